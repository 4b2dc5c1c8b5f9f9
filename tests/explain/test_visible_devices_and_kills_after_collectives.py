""""No CUDA GPUs are available" in a log that sets CUDA_VISIBLE_DEVICES to a value hiding every
GPU (a setting, so a warning), and a worker's SIGKILL after an NCCL failure of the same log (the
job taken down, so a consequence). Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import explain_sources
from gpu_audit.visible_devices import hides_every_gpu
from tests.explain.helpers import SHAPES
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "value"), [
    ("visible_devices_set_in_script.log", "'1'"),
    ("visible_devices_shell_prefix.log", "'2,3'"),
    ("visible_devices_exported_empty.log", "''"),
])
def test_no_gpu_under_a_hiding_setting_is_a_warning_naming_it(name: str, value: str) -> None:
    found = incidents(name)
    assert not [i for i in found if i.is_failure], name
    (warning,) = [i for i in found if i.signature == "driver-mismatch/cuda-init"]
    assert warning.severity.name == "WARNING"
    assert f"CUDA_VISIBLE_DEVICES={value}" in warning.explanation


@pytest.mark.parametrize("name", [
    "visible_devices_zero_no_gpu.log",  # 0 is the first GPU of any machine that has one
    "visible_devices_from_scheduler.log",  # a variable's value the log does not show
])
def test_no_gpu_under_a_setting_that_names_one_stays_a_failure(name: str) -> None:
    found = root(name)
    assert (found.signature, found.severity.name) == ("driver-mismatch/cuda-init", "ERROR")
    assert "CUDA_VISIBLE_DEVICES=" not in found.explanation


@pytest.mark.parametrize(("value", "hides"), [
    ("", True), ("1", True), ("2,3", True), ("1,0", True), ("-1", True), ("NoDevFiles", True),
    ("0,0", True), ("0", False), ("0,1", False), (" 0", False), ("GPU-6f3a9c1e", False),
    ("MIG-5c2d", False),
])
def test_which_values_hide_every_gpu_of_any_machine_with_one(value: str, hides: bool) -> None:
    assert (hides_every_gpu(value) is not None) is hides


def test_a_worker_killed_after_a_collective_timeout_is_its_consequence() -> None:
    found = [i for i in incidents("nccl_timeout_then_workers_killed.log") if i.is_failure]
    assert [(i.signature, i.role) for i in found] == [
        ("nccl/watchdog-timeout", "root-cause"), ("host-oom/sigkill", "consequence")]
    assert "after the collective failure on line 1" in found[1].explanation


def test_the_kernel_oom_killer_before_the_timeout_stays_the_root() -> None:
    found = [i for i in incidents("oom_killer_then_nccl_timeout.log") if i.is_failure]
    assert found[0].signature == "host-oom/kernel-oom-killer"
    kill = next(i for i in found if i.signature == "host-oom/sigkill")
    assert "after the collective failure" not in kill.explanation


def test_an_absurd_index_is_named_beyond_any_machine() -> None:
    assert hides_every_gpu("99999999999999999999") == (
        "it starts at index 99999999999999999999, beyond the GPUs any machine has")


def test_a_kill_seen_in_two_logs_keeps_its_place_where_one_records_memory() -> None:
    found = [i for i in explain_sources([str(SHAPES / "nccl_timeout_then_workers_killed.log"),
                                         str(SHAPES / "oom_killer_then_nccl_timeout.log")],
                                        torch_version=None, workers=1).incidents
             if i.signature == "host-oom/sigkill"]
    assert found and "after the collective failure" not in found[0].explanation
