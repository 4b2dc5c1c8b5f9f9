"""The MIG devices of a GPU in MIG mode: each a handle of its own under the physical GPU's.

NVML numbers a GPU's MIG devices 0 .. ``nvmlDeviceGetMaxMigDeviceCount`` - 1; an index with no
device behind it answers NOT_FOUND (the instances need not fill the range). Each device answers
its uuid, its GPU and compute instance ids, its memory and, through ``nvmlDeviceGetAttributes``,
its SM count and slices. Tolerant like the rest of the collector: a value NVML does not give is
``None``, a failed call is a probe error and the next device is read.
"""

from __future__ import annotations

import math
from typing import Any

from gpu_audit.collect.nvml.binding import Calls, error_code
from gpu_audit.model import MigDevice

NVML_ERROR_NOT_FOUND = 6
MAX_MIG_DEVICES = 64  # far above any GPU's (7 on A100/H100): a bound on a confused driver
_MIB = 1024**2


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    return value.strip("\x00").strip() or None


def mig_handle(calls: Calls, handle: Any, index: int) -> Any:
    """The MIG device handle at ``index``, or None (no device there: nothing to report)."""
    name = "nvmlDeviceGetMigDeviceHandleByIndex"
    calls.begin(name)
    try:
        return calls.nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
    except calls.nvml.NVMLError as exc:
        if error_code(exc) != NVML_ERROR_NOT_FOUND:
            calls.failed(name, exc, what=f" for MIG device {index}")
        return None
    finally:
        calls.end()


def profile_name(
    name: str | None, gpu_slices: int | None, compute_slices: int | None, memory_mib: int | None
) -> str | None:
    """The MIG profile as ``nvidia-smi`` names it: from the device name NVML gives ("NVIDIA A100
    ... MIG 1g.5gb"), else from the slices and memory ("1g.5gb", "1c.2g.10gb"; memory rounded
    up to whole GB as the profile names do)."""
    if name and " MIG " in name:
        return name.rsplit(" MIG ", 1)[1].strip() or None
    if not gpu_slices or not memory_mib:
        return None
    size = f"{gpu_slices}g.{math.ceil(memory_mib / 1024)}gb"
    if compute_slices and compute_slices != gpu_slices:
        return f"{compute_slices}c.{size}"
    return size


def read_mig_device(calls: Calls, index: int, mig: Any) -> MigDevice:
    """One MIG device's identity, memory and size."""
    attributes = calls.call("nvmlDeviceGetAttributes", mig)
    memory = calls.call("nvmlDeviceGetMemoryInfo", mig)
    gpu_slices = compute_slices = sm_count = memory_mib = None
    if attributes is not None:
        sm_count = attributes.multiprocessorCount
        gpu_slices = attributes.gpuInstanceSliceCount
        compute_slices = attributes.computeInstanceSliceCount
        memory_mib = attributes.memorySizeMB
    total = None if memory is None else memory.total
    if memory_mib is None and total is not None:
        memory_mib = total // _MIB
    return MigDevice(
        index=index,
        uuid=_text(calls.call("nvmlDeviceGetUUID", mig)),
        gpu_instance_id=calls.call("nvmlDeviceGetGpuInstanceId", mig),
        compute_instance_id=calls.call("nvmlDeviceGetComputeInstanceId", mig),
        profile=profile_name(
            _text(calls.call("nvmlDeviceGetName", mig)), gpu_slices, compute_slices, memory_mib
        ),
        memory_total_bytes=total,
        memory_used_bytes=None if memory is None else memory.used,
        sm_count=sm_count,
        gpu_instance_slices=gpu_slices,
        compute_instance_slices=compute_slices,
    )


def read_mig_devices(calls: Calls, handle: Any) -> list[MigDevice]:
    """The MIG devices of the GPU behind ``handle`` (empty: none created, or MIG off)."""
    count = calls.call("nvmlDeviceGetMaxMigDeviceCount", handle)
    devices = []
    for index in range(min(count or 0, MAX_MIG_DEVICES)):
        mig = mig_handle(calls, handle, index)
        if mig is not None:
            devices.append(read_mig_device(calls, index, mig))
    return devices


def instance_uuids(devices: list[MigDevice]) -> dict[tuple[int, int | None], str]:
    """(GPU instance id, compute instance id) -> MIG device uuid, for placing processes."""
    found: dict[tuple[int, int | None], str] = {}
    for device in devices:
        if device.gpu_instance_id is not None and device.uuid:
            found[(device.gpu_instance_id, device.compute_instance_id)] = device.uuid
    return found
