"""A fake NVIDIA machine for tests and benchmarks: the C fake of ``libnvidia-ml.so.1``.

The fake in ``tests/fakenvml/`` is compiled once per source version into
``tests/fakenvml/build/<hash>/libnvidia-ml.so.1`` and loaded by the *real* ``pynvml`` through the
dynamic loader, so a test must run the code under test in a subprocess started with the
environment these helpers return (``LD_LIBRARY_PATH`` and ``FAKE_NVML_SCENARIO``)::

    def test_scan_sees_three_uvicorns(fake_nvml, cli_env):
        env = fake_nvml(gtx1650_laptop(uvicorn_pids=pids), base=cli_env)
        subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json"], env=env, ...)

Scenario format (JSON; every key optional)
------------------------------------------
Top level: ``driver_version`` ("550.90.07"), ``nvml_version`` ("12.550.90.07"),
``cuda_driver_version`` (12040 means CUDA 12.4), ``init_error`` (an NVML return code that
``nvmlInit`` answers, e.g. 9 driver not loaded, 18 library/driver version mismatch, 4 no
permission), ``call_delay_ms`` (every call sleeps this long: a slow driver), ``hang`` (function
names that never return, e.g. ``"nvmlInitWithFlags"``), ``errors`` (``{"function": code}``),
``missing_symbols`` (entry points that answer NVML_ERROR_FUNCTION_NOT_FOUND, as an older driver
lacking them would), ``unknown_field_ids`` (``nvmlDeviceGetFieldValues`` ids an older driver
does not know: answered NVML_ERROR_INVALID_ARGUMENT), ``gpus`` (a list).

Per GPU: the field names of :class:`gpu_audit.model.Gpu` (``uuid``, ``name``, ``pci_bus_id``,
``memory_total_bytes``, ``power_draw_w``, ``compute_mode`` as "default", ``brand`` as "geforce",
``architecture`` as "turing", ``compute_capability`` as "7.5", ``throttle_reasons_mask``, ...)
plus ``pci_device_id``, ``encoder_utilization_pct``, ``decoder_utilization_pct``,
``graphics_clock_mhz``, ``pcie_gen_gpu_max``, ``pcie_tx_kbps``/``pcie_rx_kbps``, ``display_mode``,
``ecc_mode_pending`` and ``mig_mode_pending`` (default: the current mode; the graphics clocks
default to the SM clocks). A field that is absent or null answers NVML_ERROR_NOT_SUPPORTED.
``memory_used_bytes`` defaults to the sum of the processes' memory. Faults: ``lost`` (every call
answers GPU_IS_LOST), ``unsupported`` (groups or function names answering NOT_SUPPORTED: see
:data:`UNSUPPORTED_GROUPS`), ``unsupported_field_ids`` (``nvmlDeviceGetFieldValues`` ids answered
NOT_SUPPORTED while the dedicated calls still answer), ``hang`` and ``errors`` as above but for
this GPU only.
``processes``: a list of ``{"pid", "used_memory_bytes"`` (null: not available),
``"type"`` ("compute", "graphics" or "compute+graphics")``, "gpu_instance_id",
"compute_instance_id"`` (the MIG instance it runs in)``}``.
``mig_devices`` (a GPU with ``mig_mode`` true): a list of MIG devices, each a handle of its own
(``nvmlDeviceGetMigDeviceHandleByIndex``) with ``uuid``, ``name``, ``gpu_instance_id``,
``compute_instance_id``, ``memory_total_bytes``, ``memory_used_bytes`` (default: its processes'),
``multiprocessor_count``, ``gpu_instance_slice_count``, ``compute_instance_slice_count``,
``shared_*_count`` (``nvmlDeviceGetAttributes``) and ``unsupported``/``hang``/``errors``; a MIG
handle lists the parent's processes whose instance ids are its own. See :func:`h100_mig_gpu`.
``nvlinks``: a GPU's NVLinks, a list of ``{"remote_type"`` ("gpu", "ibmnpu", "switch" or
"unknown")``, "remote_pci_bus_id"}`` (``nvmlDeviceGetNvLinkRemoteDeviceType``,
``nvmlDeviceGetNvLinkRemotePciInfo_v2``; a link past the list is an invalid argument). Without
it the GPU has no NVLink and those calls answer NOT_SUPPORTED; ``nvmlDeviceGetGpuFabricInfoV``
always does (no scenario is in an NVLink fabric). PyTorch resolves these at its first CUDA
allocation, so they exist even though gpu-audit does not call them.

The fake rejects unknown keys (``nvmlInit`` then fails with NVML_ERROR_UNKNOWN and says why on
stderr), so a misspelt field never passes for an unsupported one.

Test modules load the fixtures with ``pytest_plugins = ["tests.fakegpu"]``; this module holds no
assertions of its own, so pytest need not rewrite it (PYTEST_DONT_REWRITE) and does not warn when a
test module has imported it first.
"""

