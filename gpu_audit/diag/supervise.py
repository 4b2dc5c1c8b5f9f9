"""Running diag workers: child processes with deadlines, killed cleanly on a hang or Ctrl-C.

Each worker leads a session of its own (so a Ctrl-C in the terminal reaches only gpu-audit,
which then kills every worker's process group: nothing is left holding a GPU). Every test the
worker announces (``{"ev": "phase", "limit_s": S}``) sets its deadline; a worker past it is
killed and reported as hung. Several workers may run at once (the sustained load of level 3).
A worker dies with gpu-audit, also when gpu-audit is killed outright (:mod:`.lifeline`): its
stdin is a pipe only this process holds, and it knows this process's pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.diag.lifeline import parent_environment
from gpu_audit.diag.results import WorkerOutcome
from gpu_audit.redact import redact_text
from gpu_audit.validate.spawn import EOF, kill_group, read_events, worker_env

TAIL_BYTES = 4000
EXIT_GRACE_S = 2.0


@dataclass
class Child:
    """One worker to run: its arguments, its environment additions, and what it reported."""

    key: str  # "gpu:0", "peers", "sustain:gpu:0"
    args: list[str]
    env: dict[str, str]
    startup_s: float
    on_event: Callable[[dict[str, Any]], None] | None = None
    outcome: WorkerOutcome = field(default_factory=WorkerOutcome)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Internals while it runs.
    proc: subprocess.Popen[bytes] | None = None
    events: queue.Queue[Any] = field(default_factory=queue.Queue)
    deadline: float = 0.0
    log: Any = None
    exited_at: float | None = None
    finished: bool = False


def worker_args(device: str, mode: str, plan: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "gpu_audit.diag.worker", "--device", device, "--mode", mode,
            "--plan", json.dumps(plan)]


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    env = worker_env(None)  # a fresh allocator: the user's allocator settings are not diag's
    env.update(parent_environment())
    env.update(extra)
    return env


def _start(child: Child) -> None:
    child.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in _finish
    popen: dict[str, Any] = {"start_new_session": True} if os.name == "posix" else {}
    child.proc = subprocess.Popen(child.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=child.log, env=child_environment(child.env), **popen)
    child.deadline = time.monotonic() + child.startup_s
    child.outcome.status = "running"
    threading.Thread(target=read_events, args=(child.proc.stdout, child.events),
                     daemon=True).start()


def _handle(child: Child, event: dict[str, Any]) -> None:
    kind = event.get("ev")
    now = time.monotonic()
    if kind == "phase":
        child.outcome.test = event.get("test")
        child.outcome.limit_s = float(event.get("limit_s") or child.startup_s)
        child.deadline = now + child.outcome.limit_s
    elif kind == "result":
        child.results[str(event.get("test"))] = event.get("record") or {}
    elif kind == "ready":
        child.outcome.ready = {k: v for k, v in event.items() if k != "ev"}
    elif kind == "fatal":
        child.outcome.status = "fatal"
        child.outcome.kind = event.get("kind")
        child.outcome.reason = event.get("reason")
        child.outcome.facts = {k: v for k, v in event.items() if k not in ("ev", "kind", "reason")}
    elif kind == "done":
        child.outcome.status = "done"
        child.outcome.test = None
    if child.on_event is not None and kind in ("tick", "phase", "result"):
        child.on_event(event)


def _tail(child: Child) -> str | None:
    if child.log is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        child.log.seek(0, os.SEEK_END)
        size = child.log.tell()
        child.log.seek(max(0, size - TAIL_BYTES))
        text = child.log.read().decode("utf-8", "replace").strip()
        return redact_text("\n".join(text.splitlines()[-20:])) or None
    return None


def _finish(child: Child) -> None:
    proc = child.proc
    if proc is None:
        return
    if proc.poll() is None and child.outcome.status != "hung":
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=EXIT_GRACE_S)  # its events ended: it is exiting
    if proc.poll() is None:
        kill_group(proc)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
    kill_group(proc)  # anything it started
    _cut_lifeline(child)
    child.outcome.returncode = proc.returncode
    if child.outcome.status == "running":
        child.outcome.status = "died"
        child.outcome.reason = f"exit status {proc.returncode}"
    if child.outcome.status in ("died", "hung", "fatal"):
        child.outcome.log_tail = _tail(child)
    with contextlib.suppress(OSError):
        child.log.close()
    child.finished = True


def _cut_lifeline(child: Child) -> None:
    """Close the worker's stdin (its lifeline) once it has exited."""
    if child.proc is not None and child.proc.stdin is not None:
        with contextlib.suppress(OSError):
            child.proc.stdin.close()


def run_children(children: list[Child], poll_s: float = 0.1) -> None:
    """Run ``children`` together until each has finished, hung or died. Ctrl-C kills them all
    (their process groups) and is raised again."""
    try:
        for child in children:
            _start(child)
        while not all(c.finished for c in children):
            busy = False
            for child in children:
                if child.finished:
                    continue
                try:
                    event = child.events.get(timeout=poll_s / max(1, len(children)))
                except queue.Empty:
                    event = None
                now = time.monotonic()
                if event is EOF:
                    _finish(child)
                    continue
                if isinstance(event, dict):
                    busy = True
                    _handle(child, event)
                    continue
                if child.proc is not None and child.proc.poll() is not None:
                    child.exited_at = child.exited_at or now
                    if now - child.exited_at > EXIT_GRACE_S:
                        _finish(child)
                elif now > child.deadline:
                    child.outcome.status = "hung"
                    _finish(child)
            if not busy:
                time.sleep(0)
    except BaseException:
        for child in children:
            if child.proc is not None and not child.finished:
                kill_group(child.proc)
                with contextlib.suppress(Exception):
                    child.proc.wait(timeout=5)
                _cut_lifeline(child)
                with contextlib.suppress(OSError):
                    child.log.close()
        raise
