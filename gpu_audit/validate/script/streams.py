"""From what a running command shows to cycle records: its telemetry streams and its output.

:class:`StreamReader` follows the per-rank stream files the hook writes
(:mod:`gpu_audit.validate.script.hook`), a line at a time, tolerating a half-written last line.
:class:`Cycles` turns them, and the command's output lines, into the stage's cycle records:

- cycles come from the primary stream (rank 0, else the first process that stepped): its
  ``monitor.step()`` calls, else its optimizer steps; else from output lines matching
  ``--cycle-pattern``; else nothing (the stage is judged as a whole, by :meth:`Cycles.finish`);
- ``--metric NAME=REGEX`` values come from output lines. The hook also writes a marker line
  (:data:`MARKER`, never copied to the log) into the command's output at each cycle, so lines
  are placed exactly: with ``monitor.step()`` a line belongs to the cycle the next marker ends
  (what a cycle prints comes before its ``step()``); with optimizer steps, to the cycle the last
  marker ended (loops print the loss after ``optimizer.step()``), lines before the first one to
  cycle 0. Where the hook cannot write markers (its stdout is not the supervisor's pipe), a line
  belongs to the cycle that ended last before it was read (by time). With cycles from a
  pattern, a line belongs to the cycle its line (or the next matching line) ends;
- the other ranks' figures for the same cycle ride along under ``ranks``.

A stream cycle is written once its lines are all in: its window's closing marker was read (or,
without markers, the next cycle has been seen for :data:`LINE_GRACE_S`), or the command has
ended. The hook reads CUDA figures only every so often; the newest cycle without them waits for
the next cycle or the end of the command, whose ``{"ev": "cuda"}`` record (the peaks since the
last read, written as the process exits) it then carries.

When the source of cycles changes (a ``monitor.step()`` is seen after optimizer steps, or the
first hook cycle after pattern matches), a ``stage-start`` marker supersedes what was written
from the old one.
"""

from __future__ import annotations

import math
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_audit.bounds import load_json
from gpu_audit.errors import InputError
from gpu_audit.trust import kind_of, open_folder
from gpu_audit.units import KIB, MIB, fmt_bytes, plural
from gpu_audit.validate.script.hook import MARKER
from gpu_audit.validate.telemetry import CUDA_FIELDS

LINE_GRACE_S = 0.2
MAX_PENDING_LINES = 100_000  # metric lines waiting for their cycle (bounded)
# Cycles held per stream before they are written (or, for another rank's, matched): a stream
# that numbers its cycles so that they never close cannot grow these without bound.
MAX_PENDING_CYCLES = 10_000
# Input bounds of the telemetry streams (general input ceilings, to join gpu_audit.bounds):
# - one line: the hook's are a few hundred bytes (a cycle's figures), a few KiB at most (the
#   device's facts, once), so a longer one is not the hook's: counted and skipped as it is read,
#   never held whole;
MAX_STREAM_LINE_BYTES = 64 * KIB
# - one stream: some 400,000 cycle lines of one process; what lies past it is counted, not read;
MAX_STREAM_BYTES = 256 * MIB
# - streams in one stage: one per process that steps (the ranks of a node, spawned workers).
MAX_STREAM_FILES = 1024
# Read from a stream at a time (some 400 cycles of the hook's, a fraction of a second to parse
# however short its lines), and the time spent reading streams per poll of the supervisor:
# stop requests are seen between polls, however much the streams hold.
READ_CHUNK_BYTES = 256 * KIB
STREAMS_PER_POLL_S = 0.25
# Once the command has ended: the time its streams are read to their end in, at most.
FINAL_READ_S = 15.0
RANK_FIELDS = ("cycle_s", "rss_bytes", "allocated_peak_bytes", "reserved_bytes",
               "reserved_peak_bytes", "fragmentation_pct", "alloc_retries", "ooms")
SOURCES = {"monitor": "gpu_audit.monitor.step() calls", "optimizer": "optimizer steps",
           "pattern": "output lines matching --cycle-pattern"}


