"""What NVML says about the driver and each GPU, read field by field into plain structs.

Most useful first, so that a driver that hangs late in a GPU's sequence still leaves the
essentials. Power, memory-health values and the memory temperature come in one
``nvmlDeviceGetFieldValues`` call (a value it does not give is asked through its dedicated call,
where there is one) and
each process list is read into a ready buffer in one call: a slow driver answers each call in
tens of milliseconds.
"""

from __future__ import annotations

import threading
from types import ModuleType
from typing import Any

from gpu_audit.collect.nvml.binding import (
    MISSING,
    UNKNOWN_FIELD,
    Abandoned,
    Calls,
    error_code,
    field_number,
    running_processes,
)
from gpu_audit.collect.nvml.codes import (
    ARCHITECTURES,
    BOOLEAN_FIELDS,
    BRANDS,
    COMPUTE_MODES,
    FI_POWER_AVERAGE,
    FI_POWER_CURRENT_LIMIT,
    FI_POWER_DEFAULT_LIMIT,
    FI_POWER_INSTANT,
    FI_POWER_MAX_LIMIT,
    FI_POWER_MIN_LIMIT,
    FIELD_VALUE_IDS,
    HEALTH_FIELDS,
    NVML_ERROR_GPU_IS_LOST,
    NVML_SUCCESS,
    POWER_FIELD_NAMES,
    PSTATE_UNKNOWN,
    READING_FIELDS,
    THROTTLE_REASONS,
    UNKNOWN_ARCHITECTURE,
)
from gpu_audit.collect.nvml.reading import NvmlProcessEntry
from gpu_audit.model import Driver, Gpu, ProbeError

_POWER_CALLS = (
    ("power_draw_w", "nvmlDeviceGetPowerUsage"),
    ("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit"),
    ("power_default_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit"),
)
# The range the power limit may be set in: one dedicated call gives both.
_POWER_RANGE = frozenset({"power_min_limit_w", "power_max_limit_w"})


class _GpuLost(Exception):
    """NVML answered NVML_ERROR_GPU_IS_LOST: stop reading this GPU."""


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


def read_driver(calls: Calls) -> Driver:
    """Driver, NVML and CUDA versions (``calls`` is about the subject ``driver``)."""
    nvml = calls.nvml
    driver_version = calls.call("nvmlSystemGetDriverVersion")
    nvml_version = calls.call("nvmlSystemGetNVMLVersion")
    cuda = calls.call_newest(
        ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"),
        lambda name: getattr(nvml, name)(),
    )
    return Driver(
        driver_version=_text(driver_version),
        nvml_version=_text(nvml_version),
        cuda_driver_version=cuda_version_text(cuda),
    )


