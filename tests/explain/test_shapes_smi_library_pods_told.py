"""Shapes read since the twentieth held-out set: nvidia-smi's "no devices were found" retold in
lower case in a post, NVML's library told not found (in English and in Chinese), a kill told
in a pod on any line, and Kubernetes' records of a container killed for memory (kubectl
describe's and the status's exit code 137, eviction for memory pressure, a memory limit told
exceeded). Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

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
])
def test_root_cause(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)


@pytest.mark.parametrize("name", [
    "smi_no_devices_advice_only.log",  # "if nvidia-smi says ...", "you should check ..."
    "libnvml_loader_falls_back_quiet.log",  # a loader that goes on to the next name
    "memory_limit_advice_quiet.log",  # "if a container exceeds ...", "to avoid pods ..."
])
def test_advice_and_fallbacks_raise_nothing(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure], name


def test_the_library_told_missing_names_it() -> None:
    found = root("libnvml_not_found_told_zh.log")
    assert found.numbers["library"] == "libnvidia-ml.so.1"
    assert "libnvidia-ml.so.1" in found.title


def test_the_memory_limit_advice_names_kubectl() -> None:
    assert "kubectl describe pod" in root("pod_memory_limit_told.log").remedy
