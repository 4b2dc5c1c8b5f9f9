"""Plain data: what the collectors return, what the rules read, what the renderers show.

Every class here is a frozen ``msgspec.Struct`` of JSON-friendly fields. Units are in the field
names (``*_bytes``, ``*_pct``, ``*_c``, ``*_w``, ``*_mhz``, ``*_s``); ``None`` means unknown or not
supported, never zero. :mod:`gpu_audit.serial` turns these into JSON and back, so a saved scan
can be re-judged (``scan --from FILE``) and tests can feed rules without any I/O.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gpu_audit.severity import Severity


class ProbeError(msgspec.Struct, frozen=True):
    """A measurement that could not be taken; the scan goes on without it."""

    source: str  # "nvml", "host", "process", "torch", ...
    subject: str  # "gpu:0", "pid:123", "host", "driver"
    message: str
    call: str | None = None  # the function that failed, e.g. "nvmlDeviceGetPowerUsage"
    timed_out: bool = False  # the call never returned within the scan's timeout (a hung driver)


class Host(msgspec.Struct, frozen=True):
    hostname: str
    os: str
    kernel: str | None
    wsl: bool
    container: str | None  # "docker", "podman", "kubernetes", "lxc", "containerd", ... or None
    cpu_count: int | None
    memory_total_bytes: int | None
    memory_available_bytes: int | None
    swap_total_bytes: int | None
    swap_used_bytes: int | None
    swap_in_bytes: int | None = None  # cumulative since boot
    swap_out_bytes: int | None = None
    python_version: str | None = None
    boot_time: str | None = None  # ISO 8601, UTC
    nvidia_pci_devices: int | None = None  # NVIDIA display/3D controllers seen on the PCI bus


class Driver(msgspec.Struct, frozen=True):
    driver_version: str | None
    nvml_version: str | None
    cuda_driver_version: str | None  # "12.4": the newest CUDA runtime this driver supports


class MigDevice(msgspec.Struct, frozen=True):
    """One MIG device of a GPU in MIG mode: a compute instance inside a GPU instance, which CUDA
    sees as a device of its own (``CUDA_VISIBLE_DEVICES=MIG-...``)."""

    index: int  # NVML's MIG device index on its GPU
    uuid: str | None = None  # "MIG-..."
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    profile: str | None = None  # "1g.10gb", "1c.2g.20gb": derived from slices and memory
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    sm_count: int | None = None  # streaming multiprocessors of its compute instance
    gpu_instance_slices: int | None = None
    compute_instance_slices: int | None = None


class Gpu(msgspec.Struct, frozen=True):
    """One device as NVML sees it. Any field may be ``None`` (not supported or not readable)."""

    index: int
    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    serial: str | None = None
    brand: str | None = None
    architecture: str | None = None
    compute_capability: str | None = None  # "8.6"
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None  # driver/firmware reservation (memory info v2)
    bar1_total_bytes: int | None = None
    bar1_used_bytes: int | None = None
    utilization_pct: int | None = None
    memory_utilization_pct: int | None = None
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    temperature_shutdown_c: int | None = None
    temperature_max_operating_c: int | None = None
    fan_speed_pct: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    sm_clock_max_mhz: int | None = None
    memory_clock_max_mhz: int | None = None
    performance_state: int | None = None  # 0 (P0, max) .. 15
    throttle_reasons: list[str] | None = None  # active clock-event reason names
    throttle_reasons_mask: int | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = (
        None  # "default", "exclusive_thread", "prohibited", "exclusive_process"
    )
    mig_mode: bool | None = None
    ecc_mode: bool | None = None
    ecc_errors_corrected_volatile: int | None = None
    ecc_errors_uncorrected_volatile: int | None = None
    ecc_errors_corrected_aggregate: int | None = None
    ecc_errors_uncorrected_aggregate: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    display_active: bool | None = None
    lost: bool = False  # NVML answered "GPU is lost" (fallen off the bus)
    mig_devices: list[MigDevice] = msgspec.field(default_factory=list)  # MIG mode: its instances
    memory_temperature_c: int | None = None  # HBM/GDDR, NVML_FI_DEV_MEMORY_TEMP
    memory_temperature_max_c: int | None = None  # the GPU slows down above it (THRESHOLD_MEM_MAX)
    power_min_limit_w: float | None = None  # the range the power limit may be set in
    power_max_limit_w: float | None = None
    graphics_clock_mhz: int | None = None
    graphics_clock_max_mhz: int | None = None
    ecc_mode_pending: bool | None = None  # in force after the next GPU reset or reboot
    mig_mode_pending: bool | None = None  # likewise
    minor_number: int | None = None  # N of its /dev/nvidiaN (NVML, else the kernel driver)
    # Where uuid, pci_bus_id or minor_number came from when NVML could not give them (a lost
    # GPU): "proc" (/proc/driver/nvidia/gpus/*/information) or "dev" (/dev/nvidiaN); None: NVML.
    identity_source: str | None = None


class KernelGpu(msgspec.Struct, frozen=True):
    """A GPU as the kernel driver or ``/dev`` knows it, which NVML may not list (see
    :mod:`gpu_audit.gpu_identity`)."""

    source: str  # "proc" (/proc/driver/nvidia/gpus/*/information) or "dev" (/dev/nvidiaN only)
    minor_number: int | None = None  # N of /dev/nvidiaN
    pci_bus_id: str | None = None  # "0000:3b:00.0", as the driver writes it
    uuid: str | None = None
    name: str | None = None


class AllocatorSample(msgspec.Struct, frozen=True):
    """One reading of a process's allocator counters, kept so rules can see a trend."""

    at: str  # ISO 8601, UTC
    num_alloc_retries: int | None
    num_ooms: int | None
    step: int | None = None


