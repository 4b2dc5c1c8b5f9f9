"""Failures as more programs name them: NCCL's InfiniBand completion status named before its
number, Triton's "device kernel image is invalid", PaddlePaddle's wheel built for other
architectures, go-nvml's failed start in a Kubernetes device plugin, nvidia-smi's "GPU requires
reset". Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from tests.explain.helpers import shape_root as root


def test_an_ib_completion_status_named_before_its_number() -> None:
    found = root("nccl_ib_completion_status_named.log")
    assert (found.cls, found.signature) == ("nccl", "nccl/network")
    assert found.numbers.get("status") == 12
    assert found.line_numbers[0] == 3


def test_tritons_invalid_kernel_image() -> None:
    found = root("triton_kernel_image_invalid.log")
    assert (found.cls, found.signature) == ("driver-mismatch", "driver-mismatch/no-kernel-image")
    assert found.line_numbers == [8]


def test_paddles_wheel_built_for_other_architectures() -> None:
    found = root("paddle_wheel_arch_not_compatible.log")
    assert (found.cls, found.signature) == ("driver-mismatch", "driver-mismatch/no-kernel-image")
    assert found.line_numbers[0] == 5


def test_go_nvml_library_not_found() -> None:
    found = root("go_nvml_init_library_not_found.log")
    assert (found.cls, found.signature) == ("nvml-unavailable", "nvml-unavailable/pynvml")
    assert "libnvidia-ml" in found.explanation or "NVML" in found.explanation
    assert "could not be initialised" not in found.explanation  # the kind was read


def test_nvidia_smi_gpu_requires_reset() -> None:
    found = root("smi_gpu_requires_reset.log")
    assert found.cls == "gpu-hardware"
    assert "nvidia-smi -r" in found.remedy or "reboot" in found.remedy
