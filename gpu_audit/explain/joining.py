"""Joining a message that a terminal, a logger or a copy-paste wrapped over several lines.

Logs as people paste them are rarely one message per line: a terminal wraps a long line at its
width (cutting inside a word), a logger or a forum wraps at a word, the kernel prints one
message over several ``NVRM:`` lines, rich draws tracebacks inside a box, a launcher prefixes
every line with ``[rank0]:``. A candidate line is joined with the lines around it (the scanner
hands them over, see :class:`~gpu_audit.explain.scanner.Candidate`) when one of these says the
message goes on:

- the line ends on a word or sign that cannot end a message (``at``, ``of``, ``,``, ``(`` ...),
  or inside an unclosed quote or bracket;
- the line was cut at a fixed width: it is the longest line nearby and either another line has
  the same length or it is a usual terminal width; the pieces are put together with nothing
  added (the cut may fall inside a word), and a piece cut from a prefixed line carries the
  prefix's kind on;
- both lines carry the same repeated prefix (whatever stamps a kernel line before ``NVRM:``)
  and the next one reads as the rest of a sentence (lower case, a bracket);
- a line of some length is followed by one that starts in lower case;
- a line ends inside a word at its apostrophe (``ProcessGroupNCCL'``) and the next line opens
  with the rest of it (``s watchdog``), whatever prefix the first one carried.

A line that opens a record of its own (a timestamp, a log level, ``Traceback``, ``File "``, an
exception name, a prompt, ``program: ...``, a line that starts like the one before, a fence or
a box border) is not joined to the one before it; kernel lines without ``NVRM:`` are one record
each. Box borders and markdown quote marks are dropped from the joined text. The joined text is
matched only if the signature that matches it covers the candidate's own line; otherwise the
line is read alone, as before. Joining looks only at the lines the scanner handed over with a
candidate, so its cost grows with the failures in a log, not with its size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from gpu_audit.explain.prefixes import RANK_PREFIX
from gpu_audit.explain.scanner import Candidate

MAX_JOIN_LINES = 8
MAX_JOIN_CHARS = 3000
MIN_WRAPPED = 60  # a line shorter than this was not cut by a terminal
# Widths at which terminals, consoles and CI log viewers commonly cut lines.
COMMON_WIDTHS = frozenset((80, 100, 120, 128, 132, 140, 150, 160, 180, 200, 220, 240, 250, 256,
                           1000, 1024))  # (and lengths at which tools cut long lines)
_LONG = 40  # a line at least this long, followed by one in lower case, was wrapped at a word

# A repeated per-line prefix: a kernel timestamp or syslog header, then NVRM:, or a launcher's
# rank prefix. Continuation lines lose it when joined.
_KERNEL_HEAD = (r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: ?|\d{4}-\d\d-\d\dT[\d:.,+-]+ "
                r"\S+ kernel: ?)?\[\s*\d+\.\d+\] ?")
_PREFIXES = (
    ("nvrm", re.compile(r"^[^\n]{0,80}?NVRM: ?")),  # whatever stamps the kernel's lines
    ("kernel", re.compile(rf"^\s*{_KERNEL_HEAD}")),
    ("rank", re.compile(rf"^\s*{RANK_PREFIX}")),
)
_BOX_LEFT = re.compile(r"^\s*[│┃║]\s?")
_BOX_RIGHT = re.compile(r"\s?[│┃║]\s*$")
_QUOTE = re.compile(r"^\s*>(?: |$)")
# A line that opens a record even right after a line cut at a fixed width.
# (a syslog or journal stamp too: "Nov 03 11:02:17 host ...")
_HARD_RECORD = re.compile(
    r"(?:Traceback \(most recent call last\)|File \"|\[?[EWIF]\d{4} |\d{4}[-/]\d\d[-/]\d\d\b|"
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d\b|"
    r"\[\s*[+-]?\d+\.\d+\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]|"
    r"\$ |>>> |```)")

# A line that opens a record of its own.
_NEW_RECORD = re.compile(
    r"(?:Traceback \(most recent call last\)|File \"|During handling of|The above exception|"
    r"[A-Za-z_][\w.]*(?:Error|Exception|Warning|Interrupt|Exit|Failure)\b(?::|$)|"
    r"\[?[EWIF]\d{4} |\d{4}[-/]\d\d[-/]\d\d\b|\d\d:\d\d:\d\d\b|"
    r"\[?(?:INFO|WARN(?:ING)?|ERROR|DEBUG|CRITICAL|FATAL|NOTICE)\b|"
    r"\$ |# |>>> |In \[\d+\]|\(\w[\w.-]*\) \S+[@:]|[\w.-]+@[\w.-]+:|"
    r"\S+:\d+:\d+ \[\d+\] NCCL |NCCL (?:INFO|WARN) |```|={3,}|-{3,}|[╭╰┏┗╔╚]|"
    r"\S+ - \w+ - |\w+:\s*\d+%\||[a-z][\w.-]*: |"  # "srun: error: ..."
    r"current device: -?\d+, in function )")  # (llama.cpp's line under a CUDA error)
_DANGLING_WORDS = frozenset((
    "at", "of", "the", "to", "by", "in", "for", "and", "or", "has", "have", "had", "is", "are",
    "was", "were", "with", "from", "on", "a", "an", "but", "than", "which", "that", "when",
    "while", "not", "be", "been", "no", "if", "because", "its", "your", "this", "these", "their",
    "into", "as", "so", "can", "could", "will", "would", "should", "may", "might", "must",
    "does", "did", "do", "allocate", "after", "before", "since", "via", "per", "between",
))
_DANGLING_END = re.compile(r"(?:[,(\[{=:;/\\+&|-]|==|->|\bTried)$")
_LAST_WORD = re.compile(r"([A-Za-z]+)$")
_SENTENCE_END = re.compile(r"[.!?]$")
_DIGITS = re.compile(r"\d+")
# A row of a table drawn with ASCII bars, closed on both sides: "|   0  Tesla V100 ...  |".
_BOX_ROW = re.compile(r"^\s*\|[^\n]*\|\s*$")
# A fence, a rule or a box border: never part of a message.
_FENCE = re.compile(r"^\s*(?:```|~~~|[╭╰┏┗╔╚┌└]|[─━═=_*-]{3,})")
_STARTS_LOWER = re.compile(r"^(?:[a-z]|\(|\")")
# A line cut right after an apostrophe inside a word ("ProcessGroupNCCL'" / "s watchdog"): the
# rest of the word opens the next line, without the line's prefix.
_APOSTROPHE_CUT = re.compile(r"[A-Za-z]'$")
_APOSTROPHE_REST = re.compile(r"^(?:s|t|ll|re|ve|d|m)\b")
# PyTorch's out-of-memory message pasted one sentence per line: its head, then the size asked
# for on a line of its own (which carries no prefilter key, so it is read only joined); and an
# allocator that prints its request as a field below its head (RELION's "... out of memory" over
# "[requestedSpace: 44135424 B]").
_OOM_HEAD_END = re.compile(r"\bout of memory\.?$")
_OOM_REQUEST = re.compile(r"^(?:Tried to allocate \d|\[requestedSpace: *\d)")
# ... and messages printed over two lines by their program, each line ending where the program
# broke it: torch's check of the CUDA toolkit that builds an extension ("The detected CUDA
# version (11.8) mismatches the version that was used to compile" over "PyTorch (12.4). ...").
_SPLIT_BY_PROGRAM = ((re.compile(r"\bthe version that was used to compile$"),
                      re.compile(r"^PyTorch \(\d")),)


@dataclass(frozen=True)
class Joined:
    """A candidate's line joined with its neighbours."""

    text: str
    spans: tuple[tuple[int, int, int], ...]  # (line, start, end) of each line's part of text
    own: int  # the index in spans of the candidate's own line

    def lines_of(self, start: int, end: int) -> tuple[int, int] | None:
        """The lines of the joined message, when the match in ``[start, end)`` covers part of
        the candidate's own line; None otherwise (the match belongs to another line)."""
        touched = [i for i, (_, a, b) in enumerate(self.spans) if a < end and b > start]
        if self.own not in touched:
            return None
        return self.spans[0][0], self.spans[-1][0]