class StreamFolderError(Exception):
    """The streams folder is not one gpu-audit may read decisions from (see DESIGN, "Trust")."""


def open_streams_folder(path: Path) -> int:
    """A descriptor of ``path``, made if missing (mode 0700), reached through the trust rule's
    walk from ``/`` (:func:`gpu_audit.trust.open_folder`: no folder on the way another user
    could change, the folder itself no link) and owned by the running user. Opened before the
    command starts, so that what the command later does to the path (replace it, mount over it)
    never changes what is read. :class:`StreamFolderError` if not."""
    try:
        fd = open_folder(path, create_mode=0o700)
    except InputError as exc:
        raise StreamFolderError(str(exc)) from None
    except OSError as exc:
        raise StreamFolderError(f"cannot open it ({exc.strerror or exc})") from None
    owner = os.fstat(fd).st_uid
    if owner != os.geteuid():
        os.close(fd)
        raise StreamFolderError(f"it is owned by uid {owner}, not by this user ({os.geteuid()})")
    return fd


class _Untrusted(Exception):
    """A streams folder entry gpu-audit does not read; the message says why."""


@dataclass
class _Stream:
    """How far one stream has been read, and what of it was not telemetry."""

    offset: int = 0
    partial: bytearray = field(default_factory=bytearray)  # an unfinished last line
    skipping: bool = False  # inside a line longer than MAX_STREAM_LINE_BYTES
    too_long: int = 0
    malformed: int = 0
    capped: bool = False  # MAX_STREAM_BYTES read: the rest is counted, not read
    size: int = 0  # the file's size when last seen