class ProcessAllocatorState(msgspec.Struct, frozen=True):
    """A process's own PyTorch allocator on one device, as published by ``gpu_audit.monitor``.

    NVML sees only what a process holds; these figures say how much of it PyTorch is using
    (allocated) and how much it keeps cached (reserved). Fragmentation follows the reference's
    definitions: ``fragmentation_pct`` = (reserved - allocated) / reserved, the quantity
    PyTorch's OOM message calls "reserved but unallocated"; ``split_fragmentation_pct`` =
    inactive_split / reserved, the part that cannot be released (0 with expandable segments).
    """

    cuda_device: int  # the device ordinal inside that process (its CUDA_VISIBLE_DEVICES view)
    published_at: str  # ISO 8601, UTC
    age_s: float | None = None  # how old the publication was when the scan read it
    interval_s: float | None = None
    torch_version: str | None = None
    backend: str | None = None  # "native" or "cudaMallocAsync"
    settings: str | None = None  # the allocator configuration string in force
    expandable_segments: bool | None = None
    max_split_size_bytes: int | None = None  # None: unlimited or unknown
    allocated_bytes: int | None = None
    allocated_peak_bytes: int | None = None
    reserved_bytes: int | None = None
    reserved_peak_bytes: int | None = None
    active_bytes: int | None = None
    active_peak_bytes: int | None = None
    inactive_split_bytes: int | None = None
    inactive_split_peak_bytes: int | None = None
    requested_bytes: int | None = None
    segments: int | None = None
    reserved_unallocated_bytes: int | None = None
    fragmentation_pct: float | None = None
    split_fragmentation_pct: float | None = None
    num_alloc_retries: int | None = None
    num_ooms: int | None = None
    step: int | None = None
    history: list[AllocatorSample] = msgspec.field(default_factory=list)  # oldest first
    oom_snapshots: list[str] = msgspec.field(default_factory=list)  # files written on OOM


class GpuProcess(msgspec.Struct, frozen=True):
    """A process NVML reports on a GPU, joined with what the OS says about its PID."""

    pid: int
    gpu_index: int
    gpu_uuid: str | None
    used_memory_bytes: int | None
    type: str  # "compute", "graphics" or "compute+graphics"
    name: str | None = None
    user: str | None = None
    cmdline: list[str] | None = None  # redacted
    status: str | None = None  # psutil status: "running", "sleeping", "zombie", "disk-sleep", ...
    start_time: str | None = None  # ISO 8601, UTC
    ppid: int | None = None
    parent_cmdline: list[str] | None = None  # redacted
    rss_bytes: int | None = None
    container: str | None = None  # container id or runtime label from the cgroup path
    cgroup: str | None = None
    listen_ports: list[int] | None = None
    dist_rank: int | None = None  # LOCAL_RANK/RANK from its environment, where readable
    visible: bool = True  # False: the PID is not in this PID namespace (exited, or another one)
    note: str | None = None  # why some fields are missing
    duplicate_group: int | None = None  # set by the duplicate-backend analysis
    allocator: ProcessAllocatorState | None = None  # from gpu_audit.monitor, if published
    # MIG: the instance it runs in (NVML's ids; the MIG device's uuid where one matches)
    mig_gpu_instance_id: int | None = None
    mig_compute_instance_id: int | None = None
    mig_uuid: str | None = None


