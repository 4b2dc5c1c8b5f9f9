"""The stage worker as a process: its command line, its environment, its events, its end.

Used on both sides: the runner starts ``python -m gpu_audit.validate.worker`` with
:func:`worker_command` and :func:`worker_env`, reads its events with :func:`read_events` and
stops it (and whatever it started) with :func:`kill_group`; the worker sets the allocator
variables with :func:`apply_alloc_conf` before anything imports torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpu_audit.knowledge.allocator import BOTH_VARS

EOF = object()  # put on the event queue when the worker's event stream ends


def apply_alloc_conf(conf: str | None, environ: Any = os.environ) -> None:
    """Both variable names, one string (which one torch reads depends on its version), or
    neither: set before torch is imported, since the allocator reads them once, at load time."""
    for name in BOTH_VARS:
        if conf:
            environ[name] = conf
        else:
            environ.pop(name, None)


def worker_command(run_path: Path, key: str, device: str, attempt: int) -> list[str]:
    return [sys.executable, "-m", "gpu_audit.validate.worker", "run", "--run-dir", str(run_path),
            "--leg", key, "--device", device, "--attempt", str(attempt)]


def worker_env(alloc_conf: str | None, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    apply_alloc_conf(alloc_conf, env)
    # The worker must import this same gpu_audit, also when it runs from a source tree.
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if package_root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([*paths, package_root])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def read_events(stream: Any, events: queue.Queue[Any]) -> None:
    """Each JSON line of ``stream`` onto ``events``, then :data:`EOF` (run in a thread)."""
    try:
        for line in stream:
            try:
                events.put(json.loads(line))
            except ValueError:
                continue
    except (OSError, ValueError):
        pass
    finally:
        events.put(EOF)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The worker and anything it started: it leads a session of its own."""
    if os.name == "posix":
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - Windows
        with contextlib.suppress(OSError):
            proc.kill()
