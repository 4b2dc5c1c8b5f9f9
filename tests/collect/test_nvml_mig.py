"""MIG instances as the NVML collector reads them: each MIG device of a GPU in MIG mode, and the
instance each process runs in."""

from __future__ import annotations

import pytest

from gpu_audit.collect.nvml.mig import instance_uuids, profile_name
from gpu_audit.model import MigDevice
from tests.collect.test_nvml import read_in_child
from tests.fakegpu import MIB, h100_mig_gpu, h100_node, process

pytest_plugins = ["tests.fakegpu"]


def mig_node() -> dict:
    scenario = h100_node(2)
    gpu = scenario["gpus"][1] = h100_mig_gpu(1, ("3g.40gb", "1g.10gb"))
    gpu["processes"] = [
        dict(process(4_194_500, 700 * MIB), gpu_instance_id=7, compute_instance_id=0),
        process(4_194_501, 300 * MIB),  # no instance ids: listed, not placed
    ]
    return scenario


def test_the_mig_devices_of_a_mig_gpu_are_read(fake_nvml):
    run = read_in_child(fake_nvml(mig_node()))
    plain, mig = run.reading.gpus
    assert plain.mig_devices == [] and mig.mig_mode is True
    assert mig.utilization_pct is None  # per instance in MIG mode: not on the parent
    big, small = mig.mig_devices
    assert big == MigDevice(
        index=0, uuid="MIG-00000001-0002-4c3d-8e9f-000000000000", gpu_instance_id=2,
        compute_instance_id=0, profile="3g.40gb", memory_total_bytes=40192 * MIB,
        memory_used_bytes=0, sm_count=60, gpu_instance_slices=3, compute_instance_slices=3)
    assert (small.gpu_instance_id, small.profile, small.sm_count) == (7, "1g.10gb", 16)
    assert small.memory_used_bytes == 700 * MIB  # the process in that instance
    assert run.reading.probe_errors == []


def test_processes_carry_their_instance(fake_nvml):
    run = read_in_child(fake_nvml(mig_node()))
    placed = {p.pid: (p.mig_gpu_instance_id, p.mig_compute_instance_id, p.mig_uuid)
              for p in run.reading.processes}
    assert placed == {4_194_500: (7, 0, "MIG-00000001-0007-4c3d-8e9f-000000000000"),
                      4_194_501: (None, None, None)}


def test_a_mig_gpu_without_instances_has_none(fake_nvml):
    scenario = h100_node(2)
    scenario["gpus"][1]["mig_mode"] = True
    run = read_in_child(fake_nvml(scenario))
    assert run.reading.gpus[1].mig_mode is True and run.reading.gpus[1].mig_devices == []
    assert run.reading.probe_errors == []


def test_a_failing_mig_device_is_a_probe_error_and_the_others_are_read(fake_nvml):
    scenario = mig_node()
    scenario["gpus"][1]["mig_devices"][0]["errors"] = {"nvmlDeviceGetAttributes_v2": 4}
    run = read_in_child(fake_nvml(scenario))
    big, small = run.reading.gpus[1].mig_devices
    assert big.uuid is not None and big.sm_count is None
    assert big.memory_total_bytes == 40192 * MIB
    assert big.profile == "3g.40gb"  # from the device's name
    assert small.sm_count == 16
    [error] = run.reading.probe_errors
    assert error.subject == "gpu:1" and error.call == "nvmlDeviceGetAttributes"


def test_no_mig_call_on_a_gpu_without_mig(fake_nvml, tmp_path):
    log = tmp_path / "calls.log"
    env = fake_nvml(h100_node(2))
    env["FAKE_NVML_CALL_LOG"] = str(log)
    read_in_child(env)
    assert "nvmlDeviceGetMaxMigDeviceCount" not in log.read_text()


@pytest.mark.parametrize(("name", "gpu", "compute", "mib", "profile"), [
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 1, 1, 4864, "1g.5gb"),
    (None, 1, 1, 4864, "1g.5gb"),
    (None, 3, 3, 40192, "3g.40gb"),
    (None, 2, 1, 9856, "1c.2g.10gb"),
    (None, None, None, 9856, None),
    ("NVIDIA H100 80GB HBM3", 1, 1, 9984, "1g.10gb"),  # a name without the profile
])
def test_profile_names(name, gpu, compute, mib, profile):
    assert profile_name(name, gpu, compute, mib) == profile


def test_instance_uuids_skip_devices_without_ids():
    devices = [MigDevice(index=0, uuid="MIG-a", gpu_instance_id=1, compute_instance_id=0),
               MigDevice(index=1, uuid="MIG-b")]
    assert instance_uuids(devices) == {(1, 0): "MIG-a"}
