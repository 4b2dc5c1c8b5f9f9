"""Per-cycle measurements inside the stage worker: allocator, device and host memory.

CUDA figures come from ``torch.cuda.memory_stats`` (current values at the end of the cycle, peaks
over the cycle after ``reset_peak_memory_stats``) and ``mem_get_info``; on the CPU they are
``None``. Host RSS is read every cycle; swap, which moves slowly, at most every half second
(each record carries the latest reading).

On Linux both come from ``/proc`` files kept open and re-read with ``pread``: opening a ``/proc``
file costs a path walk that, right after a cycle has kept the CPU busy elsewhere, takes a few
hundred microseconds (psutil opens the file on every call); a re-read of an open one takes tens.
Elsewhere psutil answers (imported when first needed: :func:`cuda_sample` and
:func:`read_rss` also run inside a user's script, through ``validate -- COMMAND``'s hook).
"""

from __future__ import annotations

import os
import time
from typing import Any

from gpu_audit.units import KIB

SWAP_SAMPLE_INTERVAL_S = 0.5

# Columns of a cycle record. ``device_free_bytes``/``device_used_bytes`` are the device's
# mem_get_info at the end of each cycle; an OOM's figures (a stage's failure detail) use the
# names of gpu_audit.knowledge.oom instead.
CUDA_FIELDS = (
    "allocated_bytes", "allocated_peak_bytes", "reserved_bytes", "reserved_peak_bytes",
    "active_bytes", "active_peak_bytes", "inactive_split_bytes", "inactive_split_peak_bytes",
    "fragmentation_pct", "cache_slack_pct", "alloc_retries", "ooms", "device_free_bytes",
    "device_used_bytes",
)


class Telemetry:
    def __init__(self, device: str, torch: Any | None = None) -> None:
        self.device = device
        self.cuda = device.startswith("cuda") and torch is not None
        self.torch = torch
        self._statm = _open_proc("/proc/self/statm")
        self._meminfo = _open_proc("/proc/meminfo")
        self._page_size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._swap_at = 0.0
        self._swap_used: int | None = None
        self._retries_seen = 0
        self._ooms_seen = 0
        if self.cuda:
            stats = torch.cuda.memory_stats(device)
            self._retries_seen = stats.get("num_alloc_retries", 0)
            self._ooms_seen = stats.get("num_ooms", 0)

    def start_cycle(self) -> None:
        if self.cuda:
            self.torch.cuda.reset_peak_memory_stats(self.device)

    def finish_cycle(self) -> None:
        """Wait for the cycle's kernels, so its wall time and memory figures are its own."""
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def sample(self) -> dict[str, Any]:
        record: dict[str, Any] = dict.fromkeys(CUDA_FIELDS)
        if self.cuda:
            record.update(self._cuda_sample())
        record["rss_bytes"] = self._rss()
        record["swap_used_bytes"] = self._swap()
        return record

    def _rss(self) -> int:
        rss = read_rss(self._statm, self._page_size)
        if rss is None:
            self._statm = None
            import psutil

            rss = psutil.Process().memory_info().rss
        return rss

    def _cuda_sample(self) -> dict[str, Any]:
        sample, self._retries_seen, self._ooms_seen = cuda_sample(
            self.torch, self.device, self._retries_seen, self._ooms_seen)
        return sample

    def _swap(self) -> int | None:
        now = time.monotonic()
        if now - self._swap_at >= SWAP_SAMPLE_INTERVAL_S:
            self._swap_at = now
            self._swap_used = self._read_swap()
        return self._swap_used

    def _read_swap(self) -> int | None:
        if self._meminfo is not None:
            try:
                fields = dict(line.split(b":", 1)
                              for line in os.pread(self._meminfo, 8192, 0).splitlines()
                              if b":" in line)
                total = int(fields[b"SwapTotal"].split()[0]) * KIB
                free = int(fields[b"SwapFree"].split()[0]) * KIB
                return total - free  # what psutil reports as used
            except (OSError, ValueError, KeyError, IndexError):
                self._meminfo = None
        import psutil

        try:
            return psutil.swap_memory().used
        except (OSError, RuntimeError):
            return None


def _open_proc(path: str) -> int | None:
    if not hasattr(os, "pread"):
        return None
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def host_memory_available() -> int | None:
    import psutil

    try:
        return psutil.virtual_memory().available
    except (OSError, RuntimeError):
        return None


def read_rss(statm_fd: int | None, page_size: int) -> int | None:
    """Resident memory from an open ``/proc/<pid>/statm`` (``None`` when it cannot be read)."""
    if statm_fd is None:
        return None
    try:
        return int(os.pread(statm_fd, 256, 0).split()[1]) * page_size
    except (OSError, ValueError, IndexError):
        return None


def cuda_sample(torch: Any, device: Any, retries_seen: int, ooms_seen: int
                ) -> tuple[dict[str, Any], int, int]:
    """The CUDA columns of a cycle record (:data:`CUDA_FIELDS`), and the allocator's retry and
    OOM counters now (the next call's ``retries_seen``/``ooms_seen``)."""
    cuda = torch.cuda
    stats = cuda.memory_stats(device)
    free, total = cuda.mem_get_info(device)
    allocated = stats.get("allocated_bytes.all.current", 0)
    reserved = stats.get("reserved_bytes.all.current", 0)
    inactive_split = stats.get("inactive_split_bytes.all.current", 0)
    retries = stats.get("num_alloc_retries", 0)
    ooms = stats.get("num_ooms", 0)
    sample = {
        "allocated_bytes": allocated,
        "allocated_peak_bytes": stats.get("allocated_bytes.all.peak", allocated),
        "reserved_bytes": reserved,
        "reserved_peak_bytes": stats.get("reserved_bytes.all.peak", reserved),
        "active_bytes": stats.get("active_bytes.all.current", 0),
        "active_peak_bytes": stats.get("active_bytes.all.peak", 0),
        "inactive_split_bytes": inactive_split,
        "inactive_split_peak_bytes": stats.get("inactive_split_bytes.all.peak", 0),
        "fragmentation_pct": round(100.0 * inactive_split / reserved, 2) if reserved else 0.0,
        "cache_slack_pct": (round(100.0 * (reserved - allocated) / reserved, 2)
                            if reserved else 0.0),
        "alloc_retries": retries - retries_seen,
        "ooms": ooms - ooms_seen,
        "device_free_bytes": free,
        "device_used_bytes": total - free,
    }
    return sample, retries, ooms
