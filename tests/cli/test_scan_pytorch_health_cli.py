"""``gpu-audit scan`` end to end: real environment variables, the fake NVML, a stand-in torch.

Each test is a user's situation: the job's shell carries allocator settings and leftovers, the
machine (played by the fake ``libnvidia-ml``) has a health problem, or the installed torch does
not fit the GPU. The scan runs as a subprocess and the findings are read from its JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakegpu import MIB, gtx1650_laptop, h100_node
from tests.faketorch import install_fake_torch

pytest_plugins = ["tests.fakegpu"]


def scan(env: dict[str, str], cwd: Path, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    result = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report",
                             *args], env=env, cwd=cwd, capture_output=True, text=True,
                            timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout), result


def by_id(doc: dict, finding_id: str) -> list[dict]:
    return [f for f in doc["findings"] if f["id"] == finding_id]


def with_torch(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` whose Python finds the stand-in torch (and its metadata) first."""
    return {**env, "PYTHONPATH": f"{folder}:{env['PYTHONPATH']}"}


# ----------------------------------------------------------------- allocator and environment


def test_field_note_settings_under_torch_2_9(cli_env, tmp_path):
    """The H100 job that "fixed" a deprecation warning by renaming the variable (torch 2.9)."""
    env = with_torch(cli_env, install_fake_torch(tmp_path / "torch", version="2.9.1+cu128"))
    env["PYTORCH_ALLOC_CONF"] = ("max_split_size_mb:512,garbage_collection_threshold:0.7,"
                                "expandable_segments:True")
    env["PYTORCH_NO_NVML"] = "1"
    doc, result = scan(env, tmp_path)
    assert doc["allocator"]["torch_version"] == "2.9.1+cu128"
    (ignored,) = by_id(doc, "alloc-conf-ignored")
    assert ignored["severity"] == "warning"
    value = env["PYTORCH_ALLOC_CONF"]
    assert ignored["remedy"] == (f"export PYTORCH_ALLOC_CONF='{value}' "
                                 f"PYTORCH_CUDA_ALLOC_CONF='{value}'")
    assert by_id(doc, "pytorch-no-nvml")
    # settings torch 2.9 does not read are not judged for combinations
    assert by_id(doc, "alloc-conf-risky-combination") == []
    assert result.returncode == 1


def test_invalid_allocator_string_fails_the_scan_with_its_column(cli_env, tmp_path):
    env = with_torch(cli_env, install_fake_torch(tmp_path / "torch", version="2.5.1+cu124"))
    env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:true,max_split_size_mb:20"
    doc, result = scan(env, tmp_path)
    (invalid,) = by_id(doc, "alloc-conf-invalid")
    assert invalid["severity"] == "error"
    columns = [i["column"] for i in invalid["evidence"]["issues"]]
    assert columns == [21, 44]
    assert invalid["remedy"] == ("export PYTORCH_CUDA_ALLOC_CONF="
                                 "'expandable_segments:True,max_split_size_mb:21'")
    assert result.returncode == 2


def test_leftover_debug_variables(cli_env, tmp_path):
    env = dict(cli_env, CUDA_LAUNCH_BLOCKING="1", PYTORCH_NO_CUDA_MEMORY_CACHING="0",
               CUDA_INJECTION64_PATH="/opt/nvidia/nsight-systems/libToolsInjection64.so")
    doc, _ = scan(env, tmp_path)
    assert by_id(doc, "launch-blocking")[0]["remedy"] == "unset CUDA_LAUNCH_BLOCKING"
    assert "0 included" in by_id(doc, "caching-allocator-disabled")[0]["detail"]
    assert by_id(doc, "profiler-injection")[0]["remedy"] == "unset CUDA_INJECTION64_PATH"


def test_clean_environment_has_no_environment_findings(cli_env, tmp_path):
    doc, _ = scan(cli_env, tmp_path)
    env_ids = {"alloc-conf-invalid", "alloc-conf-ignored", "alloc-conf-conflict",
               "alloc-conf-risky-combination", "pytorch-no-nvml", "caching-allocator-disabled",
               "launch-blocking", "profiler-injection", "visible-devices-missing",
               "device-order-mismatch"}
    assert env_ids.isdisjoint(f["id"] for f in doc["findings"])


def test_pid_judges_the_running_job_not_this_shell(cli_env, tmp_path):
    job_env = dict(cli_env, PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:abc")
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=job_env)
    try:
        doc, _ = scan(cli_env, tmp_path, "--pid", str(job.pid))
    finally:
        job.kill()
        job.wait()
    assert doc["allocator"]["source"] == f"pid:{job.pid}"
    (invalid,) = by_id(doc, "alloc-conf-invalid")
    assert invalid["evidence"]["value"] == "max_split_size_mb:abc"


# -------------------------------------------------------------------------- hardware health


def sick_node() -> dict:
    """Four H100s: one failing memory, one throttled by hardware, one on a degraded busy link,
    one in exclusive mode with a job on it."""
    scenario = h100_node(4)
    failing, hot, slow_link, exclusive = scenario["gpus"]
    failing.update(ecc_errors_uncorrected_volatile=2, ecc_errors_uncorrected_aggregate=2,
                   remapped_rows_pending=True)
    hot.update(throttle_reasons_mask=0x8 | 0x40, temperature_c=93)
    slow_link.update(utilization_pct=95, pcie_gen_current=3, pcie_width_current=8)
    exclusive.update(compute_mode="exclusive_process",
                     processes=[{"pid": 4_194_500, "used_memory_bytes": 2000 * MIB,
                                 "type": "compute"}])
    return scenario


