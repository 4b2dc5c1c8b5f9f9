"""Device memory headroom."""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.model import Finding, Scan
from gpu_audit.rules import rule
from gpu_audit.units import fmt_bytes, fmt_pct, pct


@rule("low-free-vram")
def low_free_vram(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Free device memory below a share of the GPU's size ({min_free_vram_pct}% by default).

    The finding lists the processes holding the memory (pid, name, VRAM) so you can decide what
    to stop. Configure with `min_free_vram_pct`.

    Why it matters: memory held before the run starts is memory the run cannot have: an
    allocation that would fit on an idle card fails with `CUDA out of memory` partway through.

    Example: `GPU 0: only 3.1 GiB free` - 3.1 GiB of 79.6 GiB free (3.9%, minimum
    {min_free_vram_pct}%). Held by: 41822 (python, 76.0 GiB).

    Fix: stop the processes you do not need (`nvidia-smi -i N` lists them), or pick another GPU
    with `CUDA_VISIBLE_DEVICES`.
    """
    for gpu in scan.gpus:
        free_pct = pct(gpu.memory_free_bytes, gpu.memory_total_bytes)
        if free_pct is None or free_pct >= policy.min_free_vram_pct:
            continue
        holders = sorted(
            (p for p in scan.processes if p.gpu_index == gpu.index),
            key=lambda p: -(p.used_memory_bytes or 0),
        )
        listing = ", ".join(
            f"{p.pid} ({p.name or '?'}, {fmt_bytes(p.used_memory_bytes)})" for p in holders[:5]
        )
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"GPU {gpu.index}: only {fmt_bytes(gpu.memory_free_bytes)} free",
            detail=(
                f"{fmt_bytes(gpu.memory_free_bytes)} of {fmt_bytes(gpu.memory_total_bytes)} "
                f"free ({fmt_pct(free_pct)}, minimum {fmt_pct(policy.min_free_vram_pct)})."
                + (f" Held by: {listing}." if listing else "")
            ),
            remedy=(
                f"Stop the processes you do not need (`nvidia-smi -i {gpu.index}` lists them), "
                "or pick another GPU with `CUDA_VISIBLE_DEVICES`."
            ),
            evidence={
                "memory_free_bytes": gpu.memory_free_bytes,
                "memory_total_bytes": gpu.memory_total_bytes,
                "free_pct": free_pct,
                "min_free_pct": policy.min_free_vram_pct,
                "holders": [
                    {"pid": p.pid, "used_memory_bytes": p.used_memory_bytes} for p in holders
                ],
            },
        )
