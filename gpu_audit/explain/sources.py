"""Opening a log: a file, ``-`` for stdin, gzip/bzip2/xz by content (and checked against the name).

Every failure to read becomes an :class:`~gpu_audit.errors.InputError` naming the input and
what to do, including corruption found halfway through a compressed stream.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import stat
import sys
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from gpu_audit.errors import InputError
from gpu_audit.explain.scanner import BLOCK_SIZE
from gpu_audit.inputs import DECOMPRESSED_LIMIT, STREAM_LIMIT, CappedReader, open_input
from gpu_audit.units import fmt_bytes

STDIN = "-"
STDIN_LABEL = "<stdin>"

_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
)
_SUFFIX = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bzip2", ".xz": "xz"}
_CAT = {"gzip": "zcat", "bzip2": "bzcat", "xz": "xzcat"}


def label(name: str) -> str:
    return STDIN_LABEL if name == STDIN else name


def compression_of(head: bytes) -> str | None:
    return next((kind for magic, kind in _MAGIC if head.startswith(magic)), None)


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were already read (to sniff the format)."""

    def __init__(self, head: bytes, rest: BinaryIO, owns_rest: bool) -> None:
        super().__init__()
        self._head = head
        self._rest = rest
        self._owns_rest = owns_rest

    def close(self) -> None:
        if self._owns_rest and not self.closed:
            self._rest.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def open_log(name: str, stdin: BinaryIO | None = None) -> tuple[BinaryIO, str | None]:
    """(a readable binary stream of the log's text, the compression it had)."""
    if name == STDIN:
        raw: BinaryIO = CappedReader(stdin if stdin is not None else sys.stdin.buffer,
                                     STREAM_LIMIT, _too_long(name, STREAM_LIMIT, None))
    else:
        handle, st = open_input(name, allow_stream=True)
        raw = handle
        if not stat.S_ISREG(st.st_mode):  # a FIFO: read up to the cap
            raw = CappedReader(handle, STREAM_LIMIT, _too_long(name, STREAM_LIMIT, None))
    try:
        head = raw.read(8)
    except OSError as exc:
        raise InputError(f"{label(name)}: cannot read: {exc.strerror or exc}") from None
    kind = compression_of(head)
    expected = next((k for suffix, k in _SUFFIX.items() if name.lower().endswith(suffix)), None)
    if expected is not None and kind != expected:
        raw.close()
        raise InputError(
            f"{name}: not a valid {expected} file (its first bytes are not a {expected} header); "
            f"if it is plain text, read it with `gpu-audit explain - < {name}`")
    if kind is None and name != STDIN and raw.seekable():
        raw.seek(0)  # a plain file is read directly, without the sniffing wrapper's copy
        return raw, None
    stream: BinaryIO = io.BufferedReader(_Prefixed(head, raw, owns_rest=name != STDIN),
                                         BLOCK_SIZE)
    if kind is None:
        return stream, None
    opener = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}[kind]
    capped = CappedReader(opener(stream, mode="rb"), DECOMPRESSED_LIMIT,
                          _too_long(name, DECOMPRESSED_LIMIT, kind))
    return _Closing(capped, stream), kind  # type: ignore[arg-type]


def _too_long(name: str, limit: int, kind: str | None) -> str:
    """The message for an input past its cap (a decompression bomb, ``/dev/zero``)."""
    if kind:
        return (f"{label(name)}: more than {fmt_bytes(limit)} once {kind}-decompressed "
                f"(gpu-audit's cap); explain a part of it: {_CAT[kind]} {name} | head -c 1G | "
                f"gpu-audit explain -")
    return (f"{label(name)}: more than {fmt_bytes(limit)} from a pipe "
            f"(gpu-audit's cap); save the log to a file and explain the file")


class _Closing(io.BufferedIOBase):
    """A decompressing reader that also closes the stream under it."""

    def __init__(self, reader: BinaryIO, under: BinaryIO) -> None:
        super().__init__()
        self._reader = reader
        self._under = under

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._reader.read(size)

    def close(self) -> None:
        if not self.closed:
            self._reader.close()
            self._under.close()
        super().close()


def read_chunks(name: str, stream: BinaryIO, kind: str | None) -> Iterator[bytes]:
    """The log's bytes in blocks; a corrupt or truncated stream is an InputError."""
    try:
        while chunk := stream.read(BLOCK_SIZE):
            yield chunk
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        what = f"{kind} data is corrupt or truncated" if kind else "read failed"
        hint = (f"; to explain what can be read: {_CAT[kind]} {name} | gpu-audit explain -"
                if kind and name != STDIN else "")
        raise InputError(f"{label(name)}: {what} ({exc}){hint}") from None
    finally:
        stream.close()
