"""Allocator figures from ``torch.cuda.memory_stats()`` keys, and the fragmentation metrics.

Pure functions over plain dictionaries, shared by the monitor (which publishes them), the
scan's reader and the rules. The count family is ``allocation.*``; ``inactive_split_bytes`` is the
non-releasable free memory inside split segments and stays 0 with expandable segments. The
allocator settings string is read by :mod:`gpu_audit.knowledge.allocator`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpu_audit.units import MIB

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


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def counters_from_stats(stats: Mapping[str, Any]) -> dict[str, int | None]:
    """The published counters; a key the running torch does not report becomes ``None``."""
    return {field: _int_or_none(stats.get(key)) for field, key in STAT_FIELDS.items()}


def expandable_segments(settings: Mapping[str, str]) -> bool:
    """Whether ``settings`` (from :func:`~gpu_audit.knowledge.allocator.raw_settings`) turn
    expandable segments on: torch's booleans are exactly ``True`` or ``False``."""
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