class GpuReader(Calls):
    """Reads one GPU on a worker thread; the waiting thread copies out what it has at any time."""

    def __init__(self, nvml: ModuleType, index: int) -> None:
        super().__init__(nvml, f"gpu:{index}")
        self.index = index
        self.done = threading.Event()
        self._fields: dict[str, Any] = {"index": index}
        # pid -> [used_memory_bytes, kinds, MIG gpu instance id, MIG compute instance id]
        self._processes: dict[int, list[Any]] = {}
        # Power fields the field-values call did not settle, left to the dedicated calls.
        self._power_unread = {field for field, _ in _POWER_CALLS} | _POWER_RANGE
        # Memory-health fields likewise: one the field-values call answers "not supported" (or
        # does not know) is asked again through its dedicated call.
        self._health_unread = set(HEALTH_FIELDS.values())

    # -- what the waiting thread sees

    def reading(self) -> tuple[Gpu, list[NvmlProcessEntry], list[ProbeError], str | None]:
        """The GPU and its processes as read so far, its probe errors, and the call under way."""
        with self.lock:
            fields = dict(self._fields)
            processes = {pid: list(entry) for pid, entry in self._processes.items()}
            errors = list(self.errors)
            current = self.current_call
        gpu = Gpu(**fields)
        instances: dict[tuple[int, int | None], str] = {}
        if gpu.mig_devices:  # MIG's reader is loaded for MIG GPUs only
            from gpu_audit.collect.nvml.mig import instance_uuids

            instances = instance_uuids(gpu.mig_devices)
        entries = [
            NvmlProcessEntry(
                pid=pid,
                gpu_index=self.index,
                gpu_uuid=gpu.uuid,
                used_memory_bytes=memory,
                type="+".join(k for k in ("compute", "graphics") if k in kinds),
                mig_gpu_instance_id=gi,
                mig_compute_instance_id=ci,
                mig_uuid=None if gi is None else instances.get((gi, ci)),
            )
            for pid, (memory, kinds, gi, ci) in processes.items()
        ]
        return gpu, entries, errors, current

    # -- helpers used on the GPU's thread

    def _set(self, **fields: Any) -> None:
        with self.lock:
            self._fields.update(fields)

    def failed(self, name: str, exc: BaseException, what: str = "") -> None:
        """A lost GPU stops the reading; anything else as :meth:`Calls.failed`."""
        if error_code(exc) == NVML_ERROR_GPU_IS_LOST:
            self._set(lost=True)
            self.error(
                f"GPU {self.index} is lost: NVML answered NVML_ERROR_GPU_IS_LOST to {name} "
                "(it has fallen off the bus or needs a reset)",
                name,
            )
            raise _GpuLost
        super().failed(name, exc, what)

    # -- the reading itself

    def run(self) -> None:
        try:
            self._read()
        finally:
            self.done.set()

    def _read(self) -> None:
        try:
            handle = self.call("nvmlDeviceGetHandleByIndex", self.index)
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
                self._read_mig_devices,
                self._read_pcie,
                self._read_static_identity,
            ):
                step(handle)
        except (_GpuLost, Abandoned):
            pass
        except Exception as exc:  # a bug or a binding surprise: reported, the scan goes on
            self.error(f"reading GPU {self.index} stopped: {type(exc).__name__}: {exc}", None)

    def _read_identity(self, handle: Any) -> None:
        self._set(uuid=_text(self.call("nvmlDeviceGetUUID", handle)))
        self._set(name=_text(self.call("nvmlDeviceGetName", handle)))
        pci = self.call("nvmlDeviceGetPciInfo_v3", handle)
        if pci is not None:
            self._set(pci_bus_id=_text(pci.busId) or _text(pci.busIdLegacy))
        # Slurm's gres numbers GPUs by their /dev/nvidiaN minor numbers (gpu_audit.gpu_identity).
        self._set(minor_number=self.call("nvmlDeviceGetMinorNumber", handle))

    def _read_static_identity(self, handle: Any) -> None:
        self._set(serial=_text(self.call("nvmlDeviceGetSerial", handle)))
        brand = self.call("nvmlDeviceGetBrand", handle)
        if brand is not None:
            self._set(brand=BRANDS.get(brand, f"unknown_{brand}"))
        arch = self.call("nvmlDeviceGetArchitecture", handle)
        if arch is not None and arch != UNKNOWN_ARCHITECTURE:
            self._set(architecture=ARCHITECTURES.get(arch, f"unknown_{arch}"))
        cc = self.call("nvmlDeviceGetCudaComputeCapability", handle)
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
        memory = self.call_newest(names if v2 is not None else names[1:], memory_info)
        if memory is not None:
            self._set(
                memory_total_bytes=memory.total,
                memory_used_bytes=memory.used,
                memory_free_bytes=memory.free,
                memory_reserved_bytes=getattr(memory, "reserved", None),
            )
        bar1 = self.call("nvmlDeviceGetBAR1MemoryInfo", handle)
        if bar1 is not None:
            self._set(bar1_total_bytes=bar1.bar1Total, bar1_used_bytes=bar1.bar1Used)

    def _read_processes(self, handle: Any) -> None:
        for kind in ("compute", "graphics"):
            title = kind.capitalize()
            names = tuple(
                f"nvmlDeviceGet{title}RunningProcesses{suffix}" for suffix in ("_v3", "_v2", "")
            )
            rows = self.call_newest(names, lambda name: running_processes(self.nvml, name, handle))
            for pid, memory, gi, ci in rows or ():
                with self.lock:
                    entry = self._processes.setdefault(pid, [memory, set(), gi, ci])
                    entry[1].add(kind)
                    if memory is not None and (entry[0] is None or memory > entry[0]):
                        entry[0] = memory

    def _read_field_values(self, handle: Any) -> None:
        """Power and its limits, ECC modes and counters, retired pages, remapped rows and the
        memory temperature: one call."""
        name = "nvmlDeviceGetFieldValues"
        values = self.call_unless_missing(name, handle, FIELD_VALUE_IDS)
        if values is MISSING:
            self._read_memory_health_one_by_one(handle)
            return
        if values is None:
            return
        self._take_field_values(name, values)
        if self._health_unread:
            self._read_memory_health_one_by_one(handle)

    def _take_field_values(self, name: str, values: Any) -> None:
        power: dict[int, int] = {}
        for value in values:
            field_id, code = value.fieldId, value.nvmlReturn
            field = (HEALTH_FIELDS.get(field_id) or POWER_FIELD_NAMES.get(field_id)
                     or READING_FIELDS.get(field_id))
            if field is None:
                continue
            if code == NVML_SUCCESS:
                number = field_number(value)
                if field_id in POWER_FIELD_NAMES:
                    power[field_id] = int(number)
                elif field_id in READING_FIELDS:
                    self._set(**{field: int(number)})
                else:
                    self._set(**{field: bool(number) if field in BOOLEAN_FIELDS else number})
                    self._health_unread.discard(field)
            elif code not in UNKNOWN_FIELD:
                what = f" for field {field_id} ({field})"
                self.failed(name, self.nvml.NVMLError(code), what=what)
                self._power_unread.discard(field)  # already reported: do not ask twice
                self._health_unread.discard(field)
        self._take_power(power)

    def _take_power(self, power: dict[int, int]) -> None:
        draw = power.get(FI_POWER_AVERAGE, power.get(FI_POWER_INSTANT))
        for field, milliwatts in (
            ("power_draw_w", draw),
            ("power_limit_w", power.get(FI_POWER_CURRENT_LIMIT)),
            ("power_default_limit_w", power.get(FI_POWER_DEFAULT_LIMIT)),
            ("power_min_limit_w", power.get(FI_POWER_MIN_LIMIT)),
            ("power_max_limit_w", power.get(FI_POWER_MAX_LIMIT)),
        ):
            if milliwatts is not None:
                self._set(**{field: _watts(milliwatts)})
                self._power_unread.discard(field)

    def _read_memory_health_one_by_one(self, handle: Any) -> None:
        """The memory-health values the field-values call did not give (all of them on drivers
        without that call), through the dedicated calls."""
        unread = self._health_unread
        with self.lock:
            ecc_mode = self._fields.get("ecc_mode")
        if "ecc_mode" in unread or "ecc_mode_pending" in unread:
            ecc = self.call("nvmlDeviceGetEccMode", handle)
            if "ecc_mode" in unread:
                ecc_mode = None if ecc is None else bool(ecc[0])
            if ecc is not None:
                modes = {"ecc_mode": bool(ecc[0]), "ecc_mode_pending": bool(ecc[1])}
                self._set(**{field: modes[field] for field in modes if field in unread})
        if ecc_mode is not None:  # counters exist where the GPU reports an ECC mode
            for field, error_type, counter in (
                ("ecc_errors_corrected_volatile", 0, 0),
                ("ecc_errors_uncorrected_volatile", 1, 0),
                ("ecc_errors_corrected_aggregate", 0, 1),
                ("ecc_errors_uncorrected_aggregate", 1, 1),
            ):
                if field in unread:
                    count = self.call("nvmlDeviceGetTotalEccErrors", handle, error_type, counter)
                    self._set(**{field: count})
        remap_fields = ("remapped_rows_correctable", "remapped_rows_uncorrectable",
                        "remapped_rows_pending", "remapped_rows_failure")
        remaps = not all(field in unread for field in remap_fields)  # some read as fields
        if any(field in unread for field in remap_fields):
            rows = self.call("nvmlDeviceGetRemappedRows", handle)
            if rows is not None:
                remaps = True
                values = (rows[0], rows[1], bool(rows[2]), bool(rows[3]))
                self._set(**{field: value for field, value in zip(remap_fields, values, strict=True)
                             if field in unread})
        if remaps:
            return  # GPUs that remap rows (Ampere and later) do not retire pages
        for field, cause in (("retired_pages_sbe", 0), ("retired_pages_dbe", 1)):
            if field in unread:
                pages = self.call("nvmlDeviceGetRetiredPages", handle, cause)
                self._set(**{field: None if pages is None else len(pages)})
        if "retired_pages_pending" in unread:
            pending = self.call("nvmlDeviceGetRetiredPagesPendingStatus", handle)
            if pending is not None:
                self._set(retired_pages_pending=bool(pending))

    def _read_activity(self, handle: Any) -> None:
        nvml = self.nvml
        util = self.call("nvmlDeviceGetUtilizationRates", handle)
        if util is not None:
            self._set(utilization_pct=util.gpu, memory_utilization_pct=util.memory)
        temperature = self.call_newest(
            ("nvmlDeviceGetTemperatureV", "nvmlDeviceGetTemperature"),
            lambda name: getattr(nvml, name)(handle, nvml.NVML_TEMPERATURE_GPU),
        )
        self._set(temperature_c=temperature)
        for field, threshold in (
            ("temperature_slowdown_c", nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            ("temperature_shutdown_c", nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
            ("temperature_max_operating_c", nvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
            ("memory_temperature_max_c", nvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
        ):
            self._set(**{field: self.call("nvmlDeviceGetTemperatureThreshold", handle, threshold)})
        self._set(fan_speed_pct=self.call("nvmlDeviceGetFanSpeed", handle))

    def _read_power_and_clocks(self, handle: Any) -> None:
        nvml = self.nvml
        for field, name in _POWER_CALLS:
            if field in self._power_unread:
                self._set(**{field: _watts(self.call(name, handle))})
        for field, name, clock in (
            ("sm_clock_mhz", "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_SM),
            ("memory_clock_mhz", "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_MEM),
            ("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM),
            ("memory_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_MEM),
            ("graphics_clock_mhz", "nvmlDeviceGetClockInfo", nvml.NVML_CLOCK_GRAPHICS),
            ("graphics_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_GRAPHICS),
        ):
            self._set(**{field: self.call(name, handle, clock)})
        if self._power_unread & _POWER_RANGE:
            limits = self.call("nvmlDeviceGetPowerManagementLimitConstraints", handle)
            if limits is not None:
                self._set(power_min_limit_w=_watts(limits[0]), power_max_limit_w=_watts(limits[1]))
        pstate = self.call("nvmlDeviceGetPerformanceState", handle)
        if pstate is not None and pstate != PSTATE_UNKNOWN:
            self._set(performance_state=pstate)
        mask = self.call_newest(
            ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"),
            lambda name: getattr(nvml, name)(handle),
        )
        if mask is not None:
            self._set(throttle_reasons_mask=mask, throttle_reasons=throttle_reason_names(mask))

    def _read_modes(self, handle: Any) -> None:
        persistence = self.call("nvmlDeviceGetPersistenceMode", handle)
        if persistence is not None:
            self._set(persistence_mode=bool(persistence))
        mode = self.call("nvmlDeviceGetComputeMode", handle)
        if mode is not None:
            self._set(compute_mode=COMPUTE_MODES.get(mode, f"unknown_{mode}"))
        mig = self.call("nvmlDeviceGetMigMode", handle)
        if mig is not None:
            self._set(mig_mode=bool(mig[0]), mig_mode_pending=bool(mig[1]))
        display = self.call("nvmlDeviceGetDisplayActive", handle)
        if display is not None:
            self._set(display_active=bool(display))

    def _read_mig_devices(self, handle: Any) -> None:
        """A GPU in MIG mode: its MIG devices (asked only then, so other GPUs cost no call)."""
        with self.lock:
            mig_mode = self._fields.get("mig_mode")
        if mig_mode:
            from gpu_audit.collect.nvml.mig import read_mig_devices  # MIG GPUs only

            self._set(mig_devices=read_mig_devices(self, handle))

    def _read_pcie(self, handle: Any) -> None:
        for field, name in (
            ("pcie_gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
            ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            ("pcie_width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
        ):
            self._set(**{field: self.call(name, handle)})
