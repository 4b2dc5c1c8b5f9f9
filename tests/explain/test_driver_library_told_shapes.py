"""Driver, cuDNN, allocator-backend, NVML, NCCL and device-assert failures in the shapes they
reach a thread: a title cut after "available", CUDA's "invalid device function" after a kernel's
name, ONNX Runtime's checks of a cuDNN call, nvidia-smi's missing command retold, a title in
Chinese that runs into the English message, the cuda-malloc option told to break a program, and a
pull request opened to debug a failure whose replies paste it. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "signature"), [
    # a title that keeps the message up to "available"
    ("title_no_kernel_image_cut.log", "driver-mismatch/no-kernel-image"),
    # a self-built program's kernels, each followed by CUDA's words
    ("selfbuilt_invalid_device_function.log", "driver-mismatch/invalid-device-function"),
    # ONNX Runtime's kernel status naming the cuDNN call, and its check's number in a title
    ("onnxruntime_cudnn_error_executing.log", "cudnn-failure/status"),
    ("title_cudnn_failure_number.log", "cudnn-failure/status"),
    # an application's option for the async backend, told to break an extension
    ("title_cuda_malloc_option_breaks_extension.log", "alloc-conf/async-fails-told"),
    # a Chinese title with the message inside it, no space on either side
    ("title_cjk_device_assert.log", "device-assert/triggered"),
    # a pull request's title that says it is there to debug; a reply pastes the failure
    ("pull_request_debug_title_pasted_nccl.log", "nccl/error"),
])
def test_shapes_name_their_failure(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_cudnn_numbers_read_as_statuses() -> None:
    assert root("title_cudnn_failure_number.log").numbers["status"] == (
        "CUDNN_STATUS_INTERNAL_ERROR")
    assert root("onnxruntime_cudnn_error_executing.log").numbers["call"] == (
        "cudnnConvolutionForward")


@pytest.mark.parametrize(("line", "status"), [
    # ONNX Runtime's check, whole, with cuDNN 9's numbering
    ("CUDNN failure 5003: CUDNN_STATUS_EXECUTION_FAILED_CUDART ; GPU=0 ; hostname=box ; "
     "file=conv.cc ; line=410 ; expr=cudnnConvolutionForward(...);",
     "CUDNN_STATUS_EXECUTION_FAILED_CUDART"),
    # ... its number alone, as a title or a cut paste keeps it (cuDNN 8's and 9's numbering)
    ("Status Message: CUDNN failure 3 ; GPU=0", "CUDNN_STATUS_BAD_PARAM"),
    ("Error : CUDNN failure 3000", "CUDNN_STATUS_NOT_SUPPORTED"),
    # CNTK's
    ("cuDNN failure 9: CUDNN_STATUS_NOT_SUPPORTED ; GPU=0 ; hostname=box ; expr=err",
     "CUDNN_STATUS_NOT_SUPPORTED"),
])
def test_cudnn_failure_by_number(line: str, status: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert failure.signature == "cudnn-failure/status"
    assert failure.numbers["status"] == status


@pytest.mark.parametrize("line", [
    "CUDNN failure 4.5 ms slower than the CPU path",  # a figure, no status
    "Error: no kernel image is available or the driver is too old, check both",  # mid-sentence
])
def test_other_numbers_and_cut_words_are_not_read(line: str) -> None:
    assert not [i for i in classify_text(line, torch_version=None)
                if i.cls in ("cudnn-failure", "driver-mismatch")]


@pytest.mark.parametrize(("line", "found"), [
    ("After the kernel update nvidia-smi shows command not found.", True),
    ("Running it again, nvidia-smi gives me 'command not found' on the node.", True),
    ("If nvidia-smi shows command not found, install the driver first.", False),
])
def test_smi_missing_retold(line: str, found: bool) -> None:
    ids = [i.signature for i in classify_text(line, torch_version=None)]
    assert ("nvml-unavailable/smi-missing" in ids) is found


@pytest.mark.parametrize(("line", "found"), [
    ("Since I launch with --cuda-malloc the face-swap extension stopped working.", True),
    ("cudaMallocAsync breaks the tiled upscaler on my 1070.", True),
    ("cudaMallocAsync not working is a known problem on the GTX 950M.", True),
    # (the option that turns the backend off, told as the cure: the backend was at fault)
    ("Launching with --disable-cuda-malloc fixed it, before that it crashed.", True),
    # (... but that option named beside a crash is no telling of the backend's)
    ("Even when launching with --disable-cuda-malloc it crashed.", False),
    ("If --cuda-malloc breaks something, turn it off.", False),
])
def test_async_backend_told(line: str, found: bool) -> None:
    ids = [i.signature for i in classify_text(line, torch_version=None)]
    assert ("alloc-conf/async-fails-told" in ids) is found


def test_definition_title_in_korean_is_no_report() -> None:
    assert not [i for i in shape_incidents("title_cjk_definition_question_ko.log")
                if i.role == "root-cause"]


@pytest.mark.parametrize(("line", "signature"), [
    ("WARNING: GPU acceleration is off; make sure the NVIDIA driver is installed: nvidia-smi "
     "command failed", "nvml-unavailable/smi-fails-told"),
    ("Thanks for the pointers. Looks like there is no `nvidia-smi` inside WSL2 on my box.",
     "nvml-unavailable/smi-missing"),
    ("CUDA seems fine now. It seems there's no nvidia-smi in this container.",
     "nvml-unavailable/smi-missing"),
])
def test_an_installers_check_and_a_telling_of_nvidia_smi_absent(line: str,
                                                                 signature: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert (failure.signature, failure.is_failure) == (signature, True)


@pytest.mark.parametrize("line", [
    "If there is no nvidia-smi in your container, the runtime did not mount the driver.",
    "Check whether there is no nvidia-smi in the image.",
    "Also: there is no `nvidia-smi` for macOS, so the script reads the sensors another way.",
])
def test_nvidia_smi_absent_as_a_condition_is_no_telling(line: str) -> None:
    assert [i for i in classify_text(line, torch_version=None) if i.is_failure] == []
