"""The NVML read under one deadline: every driver call on a daemon thread, GPUs fanned out.

A driver call can hang (a wedged GPU, a driver stuck in an RM lock), so every call runs on a
daemon thread and the whole read has one deadline. One thread reads the GPUs in turn while the
driver answers quickly; as soon as it does not, the GPUs not yet begun are queried concurrently,
one daemon thread each: plain threads rather than a ``ThreadPoolExecutor``, whose worker threads
are joined at interpreter exit, so that a call that never returns cannot stop gpu-audit from
exiting. A GPU whose thread misses the deadline is reported with what it had read so far, and
the call it was stuck in. Nothing here raises: :func:`read_nvml` always returns a reading.

``nvmlInit`` runs once per process, thread-safely; ``nvmlShutdown`` runs at exit unless a call
is still stuck in the driver.
"""

from __future__ import annotations

import atexit
import collections
import functools
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from gpu_audit.collect.nvml.binding import (
    Calls,
    describe,
    import_pynvml,
    init_failure,
    loaded_library_path,
)
from gpu_audit.collect.nvml.device import GpuReader, read_driver
from gpu_audit.collect.nvml.reading import NvmlProcessEntry, NvmlReading
from gpu_audit.model import Driver, Gpu, NvmlStatus, ProbeError

# How long one thread reads the GPUs in turn before each GPU not yet begun gets its own thread.
FAN_OUT_AFTER_S = 0.01


