"""``scan --torch``'s probe: a child process that imports torch, under a deadline."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import stat
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from gpu_audit.collect.torch_probe import attach_torch_probe, child_environment, probe_torch
from gpu_audit.model import AllocatorConfig
from gpu_audit.rules.software import runs_on
from gpu_audit.units import torch_release
from tests import builders as b
from tests.faketorch import install_fake_torch

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def on_path(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(folder))


def test_probe_reads_a_cuda_build_on_two_gpus(tmp_path, monkeypatch):
    devices = [{"name": "NVIDIA GeForce GTX 1080", "cc": "6.1", "memory": 8 * b.GIB,
                "uuid": "0a1b2c3d-0000-0000-0000-000000000000"},
               {"name": "NVIDIA RTX A6000", "cc": "8.6", "memory": 48 * b.GIB, "uuid": None}]
    on_path(monkeypatch, install_fake_torch(tmp_path, arch_list=["sm_75", "sm_86"],
                                            devices=devices))
    probe, errors = probe_torch(timeout_s=60)
    assert errors == []
    assert probe.error is None and probe.import_error is None
    assert (probe.torch_version, probe.cuda_version, probe.cudnn_version) == (
        "2.8.0+cu128", "12.8", 91002)
    assert probe.cuda_available is True and probe.device_count == 2
    assert probe.arch_list == ["sm_75", "sm_86"]
    assert [d.compute_capability for d in probe.devices] == ["6.1", "8.6"]
    assert probe.devices[0].uuid == "GPU-0a1b2c3d-0000-0000-0000-000000000000"
    assert probe.devices[1].uuid is None
    assert probe.allocator_backend == "native"


def test_probe_captures_torch_warnings_when_cuda_is_unusable(tmp_path, monkeypatch):
    on_path(monkeypatch, install_fake_torch(tmp_path, driver_too_old=True))
    probe, _ = probe_torch(timeout_s=60)
    assert probe.cuda_available is False and probe.device_count == 0
    assert any("driver on your system is too old" in w for w in probe.warnings)


def test_probe_reports_an_import_failure(tmp_path, monkeypatch):
    on_path(monkeypatch, install_fake_torch(
        tmp_path, broken="libcudnn.so.9: cannot open shared object file: No such file"))
    probe, errors = probe_torch(timeout_s=60)
    assert probe.torch_version is None and errors == []
    assert probe.import_error == ("ImportError: libcudnn.so.9: cannot open shared object file: "
                                  "No such file")


def test_probe_judges_the_allocator_variables_it_is_given(tmp_path, monkeypatch):
    on_path(monkeypatch, install_fake_torch(tmp_path, refuse_keys=["bogus"]))
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    probe, _ = probe_torch(timeout_s=60, alloc_env={"PYTORCH_CUDA_ALLOC_CONF": "bogus:1"})
    assert probe.allocator_error == "ValueError: Unrecognized key 'bogus' in CUDA allocator config."
    probe, _ = probe_torch(timeout_s=60)
    assert probe.allocator_settings == "expandable_segments:True" and not probe.allocator_error


def test_child_sees_every_gpu_in_pci_order(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    env = child_environment({"PYTORCH_ALLOC_CONF": None, "PYTORCH_CUDA_ALLOC_CONF": "x:1"})
    assert "CUDA_VISIBLE_DEVICES" not in env and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "PYTORCH_ALLOC_CONF" not in env and env["PYTORCH_CUDA_ALLOC_CONF"] == "x:1"


def fake_python(path: Path, body: str) -> str:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="shell scripts as interpreters")
def test_a_hung_import_is_cut_off_by_the_deadline(tmp_path):
    python = fake_python(tmp_path / "python", "sleep 30")
    probe, (error,) = probe_torch(python=python, timeout_s=0.5)
    assert probe.error.startswith("timed out after 0.5 s")
    assert error.source == "torch" and "timed out" in error.message


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="shell scripts as interpreters")
def test_a_crashing_interpreter_is_a_probe_error(tmp_path):
    python = fake_python(tmp_path / "python", "echo 'Segmentation fault' >&2; kill -SEGV $$")
    probe, (error,) = probe_torch(python=python, timeout_s=30)
    assert "without a report (killed by signal 11)" in probe.error
    assert "Segmentation fault" in error.message


def test_a_missing_interpreter_is_a_probe_error():
    probe, (error,) = probe_torch(python="/nonexistent/python3", timeout_s=5)
    assert probe.error.startswith("cannot run /nonexistent/python3")
    assert error.message == f"torch probe: {probe.error}"


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_TORCH, reason="needs torch installed")
def test_probe_with_the_real_torch_installed_here(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    probe, _ = probe_torch(timeout_s=120, alloc_env={"PYTORCH_CUDA_ALLOC_CONF":
                                                     "max_split_size_mb:5"})
    version = importlib.metadata.version("torch")
    assert probe.torch_version == version and probe.error is None
    if torch_release(version) >= (2, 10):  # the shared parser that a CPU build runs too
        assert "max_split_size_mb too small" in (probe.allocator_error or "")


def test_attach_puts_the_probe_and_its_errors_into_the_snapshot(tmp_path, monkeypatch):
    on_path(monkeypatch, install_fake_torch(tmp_path, refuse_keys=["bogus"]))
    scan = b.scan(allocator=AllocatorConfig(
        source="pid:42", pytorch_cuda_alloc_conf="bogus:1", pytorch_alloc_conf=None,
        torch_version="2.8.0+cu128"))
    attached = attach_torch_probe(scan, timeout_s=60)
    assert attached.torch_probe.allocator_error.startswith("ValueError")
    assert msgspec.structs.replace(attached, torch_probe=None) == scan


@pytest.mark.gpu
def test_on_a_real_gpu_the_probe_agrees_with_a_kernel_that_ran():
    ran = subprocess.run([sys.executable, "-c", "import torch; "
                          "print(torch.ones(4, device='cuda').sum().item())"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout.strip() == "4.0", ran.stderr
    probe, errors = probe_torch(timeout_s=300)
    assert errors == [] and probe.cuda_available is True and probe.devices
    device = probe.devices[0]
    capability = int(device.compute_capability.replace(".", ""))
    assert any(runs_on(entry, capability) for entry in probe.arch_list), probe.arch_list
    assert device.uuid is None or device.uuid.startswith(("GPU-", "MIG-"))
