"""Shapes read since the eighteenth held-out set: cuDNN's plan warning wrapped by a terminal
under a heading that names its status, how-to pages in Romanian and Russian, nvidia-smi in a
virtual machine, machines that restart under load told in titles, messages printed without
"error" (a miner's "no kernel image"), titles cut inside a kernel assertion, a collective
timeout, a notebook out of RAM, expandable segments told to break a program, a request for an
operation cudaMallocAsync lacks, and PaddlePaddle's cuBLAS status by number. Synthetic fixtures
in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize("name", [
    # wrapped over lines, the warning's status line alone; its heading restates it
    "cudnn_plan_warning_wrapped_heading.log",
    # guides that quote the messages they explain
    "device_assert_howto_ro.log",
    "nvidia_smi_failed_manual_ru.log",
])
def test_no_failure_is_raised(name: str) -> None:
    found = incidents(name)
    assert found, name  # the message is still read ...
    assert not [i for i in found if i.is_failure], [(i.cls, i.title) for i in found]


def test_the_wrapped_plan_warning_is_the_warning() -> None:
    found = incidents("cudnn_plan_warning_wrapped_heading.log")
    assert {i.signature for i in found} == {"cudnn-failure/plan-rejected", "cudnn-failure/status"}
    plan = next(i for i in found if i.signature == "cudnn-failure/plan-rejected")
    assert plan.numbers["status"] == "CUDNN_STATUS_NOT_SUPPORTED"


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("no_devices_found_title_vm.log", "nvml-unavailable", "nvml-unavailable/no-devices-found"),
    ("machine_restarts_whenever_training_title.log", "gpu-hardware",
     "gpu-hardware/power-loss-told"),
    ("training_reboots_server_title.log", "gpu-hardware", "gpu-hardware/power-loss-told"),
    ("miner_no_kernel_image_without_error.log", "driver-mismatch",
     "driver-mismatch/no-kernel-image"),
    ("kernel_assertion_title_cut.log", "device-assert", "device-assert/kernel-assertion"),
    ("collective_operation_timeout_title.log", "nccl", "nccl/watchdog-timeout"),
    ("notebook_session_keeps_crashing_ram_title.log", "host-oom",
     "host-oom/notebook-session-ram"),
    ("expandable_segments_fails_with_title.log", "alloc-conf", "alloc-conf/expandable-told"),
    ("expandable_segments_doesnt_work_when_set.log", "alloc-conf",
     "alloc-conf/expandable-told"),
    ("async_feature_request_other_order_title.log", "alloc-conf",
     "alloc-conf/async-unsupported"),
    ("paddle_cublas_error_number.log", "cublas-failure", "cublas-failure/status-code"),
])
def test_root_cause(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)


def test_the_async_feature_is_named() -> None:
    found = root("async_feature_request_other_order_title.log")
    assert found.numbers["feature"] == "checkPoolLiveAllocations"


def test_paddles_cublas_number_is_named() -> None:
    assert root("paddle_cublas_error_number.log").numbers["status"] == (
        "CUBLAS_STATUS_INVALID_VALUE")


@pytest.mark.parametrize("line", [
    # a bare-metal GPU is device 00 behind its port: that stays a GPU lost from the bus
    "Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error",
    "Unable to determine the device handle for GPU 0000:00:05.0: GPU is lost",
])
def test_bare_metal_device_handles_stay_hardware(line: str) -> None:
    from gpu_audit.explain import classify_text
    found = classify_text(line + "\n", torch_version="2.3.1")
    assert [i.cls for i in found] == ["gpu-hardware"]


def test_a_guest_device_handle_is_the_driver_in_the_vm() -> None:
    from gpu_audit.explain import classify_text
    found = classify_text("$ nvidia-smi\nUnable to determine the device handle for GPU "
                          "0000:02:01.0: Unknown Error\n", torch_version="2.3.1")
    assert [(i.cls, i.signature) for i in found] == [
        ("nvml-unavailable", "nvml-unavailable/guest-device-handle")]
    assert found[0].numbers["pci_bus_id"] == "0000:02:01.0"