class _Worker:
    """A daemon thread running one piece of NVML work, waited on with a deadline."""

    def __init__(self, name: str, target: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._target = target
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            self.result = self._target()
        except BaseException as exc:  # handed to the waiting thread, never lost
            self.error = exc
        finally:
            self.done.set()

    def start(self) -> _Worker:
        with _state_lock:
            _all_workers.append(self)
        self.thread.start()
        return self

    def wait_until(self, deadline: float) -> bool:
        return self.done.wait(max(0.0, deadline - time.monotonic()))


_state_lock = threading.Lock()
_all_workers: list[_Worker] = []
_init_worker: _Worker | None = None
_initialised = False


def _seconds(value: float) -> str:
    return f"{value:g}"


def _timeout_error(subject: str, call: str | None, timeout_s: float) -> ProbeError:
    what = f"NVML call {call}" if call else "NVML"
    return ProbeError(
        "nvml", subject, f"{what} did not return within {_seconds(timeout_s)} s", call,
        timed_out=True,
    )


# ------------------------------------------------------------------ initialisation, shutdown


def _calls_in_flight() -> bool:
    with _state_lock:
        _all_workers[:] = [w for w in _all_workers if not w.done.is_set()]
        return bool(_all_workers)


def shutdown() -> None:
    """Release NVML, unless a driver call is still stuck (shutting down under it could hang)."""
    global _initialised
    if not _initialised or _calls_in_flight():
        return
    nvml = import_pynvml()
    if nvml is None:
        return
    _initialised = False
    try:
        worker = _Worker("nvml-shutdown", nvml.nvmlShutdown).start()
    except RuntimeError:  # no new threads this late in interpreter shutdown: the OS cleans up
        return
    worker.wait_until(time.monotonic() + 1.0)


def _initialise(nvml: ModuleType, deadline: float, timeout_s: float) -> NvmlStatus:
    """nvmlInit once per process, thread-safe, bounded by ``deadline``."""
    global _init_worker, _initialised
    with _state_lock:
        if not _initialised and _init_worker is None:
            _init_worker = _Worker("nvml-init", nvml.nvmlInit)
            starting = True
        else:
            starting = False
        worker = _init_worker
    if worker is None:  # initialised by an earlier read
        return NvmlStatus(available=True, library_path=loaded_library_path())
    if starting:
        worker.start()
    if not worker.wait_until(deadline):
        # Left in place: the next read waits on this same call rather than starting another.
        return NvmlStatus(
            available=False,
            cause="timeout",
            message=f"nvmlInit did not return within {_seconds(timeout_s)} s: the driver hangs",
            library_path=loaded_library_path(),
        )
    with _state_lock:
        if _init_worker is worker:
            _init_worker = None
        if worker.error is None and not _initialised:
            _initialised = True
            atexit.register(shutdown)
    if worker.error is not None:
        return init_failure(nvml, worker.error)
    return NvmlStatus(available=True, library_path=loaded_library_path())


# ---------------------------------------------------------------------------------- the reading


def _unavailable(status: NvmlStatus, errors: list[ProbeError] | None = None) -> NvmlReading:
    return NvmlReading(status=status, driver=None, gpus=[], processes=[], probe_errors=errors or [])


def read_nvml(timeout_s: float = 5.0) -> NvmlReading:
    """Everything NVML tells about the driver, the GPUs and their processes; never raises.

    The whole read finishes within about ``timeout_s`` seconds however the driver behaves.
    """
    try:
        return _read_nvml(timeout_s)
    except Exception as exc:  # a bug here must not end the scan: say so in the reading
        return _unavailable(
            NvmlStatus(
                available=False,
                cause="unknown",
                message=f"reading NVML failed: {type(exc).__name__}: {exc}",
            )
        )


class PendingReading:
    """An NVML read under way on a daemon thread; see :func:`.isolated.start_read`."""

    def __init__(self, timeout_s: float) -> None:
        self.started = time.perf_counter()
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s
        self._worker = _Worker("nvml-read", lambda: read_nvml(timeout_s)).start()

    def result(self) -> NvmlReading:
        """The reading; waits at most until the read's own deadline (plus a moment)."""
        # read_nvml bounds itself; the grace covers its start on a busy interpreter.
        if self._worker.wait_until(self._deadline + 1.0) and self._worker.error is None:
            return self._worker.result
        message = f"reading NVML did not finish within {_seconds(self._timeout_s)} s"
        return _unavailable(NvmlStatus(available=False, cause="timeout", message=message))


def _read_nvml(timeout_s: float) -> NvmlReading:
    deadline = time.monotonic() + timeout_s
    nvml = import_pynvml()
    if nvml is None:
        return _unavailable(
            NvmlStatus(
                available=False,
                cause="library-not-found",
                message="the Python binding for NVML is missing: install nvidia-ml-py",
            )
        )
    status = _initialise(nvml, deadline, timeout_s)
    if not status.available:
        return _unavailable(status)

    # The versions are read while the GPUs are: nothing waits on them.
    driver_calls = Calls(nvml, "driver")
    driver_worker = _Worker("nvml-driver", lambda: read_driver(driver_calls)).start()
    count_worker = _Worker("nvml-count", nvml.nvmlDeviceGetCount).start()
    if not count_worker.wait_until(deadline):
        message = f"nvmlDeviceGetCount did not return within {_seconds(timeout_s)} s"
        return _unavailable(
            NvmlStatus(False, "timeout", message, status.library_path),
            [_timeout_error("driver", "nvmlDeviceGetCount", timeout_s)],
        )
    if count_worker.error is not None:
        message = f"nvmlDeviceGetCount failed: {describe(nvml, count_worker.error)}"
        return _unavailable(NvmlStatus(False, "unknown", message, status.library_path))

    gpus, processes, gpu_errors = _read_gpus(nvml, count_worker.result, deadline, timeout_s)
    driver, driver_errors = _driver_result(driver_worker, driver_calls, deadline, timeout_s)
    return NvmlReading(
        status=status,
        driver=driver,
        gpus=gpus,
        processes=processes,
        probe_errors=[*driver_errors, *gpu_errors],
    )


def _read_gpus(
    nvml: ModuleType, count: int, deadline: float, timeout_s: float
) -> tuple[list[Gpu], list[NvmlProcessEntry], list[ProbeError]]:
    """Every GPU, one after another while the driver is quick, else concurrently.

    A quick driver answers a GPU's ~33 calls in about a millisecond: one thread reads eight GPUs
    in less time than eight threads spend passing the interpreter lock around. A slow or hung
    driver does not, so when that thread has not finished within :data:`FAN_OUT_AFTER_S`, every
    GPU it has not begun gets a daemon thread of its own. A GPU late for the deadline gives what
    it has read so far.
    """
    readers = [GpuReader(nvml, index) for index in range(count)]
    queue = collections.deque(readers)

    def read_in_turn() -> None:
        while True:
            try:
                reader = queue.popleft()
            except IndexError:
                return
            reader.run()

    in_turn = _Worker("nvml-gpus", read_in_turn).start()
    if not in_turn.wait_until(min(deadline, time.monotonic() + FAN_OUT_AFTER_S)):
        _fan_out(queue)
    gpus: list[Gpu] = []
    processes: list[NvmlProcessEntry] = []
    errors: list[ProbeError] = []
    for reader in readers:
        finished = reader.done.wait(max(0.0, deadline - time.monotonic()))
        if not finished:
            reader.abandon()
        gpu, entries, gpu_errors, current = reader.reading()
        gpus.append(gpu)
        processes.extend(entries)
        errors.extend(gpu_errors)
        if not finished:
            errors.append(_timeout_error(reader.subject, current, timeout_s))
    return gpus, processes, errors


def _fan_out(queue: collections.deque[GpuReader]) -> None:
    """A thread for each GPU still waiting in ``queue``."""
    # Threads start idle and are released together: starting a thread waits for it to run, which
    # takes long when the threads started before it are busy and hold the interpreter lock.
    go = threading.Event()

    def read_one(reader: GpuReader) -> None:
        go.wait()
        reader.run()

    while True:
        try:
            reader = queue.popleft()
        except IndexError:
            break
        _Worker(f"nvml-gpu{reader.index}", functools.partial(read_one, reader)).start()
    go.set()


def _driver_result(
    worker: _Worker, calls: Calls, deadline: float, timeout_s: float
) -> tuple[Driver | None, list[ProbeError]]:
    if not worker.wait_until(deadline):
        return None, [_timeout_error("driver", calls.current_call, timeout_s)]
    if worker.error is not None:
        message = (
            f"reading the driver versions stopped: {type(worker.error).__name__}: {worker.error}"
        )
        return None, [ProbeError("nvml", "driver", message)]
    return worker.result, list(calls.errors)
