"""Progress on stderr: a live bar per stage in a terminal, plain periodic lines elsewhere.

A redrawing bar floods CI logs (even with ``FORCE_COLOR``, which makes rich think it has a
terminal), so the bar is used only when the console is interactive and ``CI`` is not set.
Otherwise one line at each stage start and end, and one every 10% of a stage or 30 seconds.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Protocol

from gpu_audit.report.escape import terminal, terminal_markup
from gpu_audit.units import fmt_bytes, fmt_pct

PLAIN_EVERY_S = 30.0
PLAIN_EVERY_FRACTION = 0.1


class Progress(Protocol):
    def stage_started(self, key: str, description: str, planned: int, start: int) -> None: ...
    def resumed(self, key: str, start: int) -> None: ...
    def cycle(self, key: str, event: dict[str, Any]) -> None: ...
    def stage_finished(self, key: str, status: str, reason: str | None) -> None: ...
    def note(self, message: str) -> None: ...
    def close(self) -> None: ...


def make_progress(mode: str = "auto") -> Progress:
    """``auto``: bar in an interactive terminal outside CI; ``plain``; ``bar``; ``none``."""
    if mode == "none":
        return PlainProgress(stream=None)
    if mode == "plain":
        return PlainProgress()
    from rich.console import Console

    console = Console(stderr=True)
    if mode == "bar" or (console.is_interactive and not os.environ.get("CI")):
        return RichProgress(console)
    return PlainProgress()


def _memory_text(event: dict[str, Any]) -> str:
    reserved = event.get("reserved_bytes")
    if reserved is not None:
        frag = event.get("fragmentation_pct")
        shown = fmt_pct(frag, decimals=0, missing="")
        frag_text = f", frag {shown}" if shown else ""
        return f"reserved {fmt_bytes(reserved)}{frag_text}"
    rss = event.get("rss_bytes")
    return f"rss {fmt_bytes(rss)}" if rss is not None else ""


class PlainProgress:
    def __init__(self, stream: Any = sys.stderr) -> None:
        self.stream = stream
        self._planned = 0
        self._done = 0
        self._last_at = 0.0
        self._last_done = 0
        self._started = 0.0

    def _print(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)

    def stage_started(self, key: str, description: str, planned: int, start: int) -> None:
        self._planned, self._done, self._last_done = planned, start, start
        self._started = self._last_at = time.monotonic()
        resumed = f" (resuming at cycle {start})" if start else ""
        self._print(f"[{key}] started: {description}{resumed}")

    def resumed(self, key: str, start: int) -> None:
        self._done = self._last_done = start
        self._print(f"[{key}] resuming at cycle {start} of {self._planned} (from its checkpoint)")

    def cycle(self, key: str, event: dict[str, Any]) -> None:
        self._done = event.get("cycle", self._done) + 1
        now = time.monotonic()
        step = max(1, int(self._planned * PLAIN_EVERY_FRACTION))
        if self._done - self._last_done >= step or now - self._last_at >= PLAIN_EVERY_S \
                or self._done == self._planned:
            self._last_at, self._last_done = now, self._done
            retries = event.get("oom_retries") or 0
            extra = f", {retries} OOM retr{'y' if retries == 1 else 'ies'}" if retries else ""
            self._print(f"[{key}] cycle {self._done}/{self._planned}, "
                        f"{event.get('cycle_s', 0):.3f} s/cycle, {_memory_text(event)}{extra}")

    def stage_finished(self, key: str, status: str, reason: str | None) -> None:
        self._print(f"[{key}] {status}" + (f": {terminal(reason, newlines=False)}" if reason
                                           else ""))

    def note(self, message: str) -> None:
        self._print(message)

    def close(self) -> None:
        pass


class RichProgress:
    def __init__(self, console: Any) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as RichBar

        self.console = console
        self.bar = RichBar(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            TextColumn("{task.fields[memory]}"), console=console, transient=False,
        )
        self.bar.start()
        self.tasks: dict[str, Any] = {}

    def stage_started(self, key: str, description: str, planned: int, start: int) -> None:
        self.tasks[key] = self.bar.add_task(key, total=max(planned, 1), completed=start,
                                            memory=description)

    def resumed(self, key: str, start: int) -> None:
        task = self.tasks.get(key)
        if task is not None:
            self.bar.update(task, completed=start, memory=f"resumed at cycle {start}")

    def cycle(self, key: str, event: dict[str, Any]) -> None:
        task = self.tasks.get(key)
        if task is not None:
            self.bar.update(task, completed=event.get("cycle", 0) + 1,
                            memory=_memory_text(event))

    def stage_finished(self, key: str, status: str, reason: str | None) -> None:
        task = self.tasks.get(key)

        mark = {"passed": "[green]passed", "failed": "[red]failed",
                "interrupted": "[yellow]interrupted"}.get(status, status)
        reason = terminal_markup(reason, newlines=False) if reason else reason
        if task is not None:
            done = {"completed": self.bar.tasks[task].total} if status == "passed" else {}
            self.bar.update(task, memory=mark + (f": {reason}" if reason else ""), **done)
        else:
            self.console.print(f"[{key}] {mark}" + (f": {reason}" if reason else ""))

    def note(self, message: str) -> None:
        self.bar.console.print(message, markup=False, highlight=False)

    def close(self) -> None:
        self.bar.stop()
