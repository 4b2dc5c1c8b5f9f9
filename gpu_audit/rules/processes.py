"""Who holds device memory: duplicate servers, memory nobody accounts for, dead holders."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.model import Finding, Gpu, GpuProcess, Scan
from gpu_audit.rules import rule
from gpu_audit.rules.cmdline import command_head
from gpu_audit.rules.duplicates import duplicate_groups, instance_port
from gpu_audit.units import fmt_bytes, plural


def _vram_by_pid(processes: list[GpuProcess]) -> dict[int, int]:
    """Device memory per PID summed over GPUs (a process may use several)."""
    total: dict[int, int] = defaultdict(int)
    for p in processes:
        total[p.pid] += p.used_memory_bytes or 0
    return total


@rule("duplicate-backend")
def duplicate_backend(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Several GPU processes are copies of the same server.

    A `uvicorn app:app` started again on `--port 8080` and `--port 3001` after the first one on
    8000 (or gunicorn, celery workers, jupyter kernels and the like). Copies are the same program
    and arguments once ports, pids, bind addresses and similar per-instance values are set aside.
    The ranks of one distributed job (told apart by `--local-rank`/`LOCAL_RANK`, or started by
    torchrun, DeepSpeed, accelerate or mpirun) and the workers of one server master are a single
    job and are not flagged. Evidence lists every copy with its pid, port, VRAM and start time,
    and the memory freed by keeping only the oldest.

    Why it matters: each copy loads its model onto the GPU again, so forgotten copies hold memory
    a training run needs.

    Example: `3 copies of the same server hold GPU memory` - 3 processes run
    `uvicorn app:app` on ports 8000, 8080, 3001; together they hold 42.0 GiB. Keeping only the
    oldest (pid 2210) frees 28.0 GiB.

    Fix: the remedy names exact pids (`ps -o pid,lstart,args -p ...`, then `kill ...`): check
    them before you stop anything.
    """
    vram = _vram_by_pid(scan.processes)
    for group in duplicate_groups(scan.processes):
        keep, extra = group[0], group[1:]
        reclaimable = sum(vram[p.pid] for p in extra)
        members = [
            {
                "pid": p.pid,
                "port": instance_port(p),
                "used_memory_bytes": vram[p.pid],
                "start_time": p.start_time,
                "gpu_index": p.gpu_index,
                "user": p.user,
            }
            for p in group
        ]
        program = command_head(keep.cmdline or [keep.name or "?"], 4)
        pids = " ".join(str(p.pid) for p in extra)
        ports = ", ".join(str(m["port"]) for m in members if m["port"] is not None)
        yield Finding(
            subject=f"pid:{keep.pid}",
            title=f"{len(group)} copies of the same server hold GPU memory",
            detail=(
                f"{len(group)} processes run `{program}`"
                + (f" on ports {ports}" if ports else "")
                + f"; together they hold {fmt_bytes(sum(vram[p.pid] for p in group))}. "
                f"Keeping only the oldest (pid {keep.pid}) frees {fmt_bytes(reclaimable)}."
            ),
            remedy=(
                f"ps -o pid,lstart,args -p {' '.join(str(p.pid) for p in group)}  "
                f"# confirm which copies are stale, then: kill {pids}"
            ),
            evidence={
                "members": members,
                "reclaimable_bytes": reclaimable,
                "keep_pid": keep.pid,
                "stop_pids": [p.pid for p in extra],
            },
        )


def unattributed_bytes(gpu: Gpu, members: list[GpuProcess]) -> int | None:
    """``gpu``'s used memory that none of ``members`` (its listed processes) accounts for;
    ``None`` when the used memory or any process's memory is not reported."""
    if gpu.memory_used_bytes is None or any(p.used_memory_bytes is None for p in members):
        return None
    return gpu.memory_used_bytes - sum(p.used_memory_bytes or 0 for p in members)


