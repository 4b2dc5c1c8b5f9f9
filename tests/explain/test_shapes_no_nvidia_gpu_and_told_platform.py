"""Shapes read since the twenty-sixth held-out set: CUDA asked for on a machine its owner says
has no NVIDIA GPU (a warning, not a driver failure), no device because the job's
CUDA_VISIBLE_DEVICES hides the GPUs, "No kernel image ..." capitalised, an Xid a tool reports,
an uncorrectable ECC error told as what made a GPU unusable, a driver told too old as the cause,
nvidia-smi and NVML's library told not found, a sudden reboot under training and a card's
overclock told as the cause. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("no_kernel_image_capitalised_title.log", "driver-mismatch", "driver-mismatch/no-kernel-image"),
    ("no_driver_on_gpu_server.log", "driver-mismatch", "driver-mismatch/no-driver"),
    ("xid_reported_by_device_plugin.log", "gpu-hardware", "gpu-hardware/xid-mention"),
    ("uncorrectable_ecc_told_then_oom.log", "gpu-hardware", "gpu-hardware/uncorrectable-ecc-told"),
    ("driver_too_old_told_cause.log", "driver-mismatch", "driver-mismatch/driver-older-than-cuda"),
    ("smi_device_not_found_retold.log", "nvml-unavailable", "nvml-unavailable/no-devices-found"),
    ("nvml_library_fails_to_find_told.log", "nvml-unavailable",
     "nvml-unavailable/library-missing"),
    ("smi_failing_to_find_told.log", "nvml-unavailable", "nvml-unavailable/smi-missing"),
    ("sudden_reboot_training_title.log", "gpu-hardware", "gpu-hardware/power-loss-told"),
    ("overclock_told_cause.log", "gpu-hardware", "gpu-hardware/overclock-told"),
])
def test_root_cause(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)


@pytest.mark.parametrize(("name", "signature", "words"), [
    ("no_driver_laptop_intel_only.log", "driver-mismatch/no-driver", "no NVIDIA GPU"),
    ("no_driver_cpu_told_zh.log", "driver-mismatch/no-driver", "no NVIDIA GPU"),
    ("no_cuda_gpus_visible_devices_named.log", "driver-mismatch/cuda-init",
     "CUDA_VISIBLE_DEVICES"),
])
def test_no_gpu_to_run_on_is_a_warning_with_its_reason(name: str, signature: str,
                                                        words: str) -> None:
    found = incidents(name)
    assert not [i for i in found if i.is_failure], name
    warning = next(i for i in found if i.signature == signature)
    assert warning.severity.name == "WARNING"
    assert words in warning.explanation


@pytest.mark.parametrize("name", [
    "uncorrectable_ecc_condition_guide.log",
    "driver_too_old_condition_guide.log",
    "overclock_condition_advice.log",
])
def test_conditions_and_guides_report_no_failure(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure], name


def test_the_ecc_error_is_the_root_of_the_out_of_memory_it_causes() -> None:
    found = [i for i in incidents("uncorrectable_ecc_told_then_oom.log") if i.is_failure]
    assert [(i.cls, i.role) for i in found] == [
        ("gpu-hardware", "root-cause"), ("cuda-oom", "consequence")]
