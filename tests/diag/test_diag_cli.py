"""``gpu-audit diag`` end to end in the CPU test mode: the fake NVML plays the GPUs (selection,
busy GPUs, NVML sampled during the load), torch runs the tests on the CPU with small sizes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests import fakegpu
from tests.fakegpu import absent_pids, h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml
pytest.importorskip("torch")


def diag(args: list[str], env: dict, cwd: Path, timeout: int = 120):
    return subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu", *args],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_level2_reports_a_planted_bit_by_offset_and_bit(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(1), base=cli_env)
    done = diag(["--level", "2", "--json", "--no-report", "--plant-fault", "8195:6"], env,
                tmp_path)
    assert done.returncode == 2, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpu-audit.diag/1" and doc["test_mode"] is True
    assert doc["summary"] == {"exit_code": 2, "verdict": "CRITICAL",
                              "counts": {"info": 1, "warning": 0, "error": 0, "critical": 1}}
    [error] = [f for f in doc["findings"] if f["id"] == "diag-memory-error"]
    assert error["subject"] == "gpu:0"
    assert (error["evidence"]["offset_bytes"], error["evidence"]["bit"]) == (8195, 6)
    gpu = doc["gpus"][0]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["worker"]["status"] == "done"
    assert {f["metric"] for f in gpu["figures"]} == {"memory-bandwidth", "matmul-fp32",
                                                      "matmul-bf16"}
    # Before it starts, diag says what it will take.
    assert "about" in done.stderr and "Ctrl-C" in done.stderr


def test_level1_clean_run_and_report_files(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(3), base=dict(cli_env, COLUMNS="40"))
    done = diag(["--level", "1", "--gpus", "1,2", "--out", str(tmp_path / "r")], env, tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    assert done.stdout.startswith("DIAG OK: level 1 on 2 GPUs")
    # Piped (into a log, a monitoring plugin runner): the status line is one line, however
    # narrow the terminal the environment names.
    status = done.stdout.splitlines()[0]
    assert len(status) > 40 and status.endswith(" warning=0 error=0 critical=0"), status
    [doc_path] = (tmp_path / "r").glob("diag-*.json")
    doc = json.loads(doc_path.read_text())
    assert [g["index"] for g in doc["gpus"]] == [1, 2]
    assert doc["selection"]["indices"] == [1, 2]
    for gpu in doc["gpus"]:  # level 1 runs the GPUs' workers side by side
        assert all(gpu["tests"][t]["ok"] for t in ("context", "kernel-launch", "round-trip",
                                                   "matmul-check"))
        assert "memtest" not in gpu["tests"]
    assert doc_path.with_suffix(".md").read_text().startswith("# gpu-audit diag level 1: OK")


def test_busy_gpu_is_refused_unless_forced(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(1, pids=absent_pids(1)), base=cli_env)
    refused = diag(["--level", "1", "--no-report"], env, tmp_path)
    assert refused.returncode == 3 and refused.stdout == ""
    assert "other processes are using" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr
    forced = diag(["--level", "1", "--no-report", "--force"], env, tmp_path)
    assert forced.returncode == 0, forced.stderr


def test_bad_selection_is_a_usage_error(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(h100_node(1), base=cli_env)
    done = diag(["--gpus", "7", "--no-report"], env, tmp_path)
    assert done.returncode == 3 and "Traceback" not in done.stderr
    bad_plant = diag(["--plant-fault", "x", "--no-report"], env, tmp_path)
    assert bad_plant.returncode == 3 and "OFFSET:BIT" in bad_plant.stderr


def test_level3_samples_nvml_during_the_load(fake_nvml, cli_env, tmp_path):
    scenario = h100_node(1)
    gpu = scenario["gpus"][0]
    gpu.update(sm_clock_mhz=1755, power_draw_w=450.0, temperature_c=91,
               throttle_reasons_mask=0x40 | 0x20)  # hardware and software thermal slowdown
    env = fake_nvml(scenario, base=cli_env)
    out = tmp_path / "r"
    done = diag(["--level", "3", "--duration", "3", "--json", "--out", str(out)], env, tmp_path)
    assert done.returncode == 2, done.stderr
    doc = json.loads(done.stdout)
    sustained = doc["gpus"][0]["sustained"]
    samples = sustained["nvml_samples"]
    assert len(samples) >= 2 and len(sustained["tflops"]) >= 2
    assert {s["sm_clock_mhz"] for s in samples} == {1755}
    assert samples[0]["throttle_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]
    [throttle] = [f for f in doc["findings"] if f["id"] == "diag-throttle-unexpected"]
    assert throttle["evidence"]["unexpected_reasons"]["hw_thermal_slowdown"] == len(samples)
    assert sustained["summary"]["temperature_max_c"] == 91
    [png] = out.glob("diag-*-gpu0.png")
    assert png.read_bytes().startswith(b"\x89PNG")
    assert f"]({png.name})" in next(out.glob("diag-*.md")).read_text()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_stops_every_worker(fake_nvml, cli_env, tmp_path, signum):
    env = fake_nvml(h100_node(1), base=cli_env)
    proc = subprocess.Popen([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu",
                             "--level", "3", "--duration", "120", "--no-report"], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not workers:
        time.sleep(0.2)
        workers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                   if "sustain" in cmdline(p)]
    assert workers, "the sustained-load worker did not start"
    time.sleep(1.0)
    started = time.monotonic()
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert time.monotonic() - started < 15
    assert "interrupted" in stderr and "Traceback" not in stderr
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive


def test_scan_never_runs_diag():
    scan_source = (Path(__file__).resolve().parents[2] / "gpu_audit" / "cli" / "scan.py")
    assert "diag" not in scan_source.read_text()


def cmdline(process: psutil.Process) -> list[str]:
    """A process's arguments, or none when it is exiting (a zombie) or gone."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []
