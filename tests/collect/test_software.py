"""Reading torch's build and the allocator settings without importing torch."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit.collect import software
from gpu_audit.collect.software import (
    read_allocator_config,
    read_process_environ,
    torch_build,
    torch_version_of_process,
    unlabelled_build,
)


@pytest.mark.parametrize("version,expected", [
    ("2.5.1+cu124", ("cuda", "12.4")),
    ("2.7.0+cu118", ("cuda", "11.8")),
    ("2.9.0+cu130", ("cuda", "13.0")),
    ("2.5.1+rocm6.2", ("rocm", None)),
    ("2.13.0+cpu", ("cpu", None)),
    ("2.13.0+cpu.cxx11.abi", ("cpu", None)),
    ("2.8.0+xpu", ("xpu", None)),
    ("2.5.1", (None, None)),
    (None, (None, None)),
])
def test_torch_build_from_the_local_label(version, expected):
    assert torch_build(version) == expected


def test_unlabelled_wheels_are_cpu_only_off_linux():
    assert unlabelled_build("Windows") == ("cpu", None)
    assert unlabelled_build("Darwin") == ("cpu", None)


def test_unlabelled_linux_wheel_takes_its_cuda_from_the_runtime_wheel(monkeypatch):
    def version(name: str) -> str:
        if name == "nvidia-cuda-runtime-cu12":
            return "12.4.127"
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(software.importlib.metadata, "version", version)
    assert unlabelled_build("Linux") == ("cuda", "12.4")


def test_this_environment_is_read_with_secrets_redacted(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    monkeypatch.delenv("PYTORCH_ALLOC_CONF", raising=False)
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    monkeypatch.setenv("NCCL_IB_AUTH_TOKEN", "hunter2-secret")
    monkeypatch.setenv("UNRELATED_VAR", "x")
    config, errors = read_allocator_config()
    assert errors == []
    assert config.source == "env"
    assert config.pytorch_cuda_alloc_conf == "expandable_segments:True"
    assert config.pytorch_alloc_conf is None
    assert config.environment["CUDA_LAUNCH_BLOCKING"] == "1"
    assert config.environment["NCCL_IB_AUTH_TOKEN"] == "***"
    assert "UNRELATED_VAR" not in config.environment
    assert "PYTORCH_CUDA_ALLOC_CONF" not in config.environment


@pytest.fixture
def training_job(tmp_path: Path):
    """A running "training job": its own allocator settings, and a mapped torch library.

    The job maps ``<site>/torch/lib/libc10.so`` as torch would, and ``<site>`` holds the
    ``torch-2.5.1+cu124.dist-info`` of that (pretend) torch, so no real torch is needed.
    """
    site = tmp_path / "site-packages"
    lib = site / "torch" / "lib" / "libc10.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\0" * 4096)
    info = site / "torch-2.5.1+cu124.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cu124\n\n")
    code = ("import mmap, sys, time\n"
            f"f = open({str(lib)!r}, 'rb'); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
            "print('ready', flush=True); time.sleep(60)\n")
    env = dict(os.environ, PYTORCH_ALLOC_CONF="expandable_segments:True",
               CUDA_VISIBLE_DEVICES="1")
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pid_reads_that_process_environment_and_its_torch(training_job):
    assert read_process_environ(training_job)["CUDA_VISIBLE_DEVICES"] == "1"
    assert torch_version_of_process(training_job) == "2.5.1+cu124"
    config, errors = read_allocator_config(training_job)
    assert errors == []
    assert config.source == f"pid:{training_job}"
    assert config.pytorch_alloc_conf == "expandable_segments:True"
    assert config.pytorch_cuda_alloc_conf is None
    assert config.torch_version == "2.5.1+cu124"
    assert (config.torch_variant, config.torch_cuda_version) == ("cuda", "12.4")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_process_that_has_not_imported_torch_falls_back_to_ours():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        assert torch_version_of_process(proc.pid) is None
        config, _ = read_allocator_config(proc.pid)
        assert config.torch_version == software.torch_version()
    finally:
        proc.kill()
        proc.wait()


def test_unreadable_process_becomes_a_probe_error_not_an_exception():
    config, errors = read_allocator_config(4_194_999)  # above PID_MAX_LIMIT: exists nowhere
    assert config.pytorch_cuda_alloc_conf is None and config.environment == {}
    (error,) = errors
    assert error.subject == "pid:4194999" and "cannot read its environment" in error.message