class AllocatorConfig(msgspec.Struct, frozen=True):
    """PyTorch allocator settings as the environment carries them, and the torch they meet."""

    source: str  # "env" (this process) or "pid:N"
    pytorch_cuda_alloc_conf: str | None
    pytorch_alloc_conf: str | None
    torch_version: str | None  # from package metadata, torch not imported
    torch_cuda_version: str | None = None  # from the local version label, "12.4" for +cu124
    torch_variant: str | None = None  # "cuda", "rocm", "cpu", "xpu" or None (unknown/absent)
    # other relevant variables, redacted
    environment: dict[str, str] = msgspec.field(default_factory=dict)


class NvmlStatus(msgspec.Struct, frozen=True):
    """Whether NVML answered, and if not, why."""

    available: bool
    cause: str | None = None  # "library-not-found", "driver-not-loaded", "version-mismatch", ...
    message: str | None = None
    library_path: str | None = None


class TorchDevice(msgspec.Struct, frozen=True):
    """One CUDA device as the installed torch sees it (indices follow CUDA_VISIBLE_DEVICES)."""

    index: int
    name: str | None = None
    compute_capability: str | None = None  # "8.6"
    total_memory_bytes: int | None = None
    uuid: str | None = None  # "GPU-..." as NVML spells it, where torch exposes it


class TorchProbe(msgspec.Struct, frozen=True):
    """What ``scan --torch`` learnt by importing torch in a child process."""

    python: str  # the interpreter that ran the probe
    torch_version: str | None = None  # torch.__version__; None when the import failed
    cuda_version: str | None = None  # torch.version.cuda ("12.4"); None for CPU/ROCm builds
    hip_version: str | None = None
    cudnn_version: int | None = None
    cuda_available: bool | None = None
    device_count: int | None = None
    arch_list: list[str] | None = None  # torch.cuda.get_arch_list(): ["sm_80", "compute_90", ...]
    devices: list[TorchDevice] = msgspec.field(default_factory=list)
    allocator_backend: str | None = None  # "native" or "cudaMallocAsync"
    allocator_settings: str | None = None  # the configuration string torch parsed
    allocator_error: str | None = None  # torch's own complaint about the configuration string
    import_error: str | None = None  # ``import torch`` raised: "ImportError: libcudnn.so.9: ..."
    error: str | None = None  # the probe itself failed: timed out, crashed, no output
    warnings: list[str] = msgspec.field(default_factory=list)  # torch's warnings during the probe
    duration_s: float | None = None


class XidEvent(msgspec.Struct, frozen=True):
    """One ``NVRM: Xid`` line from the kernel log: the driver reporting a GPU error."""

    xid: int
    pci_bus_id: str | None  # as the log prints it, "0000:3b:00"
    message: str  # the text after the code, redacted
    pid: int | None = None
    process_name: str | None = None
    uptime_s: float | None = None  # seconds since boot, from the log's timestamp
    time: str | None = None  # ISO 8601, UTC (approximate: derived from the uptime)


class KernelLog(msgspec.Struct, frozen=True):
    """Where the scan looked for Xid events and what it found (this boot only)."""

    source: str | None  # "kmsg", "dmesg", "journal"; None when no source was readable
    readable: bool
    xid_events: list[XidEvent] = msgspec.field(default_factory=list)
    truncated: bool = False  # more events than kept; the newest are kept


class Scan(msgspec.Struct, frozen=True):
    """Everything one scan saw. Findings are derived from it, never stored inside it."""

    host: Host
    nvml: NvmlStatus
    driver: Driver | None
    gpus: list[Gpu]
    processes: list[GpuProcess]
    allocator: AllocatorConfig | None
    probe_errors: list[ProbeError]
    generated_at: str
    tool_version: str
    scan_duration_s: float | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    torch_probe: TorchProbe | None = None  # only with ``scan --torch``
    kernel_log: KernelLog | None = None  # None: not looked at (not Linux, or an old saved scan)
    # The GPUs this scan was limited to (``--gpus``, a Slurm job's GPUs): the
    # ``gpu_selection.GpuSelection`` as JSON data, the document's top-level ``gpu_selection``
    # field, read back by ``--from``; None: every GPU of the machine.
    gpu_selection: dict[str, Any] | None = None
    # GPUs the kernel driver (/proc/driver/nvidia) or /dev/nvidiaN knows that NVML does not list
    # (vanished, or hidden from this process): see gpu_audit.gpu_identity.
    unlisted_gpus: list[KernelGpu] = msgspec.field(default_factory=list)


class Finding(msgspec.Struct, frozen=True):
    """A verdict about the machine. ``id`` and default ``severity`` come from the rule registry."""

    subject: str  # "host", "gpu:N", "pid:N", "env"
    title: str
    detail: str
    remedy: str
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)
    id: str = ""
    severity: Severity | None = None
