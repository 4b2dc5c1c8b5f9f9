"""cuDNN's statuses are their own class, with advice that tells memory from a mismatched install."""

from __future__ import annotations

from gpu_audit.explain import CLASSES, classify_text


def _only(text: str):
    incidents = [i for i in classify_text(text, torch_version=None) if i.is_failure]
    assert len(incidents) == 1, incidents
    return incidents[0]


def test_cudnn_failure_is_a_class_of_its_own() -> None:
    assert "cudnn-failure" in CLASSES
    incident = _only("RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR\n")
    assert incident.cls == "cudnn-failure" and incident.numbers["status"] == (
        "CUDNN_STATUS_INTERNAL_ERROR")


def test_a_status_without_a_cause_says_how_to_tell_memory_from_a_mismatch() -> None:
    incident = _only("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED\n")
    assert incident.diagnosis == "memory-or-mismatch"
    assert "memory" in incident.explanation and "driver" in incident.explanation
    assert "batch of 1" in incident.remedy and "450.80.02" in incident.remedy
    assert "torch.backends.cudnn.version()" in incident.remedy


def test_the_status_a_check_wanted_is_not_the_one_it_got() -> None:
    text = ("F0301 09:12:44.120000  4711 cudnn_conv_layer.cu:28] Check failed: status == "
            "CUDNN_STATUS_SUCCESS (8 vs. 0)  CUDNN_STATUS_EXECUTION_FAILED\n"
            "*** Check failure stack trace: ***\n")
    incident = _only(text)
    assert incident.numbers["status"] == "CUDNN_STATUS_EXECUTION_FAILED"
    assert incident.diagnosis == "execution"


def test_a_workspace_that_does_not_fit_is_out_of_memory() -> None:
    incident = _only("RuntimeError: Unable to find a valid cuDNN algorithm to run convolution\n")
    assert incident.cls == "cudnn-failure" and incident.diagnosis == "out-of-memory"


def test_cublas_statuses_stay_cublas() -> None:
    incident = _only("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
                     "`cublasSgemm( handle, opa, opb, m, n, k)`\n")
    assert incident.cls == "cublas-failure"
