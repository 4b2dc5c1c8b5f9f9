"""``gpu-audit diag`` on a real NVIDIA GPU (skipped without one): every level, the figures
against the table, a planted fault found in GPU memory, Ctrl-C leaving nothing behind.

Run: ``pytest -m gpu tests/diag -v`` (about 3 minutes on one H100)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpu_audit.knowledge.gpu_models import find_model

pytestmark = pytest.mark.gpu


def diag(args: list[str], env: dict, cwd: Path, timeout: int = 600):
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--json", "--no-report",
                           *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    print(done.stderr[-3000:])
    return done, json.loads(done.stdout) if done.stdout.strip() else None


def serious(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["severity"] in ("error", "critical")]


def test_level1_every_gpu_works(cli_env, tmp_path):
    done, doc = diag(["--level", "1"], cli_env, tmp_path)
    assert doc is not None, done.stderr
    assert serious(doc) == [] and doc["device"] == "cuda" and not doc["test_mode"]
    for gpu in doc["gpus"]:
        assert gpu["worker"]["status"] == "done"
        for test in ("context", "kernel-launch", "round-trip", "matmul-check"):
            assert gpu["tests"][test]["ok"], (gpu["index"], test, gpu["tests"][test])
        assert gpu["tests"]["context"]["name"] == gpu["name"]
        # The first launch loads the kernels' code (39.5 ms on an H200); a warm launch and
        # its answer take tens of microseconds.
        launch = gpu["tests"]["kernel-launch"]
        assert launch["latency_us"] < min(launch["first_launch_us"], 5000), launch
    if len(doc["gpus"]) >= 2:
        n = len(doc["peers"]["indices"])
        assert len(doc["peers"]["peer_access"]) == n


def test_level2_figures_stand_beside_the_table(cli_env, tmp_path):
    done, doc = diag(["--level", "2", "--gpus", "0"], cli_env, tmp_path)
    assert doc is not None, done.stderr
    assert serious(doc) == [], doc["findings"]
    gpu = doc["gpus"][0]
    memtest = gpu["tests"]["memtest"]
    assert memtest["mismatches"] == [] and memtest["bytes"] > 0.5 * gpu["memory_free_bytes"]
    figures = {f["metric"]: f for f in gpu["figures"]}
    assert {"memory-bandwidth", "h2d-bandwidth", "d2h-bandwidth", "matmul-fp32",
            "matmul-bf16"} <= set(figures)
    spec = find_model(gpu["name"])
    if spec is not None:
        # The expectation is realistic for the method: a healthy GPU lands near 100%, neither
        # far below (a wrong peak or efficiency) nor far above (a dense/sparse mix-up).
        for metric in ("memory-bandwidth", "matmul-bf16", "matmul-fp32"):
            assert 0.7 <= figures[metric]["ratio"] <= 1.6, figures[metric]
    major = float(gpu["tests"]["context"]["compute_capability"])
    if major >= 8.9:
        assert "tflops" in gpu["tests"]["matmul-fp8"], gpu["tests"]["matmul-fp8"]


def test_planted_bit_in_gpu_memory_is_found(cli_env, tmp_path):
    done, doc = diag(["--level", "2", "--gpus", "0", "--plant-fault", "123456789:4"], cli_env,
                     tmp_path)
    assert done.returncode == 2, done.stderr
    [error] = [f for f in doc["findings"] if f["id"] == "diag-memory-error"]
    assert (error["evidence"]["offset_bytes"], error["evidence"]["bit"]) == (123456789, 4)


def test_level3_holds_its_speed_with_nvml_sampled(cli_env, tmp_path):
    done, doc = diag(["--level", "3", "--gpus", "0", "--duration", "30"], cli_env, tmp_path)
    assert doc is not None, done.stderr
    sustained = doc["gpus"][0]["sustained"]
    assert len(sustained["tflops"]) >= 25 and len(sustained["nvml_samples"]) >= 25
    assert all(s["sm_clock_mhz"] for s in sustained["nvml_samples"])
    assert sustained["summary"]["decay_pct"] < 10, sustained["summary"]
    assert not [f for f in doc["findings"] if f["id"] == "diag-counter-moved"]


def test_ctrl_c_frees_the_gpu(cli_env, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "gpu_audit", "diag", "--level", "3",
                             "--gpus", "0", "--duration", "300", "--no-report"], env=cli_env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    workers: list[psutil.Process] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not workers:
        time.sleep(0.5)
        workers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                   if "sustain" in cmdline(p)]
    assert workers
    time.sleep(5)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive
    listing = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    assert not {str(w.pid) for w in workers} & set(listing.split())


def cmdline(process: psutil.Process) -> list[str]:
    """A process's arguments, or none when it is exiting (a zombie) or gone."""
    try:
        return process.cmdline()
    except psutil.Error:
        return []
