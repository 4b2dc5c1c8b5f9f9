"""MIG devices in the fake libnvidia-ml: handles of their own, answering as NVML does for them."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.fakegpu import MIB, h100_mig_gpu, h100_node, process

pytest_plugins = ["tests.fakegpu"]

READ_MIG = """
import json, pynvml as n
n.nvmlInit()
parent = n.nvmlDeviceGetHandleByIndex(1)
out = {"max": n.nvmlDeviceGetMaxMigDeviceCount(parent),
       "parent_is_mig": n.nvmlDeviceIsMigDeviceHandle(parent).value, "devices": []}
try:
    n.nvmlDeviceGetUtilizationRates(parent)
except n.NVMLError as exc:
    out["parent_utilization"] = exc.value
out["parent_processes"] = [(p.pid, p.gpuInstanceId, p.computeInstanceId)
                           for p in n.nvmlDeviceGetComputeRunningProcesses(parent)]
for i in range(out["max"]):
    try:
        mig = n.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
    except n.NVMLError_NotFound:
        continue
    a = n.nvmlDeviceGetAttributes(mig)
    back = n.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
    out["devices"].append({
        "is_mig": n.nvmlDeviceIsMigDeviceHandle(mig).value,
        "uuid": n.nvmlDeviceGetUUID(mig), "name": n.nvmlDeviceGetName(mig),
        "gi": n.nvmlDeviceGetGpuInstanceId(mig), "ci": n.nvmlDeviceGetComputeInstanceId(mig),
        "total": n.nvmlDeviceGetMemoryInfo(mig).total, "used": n.nvmlDeviceGetMemoryInfo(mig).used,
        "sms": a.multiprocessorCount, "slices": a.gpuInstanceSliceCount, "mb": a.memorySizeMB,
        "parent_uuid": n.nvmlDeviceGetUUID(back),
        "pids": [p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(mig)],
    })
try:
    n.nvmlDeviceGetGpuInstanceId(parent)
except n.NVMLError as exc:
    out["parent_gi"] = exc.value
try:
    n.nvmlDeviceGetAttributes(n.nvmlDeviceGetHandleByIndex(0))
except n.NVMLError as exc:
    out["physical_attributes"] = exc.value
print(json.dumps(out))
"""


def read(env) -> dict:
    done = subprocess.run([sys.executable, "-c", READ_MIG], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_mig_devices_are_handles_of_their_own(fake_nvml):
    scenario = h100_node(2)
    gpu = scenario["gpus"][1] = h100_mig_gpu(1, ("3g.40gb", "1g.10gb"))
    gpu["processes"] = [dict(process(4_194_500, 500 * MIB), gpu_instance_id=7,
                             compute_instance_id=0),
                        dict(process(4_194_501, 300 * MIB), gpu_instance_id=2,
                             compute_instance_id=0)]
    # no memory_used_bytes: its processes' memory
    out = read(fake_nvml(scenario))
    assert out["max"] == 7 and out["parent_is_mig"] == 0
    assert out["parent_utilization"] == 3  # NOT_SUPPORTED on a MIG-enabled parent
    assert out["parent_gi"] == 3 and out["physical_attributes"] == 3
    assert sorted(out["parent_processes"]) == [[4_194_500, 7, 0], [4_194_501, 2, 0]]
    big, small = out["devices"]
    assert big["is_mig"] == small["is_mig"] == 1
    assert (big["gi"], big["ci"], big["sms"], big["slices"]) == (2, 0, 60, 3)
    assert (small["gi"], small["sms"], small["mb"]) == (7, 16, 9984)
    assert small["uuid"].startswith("MIG-") and small["name"].endswith("MIG 1g.10gb")
    assert big["parent_uuid"] == gpu["uuid"]
    assert (big["pids"], small["pids"]) == ([4_194_501], [4_194_500])
    assert small["used"] == 500 * MIB and big["total"] == 40192 * MIB


def test_a_gpu_without_mig_has_no_mig_devices(fake_nvml):
    scenario = h100_node(2)
    scenario["gpus"][1]["mig_mode"] = True  # enabled, no instances created
    out = read(fake_nvml(scenario))
    assert out["max"] == 7 and out["devices"] == []
    assert out["parent_processes"] == []


def test_a_misspelt_mig_key_is_refused(fake_nvml):
    scenario = h100_node(2)
    scenario["gpus"][1] = h100_mig_gpu(1, ("1g.10gb",))
    scenario["gpus"][1]["mig_devices"][0]["sm_count"] = 16
    done = subprocess.run([sys.executable, "-c", "import pynvml; pynvml.nvmlInit()"],
                          env=fake_nvml(scenario), capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert 'unknown key "sm_count" in gpus[1].mig_devices[0]' in done.stderr
