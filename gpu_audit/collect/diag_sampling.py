"""NVML sampled every second while ``gpu-audit diag`` loads the GPUs (level 3), and the Xid
events of the kernel log before and after.

Each sample is one full NVML read (bounded by a deadline, as every read is) reduced to what the
sustained-load judgement needs: clocks, power and its limit, temperature, the active throttle
reasons, and the error counters (ECC, remapped rows, retired pages) whose movement fails a GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from gpu_audit.collect.kernel_log import read_kernel_log
from gpu_audit.collect.nvml import read_nvml
from gpu_audit.model import Gpu

SAMPLE_FIELDS = (
    "sm_clock_mhz", "memory_clock_mhz", "sm_clock_max_mhz", "power_draw_w", "power_limit_w",
    "temperature_c", "temperature_slowdown_c", "utilization_pct", "throttle_reasons",
    "ecc_errors_corrected_volatile", "ecc_errors_uncorrected_volatile",
    "remapped_rows_correctable", "remapped_rows_uncorrectable", "remapped_rows_pending",
    "retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending",
)


def gpu_sample(gpu: Gpu, t_s: float) -> dict[str, Any]:
    """One GPU's reading as a sample row (``t_s``: seconds since sampling started)."""
    row: dict[str, Any] = {"t_s": round(t_s, 2)}
    for name in SAMPLE_FIELDS:
        row[name] = getattr(gpu, name)
    return row


class NvmlSampler:
    """A daemon thread reading NVML every ``interval_s``; :meth:`stop` returns the samples per
    NVML index."""

    def __init__(self, indices: Iterable[int], interval_s: float = 1.0,
                 timeout_s: float = 2.0) -> None:
        self.indices = set(indices)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.samples: dict[int, list[dict[str, Any]]] = {i: [] for i in self.indices}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="diag-nvml-sampler", daemon=True)
        self._started = 0.0

    def start(self) -> NvmlSampler:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            reading = read_nvml(self.timeout_s)
            now = time.monotonic() - self._started
            if not reading.status.available:
                self.errors.append(reading.status.message or "NVML unavailable")
            for gpu in reading.gpus:
                if gpu.index in self.indices:
                    self.samples[gpu.index].append(gpu_sample(gpu, now))
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> dict[int, list[dict[str, Any]]]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.timeout_s + self.interval_s + 1)
        return {i: list(rows) for i, rows in self.samples.items()}


def xid_events() -> tuple[list[dict[str, Any]] | None, str | None]:
    """This boot's Xid events as plain rows, or ``None`` and why when the log is unreadable."""

    log, errors = read_kernel_log()
    if log is None or not log.readable:
        return None, errors[0].message if errors else "no kernel log on this system"
    return [{"xid": e.xid, "pci_bus_id": e.pci_bus_id, "uptime_s": e.uptime_s,
             "message": e.message} for e in log.xid_events], None
