"""Summarising a snapshot: segments, pools, fragmentation, allocations, sites and history."""

from __future__ import annotations

import copy

import pytest

from gpu_audit.errors import InputError
from gpu_audit.snapshot.summary import allocation_site, summarize
from gpu_audit.snapshot.trace import Timeline
from tests.snapshot.synthetic import (
    ACTIVATIONS_REQUEST,
    GIB,
    MIB,
    SMALL_FREE,
    finetune_oom_after_eval,
    legacy_2_0_snapshot,
)


@pytest.fixture
def oom_job():
    return summarize(finetune_oom_after_eval())


def test_device_totals_add_up_the_way_the_allocator_counts(oom_job):
    d0 = oom_job.devices[0]
    reserved = GIB + 20 * MIB + 2 * MIB + 40 * MIB
    allocated = 256 * MIB + 384 * MIB + 512 + 40 * MIB
    assert (d0.segments, d0.reserved_bytes, d0.allocated_bytes) == (4, reserved, allocated)
    assert d0.requested_bytes == ACTIVATIONS_REQUEST + 384 * MIB + 100 + 40 * MIB
    assert d0.pending_free_bytes == 1 * MIB
    assert d0.inactive_split_bytes == 128 * MIB + 256 * MIB + SMALL_FREE
    assert d0.whole_free_segment_bytes == 20 * MIB
    # The reference's identity: reserved = active + inactive_split + whole free segments.
    active = d0.allocated_bytes + d0.pending_free_bytes
    assert d0.reserved_bytes == active + d0.inactive_split_bytes + d0.whole_free_segment_bytes
    # segsum's split: allocated (requested) + internal + external = reserved.
    assert d0.requested_bytes + d0.free_internal_bytes + d0.free_external_bytes == reserved


def test_fragmentation_by_the_reference_definitions(oom_job):
    d0 = oom_job.devices[0]
    slack = d0.reserved_bytes - d0.allocated_bytes
    assert d0.reserved_unallocated_bytes == slack
    assert d0.fragmentation_pct == round(100 * slack / d0.reserved_bytes, 1)
    assert d0.split_fragmentation_pct == round(100 * d0.inactive_split_bytes / d0.reserved_bytes, 1)
    assert d0.trapped_pct == round(100 * d0.inactive_split_bytes / slack, 1)
    assert d0.rounding_waste_pct == round(100 * 512 / d0.allocated_bytes, 1)


def test_largest_free_block_and_external_fragmentation_per_pool(oom_job):
    pools = {p.pool: p for p in oom_job.devices[0].pools}
    assert set(pools) == {"large", "small", "large, private pool (1, 2)"}
    large = pools["large"]
    assert (large.segments, large.free_blocks) == (2, 3)
    assert large.free_bytes == 128 * MIB + 256 * MIB + 20 * MIB
    assert large.largest_free_block_bytes == 256 * MIB
    # A 300 MiB request cannot be met from 404 MiB of free cache: 1 - 256/404 of it is scattered.
    assert large.external_fragmentation_pct == round(100 * (1 - 256 / 404), 1)
    assert pools["small"].pending_free_bytes == 1 * MIB
    assert pools["small"].external_fragmentation_pct == 0.0  # one free block: not fragmented
    assert pools["large, private pool (1, 2)"].external_fragmentation_pct is None
    assert oom_job.devices[0].largest_free_block_bytes == 256 * MIB


def test_biggest_allocations_name_the_programs_own_lines(oom_job):
    biggest = oom_job.devices[0].largest_allocations
    assert [a.size_bytes for a in biggest] == [384 * MIB, 256 * MIB, 40 * MIB, 512]
    assert biggest[0].site == "scripts/train.py:95:optimizer_step"  # not torch/optim/adam.py
    assert biggest[1].site == "scripts/train.py:88:training_step"
    assert biggest[1].requested_bytes == ACTIVATIONS_REQUEST
    assert biggest[1].frames[0] == "modules/linear.py:125:forward"  # C++ and ceval frames dropped
    assert biggest[2].site is None and biggest[2].pool == "large, private pool (1, 2)"
    sites = {s.site: s for s in oom_job.devices[0].sites}
    assert sites["scripts/train.py:95:optimizer_step"].bytes == 384 * MIB
    assert sites["(no stack recorded)"].allocations == 1


def test_top_limits_the_lists():
    summary = summarize(finetune_oom_after_eval(), top=2)
    assert len(summary.devices[0].largest_allocations) == 2
    assert len(summary.devices[0].sites) == 2


