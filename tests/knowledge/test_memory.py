"""The fragmentation metrics: one definition for the monitor, the snapshot summary and readers."""

from __future__ import annotations

from gpu_audit.knowledge.memory import fragmentation
from gpu_audit.units import GIB, MIB


def test_fragmentation_metrics_from_byte_counts():
    frag = fragmentation(allocated=45 * GIB, reserved=70 * GIB,
                         inactive_split=20 * GIB, requested=45 * GIB - 450 * MIB)
    assert frag["reserved_unallocated_bytes"] == 25 * GIB
    assert frag["fragmentation_pct"] == round(100 * 25 / 70, 1)  # cache slack
    assert frag["split_fragmentation_pct"] == round(100 * 20 / 70, 1)  # non-releasable
    assert frag["trapped_pct"] == 80.0  # 20 of the 25 GiB slack
    assert frag["rounding_waste_pct"] == round(100 * (450 * MIB) / (45 * GIB), 1)


def test_fragmentation_is_undefined_for_an_empty_allocator():
    frag = fragmentation(allocated=0, reserved=0, inactive_split=0, requested=0)
    assert frag["reserved_unallocated_bytes"] == 0
    assert frag["fragmentation_pct"] is None
    assert frag["trapped_pct"] is None
    assert frag["rounding_waste_pct"] is None
