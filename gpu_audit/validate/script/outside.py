"""What the script supervisor measures from outside the command, for any program.

Every :data:`INTERVAL_S` a daemon thread reads the resident memory of the command's whole
process tree (psutil), the host's swap in use and, where NVML answers, the GPU memory NVML
counts for the processes of that tree (through gpu-audit's NVML collector, so every guard it
has applies). A Python script also reports its own figures per cycle through the hook; a
program that is not Python (or ignores the hook) is judged on these. Peaks are kept for the
stage as a whole.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

INTERVAL_S = 2.0  # walking the process tree reads /proc: not more often than this
NVML_EVERY = 1
NVML_TIMEOUT_S = 5.0


class OutsideSampler:
    def __init__(self, root_pid: int, *, nvml: bool = True) -> None:
        self.root_pid = root_pid
        self.nvml = nvml
        self.latest: dict[str, Any] = {"rss_bytes": None, "swap_used_bytes": None,
                                       "nvml_used_bytes": None}
        self.peaks: dict[str, int] = {}
        self.nvml_note: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outside-sampler", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> OutsideSampler:
        self.sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def current(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.latest)

    def _run(self) -> None:
        count = 0
        while not self._stop.wait(INTERVAL_S):
            count += 1
            self.sample(with_nvml=self.nvml and count % NVML_EVERY == 0)

    def sample(self, with_nvml: bool = False) -> None:
        import psutil

        pids: list[int] = []
        rss = 0
        try:
            root = psutil.Process(self.root_pid)
            for proc in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    rss += proc.memory_info().rss
                    pids.append(proc.pid)
        except psutil.Error:
            pass
        swap = None
        with contextlib.suppress(OSError, RuntimeError):
            swap = psutil.swap_memory().used
        nvml_used = self._nvml(pids) if with_nvml and pids else self.latest["nvml_used_bytes"]
        with self._lock:
            self.latest = {"rss_bytes": rss or None, "swap_used_bytes": swap,
                           "nvml_used_bytes": nvml_used}
            for key, value in self.latest.items():
                if value is not None:
                    self.peaks[key] = max(self.peaks.get(key, 0), value)

    def _nvml(self, pids: list[int]) -> int | None:
        # pynvml loads only for a program that is not Python (measured from outside).
        from gpu_audit.collect.nvml.deadlines import read_nvml

        try:
            reading = read_nvml(NVML_TIMEOUT_S)
        except Exception as exc:  # never let a probe end the stage
            self.nvml, self.nvml_note = False, f"NVML read failed: {exc}"
            return None
        if not reading.status.available:
            self.nvml = False
            self.nvml_note = (f"NVML is not available ({reading.status.message or 'no driver'}):"
                              " no GPU memory figures from outside the script")
            return None
        wanted = set(pids)
        used = [p.used_memory_bytes for p in reading.processes
                if p.pid in wanted and p.used_memory_bytes is not None]
        return sum(used) if used else 0
