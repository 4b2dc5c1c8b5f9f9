"""What passes between a stage worker and the runner: events, stop requests, a stage's end.

Events go, one JSON object per line, to the file descriptor that was the worker's stdout at
start (:class:`Events`); cycle events are thinned to one every ``EVENT_INTERVAL_S``
(:class:`CycleEvents`). stdin carries ``stop`` requests; its end means the runner is gone
(:class:`Control`). A stage ends by returning, by :class:`StageInterrupted` or by
:class:`StageFailed`, whose ``failure`` names the finding the runner reports, and the worker
exits with one of the ``EXIT_*`` codes.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from gpu_audit.redact import redact_text

EXIT_PASSED, EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 130
ORPHAN_GRACE_S = 10.0
# Cycle events to the runner at most this often: each one wakes the runner, and on a machine
# whose cores the workload keeps busy that wake-up is taken from the workload's threads.
EVENT_INTERVAL_S = 0.25


class StageFailed(Exception):
    def __init__(self, failure: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.failure = failure
        self.reason = reason
        self.detail = detail or {}


class StageInterrupted(Exception):
    pass


def one_line(exc: BaseException) -> str:
    """``TypeName: first line of the message``, at most 600 characters, secrets masked (it
    goes into the per-cycle log, the state and the reports)."""

    text = str(exc).strip().splitlines()
    first = redact_text(text[0]) if text else ""
    return f"{type(exc).__name__}: {first}"[:600] if first else type(exc).__name__


class Events:
    """One JSON object per line to the runner; a vanished runner is noted, not fatal."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._lock = threading.Lock()
        self.broken = False

    def send(self, event: dict[str, Any]) -> None:
        if self.broken:
            return
        line = json.dumps(event, separators=(",", ":"), default=str).encode("utf-8") + b"\n"
        with self._lock:
            try:
                self._file.write(line)
            except (BrokenPipeError, OSError):
                self.broken = True


class Control:
    """Reads ``stop`` requests from stdin; end of input means the runner died."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.orphaned = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._read, name="control", daemon=True).start()

    def _read(self) -> None:
        # Raw reads on fd 0: a thread blocked inside sys.stdin's buffered reader holds its lock,
        # and the interpreter aborts at exit when it finds that lock taken.
        pending = b""
        while True:
            try:
                chunk = os.read(0, 4096)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if any(line.strip() == b"stop" for line in lines):
                self.stop.set()
        # End of input: the runner is gone. Stop at the next cycle boundary; if a cycle runs
        # on past the grace period, leave without it so the run folder is not held.
        self.orphaned.set()
        self.stop.set()
        timer = threading.Timer(ORPHAN_GRACE_S, os._exit, args=(EXIT_INTERRUPTED,))
        timer.daemon = True
        timer.start()


class CycleEvents:
    """Cycle events to the runner, at most every ``EVENT_INTERVAL_S`` (and always the last one,
    and any cycle that needed an OOM retry); each carries the slowest cycle since the previous
    event, which is what the runner's hang limit is computed from."""

    def __init__(self, events: Events) -> None:
        self.events = events
        self.sent_at = 0.0
        self.slowest = 0.0

    def cycle_done(self, record: dict[str, Any], elapsed: float, last: bool) -> None:
        self.slowest = max(self.slowest, elapsed)
        now = time.monotonic()
        if not (last or record["oom_retries"] or now - self.sent_at >= EVENT_INTERVAL_S):
            return
        self.events.send({"ev": "cycle", "cycle": record["cycle"], "cycle_s": record["cycle_s"],
                          "slowest_s": round(self.slowest, 6),
                          "reserved_bytes": record["reserved_bytes"],
                          "fragmentation_pct": record["fragmentation_pct"],
                          "rss_bytes": record["rss_bytes"],
                          "oom_retries": len(record["oom_retries"])})
        self.sent_at, self.slowest = now, 0.0
