"""The fake libnvidia-ml itself: peers read it like a driver, scenarios parse strictly, builds race.

The benchmark times nvitop and gpustat against this fake, so they must be able to read it; the
collector's tests trust its answers, so a malformed scenario must fail loudly.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import re
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


# ---------------------------------------------------------------- what PyTorch resolves in NVML

TORCH_DRIVER_API = Path("include") / "c10" / "cuda" / "driver_api.h"


def torch_nvml_functions() -> set[str]:
    """The NVML functions PyTorch's c10/cuda/driver_api.h lists in C10_NVML_DRIVER_API and
    C10_NVML_DRIVER_API_OPTIONAL (both branches of its CUDA-version #if), read from the header of
    the installed torch without importing it."""
    spec = importlib.util.find_spec("torch")
    header = (Path(spec.origin).parent / TORCH_DRIVER_API) if spec and spec.origin else None
    if header is None or not header.is_file():
        pytest.skip("torch's C++ headers are not installed")
    names: set[str] = set()
    text = header.read_text(encoding="utf-8")
    for match in re.finditer(r"#define C10_NVML_DRIVER_API(?:_OPTIONAL)?\(_\)((?:.*\\\n)*.*)",
                             text):
        names.update(re.findall(r"\b_\((nvml\w+)\)", match.group(1)))
    return names


def test_the_fake_exports_every_nvml_function_torch_resolves(fake_nvml_lib: Path):
    """torch asserts "Can't find nvml...: undefined symbol" at its first CUDA allocation when the
    NVML it loads lacks one, so a process with the fake in front would die before the fault a
    test means to provoke."""
    wanted = torch_nvml_functions()
    assert {"nvmlInit_v2", "nvmlDeviceGetNvLinkRemoteDeviceType"} <= wanted  # the header parsed
    library = ctypes.CDLL(str(fake_nvml_lib / fakegpu.LIBRARY_NAME))
    assert sorted(name for name in wanted if not hasattr(library, name)) == []


READ_NVLINK = """
import json, pynvml as n
def answer(call):
    try:
        value = call()
    except n.NVMLError as exc:
        return exc.value
    return value.busId if hasattr(value, "busId") else value
n._LoadNvmlLibrary()
lib = n.nvmlLib
out = {"before_init": lib.nvmlDeviceGetNvLinkRemoteDeviceType(None, 0, None)}
n.nvmlInit()
out["gpus"] = []
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    out["gpus"].append({
        "types": [answer(lambda: n.nvmlDeviceGetNvLinkRemoteDeviceType(h, k)) for k in range(3)],
        "pci": [answer(lambda: n.nvmlDeviceGetNvLinkRemotePciInfo(h, k)) for k in range(3)],
        "fabric": answer(lambda: n.nvmlDeviceGetGpuFabricInfoV(h, n.c_nvmlGpuFabricInfoV_t())),
        "null_type": lib.nvmlDeviceGetNvLinkRemoteDeviceType(h, 0, None),
        "null_pci": lib.nvmlDeviceGetNvLinkRemotePciInfo_v2(h, 0, None),
        "null_fabric": lib.nvmlDeviceGetGpuFabricInfoV(h, None),
    })
print(json.dumps(out))
"""

NOT_SUPPORTED, INVALID_ARGUMENT = 3, 2


def test_nvlink_and_fabric_calls_answer_as_a_driver_does(fake_nvml):
    scenario = h100_node(4)
    gpus = scenario["gpus"]
    # GPU 0: no NVLink, as on a PCIe card. GPU 1: two links, to an NVSwitch and to a GPU whose
    # PCI address the scenario does not give. GPU 2: links declared, the group unsupported.
    gpus[1]["nvlinks"] = [{"remote_type": "switch", "remote_pci_bus_id": "00000000:05:00.0"},
                          {"remote_type": "gpu"}]
    gpus[2].update(nvlinks=gpus[1]["nvlinks"], unsupported=["nvlink"])
    gpus[3]["lost"] = True
    completed = run_python(READ_NVLINK, fake_nvml(scenario))
    assert completed.returncode == 0, completed.stderr
    out = json.loads(completed.stdout)
    assert out["before_init"] == 1  # NVML_ERROR_UNINITIALIZED
    none, linked, unsupported, lost = out["gpus"]
    assert none == {"types": [NOT_SUPPORTED] * 3, "pci": [NOT_SUPPORTED] * 3,
                    "fabric": NOT_SUPPORTED, "null_type": NOT_SUPPORTED,
                    "null_pci": NOT_SUPPORTED, "null_fabric": INVALID_ARGUMENT}
    assert linked["types"] == [2, 0, INVALID_ARGUMENT]  # SWITCH, GPU, a link past the two
    assert linked["pci"] == ["00000000:05:00.0", NOT_SUPPORTED, INVALID_ARGUMENT]
    assert linked["fabric"] == NOT_SUPPORTED  # no scenario is in an NVLink fabric
    assert (linked["null_type"], linked["null_pci"]) == (INVALID_ARGUMENT, INVALID_ARGUMENT)
    assert unsupported["types"] == unsupported["pci"] == [NOT_SUPPORTED] * 3
    assert lost["types"] == [15] * 3 and lost["fabric"] == 15  # NVML_ERROR_GPU_IS_LOST


def test_nvlink_calls_follow_injected_errors_and_a_broken_driver(fake_nvml):
    scenario = fakegpu.broken_driver(fakegpu.NVML_ERROR_DRIVER_NOT_LOADED)
    completed = run_python("import pynvml; pynvml.nvmlInit()", fake_nvml(scenario))
    assert "NVMLError_DriverNotLoaded" in completed.stderr
    scenario = h100_node(1)
    scenario["errors"] = {"nvmlDeviceGetNvLinkRemoteDeviceType": fakegpu.NVML_ERROR_UNKNOWN}
    completed = run_python(READ_NVLINK, fake_nvml(scenario))
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["gpus"][0]["types"] == [fakegpu.NVML_ERROR_UNKNOWN] * 3


@pytest.mark.parametrize(("links", "message"), [
    ({"remote_type": "nvswitch"}, "gpus[0].nvlinks[0].remote_type must be gpu, ibmnpu, switch"),
    ({"remote_bus": "00000000:05:00.0"}, "remote_bus"),
])
def test_a_misspelt_nvlink_is_refused(fake_nvml, links, message):
    scenario = h100_node(1)
    scenario["gpus"][0]["nvlinks"] = [links]
    completed = run_python("import pynvml; pynvml.nvmlInit()", fake_nvml(scenario))
    assert completed.returncode != 0
    assert message in completed.stderr