def _prefix(text: str) -> tuple[str, int]:
    for kind, pattern in _PREFIXES:
        match = pattern.match(text)
        if match:
            return kind, match.end()
    return "", 0


@dataclass
class _Piece:
    line: int
    raw: str  # as written, trailing space kept (a box's padding and borders dropped)
    kind: str  # the repeated prefix it carries, "" for none
    body: str  # the text after that prefix
    width: int  # the length a terminal saw (quote marks included; a box's padding not)


def _piece(line: int, text: str) -> _Piece:
    return _Piece(line, *_read_piece(text))


@lru_cache(maxsize=4 * MAX_JOIN_LINES)
def _read_piece(text: str) -> tuple[str, str, str, int]:
    """``_Piece``'s fields but the line. Remembered: in a log full of matching lines each line
    is the neighbour of the candidates around it, and is read once, not once per neighbour."""
    raw = text.rstrip("\r\n")
    width = len(raw)
    if _QUOTE.match(raw):
        raw = _QUOTE.sub("", raw, count=1)
    if "│" in raw or "┃" in raw or "║" in raw:
        raw = _BOX_RIGHT.sub("", _BOX_LEFT.sub("", raw, count=1), count=1).rstrip()
        width = len(raw)
    kind, cut = _prefix(raw)
    return raw, kind, raw[cut:], width


