"""What torch 2.11.0 (CUDA 13.0, NCCL 2.28.9) printed on an NVIDIA H200, read back.

The fixtures are the harness's own logs from that machine (bench/gpu/run.sh, phase truth), with
its paths made neutral: a real OOM twice under the monitor, two NCCL ranks on one GPU, and the
OOM again with a failing NVML in front (the fake library of the test suite), whose assert came
from ``DriverAPI::get()->nvmlInit_v2_()`` at ``CUDACachingAllocator.cpp:1135``.
"""

from __future__ import annotations

from gpu_audit.model import Severity
from tests.explain.helpers import fixture_incidents, gib, mib


def root(name: str):
    incidents = fixture_incidents(name, torch_version="2.11.0")
    assert incidents, name
    return incidents[0], incidents


def test_the_real_oom_is_read_with_its_numbers() -> None:
    oom, _ = root("torch211_h200_oom_twice.log")
    assert (oom.cls, oom.signature, oom.severity) == (
        "cuda-oom", "cuda-oom/caching-allocator", Severity.ERROR)
    assert oom.numbers["requested_bytes"] == gib(1)
    assert abs(oom.numbers["capacity_bytes"] - gib(139.80)) < mib(10)
    assert abs(oom.numbers["free_bytes"] - mib(293.12)) < mib(0.01)
    assert oom.numbers["reserved_bytes"] == oom.numbers["allocated_bytes"] == gib(139)


def test_two_ranks_on_one_gpu_are_named() -> None:
    first, incidents = root("torch211_nccl_duplicate_gpu_rank0.log")
    assert (first.cls, first.signature) == ("nccl", "nccl/duplicate-gpu")
    assert any(i.numbers.get("nccl_version") == "2.28.9" for i in incidents)


def test_the_nvml_init_assert_of_2_11_is_an_oom_behind_nvml() -> None:
    oom, incidents = root("torch211_nvml_init_assert_oom.log")
    assert (oom.cls, oom.signature, oom.severity) == (
        "nvml-assert-oom", "nvml-assert-oom/caching-allocator", Severity.ERROR)
    assert (oom.numbers["nvml_call"], oom.numbers["source_line"]) == ("nvmlInit_v2", 1135)
    # torch's "Can't initialize NVML" warning stays context, after the root.
    assert [i.severity for i in incidents[1:]] == [Severity.WARNING]