from __future__ import annotations

import ctypes.util
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
FAKE_SOURCE_DIR = Path(__file__).resolve().parent / "fakenvml"
FAKE_BUILD_DIR = FAKE_SOURCE_DIR / "build"
LIBRARY_NAME = "libnvidia-ml.so.1"
_SOURCES = ("fakenvml.c", "json.c", "json.h")

MIB = 1024**2
GIB = 1024**3

# Names a GPU's "unsupported" list may use, each covering the calls of one kind.
UNSUPPORTED_GROUPS = (
    "uuid",
    "name",
    "pci",
    "serial",
    "brand",
    "architecture",
    "compute_capability",
    "memory",
    "bar1",
    "utilization",
    "encoder",
    "decoder",
    "temperature",
    "temperature_thresholds",
    "fan",
    "power",
    "power_limit",
    "power_default_limit",
    "clocks",
    "max_clocks",
    "performance_state",
    "throttle_reasons",
    "persistence",
    "compute_mode",
    "mig",
    "ecc",
    "retired_pages",
    "remapped_rows",
    "pcie",
    "display",
    "processes",
    "process_utilization",
    "nvlink",  # NVLink remote device type and PCI info, GPU fabric info
)

# NVML return codes a scenario may inject.
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_UNKNOWN = 999

# Linux never hands out a PID above PID_MAX_LIMIT (2**22), so these belong to no process: use
# them for processes a test does not start itself (they read as "not visible").
ABSENT_PID_BASE = 4_194_400


class FakeNvmlUnavailable(RuntimeError):
    """The fake cannot be built or used here (not Linux, or no C compiler)."""


# ---------------------------------------------------------------------------------- building


