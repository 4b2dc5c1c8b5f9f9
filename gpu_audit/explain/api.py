"""Reading logs into incidents: the functions behind ``gpu-audit explain`` and its Python API."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from gpu_audit.explain.classify import Classifier, Incident
from gpu_audit.explain.scanner import BLOCK_SIZE, BlockScanner

SCHEMA = "gpu-audit.explain/1"


class _Detect:
    def __repr__(self) -> str:
        return "<installed torch>"


DETECT: Any = _Detect()  # use the torch installed here (package metadata; never imported)


@dataclass(frozen=True)
class InputStats:
    source: str
    bytes: int  # text bytes read (after decompression)
    lines: int
    compression: str | None = None


@dataclass(frozen=True)
class ExplainResult:
    incidents: list[Incident]
    inputs: list[InputStats] = field(default_factory=list)
    torch_version: str | None = None
    elapsed_s: float | None = None

    @property
    def failures(self) -> list[Incident]:
        return [i for i in self.incidents if i.is_failure]


def _resolve(torch_version: Any) -> str | None:
    if torch_version is DETECT:
        from gpu_audit.units import installed_torch_version

        return installed_torch_version()
    return torch_version


def _encode(lines: Iterable[str]) -> Iterator[bytes]:
    """Lines as byte blocks; a line without a trailing newline gets one."""
    batch: list[bytes] = []
    size = 0
    for line in lines:
        data = line.encode("utf-8", errors="replace")
        batch.append(data if data.endswith(b"\n") else data + b"\n")
        size += len(data) + 1
        if size >= BLOCK_SIZE:
            yield b"".join(batch)
            batch, size = [], 0
    if batch:
        yield b"".join(batch)


def _consume(classifier: Classifier, name: str, chunks: Iterable[bytes],
             index: int | None = None) -> InputStats:
    index = classifier.add_source(name) if index is None else index
    scanner = BlockScanner()
    for chunk in chunks:
        for candidate in scanner.feed(chunk):
            classifier.feed(index, candidate)
    for candidate in scanner.finish():
        classifier.feed(index, candidate)
    return InputStats(name, scanner.bytes, scanner.line_count)


def classify_lines(lines: Iterable[str], *, torch_version: Any = DETECT) -> list[Incident]:
    """Incidents found in ``lines`` (numbered from 1), root cause first.

    ``torch_version`` decides which allocator variable remedies name; by default the torch
    installed here (both variables when there is none).
    """
    classifier = Classifier(_resolve(torch_version))
    _consume(classifier, "<text>", _encode(lines))
    return classifier.incidents()


def classify_text(text: str, *, torch_version: Any = DETECT) -> list[Incident]:
    """Incidents found in a block of log text, root cause first."""
    return classify_lines([text], torch_version=torch_version)


def explain_sources(names: Sequence[str], *, torch_version: Any = DETECT,
                    stdin: BinaryIO | None = None, workers: int | None = None) -> ExplainResult:
    """Read every log (paths, or ``-`` for stdin; gzip/bzip2/xz detected) and classify.

    A plain file of :data:`~gpu_audit.explain.parallel.PARALLEL_MIN_BYTES` or more is scanned
    by ``workers`` processes (default: one per CPU, up to 8); the result is the same.
    Raises :class:`~gpu_audit.errors.InputError` when an input cannot be read.
    """
    from gpu_audit.explain import parallel
    from gpu_audit.explain.sources import STDIN, label, open_log, read_chunks

    started = time.perf_counter()
    resolved = _resolve(torch_version)
    classifier = Classifier(resolved)
    workers = parallel.default_workers() if workers is None else workers
    inputs = []
    for name in names:
        stream, kind = open_log(name, stdin)
        if (kind is None and name != STDIN and workers > 1
                and os.path.getsize(name) >= parallel.PARALLEL_MIN_BYTES):
            stream.close()
            stats = _consume_parallel(classifier, name, workers)
        else:
            stats = _consume(classifier, label(name), read_chunks(name, stream, kind))
        inputs.append(InputStats(stats.source, stats.bytes, stats.lines, kind))
    return ExplainResult(classifier.incidents(), inputs, resolved,
                         round(time.perf_counter() - started, 3))


def _consume_parallel(classifier: Classifier, name: str, workers: int) -> InputStats:
    from concurrent.futures.process import BrokenProcessPool

    from gpu_audit.errors import InputError
    from gpu_audit.explain.parallel import ParallelScan
    from gpu_audit.explain.sources import open_log, read_chunks

    index = classifier.add_source(name)
    scan = ParallelScan(name, workers)
    try:
        for candidate in scan:
            classifier.feed(index, candidate)
        return InputStats(name, scan.bytes, scan.line_count)
    except (OSError, NotImplementedError, BrokenProcessPool) as exc:
        if scan.collected:
            raise InputError(f"{name}: read failed ({exc})") from None
    # No worker processes here (a sandbox without POSIX semaphores, say): read it in this one.
    stream, kind = open_log(name)
    return _consume(classifier, name, read_chunks(name, stream, kind), index)
