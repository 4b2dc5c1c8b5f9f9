"""The published figures, from recorded memory_stats() dictionaries."""

from __future__ import annotations

from gpu_audit.knowledge.allocator import raw_settings
from gpu_audit.monitor import metrics
from tests.monitor.recorded import GIB, MIB, fragmented_training_stats, memory_stats


def test_counters_come_from_memory_stats_key_names():
    stats = fragmented_training_stats(retries=3, ooms=1)
    counters = metrics.counters_from_stats(stats)
    assert counters["allocated_bytes"] == 45 * GIB
    assert counters["reserved_bytes"] == 70 * GIB
    assert counters["reserved_peak_bytes"] == 72 * GIB
    assert counters["allocated_peak_bytes"] == 62 * GIB
    assert counters["inactive_split_bytes"] == 20 * GIB
    assert counters["requested_bytes"] == 45 * GIB - 300 * MIB
    assert counters["allocations"] == 2400  # the count family is "allocation", not "allocated"
    assert counters["segments"] == 180
    assert (counters["num_alloc_retries"], counters["num_ooms"]) == (3, 1)


def test_a_key_the_running_torch_lacks_is_unknown_not_zero():
    stats = memory_stats(allocated=GIB, reserved=2 * GIB)
    del stats["requested_bytes.all.current"]
    stats["num_ooms"] = "n/a"  # a value of the wrong type is just as unknown
    counters = metrics.counters_from_stats(stats)
    assert counters["requested_bytes"] is None
    assert counters["num_ooms"] is None


def test_expandable_segments_are_on_only_when_set_to_exactly_true():
    assert metrics.expandable_segments(raw_settings("expandable_segments:True"))
    # Booleans are case-sensitive in PyTorch: "true" is not True.
    assert not metrics.expandable_segments(raw_settings("expandable_segments:true"))
    assert not metrics.expandable_segments(raw_settings(""))


def test_max_split_size_prefers_the_live_setting_and_reads_minus_one_as_unlimited():
    stats = memory_stats(allocated=GIB, reserved=GIB, max_split_size=-1)
    assert metrics.max_split_size_bytes({}, stats) is None
    assert metrics.max_split_size_bytes({"max_split_size_mb": "512"}, stats) == 512 * MIB
    frozen = memory_stats(allocated=GIB, reserved=GIB, max_split_size=256 * MIB)
    assert metrics.max_split_size_bytes({}, frozen) == 256 * MIB
