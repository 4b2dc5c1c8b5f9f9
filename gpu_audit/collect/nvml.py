"""NVML, read tolerantly: the only module in gpu-audit that imports ``pynvml``.

What the driver does not support, or a function the installed library lacks, becomes ``None``
without complaint; a GPU that fell off the bus is marked lost; anything else that fails becomes a
:class:`ProbeError`. Nothing here raises: :func:`read_nvml` always returns a reading.

A driver call can hang (a wedged GPU, a driver stuck in an RM lock), so every call runs on a daemon
thread and the whole read has one deadline. One thread reads the GPUs in turn while the driver
answers quickly; as soon as it does not, the GPUs not yet begun are queried concurrently, one
daemon thread each: plain threads rather than a ``ThreadPoolExecutor``, whose worker threads are
joined at interpreter exit, so that a call that never returns cannot stop gpu-audit from exiting.
A GPU whose thread misses the deadline is reported with what it had read so far.

Speed matters as much as tolerance (a slow driver answers each call in tens of milliseconds):
power and memory-health values come in one ``nvmlDeviceGetFieldValues`` call, each process list is
read into a ready buffer in one call, and a versioned function the library lacks is not asked for
again.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gpu_audit.model import Driver, Gpu, NvmlStatus, ProbeError

LIBRARY_NAME = "libnvidia-ml.so.1"

# NVML return codes (nvml.h); named here so this module reads without pynvml at hand.
NVML_SUCCESS = 0
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25

# "This driver or GPU has no such thing": a None field, not a probe error.
_NOT_AVAILABLE = frozenset({NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND})
# "This library has no such version of the call": try the older one.
_OLDER_VERSION_NEEDED = frozenset(
    {NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_ARGUMENT_VERSION_MISMATCH}
)

_INIT_FAILURES = {
    NVML_ERROR_LIBRARY_NOT_FOUND: (
        "library-not-found",
        f"the NVIDIA driver library ({LIBRARY_NAME}) could not be loaded",
    ),
    NVML_ERROR_DRIVER_NOT_LOADED: (
        "driver-not-loaded",
        "the NVIDIA kernel driver is not loaded (no /dev/nvidia* to talk to)",
    ),
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: (
        "version-mismatch",
        "the NVML library and the loaded kernel driver are from different driver versions",
    ),
    NVML_ERROR_NO_PERMISSION: (
        "no-permission",
        "this user is not allowed to open the NVIDIA device files",
    ),
    NVML_ERROR_INSUFFICIENT_RESOURCES: (
        "insufficient-resources",
        "the driver ran out of resources while initialising NVML",
    ),
}

# Clock-event ("throttle") reason bits, nvmlClocksEventReason* in nvml.h.
THROTTLE_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)
_COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
_BRANDS = {
    0: "unknown",
    1: "quadro",
    2: "tesla",
    3: "nvs",
    4: "grid",
    5: "geforce",
    6: "titan",
    7: "nvidia_vapps",
    8: "nvidia_vpc",
    9: "nvidia_vcs",
    10: "nvidia_vws",
    11: "nvidia_cloud_gaming",
    12: "quadro_rtx",
    13: "nvidia_rtx",
    14: "nvidia",
    15: "geforce_rtx",
    16: "titan_rtx",
}
_ARCHITECTURES = {
    2: "kepler",
    3: "maxwell",
    4: "pascal",
    5: "volta",
    6: "turing",
    7: "ampere",
    8: "ada",
    9: "hopper",
    10: "blackwell",
    13: "rubin",
}
_PSTATE_UNKNOWN = 32
_UNKNOWN_ARCHITECTURE = 0xFFFFFFFF
_VALUE_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF  # usedGpuMemory when the driver cannot tell

# nvmlDeviceGetFieldValues ids (nvml.h): power and memory health, read in one call.
_HEALTH_FIELDS = {
    1: "ecc_mode",  # NVML_FI_DEV_ECC_CURRENT
    3: "ecc_errors_corrected_volatile",  # NVML_FI_DEV_ECC_SBE_VOL_TOTAL
    4: "ecc_errors_uncorrected_volatile",  # NVML_FI_DEV_ECC_DBE_VOL_TOTAL
    5: "ecc_errors_corrected_aggregate",  # NVML_FI_DEV_ECC_SBE_AGG_TOTAL
    6: "ecc_errors_uncorrected_aggregate",  # NVML_FI_DEV_ECC_DBE_AGG_TOTAL
    29: "retired_pages_sbe",  # NVML_FI_DEV_RETIRED_SBE
    30: "retired_pages_dbe",  # NVML_FI_DEV_RETIRED_DBE
    31: "retired_pages_pending",  # NVML_FI_DEV_RETIRED_PENDING
    142: "remapped_rows_correctable",  # NVML_FI_DEV_REMAPPED_COR
    143: "remapped_rows_uncorrectable",  # NVML_FI_DEV_REMAPPED_UNC
    144: "remapped_rows_pending",  # NVML_FI_DEV_REMAPPED_PENDING
    145: "remapped_rows_failure",  # NVML_FI_DEV_REMAPPED_FAILURE
}
_BOOLEAN_FIELDS = frozenset(
    {"ecc_mode", "retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure"}
)
# Power in milliwatts. The 1-second average is what nvmlDeviceGetPowerUsage reports on Ampere and
# later; older GPUs have only the instant reading, which is what it reports there. Drivers older
# than these ids (r530) answer them as unsupported, and the dedicated calls below fill in.
_FI_POWER_AVERAGE = 185
_FI_POWER_INSTANT = 186
_FI_POWER_DEFAULT_LIMIT = 189
_FI_POWER_CURRENT_LIMIT = 190  # the limit in force, as nvmlDeviceGetEnforcedPowerLimit
_POWER_FIELD_NAMES = {
    _FI_POWER_AVERAGE: "power_draw_w",
    _FI_POWER_INSTANT: "power_draw_w",
    _FI_POWER_DEFAULT_LIMIT: "power_default_limit_w",
    _FI_POWER_CURRENT_LIMIT: "power_limit_w",
}
_POWER_CALLS = (
    ("power_draw_w", "nvmlDeviceGetPowerUsage"),
    ("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit"),
    ("power_default_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit"),
)
_FIELD_VALUE_IDS = [*_HEALTH_FIELDS, *_POWER_FIELD_NAMES]
_UNKNOWN_FIELD = frozenset({*_NOT_AVAILABLE, NVML_ERROR_INVALID_ARGUMENT})

# One buffer big enough for every process list seen in practice saves the "how many?" call.
_PROCESS_BUFFER_ROWS = 64

# How long one thread reads the GPUs in turn before each GPU not yet begun gets its own thread.
FAN_OUT_AFTER_S = 0.01


@dataclass(frozen=True)
class NvmlProcessEntry:
    """A process as NVML lists it on one GPU; ``collect.processes`` adds what the OS knows."""

    pid: int
    gpu_index: int
    gpu_uuid: str | None
    used_memory_bytes: int | None
    type: str  # "compute", "graphics" or "compute+graphics" (a pid in both lists is merged)


@dataclass(frozen=True)
class NvmlReading:
    status: NvmlStatus
    driver: Driver | None
    gpus: list[Gpu]
    processes: list[NvmlProcessEntry]
    probe_errors: list[ProbeError]


# ------------------------------------------------------------------------------ error helpers


class _GpuLost(Exception):
    """NVML answered NVML_ERROR_GPU_IS_LOST: stop reading this GPU."""


class _Abandoned(Exception):
    """The reader gave up waiting on this GPU: make no further driver calls."""


def _error_code(exc: BaseException) -> int | None:
    return getattr(exc, "value", None)


@functools.cache
def _error_names(nvml: ModuleType) -> dict[int, str]:
    names = {}
    for name in dir(nvml):
        if name.startswith("NVML_ERROR_"):
            names.setdefault(getattr(nvml, name), name)
    return names


def _error_name(nvml: ModuleType, code: int | None) -> str:
    return _error_names(nvml).get(code, f"NVML error {code}")


def _describe(nvml: ModuleType, exc: BaseException) -> str:
    """'Insufficient Permissions (NVML_ERROR_NO_PERMISSION)' for an NVMLError."""
    code = _error_code(exc)
    if code is None:
        return f"{type(exc).__name__}: {exc}"
    try:
        text = str(exc)
    except Exception:  # pynvml asks the library for unknown codes; it may be gone
        text = "error"
    return f"{text} ({_error_name(nvml, code)})"


def _seconds(value: float) -> str:
    return f"{value:g}"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return value.strip("\x00").strip() or None


def _watts(milliwatts: int | None) -> float | None:
    return None if milliwatts is None else round(milliwatts / 1000.0, 3)


def cuda_version_text(version: int | None) -> str | None:
    """NVML's integer CUDA version as text: 12040 -> "12.4", 13000 -> "13.0"."""
    if version is None or version <= 0:
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def throttle_reason_names(mask: int) -> list[str]:
    """Names of the clock-event reason bits set in ``mask``; unknown bits as ``unknown_0x...``."""
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = sum(bit for bit, _ in THROTTLE_REASONS)
    unknown = mask & ~known
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"unknown_0x{bit:x}")
            unknown &= ~bit
        bit <<= 1
    return names


