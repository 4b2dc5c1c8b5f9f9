"""Shapes read since the 53rd and 54th held-out sets: Horovod's stall inspector (with the ranks
the others wait for, and wrapped mid-word in the middle of a long log), ROCm's out-of-memory
status, and a guide titled with how to prevent the failure. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_horovod_s_stall_names_the_ranks_the_others_wait_for() -> None:
    found = root("horovod_stall_missing_ranks.log")
    assert found.signature == "nccl/horovod-stall"
    assert found.numbers["missing_ranks"] == [7]
    assert "rank 7 never joined" in found.explanation


def test_horovod_s_stall_wrapped_mid_word_in_a_long_log() -> None:
    assert root("horovod_stall_wrapped_mid_log.log").signature == "nccl/horovod-stall"


def test_rocm_s_out_of_memory_status_gives_its_size() -> None:
    found = root("rocm_tensorflow_hip_oom.log")
    assert (found.signature, found.numbers["requested_bytes"]) == ("cuda-oom/cuda-error",
                                                                   3304535552)


def test_a_guide_titled_with_how_to_prevent_it_raises_nothing() -> None:
    assert not [i for i in incidents("oom_killer_guide_prevent_it.log") if i.is_failure]