def continues(a: _Piece, b: _Piece, widths: dict[int, bool], so_far: str) -> str | None:
    """The separator between ``a`` and the next line ``b``, or None: ``b`` does not continue
    ``a``. ``widths``: the width a terminal cut lines at, and whether more than one line shows
    it; ``so_far``: the text joined up to and including ``a``."""
    if _FENCE.match(a.raw) or _FENCE.match(b.raw) or a.raw.strip() == b.raw.strip():
        return None
    if _BOX_ROW.match(a.raw) and _BOX_ROW.match(b.raw):
        return None  # rows of a table drawn with bars (nvidia-smi's): each is whole
    if not b.kind and _APOSTROPHE_CUT.search(a.raw) and _APOSTROPHE_REST.match(b.raw):
        return ""  # cut inside a word at its apostrophe: nothing lost, nothing to add
    fixed = a.width in widths
    if fixed and not widths[a.width] and _NEW_RECORD.match((b.body if b.kind else b.raw)
                                                               .strip()):
        fixed = False  # one line of a usual width, then a record of its own: no cut
    if b.kind and b.kind != a.kind:
        return None
    if a.kind and not b.kind and not fixed:
        # (a prefixed line cut inside a bracket it opened, "WorkNCCL(S" / "eqNum=7, ...)":
        # the next line is the rest of its fields, cut with nothing lost)
        return "" if _cut_in_bracket(a.body, so_far, b.raw) else None
    body = b.body if b.kind else b.raw
    stripped = body.strip()
    if not stripped or _HARD_RECORD.match(stripped) or _same_shape(a.raw, b.raw):
        return None
    if fixed and not b.kind:  # a terminal cut the line: nothing lost, nothing to add
        return ""
    if a.kind == "kernel":
        return None  # the kernel writes one record per line (NVRM's continuations aside)
    if _NEW_RECORD.match(stripped):
        return None
    end = (a.body if a.kind else a.raw).rstrip()
    if not end:
        return None
    if _OOM_HEAD_END.search(end) and _OOM_REQUEST.match(stripped):
        return " "
    if any(head.search(end) and rest.match(stripped) for head, rest in _SPLIT_BY_PROGRAM):
        return " "
    word = _LAST_WORD.search(end)
    if (_DANGLING_END.search(end) or (word is not None and word.group(1) in _DANGLING_WORDS)
            or _unclosed(so_far)):
        return "" if _inside_path(so_far, body) else " "
    if _SENTENCE_END.search(end) or not _STARTS_LOWER.match(stripped):
        return None
    if a.kind == "nvrm" or (len(end) >= _LONG and end[-1].isalnum()):
        return " "
    return None


def _same_shape(a: str, b: str) -> bool:
    """Do both lines open with the same kind of token (``node03:4101:4188``, a date)? Then
    each is a record of its own."""
    first_a, first_b = a.split(None, 1), b.split(None, 1)
    if not first_a or not first_b or a[:1].isspace() or b[:1].isspace():
        return False
    if _PCI_ADDRESS.match(first_a[0]) and _PCI_ADDRESS.match(first_b[0]):
        return True  # lspci's rows, one device each (hex digits: "3b:00.0", "5e:00.0")
    shape_a, shape_b = _DIGITS.sub("0", first_a[0]), _DIGITS.sub("0", first_b[0])
    return shape_a == shape_b and len(shape_a) >= 6 and not shape_a.isalpha()


