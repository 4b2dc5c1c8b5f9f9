"""Shapes read since the twentieth held-out set: nvidia-smi's "no devices were found" retold in
lower case in a post, NVML's library told not found (in English and in Chinese), a kill told
in a pod on any line, and Kubernetes' records of a container killed for memory (kubectl
describe's and the status's exit code 137, eviction for memory pressure, a memory limit told
exceeded), and PyTorch's out-of-memory head retyped or lower-cased by a logger. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import re

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("smi_no_devices_told_passthrough.log", "nvml-unavailable",
     "nvml-unavailable/no-devices-found"),
    ("libnvml_not_found_told_zh.log", "nvml-unavailable", "nvml-unavailable/library-missing"),
    ("libnvml_not_found_told_en.log", "nvml-unavailable", "nvml-unavailable/library-missing"),
    ("pod_killed_told_serving.log", "host-oom", "host-oom/shell-killed"),
    ("k8s_describe_exit_code_137.log", "host-oom", "host-oom/container-exit-137"),
    ("k8s_status_yaml_exitcode.log", "host-oom", "host-oom/container-exit-137"),
    ("k8s_evicted_memory_pressure.log", "host-oom", "host-oom/kubernetes-evicted"),
    ("pod_memory_limit_told.log", "host-oom", "host-oom/memory-limit-told"),
    ("oom_lowercased_by_logger.log", "cuda-oom", "cuda-oom/caching-allocator"),
    ("oom_retyped_alone_report.log", "cuda-oom", "cuda-oom/caching-allocator"),
    ("k8s_node_system_oom_event.log", "host-oom", "host-oom/kernel-oom-killer"),
    ("libnvml_dlopen_zh_locale.log", "nvml-unavailable", "nvml-unavailable/library-missing"),
])
def test_root_cause(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)


@pytest.mark.parametrize("name", [
    "smi_no_devices_advice_only.log",  # "if nvidia-smi says ...", "you should check ..."
    "libnvml_loader_falls_back_quiet.log",  # a loader that goes on to the next name
    "memory_limit_advice_quiet.log",  # "if a container exceeds ...", "to avoid pods ..."
    "oom_lowercase_question_quiet.log",  # "how do I fix cuda out of memory?", "if you get ..."
    "docker_inspect_not_oomkilled_quiet.log",  # docker inspect's "OOMKilled": false
])
def test_advice_and_fallbacks_raise_nothing(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure], name


def test_the_library_told_missing_names_it() -> None:
    found = root("libnvml_not_found_told_zh.log")
    assert found.numbers["library"] == "libnvidia-ml.so.1"
    assert "libnvidia-ml.so.1" in found.title


def test_the_memory_limit_advice_names_kubectl() -> None:
    assert "kubectl describe pod" in root("pod_memory_limit_told.log").remedy


@pytest.mark.parametrize(("line", "read"), [
    ("runtimeerror: cuda out of memory.", True),
    ("torch.cuda.outofmemoryerror: cuda out of memory", True),
    ("[2025-01-02 10:00:00] ERROR: cuda out of memory", True),
    ("cuda out of memory.", True),
    ("- cuda out of memory", False),  # an item of a list (of errors, of symptoms)
    ("cuda out of memory when the batch is 32", False),  # a sentence, not the message
    ("what does error: cuda out of memory mean", False),
])
def test_the_retyped_head_is_the_message_alone(line: str, read: bool) -> None:
    from gpu_audit.knowledge.oom import TORCH_OOM_RETYPED_PATTERN

    assert bool(re.search(TORCH_OOM_RETYPED_PATTERN, line)) is read


def test_the_retyped_head_keeps_the_numbers_after_it() -> None:
    from gpu_audit.explain import classify_text

    found = classify_text("runtimeerror: cuda out of memory. tried to allocate 20.00 mib (gpu 0; "
                          "8.00 gib total capacity; 6.10 gib already allocated)",
                          torch_version="2.3.1")
    assert [(i.signature, i.numbers["requested_bytes"]) for i in found] == [
        ("cuda-oom/caching-allocator", 20 * 1024**2)]


def test_the_kubelets_system_oom_names_its_victim() -> None:
    found = root("k8s_node_system_oom_event.log")
    assert (found.numbers["process_name"], found.numbers["pid"]) == ("python3", 48213)


@pytest.mark.parametrize("line", [
    "After the reboot nvidia-smi just says no devices found, lspci lists the card.",
    'In the guest, nvidia-smi shows "no devices were found" error.',
])
def test_no_devices_retold_after_nvidia_smi(line: str) -> None:
    from gpu_audit.explain import classify_text

    found = classify_text(line, torch_version="2.3.1")
    assert [i.signature for i in found] == ["nvml-unavailable/no-devices-found"]


def test_the_lowercase_head_with_its_request_is_the_message_with_its_numbers() -> None:
    found = root("oom_retyped_lowercase_with_request.log")
    assert found.signature == "cuda-oom/caching-allocator"
    assert (found.numbers["requested_bytes"], found.numbers["capacity_bytes"]) == (
        30 * 1024**2, 8 * 1024**3)


@pytest.mark.parametrize("line", [
    "nvidia-smi command can't find libnvidia-ml.so library",
    "在容器里输入nvidia-smi报了找不到libnvidia-ml.so的错误",
])
def test_nvidia_smis_own_complaint_retold_is_nvidia_smis(line: str) -> None:
    from gpu_audit.explain import classify_text

    found = classify_text(line, torch_version="2.3.1")
    assert [(i.signature, i.numbers.get("missing")) for i in found] == [
        ("nvml-unavailable/nvidia-smi-no-driver", "libnvidia-ml.so")]
