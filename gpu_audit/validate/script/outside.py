"""What the script supervisor measures from outside the command, for any program.

A daemon thread reads the resident memory of the command's whole process tree (psutil), the
host's swap in use and, where NVML answers, the GPU memory NVML counts for the processes of that
tree (through gpu-audit's NVML collector, so every guard it has applies). It reads every
:data:`FIRST_INTERVAL_S` for the first :data:`FAST_FOR_S`, then at intervals that double up to
:data:`INTERVAL_S`: a short run is seen, a long one costs little. Samples taken before the
command's code has started (a Python command: before its first Python registered itself; see
:mod:`.hook`) are not kept, so a peak or a cycle never carries the figures of a bare
interpreter. A Python script also reports its own figures per cycle through the hook, and each
of its Pythons its own peak (``ru_maxrss``) as it exits, which the stage's peak takes when
higher; a program that is not Python (or ignores the hook) is judged on these samples. Peaks are
kept for the stage as a whole. Each walk of the tree also tells
:class:`~.processes.CommandProcesses` which processes the command has, so one that leaves the
tree later is still ended with the stage.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

INTERVAL_S = 2.0  # walking the process tree reads /proc: not more often than this, in steady state
FIRST_INTERVAL_S = 0.1  # at the start, when a short run's whole life can pass
FAST_FOR_S = 2.0
NVML_EVERY = 1
NVML_TIMEOUT_S = 5.0


class OutsideSampler:
    def __init__(self, root_pid: int, *, nvml: bool = True, processes: Any = None,
                 code_started: bool = True) -> None:
        self.root_pid = root_pid
        self.nvml = nvml
        self.processes = processes  # a CommandProcesses, told of each process seen
        self.started = threading.Event()  # the command's code has started: samples count
        if code_started:
            self.started.set()
        self.latest: dict[str, Any] = {"rss_bytes": None, "swap_used_bytes": None,
                                       "nvml_used_bytes": None}
        self.peaks: dict[str, int] = {}
        self.nvml_note: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="outside-sampler", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> OutsideSampler:
        self._thread.start()
        return self

    def code_started(self) -> None:
        self.started.set()

    def stop(self) -> None:
        self._stop.set()

    def current(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.latest)

    def _run(self) -> None:
        count = 0
        began = time.monotonic()
        for interval in intervals():
            if self._stop.wait(interval):
                return
            if time.monotonic() - began < FAST_FOR_S and not self.started.is_set():
                if self.processes is not None:
                    self.processes.note_tree()  # the processes are known from the start
                continue
            count += 1
            self.sample(with_nvml=self.nvml and count % NVML_EVERY == 0)

    def sample(self, with_nvml: bool = False) -> None:
        import psutil

        pids: list[int] = []
        rss = 0
        if self.processes is not None:
            tree = self.processes.note_tree()
        else:
            try:
                root = psutil.Process(self.root_pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                tree = []
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                rss += proc.memory_info().rss
                pids.append(proc.pid)
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

    def take_peak(self, key: str, value: int | None) -> None:
        """A peak measured another way (the hook's own reading inside the process)."""
        if value:
            with self._lock:
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


def intervals() -> Iterator[float]:
    """The waits between samples: :data:`FIRST_INTERVAL_S` for the first :data:`FAST_FOR_S`,
    then doubling up to :data:`INTERVAL_S`."""
    waited = 0.0
    while waited < FAST_FOR_S:
        waited += FIRST_INTERVAL_S
        yield FIRST_INTERVAL_S
    interval = FIRST_INTERVAL_S
    while True:
        interval = min(INTERVAL_S, interval * 2)
        yield interval