@rule("unattributed-vram")
def unattributed_vram(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Device memory in use that no visible process accounts for.

    NVML's used memory minus the memory of every process it lists, beyond a per-GPU allowance
    for the driver and contexts (`unattributed_vram_allowance_mib`,
    {unattributed_vram_allowance_mib} MiB by default; memory the driver reports as reserved is
    added to it). Typical causes: a killed job whose memory was never released (a defunct context
    or a process stuck in uninterruptible sleep), a process in another container whose PID this
    one cannot see, or a driver that does not report per-process memory (then the GPU is skipped
    rather than guessed).

    `gpu-audit check` has a check of the same id that judges these findings: no GPU may have
    memory in use that no listed process accounts for, a problem that is a
    "{unattributed_vram}" by default (`unattributed_vram`). Set `unattributed_vram = "fail"` on
    dedicated runners.

    Why it matters: the memory is gone for the next job all the same, and nothing on the node
    shows who to stop, so the job fails with `CUDA out of memory` on a GPU that looks idle.

    Example: `GPU 1: 11.8 GiB in use by no visible process` - 12.3 GiB used, 0 B of it by the
    0 listed processes; 11.8 GiB is unaccounted for (allowance 512 MiB).

    Fix: look for processes NVML cannot attribute: `sudo fuser -v /dev/nvidiaN` (stuck or
    defunct jobs), or containers sharing this GPU (`docker ps`). If nothing holds it, the memory
    belongs to a dead context: `sudo nvidia-smi --gpu-reset -i N` when the GPU is idle, or reboot.
    """
    by_gpu: dict[int, list[GpuProcess]] = defaultdict(list)
    for p in scan.processes:
        by_gpu[p.gpu_index].append(p)
    for gpu in scan.gpus:
        members = by_gpu.get(gpu.index, [])
        unattributed = unattributed_bytes(gpu, members)
        if unattributed is None:
            continue  # per-process memory not reported (WDDM, MIG, old drivers): cannot judge
        accounted = gpu.memory_used_bytes - unattributed
        allowance = policy.unattributed_vram_allowance_bytes + (gpu.memory_reserved_bytes or 0)
        if unattributed <= allowance:
            continue
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"GPU {gpu.index}: {fmt_bytes(unattributed)} in use by no visible process",
            detail=(
                f"{fmt_bytes(gpu.memory_used_bytes)} used, {fmt_bytes(accounted)} of it by the "
                f"{plural(len(members), 'listed process', 'listed processes')}; "
                f"{fmt_bytes(unattributed)} is unaccounted "
                f"for (allowance {fmt_bytes(allowance)})."
            ),
            remedy=(
                f"Look for processes NVML cannot attribute: `sudo fuser -v /dev/nvidia{gpu.index}`"
                " (stuck or defunct jobs), or containers sharing this GPU (`docker ps`). If "
                "nothing holds it, the memory belongs to a dead context: "
                f"`sudo nvidia-smi --gpu-reset -i {gpu.index}` when the GPU is idle, or reboot."
            ),
            evidence={
                "memory_used_bytes": gpu.memory_used_bytes,
                "accounted_bytes": accounted,
                "unattributed_bytes": unattributed,
                "allowance_bytes": allowance,
                "process_count": len(members),
            },
        )


@rule("gpu-process-gone")
def gpu_process_gone(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """NVML reports a process that no longer runs but still holds device memory.

    The PID is listed on the GPU, yet the operating system has no such process (it exited and
    its context was not torn down) or only a zombie is left whose parent never reaped it. Inside
    a container NVML lists host PIDs that the container cannot see: those are reported as not
    visible, not as gone.

    Why it matters: the memory stays held until the context goes away, so the next job on the GPU
    has that much less.

    Example: `GPU 0: memory held by a zombie process 5123` - PID 5123 is a zombie holding
    9.5 GiB on GPU 0; its parent 5100 has not reaped it.

    Fix: for a zombie, restart or stop its parent (`ps -o pid,args -p PPID`); the memory is
    released when the zombie is reaped. For a gone process, find what still holds the device
    (`sudo fuser -v /dev/nvidiaN`); if nothing does, `sudo nvidia-smi --gpu-reset -i N`.
    """
    in_container = scan.host.container is not None
    for p in scan.processes:
        gone = not p.visible and not in_container
        zombie = p.status == "zombie"
        if not (gone or zombie):
            continue
        if zombie:
            detail = (
                f"PID {p.pid} is a zombie holding {fmt_bytes(p.used_memory_bytes)} on GPU "
                f"{p.gpu_index}; its parent {p.ppid} has not reaped it."
            )
            remedy = (
                f"ps -o pid,args -p {p.ppid}  # then restart or stop the parent; "
                "the memory is released when the zombie is reaped"
            )
        else:
            detail = (
                f"NVML lists PID {p.pid} on GPU {p.gpu_index} with "
                f"{fmt_bytes(p.used_memory_bytes)}, but no such process exists."
            )
            remedy = (
                f"sudo fuser -v /dev/nvidia{p.gpu_index}  # find what still holds the device; "
                f"if nothing does: sudo nvidia-smi --gpu-reset -i {p.gpu_index}"
            )
        yield Finding(
            subject=f"pid:{p.pid}",
            title=f"GPU {p.gpu_index}: memory held by {'a zombie' if zombie else 'a dead'} "
            f"process {p.pid}",
            detail=detail,
            remedy=remedy,
            evidence={
                "pid": p.pid,
                "gpu_index": p.gpu_index,
                "used_memory_bytes": p.used_memory_bytes,
                "status": p.status or "gone",
                "ppid": p.ppid,
            },
        )
