"""Reading the kernel driver's ``/proc/driver/nvidia/gpus/*/information`` and ``/dev/nvidiaN``
(both rooted where ``GPU_AUDIT_PROC_NVIDIA`` and ``GPU_AUDIT_DEV`` say), and a scan that joins
them with NVML."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.collect.identity import read_dev_minors, read_driver_gpus, read_kernel_gpus
from tests import fakegpu
from tests.fakegpu import h100_node
from tests.test_gpu_identity import BUSES, information

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml


def driver_folder(root: Path, count: int) -> Path:
    """``root`` laid out as /proc/driver/nvidia with ``count`` GPUs."""
    for index in range(count):
        folder = root / "gpus" / BUSES[index]
        folder.mkdir(parents=True)
        (folder / "information").write_text(information(index))
    return root


def dev_folder(root: Path, minors) -> Path:
    """``root`` as /dev with nvidiaN character devices (major 195, as the driver makes them)."""
    root.mkdir(parents=True, exist_ok=True)
    for minor in minors:
        try:
            os.mknod(root / f"nvidia{minor}", stat.S_IFCHR | 0o600, os.makedev(195, minor))
        except PermissionError:
            pytest.skip("making character devices needs root (CAP_MKNOD)")
    return root


def test_the_driver_folder_is_read_and_planted_files_are_passed_over(tmp_path):
    root = driver_folder(tmp_path / "proc", 2)
    fifo_gpu = root / "gpus" / "0000:99:00.0"
    fifo_gpu.mkdir()
    os.mkfifo(fifo_gpu / "information")  # never waited on
    linked = root / "gpus" / "0000:9a:00.0"
    linked.mkdir()
    (linked / "information").symlink_to(root / "gpus" / BUSES[0] / "information")
    found = read_driver_gpus(root)
    assert sorted(g.minor_number for g in found) == [0, 1]
    assert {g.pci_bus_id for g in found} == {BUSES[0], BUSES[1]}
    assert read_driver_gpus(tmp_path / "absent") == []


def test_dev_minors_come_from_character_devices_only(tmp_path):
    dev = dev_folder(tmp_path / "dev", [0, 3])
    (dev / "nvidia7").write_text("")  # a plain file is no device
    os.mkfifo(dev / "nvidia8")
    (dev / "nvidiactl").write_text("")
    assert sorted(read_dev_minors(dev)) == [0, 3]
    kernel = read_kernel_gpus({"GPU_AUDIT_PROC_NVIDIA": str(driver_folder(tmp_path / "p", 1)),
                               "GPU_AUDIT_DEV": str(dev)})
    assert [(k.source, k.minor_number) for k in kernel] == [("proc", 0), ("dev", 3)]


def scan_json(env: dict, cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report"],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1, 2), done.stderr
    return json.loads(done.stdout)


def test_a_scan_names_a_lost_gpu_and_lists_the_gpus_nvml_does_not(fake_nvml, cli_env, tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][0]["lost"] = True
    env = {**cli_env, "GPU_AUDIT_PROC_NVIDIA": str(driver_folder(tmp_path / "proc", 3))}
    doc = scan_json(fake_nvml(scenario, base=env), tmp_path)
    lost, healthy = doc["gpus"]
    assert lost["lost"] and lost["minor_number"] == 0 and lost["identity_source"] == "proc"
    assert lost["pci_bus_id"] == "00000000:18:00.0"
    assert lost["uuid"] == scenario["gpus"][0]["uuid"]
    assert healthy["minor_number"] == 1 and healthy["identity_source"] is None
    assert [(u["source"], u["minor_number"], u["pci_bus_id"]) for u in doc["unlisted_gpus"]] \
        == [("proc", 2, BUSES[2])]
    finding = next(f for f in doc["findings"] if f["id"] == "gpu-lost")
    assert finding["evidence"]["pci_bus_id"] == "00000000:18:00.0"
    assert finding["evidence"]["pci_bus_id_source"] == "proc"
