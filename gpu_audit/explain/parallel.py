"""Scanning one large plain log file on several cores.

The file is cut into ranges of :data:`RANGE_BYTES` that start and end at line boundaries. Each
worker process runs the same :class:`~gpu_audit.explain.scanner.BlockScanner` over its range
and returns its candidate lines (numbered within the range) and its newline count; the parent
renumbers them and classifies them in file order, so the result is identical to a sequential
scan: each worker also reads the bytes just before and after its range as context (never as
candidates), and only the last range takes the file's last lines. At most two ranges per
worker are in flight, and a worker sends back at most :data:`RANGE_CANDIDATE_BYTES` of
candidates: a denser range (a log full of matching lines) is read again by the parent, one
candidate at a time, so memory stays bounded whatever the log holds. (Classifying is what costs
there, and it runs in the parent anyway.)
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import replace

from gpu_audit.explain.scanner import (
    BLOCK_SIZE,
    LOOKAHEAD,
    LOOKBEHIND,
    BlockScanner,
    Candidate,
)

PARALLEL_MIN_BYTES = 64 << 20  # below this, starting workers costs more than it saves
RANGE_BYTES = 16 << 20
# What a worker may send back for one range: the candidates' texts and context, plus
# _CANDIDATE_COST for each candidate's objects (two ranges per worker are in flight, and
# default_workers() starts at most 8). Reading a denser range again in the parent costs little
# next to classifying its candidates, which the parent does in any case.
RANGE_CANDIDATE_BYTES = 4 << 20
_CANDIDATE_COST = 1024
_BOUNDARY_PROBE = 64 << 10


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _next_line_start(handle, offset: int, size: int) -> int:  # type: ignore[no-untyped-def]
    """The first line start at or after ``offset`` (``size`` at the end of the file).

    A line without a newline for a whole range is cut where it is; its pieces keep the same
    line number because no newline lies between them.
    """
    if offset >= size:
        return size
    handle.seek(offset - 1)
    if handle.read(1) == b"\n":
        return offset
    probe = offset
    while probe < min(size, offset + RANGE_BYTES):
        chunk = handle.read(_BOUNDARY_PROBE)
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline != -1:
            return probe + newline + 1
        probe += len(chunk)
    return min(size, offset + RANGE_BYTES)


def _ranges(path: str, size: int) -> Iterator[tuple[int, int]]:
    with open(path, "rb") as handle:
        start = 0
        while start < size:
            end = _next_line_start(handle, start + RANGE_BYTES, size)
            yield start, end
            start = end


class RangeScan:
    """The candidates of one range of a file, numbered within it, as they are found;
    ``lines`` (newlines) and ``bytes`` are set once they are all read."""

    def __init__(self, path: str, start: int, end: int) -> None:
        self.path, self.start, self.end = path, start, end
        self.lines = 0
        self.bytes = 0

    def __iter__(self) -> Iterator[Candidate]:
        start, end = self.start, self.end
        with open(self.path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            first = max(0, start - LOOKBEHIND - 1)
            handle.seek(first)
            scanner = BlockScanner(before=handle.read(start - first))
            remaining = end - start
            while remaining > 0:
                chunk = handle.read(min(BLOCK_SIZE, remaining))
                if not chunk:
                    break
                remaining -= len(chunk)
                yield from scanner.feed(chunk)
            after = handle.read(LOOKAHEAD) if end < size else b""
        yield from scanner.finish(after, tail=end >= size, at_end=end + len(after) >= size)
        self.lines, self.bytes = scanner.lines, scanner.bytes


def _weight(candidate: Candidate) -> int:
    """About what a candidate costs in memory (its context's strings may be shared)."""
    return (_CANDIDATE_COST + len(candidate.text) + len(candidate.own)
            + sum(len(text) for _, text in candidate.before)
            + sum(len(text) for _, text in candidate.after))


def scan_range(path: str, start: int, end: int) -> tuple[list[Candidate] | None, int, int]:
    """Candidates (numbered within the range), newline count and bytes of one range; no
    candidates (None) when they weigh more than RANGE_CANDIDATE_BYTES."""
    scan = RangeScan(path, start, end)
    found: list[Candidate] = []
    weight = 0
    for candidate in scan:
        weight += _weight(candidate)
        if weight > RANGE_CANDIDATE_BYTES:
            return None, 0, 0
        found.append(candidate)
    return found, scan.lines, scan.bytes


class ParallelScan:
    """Candidates of a large file in order; ``lines`` and ``bytes`` are set when exhausted."""

    def __init__(self, path: str, workers: int) -> None:
        self.path = path
        self.workers = workers
        self.lines = 0
        self.bytes = 0
        self.collected = False  # True once a range's results were handed out
        self._ends_with_newline = True

    def __iter__(self) -> Iterator[Candidate]:
        size = os.path.getsize(self.path)
        pending: deque[tuple[Future[tuple[list[Candidate] | None, int, int]], int, int]] = (
            deque())
        ranges = _ranges(self.path, size)
        with ProcessPoolExecutor(max_workers=self.workers) as pool:
            for start, end in ranges:
                pending.append((pool.submit(scan_range, self.path, start, end), start, end))
                if len(pending) >= 2 * self.workers:
                    yield from self._collect(*pending.popleft())
            while pending:
                yield from self._collect(*pending.popleft())
        if size:
            with open(self.path, "rb") as handle:
                handle.seek(size - 1)
                self._ends_with_newline = handle.read(1) == b"\n"

    def _collect(self, future: Future[tuple[list[Candidate] | None, int, int]], start: int,
                 end: int) -> Iterator[Candidate]:
        found, newlines, nbytes = future.result()
        self.collected = True
        if found is None:  # too many to send: read the range here, one candidate at a time
            scan = RangeScan(self.path, start, end)
            for candidate in scan:
                yield replace(candidate, line=self.lines + candidate.line)
            newlines, nbytes = scan.lines, scan.bytes
        for candidate in found or ():
            yield replace(candidate, line=self.lines + candidate.line)
        self.lines += newlines
        self.bytes += nbytes

    @property
    def line_count(self) -> int:
        if not self.bytes:
            return 0
        return self.lines + (0 if self._ends_with_newline else 1)
