"""The recorded history of a memory snapshot (``device_traces``): counts, OOMs, a timeline.

The timeline is replayed backwards from the state at the end, so the curve is exact even when
the ring buffer dropped the start of the run.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass

from gpu_audit.snapshot.checked import as_dict, fail, opt_int, shown
from gpu_audit.units import utc_iso

MAX_TIMELINE_POINTS = 500  # in the JSON document; the plot uses every point


@dataclass(frozen=True)
class OomEvent:
    at: str | None
    request_bytes: int | None  # the rounded request that failed
    device_free_bytes: int | None  # what cudaMemGetInfo reported free at that moment


@dataclass(frozen=True)
class Timeline:
    """Allocated (requested bytes, as the program sees it) and reserved bytes after each event."""

    start: str | None
    time_s: list[float]
    allocated_bytes: list[int]
    reserved_bytes: list[int]

    def downsampled(self, points: int = MAX_TIMELINE_POINTS) -> Timeline:
        """At most ``points`` points, keeping each stretch's highest values (peaks survive)."""
        n = len(self.time_s)
        if n <= points:
            return self
        time_s, allocated, reserved = [], [], []
        for bucket in range(points):
            lo, hi = bucket * n // points, (bucket + 1) * n // points
            time_s.append(self.time_s[hi - 1])
            allocated.append(max(self.allocated_bytes[lo:hi]))
            reserved.append(max(self.reserved_bytes[lo:hi]))
        return Timeline(self.start, time_s, allocated, reserved)


@dataclass(frozen=True)
class TraceSummary:
    events: int
    first_at: str | None
    last_at: str | None
    span_s: float | None
    actions: dict[str, int]
    ooms: list[OomEvent]
    timeline: Timeline
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None


_ALLOCATED_DELTA = {"alloc": 1, "free_requested": -1}
_RESERVED_DELTA = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


def _iso_from_us(time_us: int | None) -> str | None:
    if time_us is None or time_us <= 0:
        return None
    try:
        moment = dt.datetime.fromtimestamp(time_us / 1e6, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return utc_iso(moment, precise=True)


def summarize_trace(raw_events: list, end_allocated: int, end_reserved: int,
                    where: str) -> TraceSummary:
    """Counts, OOMs and the timeline of one device's trace, anchored at the final state."""
    events = []
    for i, raw in enumerate(raw_events):
        e = as_dict(raw, f"{where}[{i}]")
        action = e.get("action")
        if not isinstance(action, str):
            raise fail(f"{where}[{i}].action", f"expected text, found {shown(action)}")
        events.append((action, opt_int(e, "size", f"{where}[{i}]") or 0,
                       opt_int(e, "time_us", f"{where}[{i}]"), e))
    actions: dict[str, int] = defaultdict(int)
    for action, *_ in events:
        actions[action] += 1

    # Walk backwards from the end state: each event's "after" value is known, so its "before"
    # value is after minus its own change. The first retained event needs no earlier history.
    allocated_after, reserved_after = [0] * len(events), [0] * len(events)
    allocated, reserved = end_allocated, end_reserved
    for i in range(len(events) - 1, -1, -1):
        action, size = events[i][0], events[i][1]
        allocated_after[i], reserved_after[i] = allocated, reserved
        allocated -= _ALLOCATED_DELTA.get(action, 0) * size
        reserved -= _RESERVED_DELTA.get(action, 0) * size

    times = [t for _, _, t, _ in events if t]
    t0 = min(times) if times else None
    time_s = []
    previous = 0.0
    for _, _, t, _ in events:
        # Entries without a time keep their order: they sit at the previous entry's time.
        previous = (t - t0) / 1e6 if (t and t0) else previous
        time_s.append(previous)
    timeline = Timeline(_iso_from_us(t0), [0.0, *time_s], [max(allocated, 0), *allocated_after],
                        [max(reserved, 0), *reserved_after])
    ooms = [
        OomEvent(_iso_from_us(t), size or None, opt_int(e, "device_free", where))
        for action, size, t, e in events
        if action == "oom"
    ]
    return TraceSummary(
        events=len(events),
        first_at=_iso_from_us(t0),
        last_at=_iso_from_us(max(times)) if times else None,
        span_s=round((max(times) - t0) / 1e6, 3) if times and t0 else None,
        actions=dict(sorted(actions.items())),
        ooms=ooms,
        timeline=timeline,
        peak_allocated_bytes=max(timeline.allocated_bytes) if events else None,
        peak_reserved_bytes=max(timeline.reserved_bytes) if events else None,
    )
