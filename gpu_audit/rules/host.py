"""Host memory: swap and available RAM."""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.rules import rule
from gpu_audit.units import GIB, fmt_bytes, fmt_pct, pct


@rule("swap-pressure")
def swap_pressure(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Swap in use above the policy limit ({max_swap_used_gib} GiB by default).

    A warning, about swap in use at the moment of the scan, whoever uses it: swap used by other
    programs still tells you memory is short before the run has even started. `gpu-audit
    validate` judges the same limit against the swap used while its stages run, where going
    over it fails the stage: that is its `stage-swap-pressure` error. Configure with
    `max_swap_used_gib`.

    Why it matters: a training job whose host memory spills to swap slows by orders of magnitude
    (data loaders, pinned-memory staging and checkpoint writes all touch host memory) and is a
    step away from the kernel's OOM killer.

    Example: `Swap in use: 6.2 GiB` - 6.2 GiB of 8.0 GiB swap is in use (limit
    {max_swap_used_gib} GiB); 3.4 GiB RAM is available.

    Fix: find what holds memory with `ps -eo pid,user,rss,comm --sort=-rss | head` and stop it;
    reduce DataLoader `num_workers`/`prefetch_factor`. To empty swap once RAM is free:
    `sudo swapoff -a && sudo swapon -a`.
    """
    host = scan.host
    used = host.swap_used_bytes
    if used is None or used <= policy.max_swap_used_bytes:
        return
    yield Finding(
        subject="host",
        title=f"Swap in use: {fmt_bytes(used)}",
        detail=(
            f"{fmt_bytes(used)} of {fmt_bytes(host.swap_total_bytes)} swap is in use "
            f"(limit {policy.max_swap_used_gib:g} GiB); "
            f"{fmt_bytes(host.memory_available_bytes)} RAM is available."
        ),
        remedy=(
            "Find what holds memory with `ps -eo pid,user,rss,comm --sort=-rss | head` and stop "
            "it; reduce DataLoader `num_workers`/`prefetch_factor`. To empty swap once RAM is "
            "free: `sudo swapoff -a && sudo swapon -a`."
        ),
        evidence={
            "swap_used_bytes": used,
            "swap_total_bytes": host.swap_total_bytes,
            "limit_bytes": policy.max_swap_used_bytes,
            "swap_in_bytes": host.swap_in_bytes,
            "swap_out_bytes": host.swap_out_bytes,
            "memory_available_bytes": host.memory_available_bytes,
        },
    )


@rule("low-host-memory")
def low_host_memory(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Available host RAM below a share of the total ({min_host_available_pct}% by default).

    PyTorch jobs need host memory beside GPU memory: the data pipeline, pinned staging buffers,
    the CUDA context's host side, checkpoints being saved. Below half a GiB available the finding
    is an error. Configure with `min_host_available_pct`.

    Why it matters: with little left the job swaps or the kernel's OOM killer ends it (`Killed`,
    exit 137) with no Python traceback.

    Example: `Low host memory: 2.1 GiB available` - 2.1 GiB of 251.5 GiB RAM is available
    (0.8%, minimum {min_host_available_pct}%).

    Fix: list the largest processes with `ps -eo pid,user,rss,comm --sort=-rss | head` and stop
    the ones you do not need before starting the run.
    """
    host = scan.host
    available_pct = pct(host.memory_available_bytes, host.memory_total_bytes)
    if available_pct is None or available_pct >= policy.min_host_available_pct:
        return
    severity = Severity.ERROR if (host.memory_available_bytes or 0) < GIB // 2 else None
    yield Finding(
        subject="host",
        title=f"Low host memory: {fmt_bytes(host.memory_available_bytes)} available",
        detail=(
            f"{fmt_bytes(host.memory_available_bytes)} of {fmt_bytes(host.memory_total_bytes)} "
            f"RAM is available ({fmt_pct(available_pct)}, "
            f"minimum {fmt_pct(policy.min_host_available_pct)})."
        ),
        remedy=(
            "List the largest processes with `ps -eo pid,user,rss,comm --sort=-rss | head` and "
            "stop the ones you do not need before starting the run."
        ),
        evidence={
            "memory_available_bytes": host.memory_available_bytes,
            "memory_total_bytes": host.memory_total_bytes,
            "available_pct": available_pct,
            "min_available_pct": policy.min_host_available_pct,
        },
        severity=severity,
    )
