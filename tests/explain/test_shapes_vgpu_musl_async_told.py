"""Shapes read since the nineteenth held-out set: a quote after "it fails and gives", how-to
pages in Indonesian and error pages that list dead ends, notebooks out of RAM told in titles,
nvidia-smi's lost device handle under a vGPU driver, nvidia-smi that cannot run in a musl
image, ComfyUI's warning that the card cannot do cuda-malloc, Fooocus as an application that
selects cudaMallocAsync, cuBLAS statuses printed as their sentences (llama.cpp's ggml), the
InfiniBand port's asynchronous error under NCCL, PyCUDA's driver calls out of memory and
TensorRT's CUDA initialisation failure 35, and a power supply told as the cause. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.model import Severity
from tests.explain.helpers import mib, text_incidents
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_a_quote_after_fails_and_gives_is_the_writers_and_keeps_its_sizes() -> None:
    found = root("oom_quoted_after_fails_and_gives.log")
    assert found.cls == "cuda-oom"
    assert found.numbers["requested_bytes"] == mib(40)


@pytest.mark.parametrize("name", [
    "device_assert_howto_id.log",
    "device_assert_error_page_dead_ends.log",
])
def test_guides_quote_without_failing(name: str) -> None:
    found = incidents(name)
    assert found, name  # the message is still read ...
    assert not [i for i in found if i.is_failure], [(i.cls, i.title) for i in found]


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("notebook_ram_crashed_title.log", "host-oom", "host-oom/notebook-session-ram"),
    ("notebook_crashes_after_all_ram_title.log", "host-oom", "host-oom/notebook-session-ram"),
    ("device_handle_vgpu_guest.log", "nvml-unavailable", "nvml-unavailable/guest-device-handle"),
    ("smi_cannot_execute_musl_image.log", "nvml-unavailable",
     "nvml-unavailable/smi-cannot-execute"),
    ("async_card_warning_in_report.log", "alloc-conf", "alloc-conf/async-card-warning"),
    ("async_operation_unsupported_fooocus.log", "alloc-conf",
     "alloc-conf/async-operation-unsupported"),
    ("ggml_cublas_status_sentence.log", "cublas-failure", "cublas-failure/status-sentence"),
    ("nccl_ib_async_port_error.log", "nccl", "nccl/network"),
    ("pycuda_driver_call_oom.log", "cuda-oom", "cuda-oom/cuda-error"),
    ("tensorrt_init_failure_35.log", "driver-mismatch", "driver-mismatch/insufficient-driver"),
    ("power_supply_told_cause.log", "gpu-hardware", "gpu-hardware/power-supply-told"),
])
def test_root_cause(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)


def test_fooocus_is_named_as_the_application_that_selects_the_backend() -> None:
    found = root("async_operation_unsupported_fooocus.log")
    assert "Fooocus selects it by default" in found.explanation


def test_the_vgpu_device_handle_keeps_its_slot() -> None:
    assert root("device_handle_vgpu_guest.log").numbers["pci_bus_id"] == "0000:06:00.0"


def test_the_card_warning_in_a_plain_log_stays_a_warning(tmp_path) -> None:
    found = text_incidents(tmp_path, "Set vram state to: NORMAL_VRAM\nWARNING: this card most "
                           "likely does not support cuda-malloc, if you get \"CUDA error\" "
                           "please run with: --disable-cuda-malloc\nStarting server\n",
                           "server.log")
    assert [i.severity for i in found] == [Severity.WARNING]


def test_the_status_sentence_is_named() -> None:
    found = root("ggml_cublas_status_sentence.log")
    assert found.numbers["status"] == "CUBLAS_STATUS_EXECUTION_FAILED"
    assert found.diagnosis == "execution"


def test_a_port_error_counts_and_a_port_back_up_is_no_failure() -> None:
    found = root("nccl_ib_async_port_error.log")
    assert (found.count, found.numbers["async_event"]) == (2, "port error")


@pytest.mark.parametrize("line", [
    "pycuda._driver.MemoryError: cuMemHostAlloc failed: out of memory",
    "node07:22871:23099 [3] NCCL WARN NET/IB : Got async event : port active",
    "[runner] CUDA error: an illegal memory access was encountered",
])
def test_lines_of_other_kinds_are_not_read_as_these(tmp_path, line: str) -> None:
    found = text_incidents(tmp_path, line + "\n")
    assert not [i for i in found if i.signature in (
        "cuda-oom/cuda-error", "nccl/network", "cublas-failure/status-sentence")]


@pytest.mark.parametrize("line", [
    "Random reboots under load are often caused by an undersized PSU.",
    "If it is a PSU issue, the machine turns off without any log.",
    "Check whether your power supply is the problem with a second unit.",
    "You could have a PSU problem; what is its rating?",
])
def test_power_supplies_named_in_advice_or_in_general_are_no_failure(tmp_path, line: str) -> None:
    found = text_incidents(tmp_path, line + "\n", "answer.log")
    assert not [i for i in found if i.is_failure], [(i.signature, i.title) for i in found]