_PCI_ADDRESS = re.compile(r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def _cut_in_bracket(end: str, so_far: str, nxt: str) -> bool:
    """Was the line ``end`` cut inside a word, in a bracket the text joined so far opened, that
    ``nxt`` goes on to close (``... WorkNCCL(S`` then ``eqNum=884217, ...) ran for ...``)?"""
    return (end[-1:].isalnum() and so_far.count("(") > so_far.count(")") and nxt[:1].isalnum()
            and nxt.count(")") > nxt.count("(") and not _NEW_RECORD.match(nxt))


def _unclosed(text: str) -> bool:
    return (text.count('"') % 2 == 1 or text.count("`") % 2 == 1
            or text.count("(") > text.count(")") or text.count("[") > text.count("]"))


def _inside_path(text: str, body: str) -> bool:
    """An unclosed quote around a path cut in the middle: join without a space."""
    if text.count('"') % 2 == 0 or text.endswith((" ", '"')) or body.startswith(" "):
        return False
    quoted = text.rsplit('"', 1)[1]
    return " " not in quoted and ("/" in quoted or "\\" in quoted or "." in quoted)


def _wrap_widths(lengths: list[int]) -> dict[int, bool]:
    """The width a terminal may have cut these lines at (their widths, as a terminal saw them):
    the longest line nearby, when it is a usual terminal width or more than one line has it (a
    terminal cuts every line at the same width, so no line is longer); mapped to whether more
    than one line has it."""
    widest = max(lengths, default=0)
    repeated = lengths.count(widest) > 1
    if widest >= MIN_WRAPPED and (widest in COMMON_WIDTHS or repeated):
        return {widest: repeated}
    return {}


def join(candidate: Candidate, floor: int = 0) -> Joined | None:
    """The candidate's line joined with the lines it continues and that continue it; None when
    there is nothing to join. Lines at or before ``floor`` (already read) are left alone."""
    own = _piece(candidate.line, candidate.own or candidate.text)
    # (line, fields) of each neighbour; a _Piece is made only for the lines walked to
    before = [(candidate.line - back, _read_piece(text)) for back, text in candidate.before
              if candidate.line - back > floor]
    after = [(candidate.line + ahead, _read_piece(text)) for ahead, text in candidate.after]
    widths = _wrap_widths([fields[3] for _, fields in before] + [own.width]
                          + [fields[3] for _, fields in after])
    pieces, seps = [own], []
    size = len(own.raw)
    for line, fields in reversed(before):  # the lines this one continues
        if len(pieces) >= MAX_JOIN_LINES or size > MAX_JOIN_CHARS:
            break
        prev = _Piece(line, *fields)
        sep = continues(prev, pieces[0], widths, prev.raw)
        if sep is None:
            break
        _inherit(prev, pieces[0])
        pieces.insert(0, prev)
        seps.insert(0, sep)
        size += len(prev.raw)
    own_index = len(pieces) - 1
    text, _ = _assemble(pieces, seps)
    for line, fields in after:  # the lines that continue it
        if len(pieces) >= MAX_JOIN_LINES or size > MAX_JOIN_CHARS:
            break
        nxt = _Piece(line, *fields)
        sep = continues(pieces[-1], nxt, widths, text)
        if sep is None:
            break
        _inherit(pieces[-1], nxt)
        pieces.append(nxt)
        seps.append(sep)
        size += len(nxt.raw)
        text, _ = _assemble(pieces, seps)
    if len(pieces) == 1:
        return None
    text, spans = _assemble(pieces, seps)
    return Joined(text, tuple(spans), own_index)


def _inherit(a: _Piece, b: _Piece) -> None:
    """A line cut from a prefixed one (``NVRM: ...``) carries that prefix's kind on, so that
    the prefixed line after it still reads as the same message."""
    if a.kind and not b.kind:
        b.kind, b.body = a.kind, b.raw


def _assemble(pieces: list[_Piece], seps: list[str]) -> tuple[str, list[tuple[int, int, int]]]:
    """The joined text (stripped) and where each line's part of it lies."""
    parts = [pieces[0].raw.lstrip()]
    for sep, piece in zip(seps, pieces[1:], strict=False):
        part = piece.body if piece.kind else piece.raw
        if sep == " ":
            parts[-1] = parts[-1].rstrip()
            part = part.lstrip()
        parts.append(sep + part)
    parts[-1] = parts[-1].rstrip()
    spans, pos = [], 0
    for piece, part in zip(pieces, parts, strict=True):
        spans.append((piece.line, pos, pos + len(part)))
        pos += len(part)
    return "".join(parts), spans
