"""What one NVML read returns, as plain structs: apart from the code that reads it, so that a
process receiving a reading from its child (:mod:`.isolated`) loads neither ctypes nor pynvml."""

from __future__ import annotations

import msgspec

from gpu_audit.model import Driver, Gpu, NvmlStatus, ProbeError


class NvmlProcessEntry(msgspec.Struct, frozen=True):
    """A process as NVML lists it on one GPU; ``collect.processes`` adds what the OS knows."""

    pid: int
    gpu_index: int
    gpu_uuid: str | None
    used_memory_bytes: int | None
    type: str  # "compute", "graphics" or "compute+graphics" (a pid in both lists is merged)
    mig_gpu_instance_id: int | None = None  # MIG: the instance it runs in
    mig_compute_instance_id: int | None = None
    mig_uuid: str | None = None


class NvmlReading(msgspec.Struct, frozen=True):
    status: NvmlStatus
    driver: Driver | None
    gpus: list[Gpu]
    processes: list[NvmlProcessEntry]
    probe_errors: list[ProbeError]
