"""Out-of-memory lines of more programs: Dask's nanny restarting a worker over its memory
budget, SageMaker's ExitCode 137 under its pointer to a troubleshooting guide, ONNX Runtime's
and LightGBM's CUDA allocation failures. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from tests.explain.helpers import shape_root as root


def test_dasks_nanny_restarting_a_worker_over_its_memory_budget() -> None:
    found = root("dask_nanny_restarts_worker.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/dask-nanny-restart")
    assert 4 in found.line_numbers
    assert "--memory-limit" in found.remedy


def test_sagemakers_exit_code_137_is_no_explainer_for_its_guide_pointer() -> None:
    found = root("sagemaker_script_exitcode_137.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/sigkill")
    assert found.severity.name == "ERROR"
    assert not found.title.startswith("Quoted")


def test_onnx_runtimes_cuda_failure_2_in_the_middle_of_a_log() -> None:
    found = root("onnxruntime_cuda_failure_2_mid_log.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/cuda-error")
    assert found.line_numbers == [7]


def test_lightgbms_cuda_out_of_memory() -> None:
    found = root("lightgbm_cuda_out_of_memory.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/cuda-error")
    assert found.line_numbers[0] == 4
