"""Shapes read since the 51st and 52nd held-out sets: NVML's and nvidia-smi's failures in
containers (the UVM module, Docker's missing command, the driver's message retold, nvidia-smi's
check of its NVML), a feature request's title, NumPy's older message, a card's memory told in
Chinese, PyTorch told finding no CUDA, a framework told out of memory, and tellings in the middle
of a long text rather than its last lines. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "signature"), [
    ("uvm_module_title.log", "nvml-unavailable/kernel-module"),
    ("container_command_smi_not_found.log", "nvml-unavailable/smi-missing"),
    ("smi_cannot_communicate_retold.log", "nvml-unavailable/smi-fails-told"),
    ("smi_nvml_mismatch_hook.log", "nvml-unavailable/smi-nvml-mismatch"),
    ("numpy_old_message_title.log", "host-oom/numpy"),
    ("gpu_memory_grows_zh.log", "cuda-oom/memory-told"),
    ("cuda_unavailable_told.log", "driver-mismatch/cuda-unavailable-told"),
    ("framework_ran_out_of_memory_told.log", "cuda-oom/memory-told"),
    # told between 30 lines of progress on each side: a key finds them, not the tail
    ("overheat_told_mid_log.log", "gpu-hardware/overheat-told"),
    ("nccl_versions_told_mid_log.log", "nccl/version-mismatch"),
    ("host_ram_eaten_mid_log.log", "host-oom/out-of-ram-told"),
])
def test_root_cause(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_the_unified_memory_module_is_named() -> None:
    assert "(nvidia_uvm)" in root("uvm_module_title.log").title


@pytest.mark.parametrize("name", [
    "feature_request_oom_killer_title.log",  # labelled an enhancement: its title names a change
    "cuda_unavailable_rule_guide.log",  # a rule about machines, a condition
])
def test_requests_and_rules_raise_nothing(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure]
