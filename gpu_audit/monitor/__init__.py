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

from typing import TYPE_CHECKING

from gpu_audit.lazy import exports
from gpu_audit.monitor.api import dump_snapshot, monitored, start, step, stop

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