def test_sick_node_gets_hardware_verdicts_per_gpu(fake_nvml, cli_env, tmp_path):
    doc, result = scan(fake_nvml(sick_node(), base=cli_env), tmp_path)
    subjects = {(f["id"], f["subject"], f["severity"]) for f in doc["findings"]}
    assert ("ecc-uncorrectable", "gpu:0", "critical") in subjects
    assert ("memory-repair-pending", "gpu:0", "error") in subjects
    assert ("hw-slowdown", "gpu:1", "error") in subjects
    assert ("pcie-link-degraded", "gpu:2", "warning") in subjects
    assert ("compute-mode-restricted", "gpu:3", "error") in subjects
    (hot,) = by_id(doc, "hw-slowdown")
    assert hot["evidence"]["throttle_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
    assert result.returncode == 2


def test_healthy_node_has_no_health_findings(fake_nvml, cli_env, tmp_path):
    doc, _ = scan(fake_nvml(h100_node(8), base=cli_env), tmp_path)
    health = {"ecc-uncorrectable", "memory-repair-pending", "row-remap-failure", "hw-slowdown",
              "thermal-slowdown", "temperature-near-slowdown", "pcie-link-degraded",
              "persistence-mode-off", "compute-mode-restricted", "mig-enabled",
              "health-unsupported"}
    assert health.isdisjoint(f["id"] for f in doc["findings"]), doc["findings"]


def test_consumer_laptop_gpu_says_not_supported_and_never_fails(fake_nvml, cli_env, tmp_path):
    scenario = gtx1650_laptop(uvicorn_pids=[4_194_401, 4_194_402, 4_194_403])
    doc, _ = scan(fake_nvml(scenario, base=cli_env), tmp_path)
    (unsupported,) = by_id(doc, "health-unsupported")
    assert unsupported["severity"] == "info"
    assert unsupported["evidence"]["not_supported"] == [
        "ECC error counts", "memory repair (page retirement, row remapping)"]
    assert by_id(doc, "persistence-mode-off")[0]["severity"] == "info"
    # an idle laptop GPU at PCIe gen 1 is saving power, not degraded
    assert by_id(doc, "pcie-link-degraded") == []
    (advice,) = by_id(doc, "alloc-conf-advice")
    assert "expandable_segments:True" in advice["remedy"]


def test_visible_devices_beyond_the_node(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(2), base=cli_env)
    env["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"
    doc, result = scan(env, tmp_path)
    (finding,) = by_id(doc, "visible-devices-missing")
    assert finding["evidence"]["visible"] == [0, 1]
    assert finding["remedy"] == "export CUDA_VISIBLE_DEVICES=0,1"
    assert result.returncode == 2


# --------------------------------------------------------------------------- torch (--torch)


def test_pascal_gpu_with_a_torch_built_without_its_kernels(fake_nvml, cli_env, tmp_path):
    scenario = h100_node(1)
    scenario["gpus"][0].update(name="NVIDIA GeForce GTX 1080", compute_capability="6.1",
                               architecture="pascal", brand="geforce")
    scenario["cuda_driver_version"] = 12080
    folder = install_fake_torch(
        tmp_path / "torch", version="2.8.0+cu128", cuda="12.8",
        arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"],
        devices=[{"name": "NVIDIA GeForce GTX 1080", "cc": "6.1", "memory": 8192 * MIB,
                  "uuid": scenario["gpus"][0]["uuid"].removeprefix("GPU-")}])
    env = with_torch(fake_nvml(scenario, base=cli_env), folder)
    doc, result = scan(env, tmp_path, "--torch")
    assert doc["torch_probe"]["arch_list"][0] == "sm_75"
    (finding,) = by_id(doc, "no-kernel-image")
    assert finding["subject"] == "gpu:0" and "sm_61" in finding["title"]
    assert result.returncode == 2


def test_cuda_13_torch_on_a_cuda_12_driver(fake_nvml, cli_env, tmp_path):
    folder = install_fake_torch(tmp_path / "torch", version="2.9.0+cu130", cuda="13.0",
                                driver_too_old=True)
    env = with_torch(fake_nvml(h100_node(1), base=cli_env), folder)  # driver: CUDA 12.4
    doc, _ = scan(env, tmp_path, "--torch")
    (old,) = by_id(doc, "driver-too-old")
    assert old["severity"] == "error"
    assert old["evidence"]["torch_cuda_source"] == "torch.version.cuda"
    (unusable,) = by_id(doc, "torch-cuda-unavailable")
    assert "too old" in unusable["detail"]


def test_torch_that_cannot_be_imported(cli_env, tmp_path):
    folder = install_fake_torch(tmp_path / "torch", broken="libcudnn.so.9: cannot open shared "
                                "object file: No such file or directory")
    doc, result = scan(with_torch(cli_env, folder), tmp_path, "--torch")
    (finding,) = by_id(doc, "torch-import-failed")
    assert "libcudnn.so.9" in finding["title"]
    assert result.returncode == 2


@pytest.mark.slow
def test_torch_flag_with_the_real_torch_here(cli_env, tmp_path):
    cli_env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    doc, _ = scan(cli_env, tmp_path, "--torch")
    probe = doc["torch_probe"]
    assert probe["error"] is None and probe["import_error"] is None
    assert probe["torch_version"] == doc["allocator"]["torch_version"]


@pytest.mark.gpu
def test_real_gpu_scan_with_torch_gives_verdicts_without_errors(cli_env, tmp_path):
    doc, result = scan(cli_env, tmp_path, "--torch")
    assert result.returncode in (0, 1, 2)
    assert doc["gpus"] and doc["torch_probe"]["cuda_available"] is True
    indices = {f"gpu:{g['index']}" for g in doc["gpus"]}
    for finding in doc["findings"]:
        assert finding["subject"] in indices | {"host", "env"}, finding
    assert by_id(doc, "no-kernel-image") == [] and by_id(doc, "torch-cuda-unavailable") == []
