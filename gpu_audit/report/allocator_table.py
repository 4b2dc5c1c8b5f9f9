"""The allocator table: what processes running ``gpu_audit.monitor`` say, next to NVML's VRAM.

NVML's figure for a process is everything it holds on the device; PyTorch's reserved memory is
the part its caching allocator holds, of which "allocated" is what tensors use. The rest of
the NVML figure (CUDA context, NCCL buffers, cuBLAS/cuDNN workspaces, other allocators) is
shown as the difference, "context/other". Shared by the terminal and markdown renderers.
"""

from __future__ import annotations

from gpu_audit.model import GpuProcess, Scan
from gpu_audit.units import fmt_bytes

NA = "n/a"

ALLOCATOR_TITLE = "PyTorch allocator (published by gpu_audit.monitor)"
ALLOCATOR_HEADERS = ["GPU", "PID", "VRAM (NVML)", "Reserved", "Allocated", "Reserved, unused",
                     "Fragmentation", "Context/other", "Retries", "OOMs", "Step", "Published"]
ALLOCATOR_NOTE = (
    "Reserved: held by PyTorch's caching allocator; allocated: used by tensors; fragmentation: "
    "reserved but unallocated as a share of reserved (split: the part trapped in split segments); "
    "context/other: NVML's VRAM minus reserved (CUDA context, NCCL, cuBLAS/cuDNN workspaces, "
    "other allocators)."
)


def publishing(scan: Scan) -> list[GpuProcess]:
    return [p for p in scan.processes if p.allocator is not None]


def context_other_bytes(p: GpuProcess) -> int | None:
    """NVML's VRAM for the process minus what PyTorch reserves; ``None`` when either is unknown."""
    a = p.allocator
    if a is None or p.used_memory_bytes is None or a.reserved_bytes is None:
        return None
    return p.used_memory_bytes - a.reserved_bytes


def _fragmentation(p: GpuProcess) -> str:
    a = p.allocator
    if a is None or a.fragmentation_pct is None:
        return NA
    if a.expandable_segments:
        return f"{a.fragmentation_pct:g}% (expandable)"
    if a.split_fragmentation_pct is None:
        return f"{a.fragmentation_pct:g}%"
    return f"{a.fragmentation_pct:g}% (split {a.split_fragmentation_pct:g}%)"


def _count(value: int | None) -> str:
    return NA if value is None else str(value)


def allocator_row(p: GpuProcess) -> list[str]:
    a = p.allocator
    assert a is not None
    published = NA if a.age_s is None else f"{a.age_s:g} s ago"
    return [
        str(p.gpu_index),
        str(p.pid),
        fmt_bytes(p.used_memory_bytes),
        fmt_bytes(a.reserved_bytes),
        fmt_bytes(a.allocated_bytes),
        fmt_bytes(a.reserved_unallocated_bytes),
        _fragmentation(p),
        fmt_bytes(context_other_bytes(p)),
        _count(a.num_alloc_retries),
        _count(a.num_ooms),
        _count(a.step),
        published,
    ]