def _source_digest(compiler: str) -> str:
    digest = hashlib.sha256(compiler.encode())
    for name in _SOURCES:
        digest.update(name.encode() + b"\0" + (FAKE_SOURCE_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def build_fake_nvml() -> Path:
    """Compile the fake (once per source version) and return the folder holding the library.

    Safe when several test processes build at once: each compiles to its own temporary file and
    renames it into place; the rename is atomic and every writer writes the same bytes.
    """
    if not sys.platform.startswith("linux"):
        raise FakeNvmlUnavailable("the fake NVML is a Linux shared library")
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        raise FakeNvmlUnavailable(
            f"no C compiler ({compiler!r} not on PATH) to build the fake NVML"
        )
    out_dir = FAKE_BUILD_DIR / _source_digest(compiler)
    library = out_dir / LIBRARY_NAME
    if library.exists():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{LIBRARY_NAME}.", suffix=".tmp", dir=out_dir)
    os.close(fd)
    command = [
        compiler,
        "-shared",
        "-fPIC",
        "-O2",
        "-Wall",
        "-fvisibility=hidden",
        "-o",
        tmp,
        str(FAKE_SOURCE_DIR / "fakenvml.c"),
        str(FAKE_SOURCE_DIR / "json.c"),
        "-lpthread",
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(
                f"building the fake NVML failed:\n{' '.join(command)}\n{result.stderr}"
            )
        os.replace(tmp, library)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out_dir


# ------------------------------------------------------------------------------- environments


def _without_nvml_dirs(path_list: str) -> list[str]:
    return [d for d in path_list.split(os.pathsep) if d and not (Path(d) / LIBRARY_NAME).exists()]


def _base_environment(base: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("FAKE_NVML_SCENARIO", None)
    return env


def write_scenario(scenario: Mapping[str, Any], directory: Path) -> Path:
    """Write ``scenario`` as JSON under ``directory`` and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix="nvml-scenario-", suffix=".json", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(scenario, handle, indent=1)
    return Path(name)


def scenario_env(
    scenario: Mapping[str, Any], directory: Path, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Environment in which ``pynvml`` (in a child process) loads the fake playing ``scenario``.

    ``base`` defaults to this process's environment; ``PYTHONPATH`` gains the repository root.
    """
    lib_dir = build_fake_nvml()
    env = _base_environment(base)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(lib_dir), *_without_nvml_dirs(env.get("LD_LIBRARY_PATH", ""))]
    )
    env["FAKE_NVML_SCENARIO"] = str(write_scenario(scenario, directory))
    # The fake plays NVML only: the driver's /proc folder and /dev are those the test gives
    # (none by default), never the machine's own (gpu_audit.collect.identity).
    for name in ("GPU_AUDIT_PROC_NVIDIA", "GPU_AUDIT_DEV"):
        env.setdefault(name, str(directory / "no-such-folder"))
    return env


def real_nvml_installed() -> bool:
    """A real libnvidia-ml in the loader's cache, which no environment variable can hide."""
    return ctypes.util.find_library("nvidia-ml") is not None


def no_nvml_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment with no libnvidia-ml on ``LD_LIBRARY_PATH`` (as on a machine without a driver).

    A library registered with the system loader stays findable; check :func:`real_nvml_installed`.
    """
    env = _base_environment(base)
    kept = _without_nvml_dirs(env.get("LD_LIBRARY_PATH", ""))
    if kept:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(kept)
    else:
        env.pop("LD_LIBRARY_PATH", None)
    return env


# ---------------------------------------------------------------------------------- scenarios


def absent_pids(count: int, start: int = 0) -> list[int]:
    """PIDs no process can have (see :data:`ABSENT_PID_BASE`)."""
    return [ABSENT_PID_BASE + start + i for i in range(count)]


def process(pid: int, used_memory_bytes: int | None, kind: str = "compute") -> dict[str, Any]:
    return {"pid": pid, "used_memory_bytes": used_memory_bytes, "type": kind}


def gtx1650_laptop(
    uvicorn_pids: Sequence[int],
    daemon_pid: int | None = None,
    xorg_pid: int | None = None,
) -> dict[str, Any]:
    """A 4 GiB GeForce GTX 1650 laptop GPU held by three uvicorn backends and a monitor.

    As reported on such a machine: Xorg holds a 4 MiB graphics context, each uvicorn backend
    (compute) 154 MiB, a monitoring daemon 114 MiB; 585 MiB used in all. Consumer parts lack ECC,
    row remapping, page retirement, MIG, a serial number, a readable fan and power limits.
    ``uvicorn_pids`` are usually real processes a test started; the daemon and Xorg default to
    PIDs that exist nowhere.
    """
    if len(uvicorn_pids) != 3:
        raise ValueError("the GTX 1650 story has exactly three uvicorn backends")
    daemon = absent_pids(1, 1)[0] if daemon_pid is None else daemon_pid
    xorg = absent_pids(1, 0)[0] if xorg_pid is None else xorg_pid
    processes = [
        process(xorg, 4 * MIB, "graphics"),
        *(process(pid, 154 * MIB) for pid in uvicorn_pids),
        process(daemon, 114 * MIB),
    ]
    gpu = {
        "name": "NVIDIA GeForce GTX 1650",
        "uuid": "GPU-6f3a9c1e-2b7d-4e8a-9c55-1d2e3f4a5b6c",
        "pci_bus_id": "00000000:01:00.0",
        "pci_device_id": 0x1F9110DE,
        "brand": "geforce",
        "architecture": "turing",
        "compute_capability": "7.5",
        "memory_total_bytes": 4096 * MIB,
        "memory_reserved_bytes": 77 * MIB,
        "memory_used_bytes": 585 * MIB,
        "bar1_total_bytes": 256 * MIB,
        "bar1_used_bytes": 5 * MIB,
        "utilization_pct": 3,
        "memory_utilization_pct": 1,
        "encoder_utilization_pct": 0,
        "decoder_utilization_pct": 0,
        "temperature_c": 46,
        "temperature_slowdown_c": 98,
        "temperature_shutdown_c": 101,
        "temperature_max_operating_c": 87,
        "power_draw_w": 4.2,
        "sm_clock_mhz": 300,
        "memory_clock_mhz": 405,
        "sm_clock_max_mhz": 2100,
        "memory_clock_max_mhz": 4001,
        "performance_state": 8,
        "throttle_reasons_mask": 0x1,
        "persistence_mode": False,
        "compute_mode": "default",
        "pcie_gen_current": 1,
        "pcie_gen_max": 3,
        "pcie_width_current": 16,
        "pcie_width_max": 16,
        "pcie_tx_kbps": 0,
        "pcie_rx_kbps": 0,
        "display_active": False,
        "processes": processes,
        # Present in the data above or not, these read as "not supported" on this part.
        "unsupported": [
            "serial",
            "fan",
            "power_limit",
            "power_default_limit",
            "mig",
            "ecc",
            "retired_pages",
            "remapped_rows",
        ],
    }
    return {
        "description": "GeForce GTX 1650 laptop, three uvicorn backends",
        "driver_version": "580.95.05",
        "nvml_version": "13.580.95.05",
        "cuda_driver_version": 13000,
        "gpus": [gpu],
    }


_H100_BUS_IDS = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


def h100_gpu(index: int) -> dict[str, Any]:
    """One healthy, idle H100 80GB HBM3 (SXM) as seen in a DGX-class node."""
    bus = _H100_BUS_IDS[index % len(_H100_BUS_IDS)]
    return {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": f"GPU-{index:08x}-a1b2-4c3d-8e9f-0123456789ab",
        "pci_bus_id": f"00000000:{bus}:00.0",
        "pci_device_id": 0x233010DE,
        "pci_subsystem_id": 0x16C110DE,
        "serial": f"16549220{index:05d}",
        "brand": "nvidia",
        "architecture": "hopper",
        "compute_capability": "9.0",
        "memory_total_bytes": 81559 * MIB,
        "memory_reserved_bytes": 530 * MIB,
        "bar1_total_bytes": 128 * GIB,
        "bar1_used_bytes": 1 * MIB,
        "utilization_pct": 0,
        "memory_utilization_pct": 0,
        "encoder_utilization_pct": 0,
        "decoder_utilization_pct": 0,
        "temperature_c": 31 + index % 4,
        "temperature_slowdown_c": 90,
        "temperature_shutdown_c": 92,
        "temperature_max_operating_c": 87,
        "memory_temperature_c": 38 + index % 4,  # HBM3
        "memory_temperature_max_c": 95,
        "power_draw_w": 71.5,
        "power_limit_w": 700.0,
        "power_default_limit_w": 700.0,
        "power_min_limit_w": 200.0,
        "power_max_limit_w": 700.0,
        "sm_clock_mhz": 345,
        "memory_clock_mhz": 2619,
        "sm_clock_max_mhz": 1980,
        "memory_clock_max_mhz": 2619,
        "performance_state": 0,
        "throttle_reasons_mask": 0x1,
        "persistence_mode": True,
        "compute_mode": "default",
        "mig_mode": False,
        "ecc_mode": True,
        "ecc_errors_corrected_volatile": 0,
        "ecc_errors_uncorrected_volatile": 0,
        "ecc_errors_corrected_aggregate": 0,
        "ecc_errors_uncorrected_aggregate": 0,
        "remapped_rows_correctable": 0,
        "remapped_rows_uncorrectable": 0,
        "remapped_rows_pending": False,
        "remapped_rows_failure": False,
        "pcie_gen_current": 5,
        "pcie_gen_max": 5,
        "pcie_width_current": 16,
        "pcie_width_max": 16,
        "pcie_tx_kbps": 1200,
        "pcie_rx_kbps": 800,
        "display_active": False,
        "processes": [],
        # SXM boards have no fan of their own; Hopper remaps rows instead of retiring pages.
        "unsupported": ["fan", "retired_pages"],
    }


def h100_node(
    n: int = 8, pids: Iterable[int] = (), process_memory_bytes: int = 40 * GIB
) -> dict[str, Any]:
    """A healthy node of ``n`` H100 80GB SXM GPUs (CC 9.0, ECC and persistence on, PCIe gen5 x16).

    Each PID in ``pids`` becomes a compute process on GPU ``k % n`` (one rank per GPU) holding
    ``process_memory_bytes``.
    """
    gpus = [h100_gpu(i) for i in range(n)]
    for k, pid in enumerate(pids):
        gpus[k % n]["processes"].append(process(pid, process_memory_bytes))
    return {
        "description": f"{n}x H100 80GB HBM3 node",
        "driver_version": "550.90.07",
        "nvml_version": "12.550.90.07",
        "cuda_driver_version": 12040,
        "gpus": gpus,
    }


# H100 80GB MIG profiles: (name, GPU slices, SMs, memory in MiB) as such a GPU lists them.
H100_MIG_PROFILES = {
    "1g.10gb": (1, 16, 9984),
    "2g.20gb": (2, 32, 19968),
    "3g.40gb": (3, 60, 40192),
    "4g.40gb": (4, 64, 40192),
    "7g.80gb": (7, 132, 80384),
}


def mig_device(
    gpu_index: int, gpu_instance_id: int, profile: str = "1g.10gb", compute_instance_id: int = 0,
    used_memory_bytes: int | None = None,
) -> dict[str, Any]:
    """One MIG device of an H100 80GB (a GPU instance with one compute instance over all of it);
    its memory used is its processes' unless ``used_memory_bytes`` is given."""
    slices, sms, memory_mib = H100_MIG_PROFILES[profile]
    device = {
        "uuid": f"MIG-{gpu_index:08x}-{gpu_instance_id:04x}-4c3d-8e9f-{compute_instance_id:012x}",
        "name": f"NVIDIA H100 80GB HBM3 MIG {profile}",
        "gpu_instance_id": gpu_instance_id,
        "compute_instance_id": compute_instance_id,
        "memory_total_bytes": memory_mib * MIB,
        "multiprocessor_count": sms,
        "gpu_instance_slice_count": slices,
        "compute_instance_slice_count": slices,
        "shared_copy_engine_count": slices,
    }
    if used_memory_bytes is not None:
        device["memory_used_bytes"] = used_memory_bytes
    return device


def h100_mig_gpu(index: int, profiles: Sequence[str] = ("3g.40gb", "2g.20gb", "1g.10gb")) -> dict:
    """An H100 in MIG mode with one GPU instance (and one compute instance) per profile.

    As NVML reports such a GPU: utilization is not supported on the parent (it is per instance
    in MIG mode); memory on the parent covers all instances.
    """
    gpu = h100_gpu(index)
    gpu_instance_ids = {"7g.80gb": 0, "4g.40gb": 1, "3g.40gb": 2, "2g.20gb": 3, "1g.10gb": 7}
    taken: set[int] = set()
    devices = []
    for profile in profiles:
        gi = gpu_instance_ids[profile]
        while gi in taken:
            gi += 1
        taken.add(gi)
        devices.append(mig_device(index, gi, profile))
    gpu.update(mig_mode=True, utilization_pct=None, memory_utilization_pct=None,
               mig_devices=devices)
    return gpu


def broken_driver(code: int) -> dict[str, Any]:
    """A node whose NVML fails to initialise with return code ``code`` (e.g. 9, 18, 4)."""
    scenario = h100_node(1)
    scenario["description"] = f"nvmlInit fails with NVML return code {code}"
    scenario["init_error"] = code
    return scenario


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def fake_nvml_lib() -> Path:
    """Folder holding the compiled fake ``libnvidia-ml.so.1`` (built once per session)."""
    try:
        return build_fake_nvml()
    except FakeNvmlUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def fake_nvml(fake_nvml_lib: Path, tmp_path: Path) -> Callable[..., dict[str, str]]:
    """``fake_nvml(scenario, base=None) -> env`` for a subprocess that should see that machine."""

    def make(scenario: Mapping[str, Any], base: Mapping[str, str] | None = None) -> dict[str, str]:
        return scenario_env(scenario, tmp_path / "nvml", base)

    return make
