"""``gpu-audit diag`` on a GPU in MIG mode: each MIG instance tested in a worker of its own.

A MIG instance is a slice of its GPU (a share of the SMs and of the memory), which CUDA sees as
a device of its own when ``CUDA_VISIBLE_DEVICES`` names its MIG UUID. The correctness tests
(context, kernel launch, round trip, matmul check, the memory test over the instance's free
memory) mean the same in a slice as on a whole GPU. The measurements do not: the datasheet
figures are the whole GPU's, and how much of them a slice gets depends on the profile, the
engines it shares and the instances beside it. So an instance's bandwidth and throughput are
judged against the node's other instances of the same model and profile only; alone, they are
reported without a verdict (the instance's SM and memory shares go with them). Host transfers
(PCIe) and the tests between GPUs (P2P, NCCL) are not run per instance: the instances share the
GPU's link, and CUDA does not give peer access between MIG devices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from gpu_audit.diag.results import GpuRun
from gpu_audit.gpu_selection import instance_label
from gpu_audit.model import Gpu, MigDevice

# The record a skipped test leaves in an instance's tests (a reason, no figure, no verdict).
HOST_BANDWIDTH_SKIPPED = {
    "skipped": True,
    "reason": "not tested per MIG instance: the instances share their GPU's PCIe link",
}
PEERS_SKIPPED = ("the tests between GPUs (P2P, NCCL) do not apply to MIG instances: CUDA gives "
                 "no peer access between MIG devices")
SUSTAIN_SKIPPED = ("the sustained load (level 3) is not run on MIG instances: NVML's power, "
                   "clocks and throttle reasons are the whole GPU's, shared by its instances")


def _share(part: int | None, whole: int | None) -> float | None:
    if not part or not whole:
        return None
    return round(part / whole, 4)


def instance_runs(gpu: Gpu, only: Sequence[MigDevice] | None = None) -> list[GpuRun]:
    """One run per MIG instance of ``gpu`` that CUDA can address (one with a UUID); ``only``:
    just those of its instances (a selection's), their shares still of all its instances."""
    runs = []
    sms = sum(m.sm_count or 0 for m in gpu.mig_devices) or None
    for mig in gpu.mig_devices:
        if not mig.uuid or (only is not None and mig not in only):
            continue
        free = None
        if mig.memory_total_bytes is not None and mig.memory_used_bytes is not None:
            free = max(mig.memory_total_bytes - mig.memory_used_bytes, 0)
        runs.append(GpuRun(
            index=gpu.index, name=gpu.name, uuid=gpu.uuid, pci_bus_id=gpu.pci_bus_id,
            memory_free_bytes=free, mig_mode=True,
            mig={"uuid": mig.uuid, "instance": instance_label(mig),
                 "gpu_instance_id": mig.gpu_instance_id,
                 "compute_instance_id": mig.compute_instance_id, "profile": mig.profile,
                 "sm_count": mig.sm_count, "memory_total_bytes": mig.memory_total_bytes,
                 # Shares of the GPU: SMs among its instances' (a lower bound where some SMs
                 # are in no instance), memory of the GPU's total.
                 "sm_share_of_instances": _share(mig.sm_count, sms),
                 "memory_share": _share(mig.memory_total_bytes, gpu.memory_total_bytes)}))
    return runs


def instance_gpu(gpu: Gpu, run: GpuRun) -> Gpu:
    """``gpu`` as the instance's plan sees it: the instance's memory."""
    total = run.mig.get("memory_total_bytes") if run.mig else None
    return msgspec.structs.replace(gpu, memory_free_bytes=run.memory_free_bytes,
                               memory_total_bytes=total)


def instance_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """An instance's plan: the GPU plan (sized from the instance's memory) without host
    transfers (``host_bytes`` 0: the worker skips them)."""
    return {**plan, "host_bytes": 0}


def visible(run: GpuRun, device: str) -> dict[str, str]:
    """The worker's environment: the instance's MIG UUID, the one device its CUDA sees (set in
    the test mode too, where the tests run on the CPU, so the plumbing is the same)."""
    return {"CUDA_VISIBLE_DEVICES": run.mig["uuid"] if run.mig else ""}


def untested_reason(gpu: Gpu) -> str:
    """Why a MIG-mode GPU has no instance to test."""
    if not gpu.mig_devices:
        return "MIG mode is on and no MIG instance is listed"
    return "MIG mode is on and no MIG instance has a UUID CUDA can be given"
