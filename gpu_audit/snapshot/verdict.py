"""What a memory snapshot means: the out-of-memory diagnosis ``explain`` makes, from its figures.

The snapshot's recorded out-of-memory event gives the request and what the device had free;
its segments give what the cache reserved, what it left unallocated and the largest free
block. These go, under the key names of :data:`gpu_audit.knowledge.oom.OOM_KEYS`, into the one
diagnosis (:func:`~gpu_audit.knowledge.oom.diagnose_oom`) and its arithmetic in words
(:func:`~gpu_audit.knowledge.oom.budget_sentences`), and a fragmentation verdict carries
the one allocator remedy (:func:`~gpu_audit.knowledge.allocator.fragmentation_remedy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_audit.knowledge.allocator import fragmentation_remedy
from gpu_audit.knowledge.oom import budget_sentences, complete_oom_numbers, diagnose_oom
from gpu_audit.snapshot.summary import DeviceSummary
from gpu_audit.units import fmt_bytes


@dataclass(frozen=True)
class Verdict:
    diagnosis: str  # as diagnose_oom names it
    title: str
    explanation: str
    remedy: str  # lines to paste, or a sentence
    numbers: dict[str, Any]


def oom_numbers(d: DeviceSummary) -> dict[str, Any] | None:
    """The figures of the last recorded out-of-memory event on ``d``, or None without one."""
    ooms = d.trace.ooms if d.trace is not None else []
    if not ooms or ooms[-1].request_bytes is None:
        return None
    oom = ooms[-1]
    return complete_oom_numbers({
        "requested_bytes": oom.request_bytes,
        "gpu_index": d.device,
        "free_bytes": oom.device_free_bytes,
        "allocated_bytes": d.allocated_bytes,
        "reserved_bytes": d.reserved_bytes,
    })


def device_verdict(d: DeviceSummary, torch_version: str | None = None) -> Verdict | None:
    """The diagnosis of ``d``'s recorded out-of-memory event; None when none was recorded."""
    numbers = oom_numbers(d)
    if numbers is None:
        return None
    diagnosis = diagnose_oom(numbers)
    arithmetic = " ".join(budget_sentences(numbers, fmt_bytes))
    req = fmt_bytes(numbers["requested_bytes"])
    largest = fmt_bytes(d.largest_free_block_bytes)
    slack = fmt_bytes(numbers["reserved_unallocated_bytes"])
    if diagnosis == "fragmentation":
        return Verdict(
            diagnosis, "out of memory from fragmentation",
            f"The request of {req} failed. {arithmetic} Of the {slack} unallocated, "
            f"{fmt_bytes(d.inactive_split_bytes)} was in split segments and the largest free "
            f"block was {largest}: the memory was there, in pieces too small to use. This is "
            "fragmentation, not a model too big for the GPU.",
            fragmentation_remedy(torch_version), numbers)
    if diagnosis == "too-large":
        return Verdict(
            diagnosis, "out of memory: the request did not fit",
            f"The request of {req} did not fit. {arithmetic} (The cache's largest free block "
            f"was {largest}.) The job needs less memory at its peak.",
            "Reduce the peak: a smaller batch, activation checkpointing, or mixed precision.",
            numbers)
    if diagnosis == "memory-fraction":
        return Verdict(
            diagnosis, "out of memory: per-process memory fraction reached",
            f"A per-process memory fraction refused the request of {req}.",
            "Raise or remove torch.cuda.set_per_process_memory_fraction(...).", numbers)
    return Verdict(
        diagnosis, "out of memory", f"A request of {req} failed; the snapshot's figures do not "
        "tell why.", "Run `gpu-audit scan` to see what else holds the GPU.", numbers)