class StreamReader:
    """New complete lines of every ``*.jsonl`` stream in ``folder`` (a descriptor, a path
    opened with :func:`open_streams_folder`, or ``None``: nothing to read), as cleaned records
    (:func:`clean_record`), by file stem.

    Nothing here waits on the command: names are opened relative to the folder's descriptor,
    without following links and without blocking, and only regular files of the running user
    on the folder's own file system, with a single link, are read (a FIFO, a device, a socket,
    a link or another user's file is skipped once, and said in :meth:`notes`). Each stream is
    read :data:`READ_CHUNK_BYTES` at a time, up to :data:`MAX_STREAM_BYTES`; a line longer than
    :data:`MAX_STREAM_LINE_BYTES`, or one that is not a JSON object of bounded shape, is counted
    and skipped.
    """

    def __init__(self, folder: int | Path | None) -> None:
        folder_fd = open_streams_folder(folder) if isinstance(folder, Path) else folder
        self.fd = folder_fd
        self.streams: dict[str, _Stream] = {}
        self.skipped: dict[str, str] = {}  # entry name -> why it is not read
        self.ignored = 0  # stream files past MAX_STREAM_FILES
        self.turn = 0  # where the next call starts: each stream gets its turn
        self.behind = False  # the streams were not read to their end once the command ended
        self.device = os.fstat(folder_fd).st_dev if folder_fd is not None else None

    def read(self) -> list[tuple[str, dict[str, Any]]]:
        """One chunk of every stream's new records."""
        return list(self.records())

    def records(self, final: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
        """The streams' new records, a chunk of each in turn for up to
        :data:`STREAMS_PER_POLL_S` (the next call starts where this one stopped); with
        ``final``, all of them up to the caps, for up to :data:`FINAL_READ_S`. Held a chunk
        at a time."""
        deadline = time.monotonic() + (FINAL_READ_S if final else STREAMS_PER_POLL_S)
        names = self._names()
        turn = self.turn % len(names) if names else 0
        for name in names[turn:] + names[:turn]:
            stem = name[:-len(".jsonl")]
            state = self.streams.setdefault(stem, _Stream())
            while True:
                if time.monotonic() > deadline:
                    self.behind = final
                    return
                data = self._chunk(name, state)
                if not data:
                    break
                for record in self._lines(state, data):
                    yield stem, record
                if not final:
                    break
            self.turn += 1

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def _names(self) -> list[str]:
        if self.fd is None:
            return []
        try:
            names = sorted(n for n in os.listdir(self.fd) if n.endswith(".jsonl"))
        except OSError:
            return []
        names = [n for n in names if n not in self.skipped]
        known = [n for n in names if n[:-len(".jsonl")] in self.streams]
        room = MAX_STREAM_FILES - len(self.streams)
        new = [n for n in names if n[:-len(".jsonl")] not in self.streams]
        self.ignored = max(self.ignored, len(new) - max(room, 0))
        return known + new[:max(room, 0)]

    def _chunk(self, name: str, state: _Stream) -> bytes:
        """The next bytes of stream ``name`` (empty when none, or when it is not read)."""
        if state.capped:
            return b""
        try:
            data = self._read_at(name, state)
        except _Untrusted as why:
            self.skipped[name] = str(why)
            self.streams.pop(name[:-len(".jsonl")], None)
            return b""
        except OSError:
            return b""  # gone since the listing: nothing to read
        state.offset += len(data)
        state.capped = state.offset >= MAX_STREAM_BYTES
        return data

    def _read_at(self, name: str, state: _Stream) -> bytes:
        """Looked at before it is opened (a device is never opened: opening one can act), then
        opened without following a link or waiting for a writer, and checked again."""
        before = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        self._check(before)
        try:
            fd = os.open(name, _OPEN_FLAGS, dir_fd=self.fd)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _Untrusted(f"cannot be opened: {exc.strerror or exc}") from None
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
                raise _Untrusted("replaced while being opened")
            self._check(info)
            state.size = info.st_size
            return os.pread(fd, min(READ_CHUNK_BYTES, MAX_STREAM_BYTES - state.offset),
                            state.offset)
        finally:
            os.close(fd)

    def _check(self, info: os.stat_result) -> None:
        """:class:`_Untrusted` with the reason, unless a stream file that may be read."""
        mode = info.st_mode
        if not stat.S_ISREG(mode):
            raise _Untrusted(kind_of(mode))
        if info.st_uid != os.geteuid():
            raise _Untrusted(f"owned by uid {info.st_uid}, not by this user")
        if info.st_nlink != 1:
            raise _Untrusted("a file with other names (hard links)")
        if info.st_dev != self.device:
            raise _Untrusted("on another file system (mounted over the stream)")

    def _lines(self, state: _Stream, data: bytes) -> Iterator[dict[str, Any]]:
        """The records of ``data``'s complete lines; an unfinished last line waits for the rest,
        a line past the cap is skipped as its bytes arrive (never held whole)."""
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if not state.skipping and len(state.partial) + len(piece) > MAX_STREAM_LINE_BYTES:
                state.skipping = True
                state.too_long += 1
                state.partial.clear()
            if end < 0:
                if not state.skipping:
                    state.partial += piece
                return
            start = end + 1
            if state.skipping:
                state.skipping = False
                continue
            line = bytes(state.partial) + piece
            state.partial.clear()
            if not line.strip():
                continue
            try:
                record = clean_record(load_json(line, "stream line",
                                                limit=MAX_STREAM_LINE_BYTES))
            except InputError:
                record = None
            if record is None:
                state.malformed += 1
            else:
                yield record

    def notes(self) -> list[str]:
        """What was not read, one sentence each (for the stage's warnings)."""
        notes = []
        if self.skipped:
            shown = ", ".join(f"{_name(n)} ({why})" for n, why in
                              sorted(self.skipped.items())[:_NAMES_SHOWN])
            more = len(self.skipped) - _NAMES_SHOWN
            notes.append(f"the telemetry streams folder held "
                         f"{plural(len(self.skipped), 'entry', 'entries')} that gpu-audit does "
                         f"not read (only regular files of this user are read): {shown}"
                         + (f" and {more} more" if more > 0 else ""))
        if self.ignored:
            notes.append(f"the telemetry streams folder held more than {MAX_STREAM_FILES} "
                         f"streams: {plural(self.ignored, 'stream')} past them were not read")
        for stem, state in sorted(self.streams.items()):
            if state.too_long or state.malformed:
                parts = [f"{state.malformed} not a JSON object of bounded size and nesting"
                         ] if state.malformed else []
                if state.too_long:
                    parts.append(f"{state.too_long} longer than "
                                 f"{fmt_bytes(MAX_STREAM_LINE_BYTES, precision=0)}")
                total = state.malformed + state.too_long
                notes.append(f"telemetry stream {_name(stem)}: {plural(total, 'line')} skipped "
                             f"as not telemetry ({', '.join(parts)})")
            if state.capped and state.size > state.offset:
                notes.append(f"telemetry stream {_name(stem)}: only its first "
                             f"{fmt_bytes(MAX_STREAM_BYTES, precision=0)} were read; "
                             f"{state.size - state.offset} bytes past them were not")
        if self.behind:
            notes.append(f"the telemetry streams were not read to their end within "
                         f"{FINAL_READ_S:g} s after the command ended: the last cycles may be "
                         "missing")
        return notes


_OPEN_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
               | getattr(os, "O_NOCTTY", 0))
