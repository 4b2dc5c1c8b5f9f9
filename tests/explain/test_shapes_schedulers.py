"""Failures as batch schedulers, notebooks and TensorFlow print them: PBS/Torque, Moab and LSF
killing a job over its memory request, a notebook runtime out of host RAM, TensorFlow 1.0's
allocator out of memory, TensorFlow's out-of-memory without its status, and NCCL's internal
error as TensorFlow's status of its collective ops. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import gib, mib
from tests.explain.helpers import shape_root as root

# --- a batch scheduler or a notebook runtime over its host memory --------------------------------


@pytest.mark.parametrize(("name", "used", "limit"), [
    ("pbs_job_killed_mem_exceeded.log", gib(20), gib(16)),  # Torque's node daemon, in kb
    ("moab_mem_usage_hard_limit.log", gib(6), gib(4)),  # Moab's mail, in MB
    ("lsf_term_memlimit.log", None, None),  # LSF's exit reason: no figures
])
def test_a_batch_scheduler_killing_a_job_over_its_memory_is_a_host_oom(
        name: str, used: int | None, limit: int | None) -> None:
    killed = root(name)
    assert (killed.cls, killed.signature) == ("host-oom", "host-oom/batch-memory-limit")
    assert killed.numbers.get("used_bytes") == used
    assert killed.numbers.get("limit_bytes") == limit


def test_a_notebook_session_out_of_ram_is_a_host_oom() -> None:
    crashed = root("notebook_session_crashed_ram.log")
    assert (crashed.cls, crashed.signature) == ("host-oom", "host-oom/notebook-session-ram")
    assert "host memory, not GPU memory" in crashed.explanation


def test_a_scheduler_limit_named_in_passing_is_not_a_kill() -> None:
    assert classify_text("The MEM usage of each job is shown in the PBS: job killed column.\n") \
        == []


# --- TensorFlow's out-of-memory, without its status or its device -------------------------------

def test_tensorflow_1_allocator_pointing_at_its_dump_is_a_cuda_oom() -> None:
    oom = root("tf1_bfc_ran_out_see_logs.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/tensorflow")
    assert oom.numbers["requested_bytes"] == mib(64)


def test_tensorflow_1_allocator_retrying_with_less_is_no_failure() -> None:
    found = classify_text(
        "W tensorflow/core/common_runtime/bfc_allocator.cc:217] Ran out of memory trying to "
        "allocate 2.10GiB. The caller indicates that this is not a failure, but may mean that "
        "there could be performance gains if more memory is available.\n")
    assert all(not i.is_failure for i in found)


def test_tensorflow_oom_when_allocating_without_its_status_is_a_cuda_oom() -> None:
    oom = root("tf_oom_when_allocating_without_status.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/tensorflow")
    assert oom.numbers["gpu_index"] == 0
    assert oom.numbers["requested_bytes"] == 8 * 64 * 128**3 * 4


# --- NCCL's internal error under TensorFlow -----------------------------------------------------

def test_tensorflow_status_internal_error_of_an_nccl_op_is_nccl() -> None:
    failed = root("tf_nccl_allreduce_internal_error.log")
    assert (failed.cls, failed.signature) == ("nccl", "nccl/error-text")
    assert failed.numbers["kind"] == "internal error"


def test_nccl_internal_error_with_its_plea_is_nccl() -> None:
    found = classify_text("RuntimeError: internal error - please report this issue to the NCCL "
                          "developers\n")
    assert [(i.cls, i.role) for i in found] == [("nccl", "root-cause")]


def test_internal_error_in_other_words_is_not_nccl() -> None:
    # (TensorFlow's copy to a GPU tensor its allocator could not create: its out-of-memory)
    assert [i.cls for i in classify_text("Internal: Dst tensor is not initialized.\n")] == [
        "cuda-oom"]
    assert classify_text("The tool reported an internal error, so we rebuilt it.\n") == []
