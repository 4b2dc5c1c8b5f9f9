"""Streaming a log in constant memory and picking out the few lines worth classifying.

The log is read in blocks of a few MiB. A cheap prefilter runs over each whole block in C: a
handful of byte patterns, each starting with one literal character, so the regex engine can
skip ahead with a plain character search instead of trying every position (measured: one
literal-prefix pattern runs at about 1.5-2 GB/s here, one alternation of differently starting
words at 15-20 MB/s). Every failure signature's line contains at least one of these keys; only
lines with a hit are decoded and run through the detailed signatures.

Lines end at ``\\n``; a ``\\r`` also ends a segment for matching (progress bars redraw with
``\\r``, and a traceback often lands after the last redraw) without changing line numbers. A line
longer than :data:`MAX_CARRY` is scanned in pieces, and a candidate is cut to a window around
its hit, so one enormous line costs neither memory nor quadratic time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

BLOCK_SIZE = 4 << 20
MAX_CARRY = 1 << 20  # a line longer than this is scanned in pieces
WINDOW_BEFORE = 2048  # bytes of a long line kept before a hit
WINDOW_AFTER = 6144  # ... and after it (a full OOM message with a process list fits)
_KEY_OVERLAP = 256  # longer than any prefilter match

# Keys grouped by their first character: each pattern has a literal prefix, so each pass is a
# fast scan. Together they cover every signature in :mod:`gpu_audit.explain.signatures`
# (tests/explain checks each fixture line through this path).
PREFILTER: tuple[re.Pattern[bytes], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        rb"rror(?!s)",  # RuntimeError, CUDA error, NCCL error, ...Error: ("errors" is prose)
        rb"emory",  # out of memory, Out Of Memory, MemoryError, illegal memory access
        rb"A(?:ssertion `|LLOC_CONF|SSERT FAILED)",
        rb"C(?:UDA(?:[ _]|CachingAllocator|AllocatorConfig)|U(?:BLAS|SOLVER|SPARSE)_STATUS|UFFT_"
        rb"|UDNN_(?:STATUS|BACKEND)"
        rb"|uda failure|achingAllocator|aught collective|onnection closed by peer"
        rb"|an't initialize NVML)",
        rb"G(?:PU(?: is lost| has fallen| \d+ has a total|\d+ [^\n]{0,80}?which is of cuda "
        rb"capability)|ET was unable)",
        rb"K(?:ill|ILL)",
        rb"N(?:V(?:RM|ML|IDIA(?:-SMI| driver)|Link|LINK)|CCL(?: WARN| error| comm| oper| work|\(|"
        rb"\.cpp|'s))",
        rb"P(?:yTorch|YTORCH_|rocess \d+ has|TX)",
        rb"X(?:id|ID)",
    )
)

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def clean_line(raw: bytes) -> str:
    """Text for matching: undecodable bytes replaced, colour codes and control bytes removed."""
    text = raw.decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text).strip()


@dataclass(frozen=True)
class Candidate:
    """A line (or a window of a very long line) that passed the prefilter."""

    line: int  # 1-based line number in its source
    text: str


class BlockScanner:
    """Feed bytes in any chunking; get candidates with their line numbers."""

    def __init__(self) -> None:
        self.lines = 0  # newlines before the start of the carried buffer
        self.bytes = 0
        self._carry = b""
        self._carry_offset = 0  # absolute offset of _carry[0]
        self._covered_to = 0  # absolute offset up to which text was already classified
        self._saw_data = False
        self._ends_with_newline = True

    def feed(self, data: bytes) -> Iterator[Candidate]:
        if not data:
            return
        self._saw_data = True
        self.bytes += len(data)
        self._ends_with_newline = data.endswith(b"\n")
        buf = self._carry + data if self._carry else data
        cut = buf.rfind(b"\n") + 1
        keep_from = cut
        if cut == 0:
            if len(buf) < MAX_CARRY:
                self._carry = buf
                return
            # One enormous line: scan all but a tail, which stays as context for the next piece;
            # the kept tail overlaps the scanned part so that a key across the cut is not lost.
            cut = len(buf) - WINDOW_AFTER
            keep_from = cut - _KEY_OVERLAP
        yield from self._scan(buf, cut)
        self._carry_offset += keep_from
        self._carry = buf[keep_from:]

    def finish(self) -> Iterator[Candidate]:
        if self._carry:
            yield from self._scan(self._carry, len(self._carry))
            self._carry_offset += len(self._carry)
            self._carry = b""

    @property
    def line_count(self) -> int:
        """Lines seen so far, counting a last line without a newline."""
        if not self._saw_data:
            return 0
        return self.lines + (0 if self._ends_with_newline else 1)

    def _scan(self, buf: bytes, end: int) -> Iterator[Candidate]:
        """Classify-worthy lines among those starting before ``end``; count the newlines."""
        hits: list[int] = []
        for pattern in PREFILTER:
            hits.extend(match.start() for match in pattern.finditer(buf, 0, end))
        counted_to = 0
        newlines = self.lines
        if hits:
            hits.sort()
            base = self._carry_offset
            covered = self._covered_to - base  # may be negative: nothing covered in buf yet
            for hit in hits:
                if hit < covered:
                    continue
                start = max(buf.rfind(b"\n", 0, hit), buf.rfind(b"\r", 0, hit)) + 1
                stop = _segment_end(buf, hit)
                start = max(start, hit - WINDOW_BEFORE, covered)
                stop = min(stop, hit + WINDOW_AFTER)
                newlines += buf.count(b"\n", counted_to, start)
                counted_to = start
                covered = stop
                self._covered_to = base + stop
                text = clean_line(buf[start:stop])
                if text:
                    yield Candidate(newlines + 1, text)
        self.lines = newlines + buf.count(b"\n", counted_to, end)


def _segment_end(buf: bytes, pos: int) -> int:
    newline, carriage = buf.find(b"\n", pos), buf.find(b"\r", pos)
    ends = [i for i in (newline, carriage) if i != -1]
    return min(ends) if ends else len(buf)


def scan_chunks(chunks: Iterable[bytes], scanner: BlockScanner | None = None
                ) -> Iterator[Candidate]:
    """Every candidate line in a stream of byte chunks."""
    scanner = scanner or BlockScanner()
    for chunk in chunks:
        yield from scanner.feed(chunk)
    yield from scanner.finish()