_NAMES_SHOWN = 5


def _name(name: str) -> str:
    """A file name the command chose, as the report may show it."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    # Control characters as \x1b-style escapes here already (the renderers escape again for
    # their format): a note is kept in the run's state as plain text.
    shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text[:80])
    return shown + ("…" if len(text) > 80 else "")


# -- what a record may hold -------------------------------------------------------------------

_NUMBERS = frozenset({"t", "cycle_s", "rss_bytes", *CUDA_FIELDS})
_WHOLE = frozenset({"pid", "rank", "local_rank", "world_size", "resumed_at"})
_WORDS = frozenset({"ev", "src", "python", "torch_version", "torch_cuda", "resumed_from"})
_DEVICE_NUMBERS = frozenset({"index", "total_memory_bytes", "memory_fraction"})
_DEVICE_WORDS = frozenset({"name", "allocator_backend", "error"})
MAX_WORD = 512  # characters of a text field kept (versions, device names, short errors)
MAX_SETTINGS = 64  # allocator settings kept (torch has about a dozen)


def clean_record(raw: Any) -> dict[str, Any] | None:
    """A stream record as the hook writes it: the fields the supervisor reads, each of its
    type (numbers finite, texts short), the rest left out; ``None`` for anything but an
    object. Keeps what a stream line can cost to hold small, whatever the line held."""
    if not isinstance(raw, dict):
        return None
    record: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "n" or key in _WHOLE:
            if type(value) is int and 0 <= value < 2**62:
                record[key] = value
        elif key in _NUMBERS:
            if (number := _finite(value)) is not None:
                record[key] = number
        elif key in _WORDS:
            if isinstance(value, str):
                record[key] = value[:MAX_WORD]
        elif key == "first":
            record[key] = value is True
        elif key == "device" and isinstance(value, dict):
            record[key] = _clean_device(value)
    return record


def _clean_device(raw: dict[str, Any]) -> dict[str, Any]:
    device: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _DEVICE_NUMBERS:
            device[key] = _finite(value)
        elif key in _DEVICE_WORDS and isinstance(value, str):
            device[key] = value[:MAX_WORD]
        elif key == "allocator_settings" and isinstance(value, dict):
            device[key] = _setting(value, 2)
    return device


def _setting(value: Any, depth: int = 1) -> Any:
    """One of the allocator's settings: a scalar or, ``depth`` levels down at most, a short
    list or mapping of them (``roundup_power2_divisions``)."""
    if isinstance(value, str):
        return value[:MAX_WORD]
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, list) and depth:
        return [_setting(v, depth - 1) for v in value[:MAX_SETTINGS]]
    if isinstance(value, dict) and depth:
        return {str(k)[:MAX_WORD]: _setting(v, depth - 1)
                for k, v in list(value.items())[:MAX_SETTINGS]}
    return _finite(value)


def _finite(value: Any) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        return value if abs(value) < 2**63 else None
    return value if math.isfinite(value) else None


class Cycles:
    """The stage's cycle records, assembled as streams and output arrive.

    ``emit(record)`` appends a cycle record to the log; ``restart(reason)`` writes a marker that
    supersedes the cycles written so far; ``outside()`` is the latest sample taken from outside
    the command (RSS of its process tree, swap, NVML memory).
    """

    def __init__(self, base: dict[str, Any], *, cycle_pattern: str | None,
                 metrics: dict[str, str], emit: Callable[[dict[str, Any]], None],
                 restart: Callable[[str], None], outside: Callable[[], dict[str, Any]],
                 started: float) -> None:
        self.base = base
        self.pattern = re.compile(cycle_pattern) if cycle_pattern else None
        self.metrics = {name: re.compile(regex) for name, regex in metrics.items()}
        self.emit = emit
        self.restart = restart
        self.outside = outside
        self.source: str | None = None
        self.primary: str | None = None
        self.pending: dict[int, dict[str, Any]] = {}  # stream cycles not yet written
        self.seen_at: dict[int, float] = {}  # when each pending cycle's record was read
        self.ranks: dict[str, dict[int, dict[str, Any]]] = {}
        self.hello: dict[str, dict[str, Any]] = {}
        self.device: dict[str, Any] | None = None
        self.lines: list[tuple[float, dict[str, float]]] = []  # (read at, values) to place
        self.pattern_values: dict[str, float] = {}
        self.last_values: dict[str, float] = {}
        self.written = 0  # cycles written from the current source
        self.last_cycle_at = started
        self.started = started
        self.stopped_by_hook = False
        self.marked = False  # the primary's markers arrive in its output
        self.marked_source: str | None = None
        self.closed_upto = -1  # cycles whose lines are all in (with markers)
        self.open_cycle = 0  # with optimizer markers: the cycle lines now belong to
        self.collecting: dict[str, float] = {}  # with monitor markers: lines of the next cycle
        self.values: dict[int, dict[str, float]] = {}  # metrics placed by markers
        self.cuda_read = False  # the primary's records carry CUDA figures (some of them)
        # Where the primary resumed itself (its first cycle's number) and what said so.
        self.resumed: tuple[int, str] | None = None

    # -- input ------------------------------------------------------------------------------

    def stream(self, stem: str, record: dict[str, Any], now: float) -> None:
        event = record.get("ev")
        if event == "hello":
            self.hello[stem] = record
            return
        if event == "stop":
            self.stopped_by_hook = True
            return
        if not isinstance(record.get("n"), int):
            return
        if event == "cuda":
            self._late_cuda(stem, record)
            return
        if "allocated_bytes" in record and self._is_primary(stem):
            self.cuda_read = True
        if record.get("device") and self.device is None:
            self.device = record["device"]
        source = record.get("src")
        if not self._is_primary(stem):
            per_rank = self.ranks.setdefault(stem, {})
            per_rank[record["n"]] = record
            _shed(per_rank)  # cycles the primary never reaches are not kept for ever
            return
        if source != self.source and source in ("monitor", "optimizer"):
            if self.source is not None and (self.source == "pattern" or source == "monitor"):
                self.pending.clear()
                self.seen_at.clear()
                self.restart(f"cycles are counted from {SOURCES[source]} from here on")
                self.written = 0
            elif self.source == "monitor":
                return  # optimizer steps after monitor.step(): the monitor counts
            self.source = source
        if record.get("resumed_at") == record["n"] and self.source == "optimizer":
            self.resumed = (record["n"], str(record.get("resumed_from") or "its own state"))
        self.pending[record["n"]] = record
        self.seen_at[record["n"]] = now
        if len(self.pending) > MAX_PENDING_CYCLES:
            self._write_oldest()

    def _write_oldest(self) -> None:
        """Write the older half of the pending cycles now, whatever lines are still to come:
        a stream whose cycles never close (their markers never come) stays bounded."""
        numbers = sorted(self.pending)
        half = numbers[:len(numbers) // 2]
        for position, n in enumerate(half):
            record = self.pending.pop(n)
            self.seen_at.pop(n, None)
            self._emit_stream(record, self.pending[numbers[position + 1]].get("t"))

    def _late_cuda(self, stem: str, record: dict[str, Any]) -> None:
        """The CUDA figures read as a process exited, for its last cycle (still pending: see
        :meth:`flush`)."""
        figures = {k: record[k] for k in CUDA_FIELDS if k in record}
        if self._is_primary(stem):
            target = self.pending.get(record["n"])
        else:
            target = self.ranks.get(stem, {}).get(record["n"])
        if target is not None and "allocated_bytes" not in target:
            target.update(figures)

    def _unread(self, record: dict[str, Any]) -> bool:
        """A cycle the hook took no CUDA reading in, while it takes them."""
        return self.cuda_read and "allocated_bytes" not in record

    def _is_primary(self, stem: str) -> bool:
        if self.primary is None and (stem == "rank-0" or not stem.startswith("rank-")):
            self.primary = stem  # rank 0, else the first process that steps (no RANK set)
        return stem == self.primary

    def marker(self, text: str) -> None:
        """A cycle's end as the hook wrote it into the output: ``<stream> <source> <n>``."""
        try:
            stem, source, number = text[len(MARKER):].split()
            n = int(number)
        except ValueError:
            return
        if not self._is_primary(stem) or source not in ("monitor", "optimizer"):
            return
        if source != self.marked_source:
            if self.marked_source == "monitor":
                return  # optimizer steps after monitor.step(): the monitor counts
            if self.marked_source is not None:  # monitor.step() after optimizer steps:
                # what came since the last optimizer step is this monitor cycle's
                self.collecting = self.values.get(self.open_cycle, {})
                self.values.clear()
            elif source == "optimizer":  # what came before the first step is cycle 0's
                self.values[0] = self.collecting
                self.collecting = {}
            self.marked_source = source
        self.marked = True
        _shed(self.values)  # cycles whose stream records never come are not kept for ever
        if source == "monitor":
            self.values[n] = self.collecting
            self.collecting = {}
            self.closed_upto = n
        else:
            self.closed_upto = n - 1
            self.open_cycle = n

    def line(self, text: str, now: float) -> None:
        """An output line, read at wall-clock time ``now`` (``time.time()``, the hook's clock)."""
        if text.startswith(MARKER):
            self.marker(text)
            return
        values = {}
        for name, pattern in self.metrics.items():
            match = pattern.search(text)
            if match:
                number = _number(match[1] if pattern.groups else match[0])
                if number is not None:
                    values[name] = number
        self.last_values.update(values)
        if self.source in (None, "pattern") and self.pattern is not None \
                and self.pattern.search(text):
            self.pattern_values.update(values)
            self._pattern_cycle(now)
            return
        if values:
            if self.source == "pattern" or (self.source is None and self.pattern is not None):
                self.pattern_values.update(values)
            if self.marked_source == "monitor":
                self.collecting.update(values)
            elif self.marked_source == "optimizer":
                self.values.setdefault(self.open_cycle, {}).update(values)
            else:
                self.collecting.update(values)  # before any marker: cycle 0's, either way
                if self.source != "pattern" and len(self.lines) < MAX_PENDING_LINES:
                    self.lines.append((now, values))

    # -- output -----------------------------------------------------------------------------

    def flush(self, now: float, final: bool = False) -> None:
        """Write the stream cycles whose lines have had time to arrive."""
        numbers = sorted(self.pending)
        for position, n in enumerate(numbers):
            has_next = position + 1 < len(numbers)
            if self.marked:  # the newest cycle without CUDA figures waits for its late ones
                ready = final or (n <= self.closed_upto
                                  and (has_next or not self._unread(self.pending[n])))
            else:
                ready = final or (has_next and now - self.seen_at[numbers[position + 1]]
                                  >= LINE_GRACE_S)
            if not ready:
                break
            record = self.pending.pop(n)
            self.seen_at.pop(n, None)
            until = self.pending[numbers[position + 1]].get("t") if has_next else None
            self._emit_stream(record, until)

    def finish(self, duration_s: float, peaks: dict[str, Any] | None = None
               ) -> dict[str, Any] | None:
        """End of the command: everything pending is written. Without any cycle, the one
        record of a stage judged as a whole (its duration, the output's last metric values,
        the highest memory figures sampled from outside)."""
        if self.primary is None and self.ranks:
            # Ranks that never had a rank 0 stepping: the lowest one stands for the stage.
            self.primary = min(self.ranks)
            for _n, record in sorted(self.ranks.pop(self.primary).items()):
                self.stream(self.primary, record, time.monotonic())
        self.flush(time.monotonic(), final=True)
        if self.source is not None:
            return None
        record = {**self.base, "cycle": 0, "whole_stage": True, "cycle_s": round(duration_s, 6),
                  **dict.fromkeys(CUDA_FIELDS), **self.outside(), **(peaks or {}),
                  "metrics": dict(self.last_values)}
        self.emit(record)
        return record

    def _emit_stream(self, record: dict[str, Any], until: float | None) -> None:
        metrics: dict[str, float] = {}
        if self.marked:
            metrics = self.values.pop(record["n"], {})
            if record["n"] == self.closed_upto + 1 and self.marked_source == "monitor":
                metrics = {**self.collecting, **metrics}  # the command ended mid-cycle
            self.lines = []
        else:
            kept = []
            for read_at, values in self.lines:
                if until is None or read_at < until:
                    metrics.update(values)
                else:
                    kept.append((read_at, values))
            self.lines = kept
        outside = self.outside()
        cycle = {**self.base, "cycle": record["n"], "source": self.source,
                 **dict.fromkeys(CUDA_FIELDS)}
        cycle.update({k: record.get(k) for k in CUDA_FIELDS if k in record})
        cycle.update({"cycle_s": record.get("cycle_s"), "first_includes_startup":
                      bool(record.get("first")), "rss_bytes": record.get("rss_bytes"),
                      "swap_used_bytes": outside.get("swap_used_bytes"),
                      "tree_rss_bytes": outside.get("rss_bytes"),
                      "nvml_used_bytes": outside.get("nvml_used_bytes"),
                      "metrics": metrics})
        others = {stem: {k: r.get(k) for k in RANK_FIELDS if r.get(k) is not None}
                  for stem, per_rank in sorted(self.ranks.items())
                  if (r := per_rank.pop(record["n"], None)) is not None}
        if others:
            cycle["ranks"] = others
        self.emit(cycle)
        self.written += 1

    def _pattern_cycle(self, now: float) -> None:
        self.source = "pattern"
        outside = self.outside()
        cycle = {**self.base, "cycle": self.written, "source": "pattern",
                 **dict.fromkeys(CUDA_FIELDS), "cycle_s": round(now - self.last_cycle_at, 6),
                 "first_includes_startup": self.written == 0, **outside,
                 "metrics": dict(self.pattern_values)}
        self.pattern_values = {}
        self.last_cycle_at = now
        self.emit(cycle)
        self.written += 1

    @property
    def ranks_seen(self) -> list[str]:
        return sorted(set(self.hello) | set(self.ranks))


def _shed(by_cycle: dict[int, Any]) -> None:
    """Past :data:`MAX_PENDING_CYCLES`, the older half of ``by_cycle`` is dropped."""
    if len(by_cycle) > MAX_PENDING_CYCLES:
        for n in sorted(by_cycle)[:len(by_cycle) // 2]:
            del by_cycle[n]


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value == value and abs(value) != float("inf") \
        else None
