"""Reading logs for ``gpu-audit explain``: files (their prefilter in GNU grep, or big ones on
several cores), ``-`` for stdin, compressed logs. The classification itself is
:mod:`gpu_audit.explain.api`.
"""

from __future__ import annotations

import io
import os
import stat
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

from gpu_audit.errors import InputError
from gpu_audit.explain import grepscan
from gpu_audit.explain.api import (
    DETECT,
    ExplainResult,
    InputStats,
    consume,
    resolve_torch,
)
from gpu_audit.explain.classify import Classifier
from gpu_audit.explain.documents import HEAD_BYTES
from gpu_audit.explain.sources import STDIN, label, open_log, read_chunks


def explain_sources(names: Sequence[str], *, torch_version: Any = DETECT,
                    stdin: BinaryIO | None = None, workers: int | None = None) -> ExplainResult:
    """Read every log (paths, or ``-`` for stdin; gzip/bzip2/xz detected) and classify.

    A plain file's prefilter runs in GNU grep when a trusted one is installed
    (:mod:`~gpu_audit.explain.grepscan`); otherwise a plain file of
    :data:`~gpu_audit.explain.parallel.PARALLEL_MIN_BYTES` or more is scanned by ``workers``
    processes (default: one per CPU, up to 8). The result is the same.
    Raises :class:`~gpu_audit.errors.InputError` when an input cannot be read.
    """
    # The process pool (multiprocessing) loads only when a log is big enough to split.
    from gpu_audit.explain import parallel

    started = time.perf_counter()
    resolved = resolve_torch(torch_version)
    classifier = Classifier(resolved)
    workers = parallel.default_workers() if workers is None else workers
    inputs = []
    for name in names:
        stream, kind = open_log(name, stdin)
        grep = grepscan.find_grep() if kind is None and _regular(stream) else None
        if grep is not None:
            stats = _consume_grep(classifier, name, stream, grep)
        elif (kind is None and name != STDIN and workers > 1
                and os.path.getsize(name) >= parallel.PARALLEL_MIN_BYTES):
            stream.close()
            stats = _consume_parallel(classifier, name, workers)
        else:
            stats = consume(classifier, label(name), read_chunks(name, stream, kind))
        inputs.append(InputStats(stats.source, stats.bytes, stats.lines, kind, stats.engine))
    return ExplainResult(classifier.incidents(), inputs, resolved,
                         round(time.perf_counter() - started, 3))


def _regular(stream: BinaryIO) -> bool:
    """A plain regular file (not stdin, a pipe or a FIFO), which grep can read by itself."""
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode) and stream.seekable()
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def _consume_grep(classifier: Classifier, name: str, stream: BinaryIO, grep: str
                  ) -> InputStats:
    """One plain file, its prefilter run by grep on another core (the worker processes
    would only compete with it for the cores)."""
    try:
        prefilter = grepscan.GrepPrefilter(grep, stream.fileno())
    except OSError:  # no process could start: the Python passes
        stream.seek(0)
        return consume(classifier, name, read_chunks(name, stream, None))
    with prefilter:
        stats = consume(classifier, name, read_chunks(name, grepscan.PreadReader(stream), None),
                        prefilter=prefilter)
    scanned, by_python = prefilter.blocks
    engine = f"grep ({scanned} blocks; {by_python} by the Python passes)"
    return InputStats(stats.source, stats.bytes, stats.lines, engine=engine)


def _consume_parallel(classifier: Classifier, name: str, workers: int) -> InputStats:
    from concurrent.futures.process import BrokenProcessPool

    # The process pool (multiprocessing) loads only when a log is big enough to split.
    from gpu_audit.explain.parallel import ParallelScan

    index = classifier.add_source(name)
    with open(name, "rb") as handle:  # a plain file, far longer than its head
        classifier.note_head(index, handle.read(HEAD_BYTES), whole=False)
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
    return consume(classifier, name, read_chunks(name, stream, kind), index)
