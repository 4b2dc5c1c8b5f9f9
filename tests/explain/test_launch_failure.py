"""CUDA's unspecified launch failure (719) is a kernel's exception on the device, the program's
fault like an illegal address; an Xid beside it, or the writer's finding that the card was at
fault, makes the hardware the root cause. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_a_launch_failure_alone_is_a_kernel_fault() -> None:
    fault = root("launch_failure_719_paddle_style.log")
    assert (fault.cls, fault.signature) == ("illegal-memory-access",
                                            "illegal-memory-access/launch-failure")
    assert "CUDA_LAUNCH_BLOCKING=1" in fault.remedy


def test_every_spelling_of_719_is_the_same_signature() -> None:
    for line in ("RuntimeError: CUDA error: unspecified launch failure",
                 "tensorflow/stream_executor/cuda/cuda_driver.cc:1032] failed to synchronize the "
                 "stop event: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",
                 "cudaErrorLaunchFailure"):
        (fault,) = classify_text(line, torch_version=None)
        assert fault.signature == "illegal-memory-access/launch-failure"


def test_an_xid_beside_a_launch_failure_stays_the_root_cause() -> None:
    xid, fault = incidents("launch_failure_after_xid109.log")
    assert (xid.cls, xid.numbers["xid"], xid.role) == ("gpu-hardware", 109, "root-cause")
    assert (fault.cls, fault.role) == ("illegal-memory-access", "consequence")


def test_a_card_found_at_fault_is_the_root_cause() -> None:
    for name in ("launch_failure_card_swap_told.log", "launch_failure_card_swap_told_zh.log"):
        told, fault = incidents(name)
        assert (told.signature, told.role) == ("gpu-hardware/card-swap-told", "root-cause")
        assert fault.signature == "illegal-memory-access/launch-failure"


def test_advice_to_replace_a_card_is_no_finding() -> None:
    assert incidents("replace_the_gpu_advice.log") == []
