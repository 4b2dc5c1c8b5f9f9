"""Allocator figures from ``torch.cuda.memory_stats()`` keys, and the fragmentation metrics.

Pure functions over plain dictionaries, shared by the monitor (which publishes them), the
scan's reader and the rules. Key names and definitions follow the reference
(``pytorch-allocator.md`` §4): the count family is ``allocation.*``; ``inactive_split_bytes``
is the non-releasable free memory inside split segments and stays 0 with expandable segments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Published field -> the flat key of torch.cuda.memory_stats() it comes from.
STAT_FIELDS: dict[str, str] = {
    "allocated_bytes": "allocated_bytes.all.current",
    "allocated_peak_bytes": "allocated_bytes.all.peak",
    "reserved_bytes": "reserved_bytes.all.current",
    "reserved_peak_bytes": "reserved_bytes.all.peak",
    "active_bytes": "active_bytes.all.current",
    "active_peak_bytes": "active_bytes.all.peak",
    "inactive_split_bytes": "inactive_split_bytes.all.current",
    "inactive_split_peak_bytes": "inactive_split_bytes.all.peak",
    "requested_bytes": "requested_bytes.all.current",
    "allocations": "allocation.all.current",
    "segments": "segment.all.current",
    "inactive_split_blocks": "inactive_split.all.current",
    "oversize_allocations": "oversize_allocations.current",
    "oversize_segments": "oversize_segments.current",
    "num_alloc_retries": "num_alloc_retries",
    "num_ooms": "num_ooms",
    "num_sync_all_streams": "num_sync_all_streams",
    "num_device_alloc": "num_device_alloc",
    "num_device_free": "num_device_free",
}

MIB = 1024**2


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def counters_from_stats(stats: Mapping[str, Any]) -> dict[str, int | None]:
    """The published counters; a key the running torch does not report becomes ``None``."""
    return {field: _int_or_none(stats.get(key)) for field, key in STAT_FIELDS.items()}


def _pct(part: int | None, whole: int | None) -> float | None:
    if part is None or whole is None or whole <= 0:
        return None
    return round(100.0 * part / whole, 1)


def fragmentation(
    allocated: int | None,
    reserved: int | None,
    inactive_split: int | None = None,
    requested: int | None = None,
) -> dict[str, int | float | None]:
    """The reference's metrics (§4.3) from current byte counts; ``None`` where undefined.

    - ``fragmentation_pct``: cache slack, (reserved - allocated) / reserved. PyTorch's OOM
      message calls the numerator "reserved by PyTorch but unallocated". An upper bound: it
      includes whole free segments that ``empty_cache()`` or the allocator's retry can release.
    - ``split_fragmentation_pct``: inactive_split / reserved, the free memory trapped inside
      partly used segments, which nothing releases until the segment empties.
    - ``trapped_pct``: inactive_split / (reserved - allocated), the share of the slack that is
      trapped rather than releasable.
    - ``rounding_waste_pct``: (allocated - requested) / allocated, internal rounding waste.
    """
    slack = None
    if allocated is not None and reserved is not None:
        slack = max(reserved - allocated, 0)
    rounding = None
    if allocated is not None and requested is not None:
        rounding = max(allocated - requested, 0)
    return {
        "reserved_unallocated_bytes": slack,
        "fragmentation_pct": _pct(slack, reserved),
        "split_fragmentation_pct": _pct(inactive_split, reserved),
        "trapped_pct": _pct(inactive_split, slack),
        "rounding_waste_pct": _pct(rounding, allocated),
    }


def split_alloc_conf(text: str) -> list[str]:
    """``a:1,b:[x:1,y:2]`` -> ``["a:1", "b:[x:1,y:2]"]``: commas inside brackets stay."""
    items, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def parse_alloc_conf(text: str | None) -> dict[str, str]:
    """An allocator configuration string as ``{key: value}`` (values left as text)."""
    if not text:
        return {}
    parsed: dict[str, str] = {}
    for item in split_alloc_conf(text):
        key, _, value = item.partition(":")
        parsed[key.strip()] = value.strip()
    return parsed


def expandable_segments(settings: Mapping[str, str]) -> bool:
    return settings.get("expandable_segments") == "True"


def max_split_size_bytes(settings: Mapping[str, str], stats: Mapping[str, Any]) -> int | None:
    """The split limit in force: the live setting first (the stat is frozen at start-up)."""
    value = settings.get("max_split_size_mb")
    if value is not None and value.isdigit():
        return int(value) * MIB
    stat = _int_or_none(stats.get("max_split_size"))
    if stat is None or stat < 0:  # -1 is how the int64 stat spells "unlimited"
        return None
    return stat
