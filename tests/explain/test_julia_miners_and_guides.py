"""Julia's CUDA.jl in its own words (a kernel's exception, CUBLASError, a driver no toolkit
supports, a memory pool fixed at precompile time), a miner's CUDA error naming its source, a
program stopped at its temperature limit and a PCIe link's cure told by the writer, a told
out-of-memory ranked after the message that has its numbers, and guides and documentation pages
kept quiet. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_julia_kernel_bounds_error_is_a_device_assert() -> None:
    failure = root("julia_kernel_bounds_error.log")
    assert (failure.cls, failure.signature) == ("device-assert",
                                                "device-assert/julia-kernel-exception")
    assert failure.numbers["exception"] == "BoundsError"
    assert failure.numbers["thread"] == "257, 1, 1"
    assert "BoundsError" in failure.explanation and "-g2" in failure.remedy


def test_julia_kernel_exception_without_its_type() -> None:
    failure = root("julia_kernel_exception_unnamed.log")
    assert failure.signature == "device-assert/julia-kernel-exception"
    assert "exception" not in failure.numbers
    assert len([i for i in incidents("julia_kernel_exception_unnamed.log")
                if i.is_failure]) == 1


@pytest.mark.parametrize(("name", "status"), [
    ("julia_cublas_error_sentence_title.log", "CUBLAS_STATUS_EXECUTION_FAILED"),
    ("julia_cublas_error_debug_between.log", None),
])
def test_julia_cublas_error(name: str, status: str | None) -> None:
    failure = root(name)
    assert (failure.cls, failure.signature) == ("cublas-failure", "cublas-failure/julia-error")
    assert failure.numbers.get("status") == status


def test_julia_cublas_error_with_its_status_name() -> None:
    (failure,) = classify_text("ERROR: CUSOLVERError: (code 7, CUSOLVER_STATUS_INTERNAL_ERROR)",
                               torch_version=None)
    assert failure.numbers["status"] == "CUSOLVER_STATUS_INTERNAL_ERROR"


def test_python_cublas_error_is_read_as_before() -> None:
    (failure,) = classify_text("cupy.cuda.cublas.CUBLASError: CUBLAS_STATUS_EXECUTION_FAILED",
                               torch_version=None)
    assert failure.signature == "cublas-failure/cublas-status"


def test_julia_driver_no_toolkit_supports() -> None:
    failure = root("julia_driver_not_compatible_any_toolkit.log")
    assert (failure.cls, failure.signature) == ("driver-mismatch",
                                                "driver-mismatch/driver-older-than-cuda")
    assert failure.numbers["driver_cuda_version"] == "9.2"


def test_julia_driver_below_the_packages_minimum() -> None:
    (failure,) = classify_text("┌ Error: CUDA.jl only supports NVIDIA drivers for CUDA 11.0 or "
                               "higher (yours is for CUDA 10.1)", torch_version=None)
    assert failure.numbers == {"required_cuda": "11.0", "driver_cuda_version": "10.1"}


def test_julia_memory_pool_fixed_at_precompile_time() -> None:
    failure = root("julia_memory_pool_precompiled.log")
    assert (failure.cls, failure.signature) == ("alloc-conf", "alloc-conf/julia-memory-pool")
    assert failure.numbers == {"pool": "binned", "precompiled_pool": "simple"}
    assert "JULIA_CUDA_MEMORY_POOL=simple" in failure.remedy


def test_errors_told_due_to_the_gpu_running_out_of_memory_explain_a_causeless_status() -> None:
    # (CUDNN_STATUS_ALLOC_FAILED is an out-of-memory on its own; a status that names no cause
    # is one only when the text says so)
    failure = root("julia_cudnn_status_told_oom.log")
    assert (failure.cls, failure.signature) == ("cuda-oom", "cuda-oom/told-cause")


@pytest.mark.parametrize("text", [
    "Training can hit errors due to the GPU running out of memory.",
    "If you see errors due to the GPU running out of memory, lower the batch.",
])
def test_the_cause_in_general_is_no_telling(text: str) -> None:
    assert classify_text(text, torch_version=None) == []


def test_a_told_oom_ranks_after_the_message_with_its_numbers() -> None:
    failure = root("tf_title_oom_bytes_told_below.log")
    assert failure.signature == "cuda-oom/cuda-error"
    assert failure.numbers["requested_bytes"] == 1610612736


def test_miner_cuda_error_naming_its_source() -> None:
    assert root("miner_cuda_error_in_source_line_oom.log").cls == "cuda-oom"
    (failure,) = classify_text("CUDA error in CudaProgram.cu line 212 : out of memory",
                               torch_version=None)
    assert failure.signature == "cuda-oom/cuda-error"


@pytest.mark.parametrize("name", ["miner_temperature_limit_quits_told.log",
                                  "miner_temperature_limit_reached_title.log"])
def test_program_stopped_at_its_temperature_limit_told(name: str) -> None:
    failure = root(name)
    assert (failure.cls, failure.signature) == ("gpu-hardware", "gpu-hardware/overheat-told")


def test_temperature_limit_in_a_condition_is_no_telling() -> None:
    assert classify_text("If your GPU reaches the temperature limit, the cracker aborts.",
                         torch_version=None) == []


def test_pcie_link_slowed_cure_told() -> None:
    failure = root("riser_pcie_gen_cure_told.log")
    assert (failure.cls, failure.signature) == ("gpu-hardware",
                                                "gpu-hardware/pcie-link-cure-told")
    assert classify_text("If you set the slot to gen2 it usually fixed it",
                         torch_version=None) == []


@pytest.mark.parametrize("name", ["guide_how_to_without_crashing.log",
                                  "docs_page_permalink_headings.log"])
def test_guides_and_documentation_pages_stay_quiet(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure]


def test_julia_out_of_gpu_memory_with_its_usage_lines() -> None:
    failure = root("julia_out_of_gpu_memory_pool.log")
    assert (failure.cls, failure.signature) == ("cuda-oom", "cuda-oom/julia-out-of-gpu-memory")
    assert failure.numbers["requested_bytes"] == 1610612736
    assert failure.numbers["capacity_bytes"] == 8 * 1024 ** 3
    assert failure.numbers["reserved_bytes"] == int(6.5 * 1024 ** 3)
    assert "CUDA.reclaim()" in failure.remedy


def test_julia_memory_status_of_a_healthy_run_is_quiet() -> None:
    assert classify_text("Effective GPU memory usage: 24.53% (1.962 GiB/8.000 GiB)\n"
                         "Memory pool usage: 1.200 GiB (1.500 GiB reserved)",
                         torch_version=None) == []
