"""Torque's server aborting a job over its memory limit, TensorFlow's status cut after "OOM", a
run that hits a quoted message (also in a pull request), and more tellings: the host's RAM
growing until the run ends, a GPU's memory run out of with its size, a reply that reads a
crash as too little VRAM, an operating system that crashes and reboots under training,
nvidia-smi unusable in a guest, NVML's "GPU access blocked" and a kernel's assertion in a title,
and an illegal memory access named in Chinese in a title. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_root as root


def failures(text: str) -> list[str]:
    return [i.signature for i in classify_text(text, torch_version=None) if i.is_failure]


def test_torques_server_abort_for_a_memory_limit_is_the_hosts_memory() -> None:
    found = root("torque_server_abort_memory_limit.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/batch-memory-limit")


def test_tensorflows_status_cut_after_oom_is_a_gpu_out_of_memory() -> None:
    found = root("tensorflow_status_cut_after_oom.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/tensorflow")


@pytest.mark.parametrize(("text", "expected"), [
    ("Training stops with Resource exhausted: OOM.\n", ["cuda-oom/tensorflow"]),
    # the host's: the status names the CPU
    ("Resource exhausted: OOM on /job:localhost/replica:0/task:0/device:CPU:0\n", []),
])
def test_tensorflows_bare_status(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_a_quoted_message_a_rig_hits_in_a_pull_request_is_the_failure() -> None:
    found = root("pull_request_rig_hits_quoted_driver_error.log")
    assert (found.cls, found.signature) == ("alloc-conf", "alloc-conf/driver-vmm")


@pytest.mark.parametrize(("text", "expected"), [
    ("The box hits `RuntimeError: CUDA driver error: device not ready` after loading.\n",
     ["alloc-conf/driver-vmm"]),
    # a condition for the reader: an explainer's
    ("If you hit `RuntimeError: CUDA driver error: device not ready`, turn it off.\n", []),
])
def test_hits_before_a_quoted_message(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_ram_growing_each_epoch_until_the_crash_is_the_hosts_memory() -> None:
    found = root("ram_grows_each_epoch_until_crash.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/ram-full-told")


@pytest.mark.parametrize(("text", "expected"), [
    ("The RAM usage keeps growing every epoch until the process is killed.\n",
     ["host-oom/ram-full-told"]),
    ("If the RAM usage keeps growing until it crashes, lower the workers.\n", []),
    # it grows, and nothing ends
    ("The RAM usage grows a little every epoch.\n", []),
])
def test_ram_growing_until_the_end(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_a_gpus_memory_run_out_of_with_its_size_is_told() -> None:
    found = root("gpu_memory_run_out_with_size.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/memory-told")


def test_a_reply_that_reads_the_crash_as_too_little_vram() -> None:
    found = root("reply_because_not_enough_vram.log")
    assert found.cls == "cuda-oom"


@pytest.mark.parametrize(("text", "expected"), [
    ("It's because you don't have enough VRAM on the GTX 1050.\n",
     ["cuda-oom/caching-allocator"]),
    ("If you have not enough VRAM, lower the batch size.\n", []),
])
def test_a_reply_because_you_have_not_enough(text: str, expected: list[str]) -> None:
    assert [s.split("/")[0] for s in failures(text)] == [e.split("/")[0] for e in expected]


def test_an_os_that_crashes_and_reboots_while_training_is_named_in_the_title() -> None:
    found = root("os_crashes_and_reboots_title.log")
    assert (found.cls, found.signature) == ("gpu-hardware", "gpu-hardware/power-loss-told")


@pytest.mark.parametrize(("text", "expected"), [
    ("The O/S crashes and reboots during the third epoch.\n", ["gpu-hardware/power-loss-told"]),
    ("The OS reboots when a system update is installed.\n", []),
])
def test_the_operating_system_going_off(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_nvidia_smi_unusable_in_a_guest_told_in_its_own_sentence() -> None:
    found = root("smi_unusable_in_wsl_told.log")
    assert (found.cls, found.signature) == ("nvml-unavailable", "nvml-unavailable/smi-fails-told")


@pytest.mark.parametrize(("text", "expected"), [
    ("We cannot run nvidia-smi inside the container.\n", ["nvml-unavailable/smi-fails-told"]),
    ("If you can not use nvidia-smi in WSL2, update the driver.\n", []),
])
def test_nvidia_smi_unusable_in_a_guest(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("gpu_access_blocked_title.log", "nvml-unavailable", "nvml-unavailable/init-failed"),
    ("kernel_assertion_title.log", "device-assert", "device-assert/triggered"),
    ("illegal_access_title_chinese.log", "illegal-memory-access",
     "illegal-memory-access/illegal-address"),
])
def test_failures_named_in_a_title(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)
    assert found.title.startswith("Named in the title")
