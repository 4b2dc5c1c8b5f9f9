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

import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_audit.validate.script.hook import MARKER
from gpu_audit.validate.telemetry import CUDA_FIELDS

LINE_GRACE_S = 0.2
MAX_PENDING_LINES = 100_000  # metric lines waiting for their cycle (bounded)
RANK_FIELDS = ("cycle_s", "rss_bytes", "allocated_peak_bytes", "reserved_bytes",
               "reserved_peak_bytes", "fragmentation_pct", "alloc_retries", "ooms")
SOURCES = {"monitor": "gpu_audit.monitor.step() calls", "optimizer": "optimizer steps",
           "pattern": "output lines matching --cycle-pattern"}


class StreamReader:
    """New complete lines of every ``*.jsonl`` file in ``folder``, by file stem."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.offsets: dict[str, int] = {}
        self.order: list[str] = []  # stems in the order their first line was seen

    def read(self) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        try:
            names = sorted(p for p in os.listdir(self.folder) if p.endswith(".jsonl"))
        except OSError:
            return out
        for name in names:
            stem = name[:-len(".jsonl")]
            offset = self.offsets.get(stem, 0)
            try:
                with open(self.folder / name, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except OSError:
                continue
            end = data.rfind(b"\n")
            if end < 0:
                continue
            self.offsets[stem] = offset + end + 1
            for line in data[:end].split(b"\n"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    if stem not in self.order:
                        self.order.append(stem)
                    out.append((stem, record))
        return out


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
            self.ranks.setdefault(stem, {})[record["n"]] = record
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
        self.pending[record["n"]] = record
        self.seen_at[record["n"]] = now

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
            until = self.pending[numbers[position + 1]]["t"] if has_next else None
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


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value == value and abs(value) != float("inf") \
        else None
