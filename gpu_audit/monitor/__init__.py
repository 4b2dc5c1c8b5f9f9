"""Live allocator visibility for PyTorch programs: one line to publish, one to catch an OOM.

::

    from gpu_audit import monitor

    monitor.start()                      # publish allocated/reserved/fragmentation every 5 s
    monitor.start(snapshot_on_oom=True,  # ... and on an OOM write a snapshot and its summary
                  snapshot_dir="reports/oom-snapshots")

    for batch in loader:
        ...
        monitor.step()                   # optional: lets gpu-audit relate retries to steps

    with monitor.start(interval_s=2):    # or as a context manager
        train()

    @monitor.monitored(interval_s=2)     # or as a decorator
    def train(): ...

``gpu-audit scan`` shows what a process publishes next to NVML's figures for it. The monitor
never imports torch itself, never initialises CUDA, never raises into the program, and on a
machine without CUDA simply publishes no devices. One monitor runs per process: calling
:func:`start` again returns the running one.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from gpu_audit.lazy import exports
from gpu_audit.monitor.publication import DEFAULT_INTERVAL_S

if TYPE_CHECKING:
    from gpu_audit.monitor.core import Monitor, active
    from gpu_audit.monitor.sources import (
        AllocatorReading,
        AllocatorSource,
        DeviceReading,
        RecordedAllocatorSource,
        TorchAllocatorSource,
    )

# The monitor itself (threads, logging, the OOM snapshotter) is imported on first use, so that
# `gpu-audit scan`, which only reads publications, never loads it: name -> defining module.
_LAZY = {
    "Monitor": "gpu_audit.monitor.core",
    "active": "gpu_audit.monitor.core",
    "AllocatorReading": "gpu_audit.monitor.sources",
    "AllocatorSource": "gpu_audit.monitor.sources",
    "DeviceReading": "gpu_audit.monitor.sources",
    "RecordedAllocatorSource": "gpu_audit.monitor.sources",
    "TorchAllocatorSource": "gpu_audit.monitor.sources",
}


__getattr__, __dir__ = exports(__name__, _LAZY, globals())  # PEP 562


__all__ = [
    "AllocatorReading",
    "AllocatorSource",
    "DeviceReading",
    "Monitor",
    "RecordedAllocatorSource",
    "TorchAllocatorSource",
    "active",
    "dump_snapshot",
    "monitored",
    "start",
    "step",
    "stop",
]

F = TypeVar("F", bound=Callable[..., Any])


def start(
    interval_s: float = DEFAULT_INTERVAL_S,
    *,
    snapshot_on_oom: bool = False,
    snapshot_dir: str | os.PathLike[str] | None = None,
    history_entries: int = 100_000,
    max_oom_snapshots: int = 3,
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
    from gpu_audit.monitor.core import active

    monitor = active()
    if monitor is not None:
        monitor.stop()


_core: ModuleType | None = None


def _monitor_core() -> ModuleType:
    """``gpu_audit.monitor.core``, imported once: ``step()`` runs in the training loop, where
    even the import statement's module lookup would triple its cost."""
    global _core
    if _core is None:
        _core = importlib.import_module("gpu_audit.monitor.core")
    return _core


def step(n: int = 1) -> None:
    """Count ``n`` training steps on the running monitor (no-op when none runs)."""
    monitor = (_core or _monitor_core()).active()
    if monitor is not None:
        monitor.step(n)


def dump_snapshot(reason: str = "requested") -> list[str]:
    """Write a memory snapshot now (the running monitor needs ``snapshot_on_oom=True``)."""
    from gpu_audit.monitor.core import active

    monitor = active()
    return monitor.dump_snapshot(reason) if monitor is not None else []


def monitored(interval_s: float = DEFAULT_INTERVAL_S, **options: Any) -> Callable[[F], F]:
    """Decorator: the function runs with a monitor started before and stopped after it."""

    from gpu_audit.monitor.core import Monitor

    def decorate(func: F) -> F:
        return Monitor(interval_s, **options)(func)

    return decorate

