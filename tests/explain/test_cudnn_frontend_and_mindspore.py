"""cuDNN's frontend finding no execution plan for the graph PyTorch built (its cuDNN attention),
MindSpore's device memory pool and PyTorch's MPS backend running out. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_root as root


def test_cudnn_frontend_without_a_plan_is_a_cudnn_failure() -> None:
    found = root("cudnn_frontend_no_plan_attention.log")
    assert (found.cls, found.signature) == ("cudnn-failure", "cudnn-failure/frontend-no-plan")
    assert found.line_numbers == [10]
    assert "enable_cudnn_sdp(False)" in found.remedy


def test_the_plan_warning_stays_context_beside_it() -> None:
    # one plan turned down is a warning; no plan for the graph is the failure
    text = ("UserWarning: Plan failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_"
            "DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED"
            " (Triggered internally at Conv_v8.cpp:919.)\nstep 3 loss 0.41\n")
    assert not [i for i in classify_text(text, torch_version="2.5.1") if i.is_failure]


def test_mindspores_device_memory_pool_out_of_memory() -> None:
    found = root("mindspore_device_memory_not_enough.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert found.title == "GPU out of memory (MindSpore)"
    assert found.numbers["requested_bytes"] == 1024**3  # "alloc size: 1073741824B"
    assert found.line_numbers == [2, 6]  # the pool's line and the kernel launch's, one incident


def test_pytorchs_mps_backend_out_of_memory() -> None:
    # an Apple GPU's memory: the request in units of 1024 written "MB"; no NVIDIA scan advised
    found = root("mps_backend_out_of_memory.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert found.title == "GPU out of memory (PyTorch on MPS)"
    assert found.numbers["requested_bytes"] == 256 * 1024**2
    assert "gpu-audit scan" not in found.remedy
    assert "PYTORCH_MPS_HIGH_WATERMARK_RATIO" in found.remedy
