"""The fake libnvidia-ml itself: peers read it like a driver, scenarios parse strictly, builds race.

The benchmark times nvitop and gpustat against this fake, so they must be able to read it; the
collector's tests trust its answers, so a malformed scenario must fail loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import fakegpu
from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


def test_gpustat_reads_the_fake_node(fake_nvml):
    if shutil.which("gpustat") is None:
        pytest.skip("gpustat is not installed")
    env = fake_nvml(h100_node(2, pids=[os.getpid()]))
    completed = subprocess.run(
        ["gpustat", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    doc = json.loads(completed.stdout)
    assert doc["driver_version"] == "550.90.07"
    assert [g["name"] for g in doc["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert [g["memory.total"] for g in doc["gpus"]] == [81559, 81559]
    assert [p["pid"] for p in doc["gpus"][0]["processes"]] == [os.getpid()]
    assert doc["gpus"][0]["processes"][0]["gpu_memory_usage"] == 40 * 1024


def test_nvitop_prints_the_fake_node(fake_nvml):
    if shutil.which("nvitop") is None:
        pytest.skip("nvitop is not installed")
    env = fake_nvml(h100_node(2))
    env["COLUMNS"] = "120"
    completed = subprocess.run(
        ["nvitop", "-1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert "Driver Version: 550.90.07" in completed.stdout
    assert "CUDA Driver Version: 12.4" in completed.stdout
    assert completed.stdout.count("H100 80GB HBM3") == 2
    assert "00000000:2A:00.0" in completed.stdout


def test_strings_with_escapes_reach_the_caller_intact(fake_nvml):
    scenario = h100_node(1)
    scenario["gpus"][0]["name"] = 'NVIDIA "Quoted" Caf\u00e9 \U0001f680'
    env = fake_nvml(scenario)
    completed = run_python(
        "import pynvml; pynvml.nvmlInit(); "
        "print(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)))",
        env,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == scenario["gpus"][0]["name"]


def test_malformed_scenario_names_line_and_column(fake_nvml, tmp_path: Path):
    env = fake_nvml(h100_node(1))
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "gpus": [\n    {"name": "x",, }\n  ]\n}\n')
    env["FAKE_NVML_SCENARIO"] = str(broken)
    completed = run_python("import pynvml; pynvml.nvmlInit()", env)
    assert completed.returncode != 0
    assert "NVMLError_Unknown" in completed.stderr
    assert "expected a string key at line 3, column 18" in completed.stderr


def test_calls_before_init_are_refused_as_by_a_real_driver(fake_nvml):
    env = fake_nvml(h100_node(1))
    completed = run_python(
        "import ctypes, pynvml; pynvml._LoadNvmlLibrary(); count = ctypes.c_uint();"
        "print(pynvml.nvmlLib.nvmlDeviceGetCount_v2(ctypes.byref(count)))",
        env,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "1"  # NVML_ERROR_UNINITIALIZED


def test_call_delay_slows_every_call(fake_nvml):
    scenario = h100_node(1)
    scenario["call_delay_ms"] = 50
    env = fake_nvml(scenario)
    completed = run_python(
        "import time, pynvml; pynvml.nvmlInit(); t = time.monotonic();"
        "[pynvml.nvmlDeviceGetCount() for _ in range(6)]; print(time.monotonic() - t)",
        env,
    )
    assert completed.returncode == 0, completed.stderr
    assert 0.3 <= float(completed.stdout) < 2.0


def test_concurrent_builds_agree(monkeypatch, tmp_path: Path):
    """Test processes starting together each compile; every one ends with a loadable library."""
    if not sys.platform.startswith("linux") or shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("needs Linux and a C compiler")
    monkeypatch.setattr(fakegpu, "FAKE_BUILD_DIR", tmp_path / "build")
    build = fakegpu.build_fake_nvml.__wrapped__  # bypass the per-process cache
    results: list[Path] = []
    errors: list[BaseException] = []

    def one_build() -> None:
        try:
            results.append(build())
        except BaseException as exc:  # handed to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=one_build) for _ in range(2)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(set(results)) == 1
    library = results[0] / fakegpu.LIBRARY_NAME
    assert library.is_file()
    assert list(results[0].glob("*.tmp")) == []  # no temporary file left behind
    assert time.monotonic() - started < 120
    completed = run_python(f"import ctypes; ctypes.CDLL({str(library)!r})", dict(os.environ))
    assert completed.returncode == 0, completed.stderr
