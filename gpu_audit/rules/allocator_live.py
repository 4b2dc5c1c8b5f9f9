"""What running PyTorch processes say about their own allocator (published by gpu_audit.monitor)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.knowledge.allocator.limits import FRAGMENTATION_MIN_BYTES
from gpu_audit.model import Finding, GpuProcess, ProcessAllocatorState, Scan, Severity
from gpu_audit.rules import rule
from gpu_audit.units import fmt_bytes, fmt_pct, noun, parse_utc, plural

# Below FRAGMENTATION_MIN_BYTES of reserved-but-unallocated memory a high percentage is noise (a
# small process with one cached 20 MiB segment is "90% fragmented" and harmless).
# When less than this share of the slack sits inside split segments, the rest is whole free
# segments, which the allocator itself releases before it would raise an OOM.
TRAPPED_SHARE_WORTH_A_WARNING = 0.25


def _restart_remedy(a: ProcessAllocatorState) -> str:
    """Restart with the setting that addresses split-segment fragmentation on this torch."""
    # The allocator grammar loads only when a monitored process needs advice.
    from gpu_audit.knowledge.allocator import alloc_conf_export, fragmentation_setting, with_setting

    key, value = fragmentation_setting(a.torch_version)
    conf = with_setting(a.settings, key, value)
    if key == "expandable_segments":
        why = ("expandable segments grow one segment per stream instead of carving many, so "
               "freed memory stays reusable")
    else:
        why = ("torch < 2.1 has no expandable segments; max_split_size_mb keeps blocks above "
               "the limit whole (any value above 20 works)")
    return f"Restart the job after `{alloc_conf_export(conf, a.torch_version)}`: {why}."


def _where(p: GpuProcess, a: ProcessAllocatorState) -> str:
    return f"pid {p.pid} on GPU {p.gpu_index}" + (
        f" (cuda:{a.cuda_device} inside the process)" if a.cuda_device != p.gpu_index else "")


def _evidence(p: GpuProcess, a: ProcessAllocatorState) -> dict:
    return {
        "pid": p.pid,
        "gpu_index": p.gpu_index,
        "cuda_device": a.cuda_device,
        "nvml_used_memory_bytes": p.used_memory_bytes,
        "allocated_bytes": a.allocated_bytes,
        "reserved_bytes": a.reserved_bytes,
        "reserved_unallocated_bytes": a.reserved_unallocated_bytes,
        "inactive_split_bytes": a.inactive_split_bytes,
        "fragmentation_pct": a.fragmentation_pct,
        "split_fragmentation_pct": a.split_fragmentation_pct,
        "num_alloc_retries": a.num_alloc_retries,
        "num_ooms": a.num_ooms,
        "torch_version": a.torch_version,
        "allocator_settings": a.settings,
        "expandable_segments": a.expandable_segments,
        "published_at": a.published_at,
        "age_s": a.age_s,
    }


@rule("allocator-fragmentation")
def allocator_fragmentation(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """A PyTorch process keeps much more memory reserved than its tensors use.

    Only a process that runs `gpu_audit.monitor` can say this: NVML sees what the process holds,
    never how much of it PyTorch is using. Fragmentation here is the share of reserved memory
    that is not allocated ("reserved by PyTorch but unallocated" in PyTorch's OOM message), and
    the finding appears when it passes `alloc_fragmentation_pct` (default
    {alloc_fragmentation_pct}) and the slack is at least {fragmentation_min_mib} MiB. When the
    slack is mostly whole free segments, the allocator releases them itself before an OOM, so the
    finding is informational. Processes using the cudaMallocAsync backend are skipped: their
    statistics do not describe fragmentation.

    Why it matters: when the slack is trapped in split segments (`inactive_split_bytes`), nothing
    releases it and the next large request can fail although the total looks free; whole free
    segments are memory other processes cannot use until `torch.cuda.empty_cache()`.

    Example: `pid 4242 on GPU 0: 63% of reserved memory is fragmented` - PyTorch
    reserves 70.0 GiB but tensors use 26.0 GiB.

    Fix: restart with expandable segments (torch 2.1+) or `max_split_size_mb` (older), set in the
    variable names that release reads; for whole free segments, call `torch.cuda.empty_cache()`
    after the phases that peak.
    """
    threshold = policy.alloc_fragmentation_pct
    for p in scan.processes:
        a = p.allocator
        if a is None or a.backend == "cudaMallocAsync":
            continue
        frag, slack = a.fragmentation_pct, a.reserved_unallocated_bytes
        if frag is None or slack is None or frag <= threshold or slack < FRAGMENTATION_MIN_BYTES:
            continue
        trapped = a.inactive_split_bytes
        numbers = (f"PyTorch reserves {fmt_bytes(a.reserved_bytes)} but tensors use "
                   f"{fmt_bytes(a.allocated_bytes)}: {fmt_bytes(slack)} ({fmt_pct(frag)}) is "
                   f"reserved but unallocated (threshold {fmt_pct(threshold)})")
        stale = f" Published {a.age_s:g} s before this scan." if (a.age_s or 0) > 60 else ""
        if a.expandable_segments:
            yield Finding(
                subject=f"pid:{p.pid}",
                title=f"{_where(p, a)}: {fmt_pct(frag)} of reserved memory is unallocated "
                      "despite expandable segments",
                detail=(f"{numbers}. With expandable segments the slack is mapped free pages, "
                        f"which only empty_cache() or an allocation retry unmaps.{stale}"),
                remedy=("Call torch.cuda.empty_cache() after the phases that peak (evaluation, "
                        "checkpointing), and find what peaks: "
                        "gpu_audit.monitor.start(snapshot_on_oom=True), then "
                        "gpu-audit snapshot <the oom-*.pickle it writes>"),
                evidence=_evidence(p, a) | {"threshold_pct": threshold},
            )
        elif trapped is not None and trapped < TRAPPED_SHARE_WORTH_A_WARNING * slack:
            yield Finding(
                subject=f"pid:{p.pid}",
                title=f"{_where(p, a)}: {fmt_bytes(slack)} of cached memory is held but unused",
                detail=(f"{numbers}. Only {fmt_bytes(trapped)} of it sits in split segments; the "
                        "rest is whole free segments that the allocator releases before it "
                        f"would fail, but no other process can use them meanwhile.{stale}"),
                remedy=("Call torch.cuda.empty_cache() after the phases that peak if other "
                        "processes need this GPU"),
                evidence=_evidence(p, a) | {"threshold_pct": threshold},
                severity=Severity.INFO,
            )
        else:
            known = f"{fmt_bytes(trapped)} of it" if trapped is not None else "Part of it"
            yield Finding(
                subject=f"pid:{p.pid}",
                title=f"{_where(p, a)}: {fmt_pct(frag)} of reserved memory is fragmented",
                detail=(f"{numbers}. {known} is trapped in split segments, which cannot be "
                        "released while any block in them is in use: a large request can fail "
                        f"with plenty of memory nominally free.{stale}"),
                remedy=_restart_remedy(a),
                evidence=_evidence(p, a) | {"threshold_pct": threshold},
            )


def _increase(values: list[int | None]) -> int | None:
    """The total rise of a counter over samples (a reset to zero does not count as a fall)."""
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return None
    return sum(max(b - a, 0) for a, b in itertools.pairwise(known))


@rule("allocator-oom-retries")
def allocator_oom_retries(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """A PyTorch process keeps running out of cached memory and retrying.

    `num_alloc_retries` counts allocations that found nothing in the cache and nothing from the
    driver, so the allocator freed every unused cached segment, synchronised all streams and
    asked again. The finding appears when the counter rose during the recent history a process
    running `gpu_audit.monitor` publishes (about two minutes at the default interval); it is an
    error when out-of-memory errors were raised in that window too.

    Why it matters: each retry stalls the process, and the next one that fails is an
    out-of-memory error: the process runs at the edge of device memory.

    Example: `pid 4242 on GPU 0: 12 allocation retries over 118 s (40 steps)`
    (evidence: `new_alloc_retries`, `new_ooms`, `window_s`).

    Fix: lower the batch size or sequence length, or free memory other processes hold on the GPU;
    without expandable segments, the remedy also gives the restart line that turns them on.
    """
    for p in scan.processes:
        a = p.allocator
        if a is None or len(a.history) < 2:
            continue
        retries = _increase([s.num_alloc_retries for s in a.history])
        if not retries:
            continue
        ooms = _increase([s.num_ooms for s in a.history]) or 0
        first, last = parse_utc(a.history[0].at), parse_utc(a.history[-1].at)
        window_s = round((last - first).total_seconds(), 1) if first and last else None
        steps = _increase([s.step for s in a.history])
        per = f" over {window_s:g} s" if window_s is not None else ""
        if steps:
            per += f" ({steps} steps)"
        remedy = ("Lower the batch size or sequence length, or free memory other processes hold "
                  f"on GPU {p.gpu_index}.")
        if a.backend != "cudaMallocAsync" and not a.expandable_segments:
            # The allocator grammar loads only when a monitored process needs advice.
            from gpu_audit.knowledge.allocator import raw_settings, supports_expandable_segments

            asked = "expandable_segments" in raw_settings(a.settings)
            if not asked and supports_expandable_segments(a.torch_version) is not False:
                remedy += " " + _restart_remedy(a)
        oom_text = (f" and {plural(ooms, 'out-of-memory error')} {noun(ooms, 'was', 'were')} "
                    "raised" if ooms else "")
        yield Finding(
            subject=f"pid:{p.pid}",
            title=f"{_where(p, a)}: {plural(retries, 'allocation retry', 'allocation retries')}"
                  f"{per}",
            detail=(f"The allocator had to flush its cache and retry "
                    f"{plural(retries, 'time')}{per}{oom_text}; it holds "
                    f"{fmt_bytes(a.reserved_bytes)} reserved, {fmt_bytes(a.allocated_bytes)} "
                    "allocated. The process runs at the edge "
                    "of device memory."),
            remedy=remedy,
            evidence=_evidence(p, a) | {"new_alloc_retries": retries, "new_ooms": ooms,
                                        "window_s": window_s, "window_steps": steps},
            severity=Severity.ERROR if ooms else None,
        )
