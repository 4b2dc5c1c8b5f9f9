"""A function missing from a driver library torch loaded: torch resolves a fixed list of NVML
and libcuda functions at its first CUDA allocation (c10/cuda/driver_api.cpp) and stops with an
INTERNAL ASSERT naming the one it could not find. For NVML that is a stub or an old copy of
libnvidia-ml.so.1 ahead of the driver's (or an old driver); for libcuda a driver older than the
CUDA torch needs. Synthetic fixtures in fixtures/ (the whole failure) and fixtures/shapes/."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.explain import Incident, classify_text
from gpu_audit.model import Severity
from tests.explain.helpers import fixture_incidents, shape_incidents, text_incidents

WHOLE = "nvml_library_lacks_function_first_allocation.log"  # in fixtures/, the others in shapes/


def incidents(name: str) -> list[Incident]:
    return fixture_incidents(name) if name == WHOLE else shape_incidents(name)


def root(name: str) -> Incident:
    found = [i for i in incidents(name) if i.role == "root-cause"]
    assert found, f"{name}: no failure found"
    return found[0]

MISSING = "nvml-unavailable/library-function-missing"


@pytest.mark.parametrize(("name", "function", "library"), [
    # the warning, then the traceback of the first allocation
    (WHOLE, "nvmlDeviceGetNvLinkRemoteDeviceType",
     "/srv/jobs/venv/lib/nvidia-shim/libnvidia-ml.so.1"),
    # every line behind torchrun's "[rank0]: "
    ("nvml_function_missing_torchrun.log", "nvmlSystemGetCudaDriverVersion_v2",
     "/usr/local/cuda/lib64/stubs/libnvidia-ml.so.1"),
    # cut at 80 columns, inside words
    ("nvml_function_missing_cut_at_80_columns.log", "nvmlDeviceGetComputeRunningProcesses",
     "/usr/lib/wsl/lib/libnvidia-ml.so.1"),
])
def test_the_missing_function_is_the_root_cause(name: str, function: str, library: str) -> None:
    found = root(name)
    assert (found.cls, found.signature, found.severity) == (
        "nvml-unavailable", MISSING, Severity.ERROR)
    assert found.numbers["function"] == function
    assert found.numbers["library"] == library
    assert found.numbers["source_line"] == 37
    # the warning before it stays context, after it
    warning = [i for i in incidents(name) if i.signature == "nvml-unavailable/torch-warning"]
    assert warning and warning[0].role == "context" and not warning[0].is_failure


def test_the_advice_says_how_to_find_the_library_loaded() -> None:
    found = root(WHOLE)
    for paste in ("ldconfig -p | grep libnvidia-ml", 'echo "$LD_LIBRARY_PATH"',
                  "grep libnvidia-ml /proc/<pid>/maps", "ctypes.CDLL('libnvidia-ml.so.1')",
                  "update the NVIDIA driver"):
        assert paste in found.remedy, paste
    assert "nvmlDeviceGetNvLinkRemoteDeviceType" in found.explanation


@pytest.mark.parametrize(("name", "words"), [
    ("nvml_function_missing_torchrun.log", "CUDA toolkit's stub"),
    ("nvml_function_missing_cut_at_80_columns.log", "WSL's copy"),
])
def test_the_library_path_says_whose_copy(name: str, words: str) -> None:
    assert words in root(name).explanation


def test_a_page_that_quotes_the_message_raises_no_error() -> None:
    found = shape_incidents("nvml_function_missing_explainer_page.log")
    assert [i.signature for i in found] == [MISSING]  # still read ...
    assert not found[0].is_failure  # ... as a quotation


@pytest.mark.parametrize(("line", "function", "library"), [
    # dlerror's words alone, the assert's head cut off
    ("Can't find nvmlInit_v2: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1: undefined symbol: "
     "nvmlInit_v2", "nvmlInit_v2", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"),
    # the line cut after the function's name
    ("Can't find nvmlDeviceGetHandleByPciBusId_v2:", "nvmlDeviceGetHandleByPciBusId_v2", None),
    # the assert cut before its file
    ("RuntimeError: r.nvmlDeviceGetNvLinkRemotePciInfo_v2_ INTERNAL ASSERT FAILED",
     "nvmlDeviceGetNvLinkRemotePciInfo_v2", None),
    # another program's loader error for the same library
    ("python: symbol lookup error: /opt/app/lib/libnvidia-ml.so.1: undefined symbol: "
     "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfoV",
     "/opt/app/lib/libnvidia-ml.so.1"),
])
def test_parts_of_the_message_mid_log(tmp_path: Path, line: str, function: str,
                                      library: str | None) -> None:
    # mid-log, so that only the prefilter's keys bring the line to the signatures
    text = "epoch 1\n" + line + "\n" + "".join(f"step {n}\n" for n in range(20))
    found = [i for i in text_incidents(tmp_path, text) if i.role == "root-cause"]
    assert found and found[0].signature == MISSING, line
    assert found[0].numbers["function"] == function
    assert found[0].numbers.get("library") == library


@pytest.mark.parametrize(("line", "function"), [
    # torch releases that print dlerror's words after the name
    ('RuntimeError: r.cuMemCreate_ INTERNAL ASSERT FAILED at "../c10/cuda/driver_api.cpp":15, '
     "please report a bug to PyTorch. Can't find cuMemCreate: "
     "/usr/lib/x86_64-linux-gnu/libcuda.so.1: undefined symbol: cuMemCreate", "cuMemCreate"),
    # ... and those that look the function up by version and print only its name
    ('RuntimeError: r.cuDeviceGet_ INTERNAL ASSERT FAILED at '
     '"/pytorch/c10/cuda/driver_api.cpp":21, please report a bug to PyTorch. Can\'t find '
     "cuDeviceGet", "cuDeviceGet"),
])
def test_a_driver_function_missing_from_libcuda_is_an_old_driver(line: str,
                                                                 function: str) -> None:
    (found, *_) = classify_text(line)
    assert found.signature == "driver-mismatch/driver-older-than-cuda"
    assert found.numbers["function"] == function
    assert found.role == "root-cause"
