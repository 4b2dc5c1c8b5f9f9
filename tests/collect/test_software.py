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
    UnusualMetadata,
    dist_info_version,
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
def test_another_process_environment_is_read_within_its_bound(monkeypatch):
    # The variables past the bound are not read (nor held): only the first bytes count.
    env = {"FIRST": "1", "PADDING": "x" * 100_000, "LAST": "2"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        time.sleep(0.2)
        assert read_process_environ(child.pid).keys() >= {"FIRST", "LAST"}
        monkeypatch.setattr(software, "MAX_ENVIRON_BYTES", 4096)
        cut = read_process_environ(child.pid)
        assert cut.get("FIRST") == "1" and "LAST" not in cut
        assert len(cut.get("PADDING", "")) < 4096
    finally:
        child.kill()
        child.wait()


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


# ------------------------------------------- package versions without importing importlib.metadata


def metadata_version(name: str, paths: list[str]) -> str | None:
    """importlib.metadata's answer for ``name`` along ``paths``: the reference."""
    found = next(iter(importlib.metadata.distributions(name=name, path=paths)), None)
    return None if found is None else found.version


def test_every_installed_distribution_reads_as_importlib_metadata_reads_it():
    folders = [p for p in sys.path if os.path.isdir(p or ".")]
    names = {
        child.rpartition(".")[0].partition("-")[0]
        for folder in folders
        for child in os.listdir(folder or ".")
        if child.lower().endswith((".dist-info", ".egg-info"))
    }
    assert "torch" in names  # the test suite's own environment has it
    read_directly = 0
    for name in sorted(names):
        try:
            version = dist_info_version(name, folders)
        except UnusualMetadata:
            continue  # left to importlib.metadata itself
        assert version == metadata_version(name, folders), name
        read_directly += 1
    assert read_directly >= len(names) * 0.9
    assert dist_info_version("surely-not-an-installed-distribution", folders) is None


def test_names_match_after_normalisation_and_the_first_folder_wins(tmp_path: Path):
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, version in ((first, "1.0"), (second, "2.0")):
        info = folder / f"Zope_Interface-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: zope.interface\n"
                                       f"VERSION:  \t{version}\n\nVersion: body, not a header\n")
    paths = [str(tmp_path / "missing"), str(first), str(second)]
    for spelling in ("zope.interface", "Zope-Interface", "zope__interface"):
        assert dist_info_version(spelling, paths) == "1.0" == metadata_version(spelling, paths)


def test_windows_line_ends_read_the_same(tmp_path: Path):
    info = tmp_path / "torch-2.5.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\r\nName: torch\r\nVersion: 2.5.1\r\n")
    paths = [str(tmp_path)]
    assert dist_info_version("torch", paths) == "2.5.1" == metadata_version("torch", paths)


def test_a_legacy_egg_info_file_is_read(tmp_path: Path):
    (tmp_path / "old_tool-0.3-py3.11.egg-info").write_text("Name: old-tool\nVersion: 0.3\n")
    paths = [str(tmp_path)]
    assert dist_info_version("old-tool", paths) == "0.3" == metadata_version("old-tool", paths)


@pytest.mark.parametrize("metadata", [
    "Metadata-Version: 2.1\nName: torch\nSummary: folded\n  onto two lines\nVersion: 2.5.1\n",
    "Name: torch\n",  # no Version header at all
    "",
])
def test_metadata_the_email_parser_must_read_is_left_to_importlib(tmp_path: Path, metadata: str):
    info = tmp_path / "torch-2.5.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(metadata, newline="")
    with pytest.raises(UnusualMetadata):
        dist_info_version("torch", [str(tmp_path)])


def test_a_zip_on_the_path_is_left_to_importlib(tmp_path: Path):
    archive = tmp_path / "bundle.zip"
    archive.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip archive
    with pytest.raises(UnusualMetadata):
        dist_info_version("torch", [str(archive)])


def test_the_cli_reads_torch_without_importlib_metadata(tmp_path: Path):
    """In a fresh interpreter the version comes from the quick reader, and it is importlib's."""
    code = (
        "import sys; from gpu_audit.collect.software import torch_version; v = torch_version(); "
        "print(v, 'importlib.metadata' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [importlib.metadata.version("torch"), "False"]