def test_the_history_is_replayed_back_from_the_final_state(oom_job):
    trace = oom_job.devices[0].trace
    assert trace.events == 20
    assert trace.actions == {"alloc": 8, "free_completed": 3, "free_requested": 4, "oom": 1,
                             "segment_alloc": 4}
    line = trace.timeline
    # The history began on an empty allocator: replaying backwards must arrive at zero.
    assert (line.allocated_bytes[0], line.reserved_bytes[0]) == (0, 0)
    assert line.reserved_bytes[-1] == oom_job.devices[0].reserved_bytes
    assert line.allocated_bytes[-1] == oom_job.devices[0].requested_bytes
    assert trace.peak_allocated_bytes == GIB - 100  # before the two temporaries were freed
    assert trace.peak_reserved_bytes == oom_job.devices[0].reserved_bytes
    assert trace.span_s == 2.0 and line.time_s[-1] == 2.0
    (oom,) = trace.ooms
    assert (oom.request_bytes, oom.device_free_bytes) == (2 * GIB, 300 * MIB)
    assert oom.at is not None and oom.at.endswith("Z")


def test_a_ring_buffer_that_dropped_the_start_still_gives_true_levels():
    snap = finetune_oom_after_eval()
    snap["device_traces"][0] = snap["device_traces"][0][5:]  # the first 5 events were overwritten
    trace = summarize(snap).devices[0].trace
    # After event 5 the job held the segment and three allocations (1 GiB - 100 B requested).
    assert trace.timeline.reserved_bytes[0] == GIB
    assert trace.timeline.allocated_bytes[0] == GIB - 100


def test_expandable_segments_are_not_counted_as_split(oom_job):
    d1 = oom_job.devices[1]
    assert d1.expandable_segments == 1
    assert d1.free_bytes == 20 * MIB
    assert d1.inactive_split_bytes == 0 and d1.whole_free_segment_bytes == 0
    assert d1.pools[0].expandable
    assert d1.trace is None  # an empty trace list is no history


def test_the_settings_in_force_and_format_are_reported(oom_job):
    assert oom_job.format == "snapshot"
    assert oom_job.allocator_settings["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:512"
    assert oom_job.notes == []


def test_the_torch_2_0_layout_gives_the_same_figures():
    legacy = summarize(legacy_2_0_snapshot())
    modern = summarize(finetune_oom_after_eval())
    assert legacy.format == "legacy"
    for old, new in zip(legacy.devices, modern.devices, strict=True):
        assert old.requested_bytes == new.requested_bytes
        assert old.inactive_split_bytes == new.inactive_split_bytes
        assert [a.site for a in old.largest_allocations] == [
            a.site for a in new.largest_allocations]
    assert any("no allocation history" in n for n in legacy.notes)


def test_a_bare_segment_list_from_memory_snapshot_is_accepted():
    summary = summarize(finetune_oom_after_eval()["segments"])
    assert summary.format == "segments"
    assert summary.devices[0].reserved_bytes == GIB + 62 * MIB
    assert summary.allocator_settings is None
    assert "only the segment list" in summary.notes[0]


def test_an_empty_allocator():
    summary = summarize({"segments": [], "device_traces": []})
    assert summary.devices == []
    assert any("no segments" in n for n in summary.notes)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda s: s.pop("segments"), "no 'segments' key"),
        (lambda s: s.update(segments="all of them"), "segments: expected a list"),
        (lambda s: s["segments"][1].pop("total_size"), r"segments\[1\]: missing 'total_size'"),
        (lambda s: s["segments"][0]["blocks"][1].update(state="free"),
         r"segments\[0\].blocks\[1\].state: expected one of"),
        (lambda s: s["segments"][0]["blocks"][0].update(size="256MiB"),
         r"segments\[0\].blocks\[0\].size: expected an integer"),
        (lambda s: s["segments"][0]["blocks"].pop(), r"segments\[0\]: its blocks add up to"),
        (lambda s: s["device_traces"][0].append({"size": 1}), r"device_traces\[0\]\[20\].action"),
    ],
)
def test_a_damaged_snapshot_is_an_input_error_naming_the_place(damage, message):
    snap = copy.deepcopy(finetune_oom_after_eval())
    damage(snap)
    with pytest.raises(InputError, match=message):
        summarize(snap)


@pytest.mark.parametrize("data", [None, 42, "segments", b"\x00"])
def test_something_else_entirely_is_an_input_error(data):
    with pytest.raises(InputError, match="not a PyTorch memory snapshot"):
        summarize(data)


def test_allocation_site_falls_back_to_the_innermost_python_frame():
    torch_only = [{"filename": "/x/site-packages/torch/nn/functional.py", "line": 7, "name": "f"}]
    assert allocation_site(torch_only) == "nn/functional.py:7:f"
    cpp_only = [{"filename": "??", "line": 0, "name": "at::empty"}]
    assert allocation_site(cpp_only) == "??:0:at::empty"
    assert allocation_site([{"garbage": True}, "text"]) is None


def test_downsampling_keeps_the_peaks():
    n = 10_000
    values = [i % 100 for i in range(n)]
    values[5_555] = 10**9
    line = Timeline("2026-11-22T10:00:00.000Z", [i / 10 for i in range(n)], values, values)
    small = line.downsampled(500)
    assert len(small.time_s) == 500
    assert max(small.allocated_bytes) == 10**9
    assert small.time_s[-1] == line.time_s[-1]
    assert line.downsampled(n) is line
