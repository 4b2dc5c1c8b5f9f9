"""The NVML collector against a real driver, checked against ``nvidia-smi`` (GPU machines only)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys

import pytest

from gpu_audit.collect.nvml import NvmlReading
from gpu_audit.serial import from_jsonable
from tests.fakegpu import REPO

READ = (
    "import json; from gpu_audit.collect.nvml import read_nvml; "
    "from gpu_audit.serial import to_jsonable; print(json.dumps(to_jsonable(read_nvml())))"
)
QUERY = "index,uuid,name,pci.bus_id,memory.total,driver_version"


def nvidia_smi_rows() -> list[dict[str, str]]:
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    names = QUERY.split(",")
    return [
        dict(zip(names, (c.strip() for c in row), strict=True))
        for row in csv.reader(io.StringIO(out))
        if row
    ]


@pytest.mark.gpu
def test_real_driver_agrees_with_nvidia_smi():
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not installed")
    # The source tree first, then whatever the interpreter was given (a GPU machine without
    # network gets gpu-audit's dependencies through PYTHONPATH).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("FAKE_NVML_SCENARIO", None)
    completed = subprocess.run(
        [sys.executable, "-c", READ], env=env, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    reading = from_jsonable(NvmlReading, json.loads(completed.stdout))
    rows = nvidia_smi_rows()

    assert reading.status.available, reading.status.message
    assert reading.driver is not None
    assert reading.driver.driver_version == rows[0]["driver_version"]
    assert reading.driver.cuda_driver_version is not None
    assert [gpu.uuid for gpu in reading.gpus] == [row["uuid"] for row in rows]
    for gpu, row in zip(reading.gpus, rows, strict=True):
        assert gpu.name == row["name"]
        assert gpu.pci_bus_id is not None
        assert gpu.pci_bus_id.lower() == row["pci.bus_id"].lower()
        assert gpu.memory_total_bytes is not None
        assert gpu.memory_total_bytes // 2**20 == int(row["memory.total"])
        assert gpu.compute_capability is not None and gpu.lost is False
    lost = [e for e in reading.probe_errors if "lost" in e.message]
    assert lost == []
