"""What a PyTorch memory snapshot says, computed offline: pure functions over the unpickled data.

The input is the dictionary ``torch.cuda.memory._snapshot()`` returns (``segments``,
``device_traces``, ``allocator_settings``), or the bare ``segments`` list that
``torch.cuda.memory_snapshot()`` returns. Per device this module computes:

- segments and pools: reserved, allocated, free bytes, and the largest free block of each
  (pool, stream), which decides whether a request can be met without a new ``cudaMalloc``;
- fragmentation as :mod:`gpu_audit.knowledge.memory` defines it (cache slack, the
  non-releasable part inside split segments, rounding waste), and external fragmentation of
  each pool's free cache (1 - largest free block / free bytes);
- the biggest live allocations and the places in the program that allocated them;
- from the recorded history (``device_traces``, :mod:`.trace`): event counts, out-of-memory
  events, and a timeline of allocated and reserved memory.

Real snapshots vary by release (≈2.0 kept a ``history`` list per block instead of ``frames`` and
``requested_size``), so absent optional keys take their documented defaults; a missing required
key or a wrong type is an :class:`~gpu_audit.errors.InputError` naming where it was found.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.bounds import LARGEST_INT
from gpu_audit.knowledge.memory import fragmentation
from gpu_audit.snapshot.checked import (
    as_dict,
    as_list,
    count,
    fail,
    int_at,
    opt_int,
    refuse_huge_numbers,
    shown,
)
from gpu_audit.snapshot.trace import TraceSummary, summarize_trace

ALLOCATED = "active_allocated"
PENDING_FREE = "active_pending_free"
INACTIVE = "inactive"
BLOCK_STATES = (ALLOCATED, PENDING_FREE, INACTIVE)

# Frames from the C++ runtime and the interpreter say nothing about the user's program
# (the same filter PyTorch's own _memory_viz applies).
_OMIT_FUNCTIONS = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                   "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_")
_OMIT_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
               "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
               "cpython/abstract.h")
# Python frames inside these packages are the machinery, not the allocation site.
_LIBRARY_MARKERS = ("/torch/", "/site-packages/", "/dist-packages/", "/lib/python3")


# --- the result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolSummary:
    pool: str  # "large", "small", or "large, private pool (1, 2)"
    stream: int
    segments: int
    reserved_bytes: int
    allocated_bytes: int
    pending_free_bytes: int
    free_bytes: int
    free_blocks: int
    largest_free_block_bytes: int
    external_fragmentation_pct: float | None  # 1 - largest free block / free bytes
    expandable: bool = False


@dataclass(frozen=True)
class Allocation:
    address: int
    size_bytes: int
    requested_bytes: int
    pool: str
    stream: int
    site: str | None
    frames: list[str] = field(default_factory=list)  # innermost first


@dataclass(frozen=True)
class AllocationSite:
    site: str
    allocations: int
    bytes: int


@dataclass(frozen=True)
class DeviceSummary:
    device: int
    segments: int
    expandable_segments: int
    reserved_bytes: int
    allocated_bytes: int  # block bytes of live allocations (memory_stats' allocated_bytes)
    requested_bytes: int  # what the program asked for
    pending_free_bytes: int  # freed by the program, waiting on stream events
    free_bytes: int  # inactive blocks
    inactive_split_bytes: int  # free blocks inside partly used segments: not releasable
    whole_free_segment_bytes: int  # what empty_cache() would return
    free_internal_bytes: int  # rounding inside live allocations (segsum's "internal")
    free_external_bytes: int  # every block not allocated, pending frees included ("external")
    reserved_unallocated_bytes: int | None
    fragmentation_pct: float | None
    split_fragmentation_pct: float | None
    trapped_pct: float | None
    rounding_waste_pct: float | None
    largest_free_block_bytes: int
    pools: list[PoolSummary]
    largest_allocations: list[Allocation]
    sites: list[AllocationSite]
    trace: TraceSummary | None


@dataclass(frozen=True)
class SnapshotSummary:
    format: str  # "snapshot", "segments" (memory_snapshot()), "legacy" (≈2.0, per-block history)
    devices: list[DeviceSummary]
    allocator_settings: dict[str, Any] | None
    notes: list[str]


# --- frames and sites ------------------------------------------------------------------------


def _frame_parts(frame: Any) -> tuple[str, int, str] | None:
    if not isinstance(frame, dict):
        return None
    filename, line, name = frame.get("filename"), frame.get("line"), frame.get("name")
    if not isinstance(filename, str) or not isinstance(name, str):
        return None
    known = isinstance(line, int) and not isinstance(line, bool) and 0 <= line <= LARGEST_INT
    return filename, line if known else 0, name


def _keep(filename: str, name: str) -> bool:
    return not any(m in name for m in _OMIT_FUNCTIONS) and not any(
        m in filename for m in _OMIT_FILES
    )


def _short(filename: str) -> str:
    parts = filename.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 else filename


def format_frames(frames: Iterable[Any], limit: int = 8) -> list[str]:
    """``file:line:function`` for the frames worth showing, innermost first.

    Python frames when the stack has any (C++ frames from ``stacks="all"`` bury them otherwise).
    """
    kept = [p for p in map(_frame_parts, frames) if p and _keep(p[0], p[2])]
    python = [p for p in kept if p[0].endswith(".py")]
    return [f"{_short(f)}:{line}:{name}" for f, line, name in (python or kept)[:limit]]


def allocation_site(frames: Iterable[Any]) -> str | None:
    """The innermost frame of the program itself: the first Python frame outside libraries."""
    python_frames = []
    for frame in frames:
        parts = _frame_parts(frame)
        if parts and parts[0].endswith(".py") and _keep(parts[0], parts[2]):
            python_frames.append(parts)
    if not python_frames:
        shown = format_frames(frames, limit=1)
        return shown[0] if shown else None
    own = [p for p in python_frames if not any(m in p[0] for m in _LIBRARY_MARKERS)]
    filename, line, name = (own or python_frames)[0]
    return f"{_short(filename)}:{line}:{name}"


# --- blocks and segments ---------------------------------------------------------------------


@dataclass
class _Block:
    address: int
    size: int
    requested: int
    state: str
    frames: list


def _block(raw: Any, where: str) -> _Block:
    b = as_dict(raw, where)
    size = int_at(b, "size", where)
    state = b.get("state")
    if state is None and "allocated" in b:  # the oldest layout had a flag, not a state
        state = ALLOCATED if b["allocated"] else INACTIVE
    if state not in BLOCK_STATES:
        raise fail(f"{where}.state", f"expected one of {', '.join(BLOCK_STATES)}, "
                                      f"found {shown(state)}")
    if "frames" in b or "requested_size" in b:
        frames = b.get("frames") if isinstance(b.get("frames"), list) else []
        requested = opt_int(b, "requested_size", where)
    else:  # ≈2.0: the request and its stack live in the first history entry
        history = b.get("history") if isinstance(b.get("history"), list) else []
        first = history[0] if history and isinstance(history[0], dict) else {}
        frames = first.get("frames") if isinstance(first.get("frames"), list) else []
        requested = opt_int(first, "real_size", f"{where}.history[0]")
    if requested is None or not 0 <= requested <= size:
        requested = size
    return _Block(opt_int(b, "address", where) or 0, size, requested, state, frames)


def _pool_label(segment: dict, where: str) -> str:
    kind = segment.get("segment_type") if segment.get("segment_type") in ("large", "small") \
        else "large"
    pool_id = segment.get("segment_pool_id")
    if isinstance(pool_id, (list, tuple)) and any(pool_id):
        ids = [str(count(p, f"{where}.segment_pool_id[{i}]"))
               if isinstance(p, int) and not isinstance(p, bool) else shown(p, 24)
               for i, p in enumerate(pool_id)]
        return f"{kind}, private pool ({', '.join(ids)})"
    return kind


def _segments(data: Any) -> tuple[str, list, list, dict | None]:
    """(format, segments, device_traces, allocator_settings) from either snapshot shape."""
    if isinstance(data, (list, tuple)):
        return "segments", as_list(data, "segments"), [], None
    snap = as_dict(data, "top level")
    if "segments" not in snap:
        keys = ", ".join(sorted(k if isinstance(k, str) else shown(k, 24)
                                for k in snap)[:8]) or "none"
        raise fail("top level", f"no 'segments' key (keys found: {keys})")
    segments = as_list(snap["segments"], "segments")
    traces = snap.get("device_traces") or []
    traces = as_list(traces, "device_traces")
    settings = snap.get("allocator_settings")
    settings = settings if isinstance(settings, dict) else None
    if settings:  # passed on whole to the document and the report
        refuse_huge_numbers(settings, "allocator_settings")
    return "snapshot", segments, traces, settings


# --- per device ------------------------------------------------------------------------------


@dataclass
class _PoolAcc:
    segments: int = 0
    reserved: int = 0
    allocated: int = 0
    pending: int = 0
    free: int = 0
    free_blocks: int = 0
    largest_free: int = 0
    expandable: bool = False


def _summarize_device(device: int, segments: list[tuple[dict, list[_Block], str]],
                      trace: list | None, top: int) -> DeviceSummary:
    pools: dict[tuple[str, int], _PoolAcc] = defaultdict(_PoolAcc)
    live: list[Allocation] = []
    totals = defaultdict(int)
    expandable_count = 0
    for seg, blocks, where in segments:
        total = int_at(seg, "total_size", where)
        stream = opt_int(seg, "stream", where) or 0
        expandable = bool(seg.get("is_expandable", False))
        expandable_count += expandable
        label = _pool_label(seg, where)
        acc = pools[(label, stream)]
        acc.segments += 1
        acc.reserved += total
        acc.expandable = acc.expandable or expandable
        totals["reserved"] += total
        split = len(blocks) > 1
        for b in blocks:
            if b.state == ALLOCATED:
                acc.allocated += b.size
                totals["allocated"] += b.size
                totals["requested"] += b.requested
                live.append(Allocation(b.address, b.size, b.requested, label, stream,
                                       allocation_site(b.frames), format_frames(b.frames)))
            elif b.state == PENDING_FREE:
                acc.pending += b.size
                totals["pending"] += b.size
            else:
                acc.free += b.size
                acc.free_blocks += 1
                acc.largest_free = max(acc.largest_free, b.size)
                totals["free"] += b.size
                if expandable:
                    continue  # neither "split" nor "whole": expandable ranges are unmapped instead
                totals["inactive_split" if split else "whole_free"] += b.size

    pool_summaries = [
        PoolSummary(
            pool=label, stream=stream, segments=acc.segments, reserved_bytes=acc.reserved,
            allocated_bytes=acc.allocated, pending_free_bytes=acc.pending, free_bytes=acc.free,
            free_blocks=acc.free_blocks, largest_free_block_bytes=acc.largest_free,
            external_fragmentation_pct=(round(100.0 * (1 - acc.largest_free / acc.free), 1)
                                        if acc.free else None),
            expandable=acc.expandable,
        )
        for (label, stream), acc in sorted(pools.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]
    live.sort(key=lambda a: (-a.size_bytes, a.address))
    by_site: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for a in live:
        entry = by_site[a.site or "(no stack recorded)"]
        entry[0] += 1
        entry[1] += a.size_bytes
    sites = sorted((AllocationSite(s, n, b) for s, (n, b) in by_site.items()),
                   key=lambda s: (-s.bytes, s.site))
    metrics = fragmentation(totals["allocated"], totals["reserved"], totals["inactive_split"],
                            totals["requested"])
    trace_summary = None
    if trace:
        trace_summary = summarize_trace(trace, totals["requested"], totals["reserved"],
                                        f"device_traces[{device}]")
    return DeviceSummary(
        device=device,
        segments=len(segments),
        expandable_segments=expandable_count,
        reserved_bytes=totals["reserved"],
        allocated_bytes=totals["allocated"],
        requested_bytes=totals["requested"],
        pending_free_bytes=totals["pending"],
        free_bytes=totals["free"],
        inactive_split_bytes=totals["inactive_split"],
        whole_free_segment_bytes=totals["whole_free"],
        free_internal_bytes=totals["allocated"] - totals["requested"],
        free_external_bytes=totals["reserved"] - totals["allocated"],
        reserved_unallocated_bytes=metrics["reserved_unallocated_bytes"],
        fragmentation_pct=metrics["fragmentation_pct"],
        split_fragmentation_pct=metrics["split_fragmentation_pct"],
        trapped_pct=metrics["trapped_pct"],
        rounding_waste_pct=metrics["rounding_waste_pct"],
        largest_free_block_bytes=max((p.largest_free_block_bytes for p in pool_summaries),
                                     default=0),
        pools=pool_summaries,
        largest_allocations=live[:top],
        sites=sites[:top],
        trace=trace_summary,
    )


def summarize(data: Any, *, top: int = 10) -> SnapshotSummary:
    """The summary of an unpickled snapshot. Raises :class:`InputError` on a malformed one."""
    fmt, raw_segments, traces, settings = _segments(data)
    by_device: dict[int, list[tuple[dict, list[_Block], str]]] = defaultdict(list)
    legacy = False
    for i, raw in enumerate(raw_segments):
        where = f"segments[{i}]"
        seg = as_dict(raw, where)
        blocks_raw = as_list(seg.get("blocks", []), f"{where}.blocks")
        legacy = legacy or any(isinstance(b, dict) and "history" in b and "frames" not in b
                               for b in blocks_raw)
        blocks = [_block(b, f"{where}.blocks[{j}]") for j, b in enumerate(blocks_raw)]
        total = int_at(seg, "total_size", where)
        if blocks and sum(b.size for b in blocks) != total:
            raise fail(where, f"its blocks add up to {sum(b.size for b in blocks)} bytes, "
                               f"not its total_size of {total}")
        by_device[opt_int(seg, "device", where) or 0].append((seg, blocks, where))
    device_traces = {i: t for i, t in enumerate(traces) if isinstance(t, list) and t}
    notes = []
    if fmt == "segments":
        notes.append("only the segment list was saved (torch.cuda.memory_snapshot()): no history, "
                     "no allocator settings")
    elif not device_traces:
        notes.append("no allocation history in this snapshot: record it with "
                     "torch.cuda.memory._record_memory_history() or "
                     "gpu_audit.monitor.start(snapshot_on_oom=True)")
    if not raw_segments:
        notes.append("no segments: the allocator held no memory when the snapshot was taken")
    devices = [
        _summarize_device(d, by_device.get(d, []), device_traces.get(d), top)
        for d in sorted(set(by_device) | set(device_traces))
    ]
    return SnapshotSummary("legacy" if legacy else fmt, devices, settings, notes)
