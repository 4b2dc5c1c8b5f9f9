"""cuBLAS statuses printed as numbers or in words, cuBLAS failures a thread says were memory,
TensorRT's out-of-memory and the CUDA driver's. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.knowledge.cublas import cublas_status_name
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "status", "diagnosis"), [
    ("cublas_check_failed_status_number.log", "CUBLAS_STATUS_EXECUTION_FAILED", "execution"),
    ("cublas_api_failed_status_in_fence.log", "CUBLAS_STATUS_NOT_SUPPORTED", "unsupported"),
])
def test_a_cublas_status_printed_as_its_number(name: str, status: str, diagnosis: str) -> None:
    failure = root(name)
    assert (failure.cls, failure.signature) == ("cublas-failure", "cublas-failure/status-code")
    assert failure.numbers["status"] == status and failure.diagnosis == diagnosis


def test_status_numbers_are_cublas_own() -> None:
    assert cublas_status_name(1) == "CUBLAS_STATUS_NOT_INITIALIZED"
    assert cublas_status_name(3) == "CUBLAS_STATUS_ALLOC_FAILED"
    assert cublas_status_name(2) is None


def test_a_check_of_success_is_not_read_as_the_success_status() -> None:
    (failure,) = classify_text("stream_gpu-inl.h:115: Check failed: err == "
                               "CUBLAS_STATUS_SUCCESS (1 vs. 0)", torch_version=None)
    assert failure.numbers["status"] == "CUBLAS_STATUS_NOT_INITIALIZED"
    assert failure.diagnosis == "out-of-memory"


@pytest.mark.parametrize("line", ["# Create cublas handle failed",
                                  "RuntimeError: CUBLAS initialization failed"])
def test_a_cublas_handle_that_could_not_be_created(line: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert failure.signature == "cublas-failure/handle-failed"
    assert failure.diagnosis == "out-of-memory"


def test_a_cublas_failure_the_thread_calls_a_memory_problem_is_an_out_of_memory() -> None:
    oom, cublas = incidents("cublas_init_failed_told_memory.log")
    assert (oom.cls, oom.role) == ("cuda-oom", "root-cause")
    assert oom.title == "CUDA out of memory, reported as a cuBLAS failure"
    assert (cublas.cls, cublas.role) == ("cublas-failure", "consequence")


def test_tensorrts_out_of_memory() -> None:
    oom = root("tensorrt_builder_out_of_memory.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/tensorrt")
    assert "workspace" in oom.remedy


def test_the_cuda_drivers_out_of_memory_is_an_out_of_memory() -> None:
    oom = root("cuda_driver_oom_cache_setup.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/driver-api")
    assert "expandable_segments:False" in oom.remedy


def test_other_driver_errors_stay_the_expandable_segments_platform_problem() -> None:
    (failure,) = classify_text("RuntimeError: CUDA driver error: operation not supported",
                               torch_version=None)
    assert failure.signature == "alloc-conf/driver-vmm"
