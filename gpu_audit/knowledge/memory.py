"""What the caching allocator's byte counts say about fragmentation: one set of definitions.

Pure: used by the monitor inside the training process (which publishes these figures), by the
PyTorch memory-snapshot summary, and by whatever reads them back. The counts are the current
values of ``torch.cuda.memory_stats()`` (or the same totals summed over a memory snapshot).
"""

from __future__ import annotations

from gpu_audit.units import pct


def fragmentation(
    allocated: int | None,
    reserved: int | None,
    inactive_split: int | None = None,
    requested: int | None = None,
) -> dict[str, int | float | None]:
    """The fragmentation metrics from current byte counts; ``None`` where undefined.

    - ``fragmentation_pct``: cache slack, (reserved - allocated) / reserved. PyTorch's OOM
      message calls the numerator "reserved by PyTorch but unallocated". An upper bound: it
      includes whole free segments that ``empty_cache()`` or the allocator's retry can release.
    - ``split_fragmentation_pct``: inactive_split / reserved, the free memory trapped inside
      partly used segments, which nothing releases until the segment empties (it stays 0 with
      expandable segments).
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
        "fragmentation_pct": pct(slack, reserved),
        "split_fragmentation_pct": pct(inactive_split, reserved),
        "trapped_pct": pct(inactive_split, slack),
        "rounding_waste_pct": pct(rounding, allocated),
    }
