"""Field-ready verdicts on fake NVIDIA machines, through the command line: a GPU off the bus,
memory-health counters only the dedicated NVML calls give, and per-GPU findings merged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]

# nvmlDeviceGetFieldValues ids of the ECC counters, retired pages and remapped rows.
HEALTH_FIELD_IDS = [3, 4, 5, 6, 29, 30, 31, 142, 143, 144, 145]


def run_json(env: dict, cwd: Path, command: str, *extra: str) -> tuple[int, dict]:
    result = subprocess.run(
        [sys.executable, "-m", "gpu_audit", command, "--json", "--no-report", *extra],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


def by_id(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in doc["findings"]:
        out.setdefault(f["id"], []).append(f)
    return out


def test_memory_health_falls_back_per_field_to_the_dedicated_calls(fake_nvml, cli_env, tmp_path):
    """Field values answer NOT_SUPPORTED for the counters; the dedicated calls still answer."""
    scenario = h100_node(2)
    sick = scenario["gpus"][1]
    sick.update(ecc_errors_uncorrected_volatile=3, ecc_errors_uncorrected_aggregate=3,
                remapped_rows_uncorrectable=1, remapped_rows_pending=True,
                unsupported_field_ids=HEALTH_FIELD_IDS)
    code, doc = run_json(fake_nvml(scenario, base=cli_env), tmp_path, "scan")
    gpu = doc["gpus"][1]
    assert gpu["ecc_errors_uncorrected_volatile"] == 3
    assert gpu["remapped_rows_pending"] is True
    found = by_id(doc)
    (ecc,) = found["ecc-uncorrectable"]
    assert ecc["subject"] == "gpu:1" and ecc["evidence"]["uncorrected_volatile"] == 3
    (pending,) = found["memory-repair-pending"]
    assert pending["subject"] == "gpu:1" and pending["evidence"]["remapped_rows_pending"] is True
    assert "health-unsupported" not in found
    assert code == 2


def test_a_lost_gpu_is_critical_in_scan_and_fails_check_from_the_same_finding(
        fake_nvml, cli_env, tmp_path):
    (tmp_path / "gpu-audit.toml").write_text(
        'ignore = ["torch-cpu-only", "swap-pressure", "low-host-memory"]\n')
    scenario = h100_node(2)
    scenario["gpus"][1]["lost"] = True
    env = fake_nvml(scenario, base=cli_env)

    code, scan = run_json(env, tmp_path, "scan")
    (lost,) = by_id(scan)["gpu-lost"]
    assert code == 2
    assert lost["severity"] == "critical" and lost["subject"] == "gpu:1"
    assert lost["evidence"]["gpu_index"] == 1
    assert "pci_bus_id" in lost["evidence"]
    assert "sudo nvidia-smi -r -i 1" in lost["remedy"] and "RMA" in lost["remedy"]
    assert "Drain" in lost["remedy"]

    code, check = run_json(env, tmp_path, "check")
    assert code == 2
    (count,) = [c for c in check["checks"] if c["id"] == "gpu-count"]
    assert count["status"] == "fail" and count["finding_id"] == "gpu-lost"
    assert count["evidence"]["lost"] == [1] and count["evidence"]["gpus"] == 1
    assert count["remedy"] == lost["remedy"]
    (judged,) = [f for f in check["findings"] if f["id"] == "gpu-lost"]
    assert judged["title"] == lost["title"] and judged["check_status"] == "fail"


def test_eight_gpus_missing_the_same_readings_get_one_finding(fake_nvml, cli_env, tmp_path):
    scenario = h100_node(8)
    for gpu in scenario["gpus"]:
        gpu["unsupported"] = [*gpu["unsupported"], "throttle_reasons"]
    _, doc = run_json(fake_nvml(scenario, base=cli_env), tmp_path, "scan")
    (finding,) = by_id(doc)["health-unsupported"]
    assert finding["subject"] == "host" and finding["evidence"]["gpus"] == list(range(8))
    assert finding["title"].startswith("GPU 0-7 (NVIDIA H100 80GB HBM3)")
    assert "consumer" not in finding["remedy"]
