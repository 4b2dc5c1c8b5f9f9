"""``gpu-audit scan`` on fake NVIDIA machines: the real pynvml over the C fake, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.test_scan_cli import assert_documented_shape
from tests.fakegpu import broken_driver, gtx1650_laptop, h100_node
from tests.procs import install_program, running, uvicorn_argvs

pytest_plugins = ["tests.fakegpu"]
MIB = 1024**2


def scan_json(env: dict, cwd: Path, *extra: str) -> tuple[int, dict, str]:
    result = subprocess.run(
        [sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report", *extra],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout), result.stderr


def by_id(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in doc["findings"]:
        out.setdefault(f["id"], []).append(f)
    return out


def test_gtx1650_with_three_stray_uvicorn_backends(fake_nvml, cli_env, tmp_path):
    bin_dir = tmp_path / "bin"
    uvicorn = install_program(bin_dir, "uvicorn")
    argvs = uvicorn_argvs(uvicorn, [8000, 8080, 3001])
    argvs.append([str(install_program(bin_dir, "gpu_daemon")), "--interval", "5"])
    argvs.append([str(install_program(bin_dir, "Xorg")), "vt2", "-displayfd", "3"])
    with running(argvs) as pids:
        env = fake_nvml(
            gtx1650_laptop(uvicorn_pids=pids[:3], daemon_pid=pids[3], xorg_pid=pids[4]),
            base=cli_env,
        )
        code, doc, _ = scan_json(env, tmp_path)
    assert_documented_shape(doc)
    (gpu,) = doc["gpus"]
    assert gpu["name"] == "NVIDIA GeForce GTX 1650"
    assert gpu["memory_total_bytes"] == 4096 * MIB
    assert gpu["ecc_errors_uncorrected_volatile"] is None  # consumer card: not supported
    procs = {p["pid"]: p for p in doc["processes"]}
    assert set(procs) == set(pids)
    assert {procs[p]["duplicate_group"] for p in pids[:3]} == {1}
    assert procs[pids[3]]["duplicate_group"] is None
    assert procs[pids[4]]["type"] == "graphics"
    found = by_id(doc)
    (dup,) = found["duplicate-backend"]
    assert dup["evidence"]["reclaimable_bytes"] == 308 * MIB
    assert sorted(m["port"] for m in dup["evidence"]["members"]) == [3001, 8000, 8080]
    assert dup["evidence"]["stop_pids"] == pids[1:3]
    assert f"kill {pids[1]} {pids[2]}" in dup["remedy"]
    assert "gpu-process-gone" not in found and "unattributed-vram" not in found
    worst = doc["summary"]["worst_severity"]
    assert code == (2 if worst in ("error", "critical") else 1)


def test_healthy_eight_gpu_node_running_one_distributed_job(fake_nvml, cli_env, tmp_path):
    # The test environment's torch is a CPU build, which a real GPU node would rightly be
    # flagged for; this node's owner has said so in their configuration.
    (tmp_path / "gpu-audit.toml").write_text('ignore = ["torch-cpu-only"]\n')
    train = install_program(tmp_path / "bin", "train")
    ranks = [[str(train), "--config", "llama.yaml"] for _ in range(8)]
    with running(ranks, env={**cli_env, "LOCAL_RANK": "0"}) as pids:
        env = fake_nvml(h100_node(8, pids=pids), base=cli_env)
        code, doc, _ = scan_json(env, tmp_path)
    assert_documented_shape(doc)
    assert len(doc["gpus"]) == 8
    assert {g["compute_capability"] for g in doc["gpus"]} == {"9.0"}
    assert all(p["duplicate_group"] is None for p in doc["processes"])
    assert doc["findings"] == [], doc["findings"]
    assert code == 0
    assert doc["probe_errors"] == []


def test_broken_driver_says_why_and_exits_critical(fake_nvml, cli_env, tmp_path):
    expected = {9: "driver-not-loaded", 18: "version-mismatch", 4: "no-permission"}
    for code_in, cause in expected.items():
        env = fake_nvml(broken_driver(code_in), base=cli_env)
        code, doc, _ = scan_json(env, tmp_path)
        (finding,) = by_id(doc)["nvml-unavailable"]
        assert finding["evidence"]["cause"] == cause
        assert doc["gpus"] == [] and doc["host"]["hostname"]
        assert code == 2


def test_a_hung_driver_call_is_bounded_and_reported(fake_nvml, cli_env, tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][1]["hang"] = ["nvmlDeviceGetFieldValues"]
    env = fake_nvml(scenario, base=cli_env)
    started = time.monotonic()
    code, doc, _ = scan_json(env, tmp_path, "--timeout", "1")
    elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed
    assert doc["gpus"][0]["power_draw_w"] is not None
    assert doc["gpus"][1]["power_draw_w"] is None
    assert any(
        "did not return" in e["message"] and e["subject"] == "gpu:1" for e in doc["probe_errors"]
    )
    (hung,) = by_id(doc)["nvml-hung"]
    assert hung["subject"] == "gpu:1"
    assert code == 2


def test_terminal_view_under_the_fake_shows_tables(fake_nvml, cli_env, tmp_path):
    (tmp_path / "gpu-audit.toml").write_text('ignore = ["torch-cpu-only"]\n')
    env = fake_nvml(h100_node(2), base=cli_env)
    env.pop("FORCE_COLOR", None)
    result = subprocess.run(
        [sys.executable, "-m", "gpu_audit", "scan", "--no-report"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "GPUs (2)" in result.stdout and "H100" in result.stdout
    assert "No findings" in result.stdout
    assert os.environ.get("NO_COLOR") or "\x1b[" not in result.stdout
