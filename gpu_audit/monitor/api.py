"""The monitor's public functions: start, stop, count steps, dump a snapshot, decorate.

Light to import: the monitor itself (threads, logging, the OOM snapshotter) is imported on first
use. :func:`step` runs in the training loop, so it keeps the imported module at hand.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from gpu_audit.publication import DEFAULT_INTERVAL_S

if TYPE_CHECKING:
    from gpu_audit.monitor.core import Monitor
    from gpu_audit.monitor.sources import AllocatorSource

F = TypeVar("F", bound=Callable[..., Any])

# The monitor's defaults, here so that :func:`start` and :class:`~.core.Monitor` share them
# without importing the monitor itself.
DEFAULT_HISTORY_ENTRIES = 100_000  # allocation events recorded per device for OOM snapshots
DEFAULT_MAX_OOM_SNAPSHOTS = 3


def start(
    interval_s: float = DEFAULT_INTERVAL_S,
    *,
    snapshot_on_oom: bool = False,
    snapshot_dir: str | os.PathLike[str] | None = None,
    history_entries: int = DEFAULT_HISTORY_ENTRIES,
    max_oom_snapshots: int = DEFAULT_MAX_OOM_SNAPSHOTS,
    source: AllocatorSource | None = None,
    runtime_dir: str | os.PathLike[str] | None = None,
) -> Monitor:
    """Start publishing this process's allocator state; returns the running :class:`Monitor`.

    - ``interval_s``: seconds between publications.
    - ``snapshot_on_oom``: record allocation history (bounded to ``history_entries`` events per
      device) and, on a CUDA out-of-memory, write ``oom-*.pickle`` (the snapshot PyTorch's
      memory viewer reads) and ``oom-*.md`` (its summary) into ``snapshot_dir``
      (default ``reports/oom-snapshots``), at most ``max_oom_snapshots`` times.
    - ``source``: where allocator figures come from (default: the torch this process imported);
      pass a :class:`RecordedAllocatorSource` to exercise everything without a GPU.
    - ``runtime_dir``: publish here instead of the per-user runtime folder.
    """
    # core imports this module's defaults, and loads threads only when a monitor runs.
    from gpu_audit.monitor.core import Monitor, ensure_single

    kwargs = {"interval_s": interval_s, "snapshot_on_oom": snapshot_on_oom}
    running = ensure_single(kwargs)
    if running is not None:
        return running
    return Monitor(interval_s, snapshot_on_oom=snapshot_on_oom, snapshot_dir=snapshot_dir,
                   history_entries=history_entries, max_oom_snapshots=max_oom_snapshots,
                   source=source, runtime_dir=runtime_dir).start()


def stop() -> None:
    """Stop the running monitor and remove its publication (no-op when none runs)."""
    # core imports this module's defaults, and loads threads only when a monitor runs.
    from gpu_audit.monitor.core import active

    monitor = active()
    if monitor is not None:
        monitor.stop()


_core: ModuleType | None = None

# Called with ``n`` on every step(), whether or not a monitor runs: ``gpu-audit validate --
# COMMAND`` counts a script's cycles so. A listener must be cheap and must not raise.
STEP_LISTENERS: list[Callable[[int], None]] = []


def add_step_listener(listener: Callable[[int], None]) -> None:
    if listener not in STEP_LISTENERS:
        STEP_LISTENERS.append(listener)


def _monitor_core() -> ModuleType:
    """``gpu_audit.monitor.core``, imported once: ``step()`` runs in the training loop, where
    even the import statement's module lookup would triple its cost."""
    global _core
    if _core is None:
        _core = importlib.import_module("gpu_audit.monitor.core")
    return _core


def step(n: int = 1) -> None:
    """Count ``n`` training steps on the running monitor (no-op when none runs), and tell the
    step listeners (:func:`add_step_listener`)."""
    for listener in STEP_LISTENERS:
        listener(n)
    monitor = (_core or _monitor_core()).active()
    if monitor is not None:
        monitor.step(n)


def dump_snapshot(reason: str = "requested") -> list[str]:
    """Write a memory snapshot now (the running monitor needs ``snapshot_on_oom=True``)."""
    # core imports this module's defaults, and loads threads only when a monitor runs.
    from gpu_audit.monitor.core import active

    monitor = active()
    return monitor.dump_snapshot(reason) if monitor is not None else []


def monitored(interval_s: float = DEFAULT_INTERVAL_S, **options: Any) -> Callable[[F], F]:
    """Decorator: the function runs with a monitor started before and stopped after it."""

    # core imports this module's defaults, and loads threads only when a monitor runs.
    from gpu_audit.monitor.core import Monitor

    def decorate(func: F) -> F:
        return Monitor(interval_s, **options)(func)

    return decorate