# ------------------------------------------------------------------------------------- workers


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
# Versioned functions this library lacks; shared by all GPUs so each is tried once per process.
_missing_functions: set[str] = set()


def _calls_in_flight() -> bool:
    with _state_lock:
        _all_workers[:] = [w for w in _all_workers if not w.done.is_set()]
        return bool(_all_workers)


def shutdown() -> None:
    """Release NVML, unless a driver call is still stuck (shutting down under it could hang)."""
    global _initialised
    if not _initialised or _calls_in_flight():
        return
    nvml = _import_pynvml()
    if nvml is None:
        return
    _initialised = False
    try:
        worker = _Worker("nvml-shutdown", nvml.nvmlShutdown).start()
    except RuntimeError:  # no new threads this late in interpreter shutdown: the OS cleans up
        return
    worker.wait_until(time.monotonic() + 1.0)


# ----------------------------------------------------------------------------- initialisation


def _import_pynvml() -> ModuleType | None:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def _loaded_library_path() -> str | None:
    """The file the dynamic loader picked for libnvidia-ml, from this process's memory map."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                if "libnvidia-ml" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        return None
    return None


def _dlopen_error() -> str | None:
    try:
        ctypes.CDLL(LIBRARY_NAME)
    except OSError as exc:
        return str(exc)
    return None


def _init_failure(nvml: ModuleType, exc: BaseException) -> NvmlStatus:
    code = _error_code(exc)
    cause, what = _INIT_FAILURES.get(code, ("unknown", "NVML could not be initialised"))
    message = f"nvmlInit failed: {what}: {_describe(nvml, exc)}"
    if code == NVML_ERROR_LIBRARY_NOT_FOUND and (reason := _dlopen_error()):
        message += f"; the loader said: {reason}"
    return NvmlStatus(
        available=False, cause=cause, message=message, library_path=_loaded_library_path()
    )


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
        return NvmlStatus(available=True, library_path=_loaded_library_path())
    if starting:
        worker.start()
    if not worker.wait_until(deadline):
        # Left in place: the next read waits on this same call rather than starting another.
        return NvmlStatus(
            available=False,
            cause="timeout",
            message=f"nvmlInit did not return within {_seconds(timeout_s)} s: the driver hangs",
            library_path=_loaded_library_path(),
        )
    with _state_lock:
        if _init_worker is worker:
            _init_worker = None
        if worker.error is None and not _initialised:
            _initialised = True
            atexit.register(shutdown)
    if worker.error is not None:
        return _init_failure(nvml, worker.error)
    return NvmlStatus(available=True, library_path=_loaded_library_path())


# ---------------------------------------------------------------------------- per-GPU reading


class _GpuReader:
    """Reads one GPU on a worker thread; the waiting thread copies out what it has at any time."""

    def __init__(self, nvml: ModuleType, index: int) -> None:
        self.nvml = nvml
        self.index = index
        self.subject = f"gpu:{index}"
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._fields: dict[str, Any] = {"index": index}
        self._processes: dict[int, list[Any]] = {}  # pid -> [used_memory_bytes, kinds]
        self._errors: list[ProbeError] = []
        self._current_call: str | None = None
        self._abandoned = False
        # Power fields the field-values call did not settle, left to the dedicated calls.
        self._power_unread = {field for field, _ in _POWER_CALLS}

    # -- what the waiting thread sees

    def snapshot(self) -> tuple[Gpu, list[NvmlProcessEntry], list[ProbeError], str | None]:
        with self._lock:
            fields = dict(self._fields)
            processes = {pid: list(entry) for pid, entry in self._processes.items()}
            errors = list(self._errors)
            current = self._current_call
        gpu = Gpu(**fields)
        entries = [
            NvmlProcessEntry(
                pid=pid,
                gpu_index=self.index,
                gpu_uuid=gpu.uuid,
                used_memory_bytes=memory,
                type="+".join(k for k in ("compute", "graphics") if k in kinds),
            )
            for pid, (memory, kinds) in processes.items()
        ]
        return gpu, entries, errors, current

    def abandon(self) -> None:
        with self._lock:
            self._abandoned = True

    # -- helpers used on the GPU's thread

    def _set(self, **fields: Any) -> None:
        with self._lock:
            self._fields.update(fields)

    def _error(self, message: str, call: str | None) -> None:
        with self._lock:
            self._errors.append(ProbeError("nvml", self.subject, message, call))

    def _begin(self, name: str) -> None:
        with self._lock:
            if self._abandoned:
                raise _Abandoned
            self._current_call = name

    def _end(self) -> None:
        with self._lock:
            self._current_call = None

    def _failed(self, name: str, exc: BaseException, what: str = "") -> None:
        """Sort a failed call: unsupported (nothing to say), GPU lost (stop), or a probe error."""
        code = _error_code(exc)
        if code in _NOT_AVAILABLE:
            return
        if code == NVML_ERROR_GPU_IS_LOST:
            self._set(lost=True)
            self._error(
                f"GPU {self.index} is lost: NVML answered NVML_ERROR_GPU_IS_LOST to {name} "
                "(it has fallen off the bus or needs a reset)",
                name,
            )
            raise _GpuLost
        self._error(f"{name} failed{what}: {_describe(self.nvml, exc)}", name)

    def _call(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, or None when it failed (see :meth:`_failed`)."""
        self._begin(name)
        try:
            return fn(*args)
        except self.nvml.NVMLError as exc:
            self._failed(name, exc)
            return None
        finally:
            self._end()

    def _call_newest(self, names: tuple[str, ...], fn: Callable[[str], Any]) -> Any:
        """``fn(name)`` for the newest of ``names`` the library has, remembering what it lacks."""
        last = len(names) - 1
        for position, name in enumerate(names):
            if name in _missing_functions and position < last:
                continue
            self._begin(name)
            try:
                return fn(name)
            except self.nvml.NVMLError as exc:
                if _error_code(exc) in _OLDER_VERSION_NEEDED and position < last:
                    _missing_functions.add(name)
                    continue
                self._failed(name, exc)
                return None
            finally:
                self._end()
        return None

    # -- the reading itself

    def run(self) -> None:
        try:
            self._read()
        finally:
            self.done.set()

    def _read(self) -> None:
        try:
            handle = self._call(
                "nvmlDeviceGetHandleByIndex", self.nvml.nvmlDeviceGetHandleByIndex, self.index
            )
            if handle is None:
                return
            # Most useful first, so a hang late in the sequence still leaves the essentials.
            for step in (
                self._read_identity,
                self._read_memory,
                self._read_processes,
                self._read_field_values,
                self._read_activity,
                self._read_power_and_clocks,
                self._read_modes,
                self._read_pcie,
                self._read_static_identity,
            ):
                step(handle)
        except (_GpuLost, _Abandoned):
            pass
        except Exception as exc:  # a bug or a binding surprise: reported, the scan goes on
            self._error(f"reading GPU {self.index} stopped: {type(exc).__name__}: {exc}", None)

    def _read_identity(self, handle: Any) -> None:
        nvml = self.nvml
        self._set(uuid=_text(self._call("nvmlDeviceGetUUID", nvml.nvmlDeviceGetUUID, handle)))
        self._set(name=_text(self._call("nvmlDeviceGetName", nvml.nvmlDeviceGetName, handle)))
        pci = self._call("nvmlDeviceGetPciInfo_v3", nvml.nvmlDeviceGetPciInfo_v3, handle)
        if pci is not None:
            self._set(pci_bus_id=_text(pci.busId) or _text(pci.busIdLegacy))

    def _read_static_identity(self, handle: Any) -> None:
        nvml = self.nvml
        self._set(serial=_text(self._call("nvmlDeviceGetSerial", nvml.nvmlDeviceGetSerial, handle)))
        brand = self._call("nvmlDeviceGetBrand", nvml.nvmlDeviceGetBrand, handle)
        if brand is not None:
            self._set(brand=_BRANDS.get(brand, f"unknown_{brand}"))
        arch = self._call("nvmlDeviceGetArchitecture", nvml.nvmlDeviceGetArchitecture, handle)
        if arch is not None and arch != _UNKNOWN_ARCHITECTURE:
            self._set(architecture=_ARCHITECTURES.get(arch, f"unknown_{arch}"))
        cc = self._call(
            "nvmlDeviceGetCudaComputeCapability", nvml.nvmlDeviceGetCudaComputeCapability, handle
        )
        if cc is not None:
            self._set(compute_capability=f"{cc[0]}.{cc[1]}")

    def _read_memory(self, handle: Any) -> None:
        nvml = self.nvml
        v2 = getattr(nvml, "nvmlMemory_v2", None)

        def memory_info(name: str) -> Any:
            if name.endswith("_v2"):
                return nvml.nvmlDeviceGetMemoryInfo(handle, version=v2)
            return nvml.nvmlDeviceGetMemoryInfo(handle)

        names = ("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo")
        memory = self._call_newest(names if v2 is not None else names[1:], memory_info)
        if memory is not None:
            self._set(
                memory_total_bytes=memory.total,
                memory_used_bytes=memory.used,
                memory_free_bytes=memory.free,
                memory_reserved_bytes=getattr(memory, "reserved", None),
            )
        bar1 = self._call("nvmlDeviceGetBAR1MemoryInfo", nvml.nvmlDeviceGetBAR1MemoryInfo, handle)
        if bar1 is not None:
            self._set(bar1_total_bytes=bar1.bar1Total, bar1_used_bytes=bar1.bar1Used)

    def _read_processes(self, handle: Any) -> None:
        for kind in ("compute", "graphics"):
            title = kind.capitalize()
            names = tuple(
                f"nvmlDeviceGet{title}RunningProcesses{suffix}" for suffix in ("_v3", "_v2", "")
            )
            rows = self._call_newest(
                names, lambda name: _running_processes(self.nvml, name, handle)
            )
            for pid, memory in rows or ():
                with self._lock:
                    entry = self._processes.setdefault(pid, [memory, set()])
                    entry[1].add(kind)
                    if memory is not None and (entry[0] is None or memory > entry[0]):
                        entry[0] = memory

    def _read_activity(self, handle: Any) -> None:
        nvml = self.nvml
        util = self._call(
            "nvmlDeviceGetUtilizationRates", nvml.nvmlDeviceGetUtilizationRates, handle
        )
        if util is not None:
            self._set(utilization_pct=util.gpu, memory_utilization_pct=util.memory)
        temperature = self._call_newest(
            ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
            lambda name: getattr(nvml, name)(handle, nvml.NVML_TEMPERATURE_GPU),
        )
        self._set(temperature_c=temperature)
        for field, threshold in (
            ("temperature_slowdown_c", nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            ("temperature_shutdown_c", nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
            ("temperature_max_operating_c", nvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
        ):
            self._set(
                **{
                    field: self._call(
                        "nvmlDeviceGetTemperatureThreshold",
                        nvml.nvmlDeviceGetTemperatureThreshold,
                        handle,
                        threshold,
                    )
                }
            )
        self._set(
            fan_speed_pct=self._call("nvmlDeviceGetFanSpeed", nvml.nvmlDeviceGetFanSpeed, handle)
        )

    def _read_power_and_clocks(self, handle: Any) -> None:
        nvml = self.nvml
        for field, name in _POWER_CALLS:
            if field in self._power_unread:
                self._set(**{field: _watts(self._call(name, getattr(nvml, name), handle))})
        for field, name, clock in (
            ("sm_clock_mhz", "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            ("memory_clock_mhz", "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            ("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM),
            ("memory_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_MEM),
        ):
            self._set(**{field: self._call(name, getattr(nvml, name), handle, clock)})
        pstate = self._call(
            "nvmlDeviceGetPerformanceState", nvml.nvmlDeviceGetPerformanceState, handle
        )
        if pstate is not None and pstate != _PSTATE_UNKNOWN:
            self._set(performance_state=pstate)
        mask = self._call_newest(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
            lambda name: getattr(nvml, name)(handle),
        )
        if mask is not None:
            self._set(throttle_reasons_mask=mask, throttle_reasons=throttle_reason_names(mask))

    def _read_modes(self, handle: Any) -> None:
        nvml = self.nvml
        persistence = self._call(
            "nvmlDeviceGetPersistenceMode", nvml.nvmlDeviceGetPersistenceMode, handle
        )
        if persistence is not None:
            self._set(persistence_mode=bool(persistence))
        mode = self._call("nvmlDeviceGetComputeMode", nvml.nvmlDeviceGetComputeMode, handle)
        if mode is not None:
            self._set(compute_mode=_COMPUTE_MODES.get(mode, f"unknown_{mode}"))
        mig = self._call("nvmlDeviceGetMigMode", nvml.nvmlDeviceGetMigMode, handle)
        if mig is not None:
            self._set(mig_mode=bool(mig[0]))
        display = self._call("nvmlDeviceGetDisplayActive", nvml.nvmlDeviceGetDisplayActive, handle)
        if display is not None:
            self._set(display_active=bool(display))

    def _read_pcie(self, handle: Any) -> None:
        nvml = self.nvml
        for field, name in (
            ("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
            ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            ("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
        ):
            self._set(**{field: self._call(name, getattr(nvml, name), handle)})

    def _read_field_values(self, handle: Any) -> None:
        """Power, ECC mode and counters, retired pages and remapped rows: one call."""
        nvml = self.nvml
        name = "nvmlDeviceGetFieldValues"
        values = None
        if name not in _missing_functions:
            self._begin(name)
            try:
                values = nvml.nvmlDeviceGetFieldValues(handle, _FIELD_VALUE_IDS)
            except nvml.NVMLError as exc:
                if _error_code(exc) != NVML_ERROR_FUNCTION_NOT_FOUND:
                    self._failed(name, exc)
                    return
                _missing_functions.add(name)
            finally:
                self._end()
        if values is None:
            self._read_memory_health_one_by_one(handle)
            return
        power: dict[int, int] = {}
        for value in values:
            field_id, code = value.fieldId, value.nvmlReturn
            field = _HEALTH_FIELDS.get(field_id) or _POWER_FIELD_NAMES.get(field_id)
            if field is None:
                continue
            if code == NVML_SUCCESS:
                number = _field_number(value)
                if field_id in _POWER_FIELD_NAMES:
                    power[field_id] = int(number)
                else:
                    self._set(**{field: bool(number) if field in _BOOLEAN_FIELDS else number})
            elif code not in _UNKNOWN_FIELD:
                self._failed(name, nvml.NVMLError(code), what=f" for field {field_id} ({field})")
                self._power_unread.discard(field)  # already reported: do not ask twice
        self._take_power(power)

    def _take_power(self, power: dict[int, int]) -> None:
        draw = power.get(_FI_POWER_AVERAGE, power.get(_FI_POWER_INSTANT))
        for field, milliwatts in (
            ("power_draw_w", draw),
            ("power_limit_w", power.get(_FI_POWER_CURRENT_LIMIT)),
            ("power_default_limit_w", power.get(_FI_POWER_DEFAULT_LIMIT)),
        ):
            if milliwatts is not None:
                self._set(**{field: _watts(milliwatts)})
                self._power_unread.discard(field)

    def _read_memory_health_one_by_one(self, handle: Any) -> None:
        """The same values through the dedicated calls, for drivers without field values."""
        nvml = self.nvml
        ecc = self._call("nvmlDeviceGetEccMode", nvml.nvmlDeviceGetEccMode, handle)
        if ecc is not None:
            self._set(ecc_mode=bool(ecc[0]))
            for field, error_type, counter in (
                ("ecc_errors_corrected_volatile", 0, 0),
                ("ecc_errors_uncorrected_volatile", 1, 0),
                ("ecc_errors_corrected_aggregate", 0, 1),
                ("ecc_errors_uncorrected_aggregate", 1, 1),
            ):
                self._set(
                    **{
                        field: self._call(
                            "nvmlDeviceGetTotalEccErrors",
                            nvml.nvmlDeviceGetTotalEccErrors,
                            handle,
                            error_type,
                            counter,
                        )
                    }
                )
        rows = self._call("nvmlDeviceGetRemappedRows", nvml.nvmlDeviceGetRemappedRows, handle)
        if rows is not None:
            self._set(
                remapped_rows_correctable=rows[0],
                remapped_rows_uncorrectable=rows[1],
                remapped_rows_pending=bool(rows[2]),
                remapped_rows_failure=bool(rows[3]),
            )
            return  # GPUs that remap rows (Ampere and later) do not retire pages
        for field, cause in (("retired_pages_sbe", 0), ("retired_pages_dbe", 1)):
            pages = self._call(
                "nvmlDeviceGetRetiredPages", nvml.nvmlDeviceGetRetiredPages, handle, cause
            )
            self._set(**{field: None if pages is None else len(pages)})
        pending = self._call(
            "nvmlDeviceGetRetiredPagesPendingStatus",
            nvml.nvmlDeviceGetRetiredPagesPendingStatus,
            handle,
        )
        if pending is not None:
            self._set(retired_pages_pending=bool(pending))


def _field_number(value: Any) -> int | float:
    kind = value.valueType
    union = value.value
    return {
        0: lambda: union.dVal,
        1: lambda: union.uiVal,
        2: lambda: union.ulVal,
        3: lambda: union.ullVal,
        4: lambda: union.sllVal,
        5: lambda: union.siVal,
        6: lambda: union.usVal,
    }.get(kind, lambda: union.ullVal)()


class _ProcessInfoV1(ctypes.Structure):
    """nvmlProcessInfo_v1_t, used by the unversioned process-list entry points."""

    _fields_ = (("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong))


def _running_processes(nvml: ModuleType, name: str, handle: Any) -> list[tuple[int, int | None]]:
    """(pid, used bytes) rows from one process-list entry point, in one call when they fit."""
    row_type = _ProcessInfoV1 if not name.endswith(("_v2", "_v3")) else nvml.c_nvmlProcessInfo_v2_t
    fn = nvml._nvmlGetFunctionPointer(name)
    rows = _PROCESS_BUFFER_ROWS
    while True:
        count = ctypes.c_uint(rows)
        buffer = (row_type * rows)()
        ret = fn(handle, ctypes.byref(count), buffer)
        if ret == NVML_SUCCESS:
            break
        if ret != NVML_ERROR_INSUFFICIENT_SIZE:
            raise nvml.NVMLError(ret)
        rows = count.value * 2 + 8  # more processes than rows: grow and ask again
    return [
        (row.pid, None if row.usedGpuMemory == _VALUE_NOT_AVAILABLE else row.usedGpuMemory)
        for row in buffer[: count.value]
    ]


# ---------------------------------------------------------------------------- driver and count


def _read_driver(nvml: ModuleType, progress: dict[str, str]) -> tuple[Driver, list[ProbeError]]:
    """Driver, NVML and CUDA versions; ``progress["call"]`` names the call under way."""
    errors: list[ProbeError] = []

    def ask(name: str, fn: Callable[[], Any]) -> Any:
        progress["call"] = name
        try:
            return fn()
        except nvml.NVMLError as exc:
            if _error_code(exc) not in _NOT_AVAILABLE:
                message = f"{name} failed: {_describe(nvml, exc)}"
                errors.append(ProbeError("nvml", "driver", message, name))
            return None

    def cuda_version() -> int | None:
        try:
            return nvml.nvmlSystemGetCudaDriverVersion_v2()
        except nvml.NVMLError as exc:
            if _error_code(exc) != NVML_ERROR_FUNCTION_NOT_FOUND:
                raise
            return nvml.nvmlSystemGetCudaDriverVersion()

    driver_version = ask("nvmlSystemGetDriverVersion", nvml.nvmlSystemGetDriverVersion)
    nvml_version = ask("nvmlSystemGetNVMLVersion", nvml.nvmlSystemGetNVMLVersion)
    cuda = ask("nvmlSystemGetCudaDriverVersion_v2", cuda_version)
    driver = Driver(
        driver_version=_text(driver_version),
        nvml_version=_text(nvml_version),
        cuda_driver_version=cuda_version_text(cuda),
    )
    return driver, errors


def _timeout_error(subject: str, call: str | None, timeout_s: float) -> ProbeError:
    what = f"NVML call {call}" if call else "NVML"
    return ProbeError(
        "nvml", subject, f"{what} did not return within {_seconds(timeout_s)} s", call,
        timed_out=True,
    )


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
    """An NVML read under way on a daemon thread; see :func:`start_read`."""

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


def start_read(timeout_s: float = 5.0) -> PendingReading:
    """Start :func:`read_nvml` in the background and return at once.

    A slow driver spends most of a read waiting, with the interpreter lock released, so a caller
    that starts the read first and then imports or collects everything else overlaps the two.
    """
    return PendingReading(timeout_s)


def _read_nvml(timeout_s: float) -> NvmlReading:
    deadline = time.monotonic() + timeout_s
    nvml = _import_pynvml()
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
    driver_progress: dict[str, str] = {}
    driver_worker = _Worker("nvml-driver", lambda: _read_driver(nvml, driver_progress)).start()
    count_worker = _Worker("nvml-count", nvml.nvmlDeviceGetCount).start()
    if not count_worker.wait_until(deadline):
        message = f"nvmlDeviceGetCount did not return within {_seconds(timeout_s)} s"
        return _unavailable(
            NvmlStatus(False, "timeout", message, status.library_path),
            [_timeout_error("driver", "nvmlDeviceGetCount", timeout_s)],
        )
    if count_worker.error is not None:
        message = f"nvmlDeviceGetCount failed: {_describe(nvml, count_worker.error)}"
        return _unavailable(NvmlStatus(False, "unknown", message, status.library_path))

    gpus, processes, gpu_errors = _read_gpus(nvml, count_worker.result, deadline, timeout_s)
    driver, driver_errors = _driver_result(driver_worker, driver_progress, deadline, timeout_s)
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
    readers = [_GpuReader(nvml, index) for index in range(count)]
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
        gpu, entries, gpu_errors, current = reader.snapshot()
        gpus.append(gpu)
        processes.extend(entries)
        errors.extend(gpu_errors)
        if not finished:
            errors.append(_timeout_error(reader.subject, current, timeout_s))
    return gpus, processes, errors


def _fan_out(queue: collections.deque[_GpuReader]) -> None:
    """A thread for each GPU still waiting in ``queue``."""
    # Threads start idle and are released together: starting a thread waits for it to run, which
    # takes long when the threads started before it are busy and hold the interpreter lock.
    go = threading.Event()

    def read_one(reader: _GpuReader) -> None:
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
    worker: _Worker, progress: dict[str, str], deadline: float, timeout_s: float
) -> tuple[Driver | None, list[ProbeError]]:
    if not worker.wait_until(deadline):
        return None, [_timeout_error("driver", progress.get("call"), timeout_s)]
    if worker.error is not None:
        message = (
            f"reading the driver versions stopped: {type(worker.error).__name__}: {worker.error}"
        )
        return None, [ProbeError("nvml", "driver", message)]
    return worker.result
