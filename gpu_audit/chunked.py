"""A resumable map over a long list of work items, one chunk at a time, each chunk saved to disk.

For jobs like "encode 50 000 texts on the GPU": if the process dies at chunk 37, running the same
call again loads chunks 0-36 from ``state_dir`` and carries on at 37::

    embeddings = chunked_map(encode_batch, texts, state_dir="cache/commits", chunk_size=1000,
                             combine=torch.cat, codec="torch", oom_retries=3)

``fn`` takes a list of items and returns one result per item (a list, or a tensor/array whose
first dimension has that length). Each chunk's result is written atomically (temporary file,
fsync, rename), so a crash never leaves half a chunk behind. A ``manifest.json`` records the
item count, the chunk size and a digest of the items, so a changed input is refused instead of
silently mixed with old results. With ``oom_retries`` an out-of-memory error splits the chunk
into halves, then quarters, ... (via :func:`gpu_audit.oom.OomRetrier`, the same recovery
``gpu-audit validate`` uses).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import pickle
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_audit.errors import InputError
from gpu_audit.oom import OomPolicy, OomRetrier, release_memory
from gpu_audit.serial import write_atomic

LOG = logging.getLogger("gpu_audit.chunked")

MANIFEST = "manifest.json"
FORMAT = "gpu-audit.chunked/1"


@dataclass(frozen=True)
class Codec:
    """How a chunk's result is turned into bytes and back."""

    suffix: str
    dumps: Callable[[Any], bytes]
    loads: Callable[[bytes], Any]


def _torch_dumps(obj: Any) -> bytes:
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _torch_loads(data: bytes) -> Any:
    import io

    import torch

    # These files were written by this function into the caller's own folder.
    return torch.load(io.BytesIO(data), weights_only=False)


CODECS = {
    "pickle": Codec("pkl", lambda obj: pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                    pickle.loads),
    "json": Codec("json", lambda obj: json.dumps(obj).encode("utf-8"),
                  lambda data: json.loads(data.decode("utf-8"))),
    "torch": Codec("pt", _torch_dumps, _torch_loads),
}


def chunked_map(
    fn: Callable[[list[Any]], Any],
    items: Iterable[Any],
    *,
    state_dir: str | Path,
    chunk_size: int = 1000,
    combine: Callable[[list[Any]], Any] | None = None,
    codec: str | Codec = "pickle",
    keep_chunks: bool = True,
    check_items: bool = True,
    oom_retries: int = 0,
    oom_backoff_s: float = 0.5,
    release_between_chunks: bool = True,
    progress: Callable[[int, int], Any] | None = None,
) -> Any:
    """Apply ``fn`` to ``items`` chunk by chunk, saving each chunk's result; resume on re-run.

    Returns the per-item results in order: a flat list, or ``combine(chunk_results)`` (for
    example ``torch.cat`` or ``numpy.concatenate``). ``keep_chunks=False`` deletes the chunk
    files once everything is combined. ``check_items=False`` skips the input digest (for items
    whose ``repr`` is costly or not stable). ``progress(done, total)`` is called after each chunk.
    """
    if chunk_size < 1:
        raise ValueError("chunk_size must be at least 1")
    codec_obj = CODECS[codec] if isinstance(codec, str) else codec
    work = items if isinstance(items, Sequence) else list(items)
    folder = Path(state_dir)
    total = math.ceil(len(work) / chunk_size)
    manifest = {
        "format": FORMAT,
        "count": len(work),
        "chunk_size": chunk_size,
        "chunks": total,
        "codec": codec_obj.suffix,
        "digest": _digest(work) if check_items else None,
    }
    _check_or_write_manifest(folder, manifest)

    done_before = 0
    for index in range(total):
        path = _chunk_path(folder, index, codec_obj)
        if path.exists():
            done_before += 1
            continue
        chunk = list(work[index * chunk_size:(index + 1) * chunk_size])
        result = _run_chunk(fn, chunk, combine, oom_retries, oom_backoff_s, index)
        _check_length(result, len(chunk), index)
        write_atomic(path, codec_obj.dumps(result))
        del result
        if release_between_chunks:
            release_memory()
        LOG.info("chunk %d/%d done (%d items)", index + 1, total, len(chunk))
        if progress is not None:
            progress(index + 1, total)
    if done_before:
        LOG.info("resumed: %d of %d chunks were already on disk in %s", done_before, total, folder)

    results = [_load_chunk(folder, index, codec_obj) for index in range(total)]
    combined = combine(results) if combine is not None else _flatten(results)
    if not keep_chunks:
        for index in range(total):
            _chunk_path(folder, index, codec_obj).unlink(missing_ok=True)
        (folder / MANIFEST).unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the folder holds other files: leave it
            folder.rmdir()
    return combined


def _run_chunk(fn: Callable[[list[Any]], Any], chunk: list[Any],
               combine: Callable[[list[Any]], Any] | None, oom_retries: int,
               backoff_s: float, index: int) -> Any:
    if oom_retries <= 0:
        return fn(chunk)
    retrier = OomRetrier(OomPolicy(max_retries=oom_retries, backoff_s=backoff_s),
                         name=f"chunk {index}")

    def in_pieces() -> Any:
        # At batch scale 1/2**k the chunk runs as 2**k consecutive pieces.
        pieces = max(1, round(1 / retrier.scale))
        size = math.ceil(len(chunk) / pieces)
        if pieces == 1 or size >= len(chunk):
            return fn(chunk)
        parts = [fn(chunk[i:i + size]) for i in range(0, len(chunk), size)]
        for number, part in enumerate(parts):
            _check_length(part, len(chunk[number * size:(number + 1) * size]), index)
        return combine(parts) if combine is not None else _flatten(parts)

    return retrier.call(in_pieces)


def _check_or_write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    path = folder / MANIFEST
    if path.exists():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: unreadable chunk manifest ({exc}); delete {folder} to "
                             "start over") from None
        if saved.get("format") != FORMAT:
            raise InputError(f"{path}: not a gpu-audit chunk manifest; use another state_dir")
        for key in ("count", "chunk_size", "codec", "digest"):
            if saved.get(key) != manifest[key]:
                raise InputError(
                    f"{folder} holds chunks of a different job ({key} was {saved.get(key)!r}, "
                    f"now {manifest[key]!r}); use another state_dir, or delete this one to start "
                    "over"
                )
        return
    write_atomic(path, json.dumps(manifest, indent=2) + "\n")


def _chunk_path(folder: Path, index: int, codec: Codec) -> Path:
    return folder / f"chunk-{index:06d}.{codec.suffix}"


def _load_chunk(folder: Path, index: int, codec: Codec) -> Any:
    path = _chunk_path(folder, index, codec)
    try:
        return codec.loads(path.read_bytes())
    except Exception as exc:
        raise InputError(f"{path}: cannot load this chunk ({type(exc).__name__}: {exc}); delete "
                         "the file and run again to recompute it") from None


def _check_length(result: Any, expected: int, index: int) -> None:
    try:
        got = len(result)
    except TypeError:
        raise ValueError(f"chunk {index}: fn must return one result per item (a list, tensor or "
                         f"array), got {type(result).__name__}") from None
    if got != expected:
        raise ValueError(f"chunk {index}: fn returned {got} results for {expected} items")


def _flatten(parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in parts:
        out.extend(part)
    return out


def _digest(items: Sequence[Any]) -> str:
    """A fingerprint of the input, so a re-run with other items does not reuse old chunks."""
    sha = hashlib.sha256()
    for item in items:
        sha.update(repr(item).encode("utf-8", "backslashreplace"))
        sha.update(b"\0")
    return sha.hexdigest()
