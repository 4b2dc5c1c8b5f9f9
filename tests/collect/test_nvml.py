"""The NVML collector against the fake libnvidia-ml, loaded by the real pynvml in a child process.

Each test describes a machine (a scenario), runs ``read_nvml`` in a subprocess that sees only that
machine, and checks what a user of ``gpu-audit scan`` would rely on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpu_audit.collect.nvml import NvmlReading, cuda_version_text, throttle_reason_names
from gpu_audit.model import Gpu
from gpu_audit.serial import from_jsonable
from tests.fakegpu import (
    MIB,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_UNKNOWN,
    absent_pids,
    broken_driver,
    gtx1650_laptop,
    h100_gpu,
    h100_node,
    no_nvml_env,
    process,
    real_nvml_installed,
)

pytest_plugins = ["tests.fakegpu"]

READ = """
import json, sys, time
from gpu_audit.collect.nvml import read_nvml
from gpu_audit.serial import to_jsonable
started = time.monotonic()
readings = [read_nvml(timeout_s=float(sys.argv[1])) for _ in range(int(sys.argv[2]))]
elapsed = time.monotonic() - started
print(json.dumps({"readings": [to_jsonable(r) for r in readings], "elapsed_s": elapsed}))
"""


# Scheduling slack for timing bounds on a loaded 2-core CI runner.
SLACK_S = 1.5


class Run:
    """What one child process read, and how long it took."""

    def __init__(self, completed: subprocess.CompletedProcess[str], wall_s: float) -> None:
        assert completed.returncode == 0, completed.stderr
        doc = json.loads(completed.stdout)
        self.readings = [from_jsonable(NvmlReading, r) for r in doc["readings"]]
        self.reading = self.readings[0]
        self.read_s: float = doc["elapsed_s"]
        self.wall_s = wall_s
        self.stderr = completed.stderr


def read_in_child(env: dict[str, str], timeout_s: float = 5.0, repeat: int = 1) -> Run:
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-c", READ, str(timeout_s), str(repeat)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Run(completed, time.monotonic() - started)


def expected_gpu(index: int, scenario_gpu: dict[str, Any]) -> Gpu:
    """The Gpu a correct collector builds from a scenario GPU (unsupported groups -> None)."""
    fields = {k: v for k, v in scenario_gpu.items() if k in Gpu.__struct_fields__}
    mask = fields.get("throttle_reasons_mask")
    if mask is not None:
        fields["throttle_reasons"] = throttle_reason_names(mask)
    total = fields.get("memory_total_bytes")
    if total is not None and "memory_used_bytes" not in fields:
        fields["memory_used_bytes"] = sum(
            p["used_memory_bytes"] or 0 for p in scenario_gpu.get("processes", [])
        )
    if total is not None:
        fields["memory_free_bytes"] = (
            total - fields.get("memory_reserved_bytes", 0) - fields["memory_used_bytes"]
        )
    # What the fake answers for a field the scenario leaves out: the graphics clocks follow the
    # SM clocks, a pending mode is the current one.
    fields.setdefault("minor_number", index)  # the fake's minor number: the index by default
    for field, default in (("graphics_clock_mhz", "sm_clock_mhz"),
                           ("graphics_clock_max_mhz", "sm_clock_max_mhz"),
                           ("ecc_mode_pending", "ecc_mode"), ("mig_mode_pending", "mig_mode")):
        if field not in fields and fields.get(default) is not None:
            fields[field] = fields[default]
    hidden = {
        "fan": ["fan_speed_pct"],
        "retired_pages": ["retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"],
        "serial": ["serial"],
        "power_limit": ["power_limit_w", "power_min_limit_w", "power_max_limit_w"],
        "power_default_limit": ["power_default_limit_w"],
        "mig": ["mig_mode", "mig_mode_pending"],
        "ecc": [k for k in Gpu.__struct_fields__ if k.startswith("ecc_")],
        "remapped_rows": [k for k in Gpu.__struct_fields__ if k.startswith("remapped_rows")],
    }
    for group in scenario_gpu.get("unsupported", []):
        for key in hidden[group]:
            fields.pop(key, None)
    return Gpu(index=index, **fields)


# ------------------------------------------------------------------------------ healthy machines


def test_h100_node_every_field_is_read(fake_nvml):
    pids = [1000 + rank for rank in range(8)]
    scenario = h100_node(8, pids=pids)
    run = read_in_child(fake_nvml(scenario))
    reading = run.reading

    assert reading.status.available
    assert reading.status.library_path and reading.status.library_path.endswith("libnvidia-ml.so.1")
    assert reading.driver is not None
    assert reading.driver.driver_version == "550.90.07"
    assert reading.driver.nvml_version == "12.550.90.07"
    assert reading.driver.cuda_driver_version == "12.4"
    assert reading.probe_errors == []
    assert [gpu.index for gpu in reading.gpus] == list(range(8))
    for index, gpu in enumerate(reading.gpus):
        assert gpu == expected_gpu(index, scenario["gpus"][index])
    # Spot checks in the units a user reads.
    first = reading.gpus[0]
    assert first.compute_capability == "9.0"
    assert first.architecture == "hopper"
    assert first.power_limit_w == 700.0
    assert first.pcie_gen_current == first.pcie_gen_max == 5
    assert first.pcie_width_max == 16
    assert first.ecc_mode is True and first.persistence_mode is True and first.mig_mode is False
    assert first.throttle_reasons == ["gpu_idle"] and first.throttle_reasons_mask == 1
    # SXM boards report no fan; Hopper remaps rows rather than retiring pages.
    assert first.fan_speed_pct is None and first.retired_pages_sbe is None
    # One compute process per GPU, in NVML's order, with its GPU's UUID.
    assert [(p.pid, p.gpu_index, p.type) for p in reading.processes] == [
        (pid, rank, "compute") for rank, pid in enumerate(pids)
    ]
    assert all(p.gpu_uuid == reading.gpus[p.gpu_index].uuid for p in reading.processes)
    assert all(p.used_memory_bytes == 40 * 1024**3 for p in reading.processes)


def test_every_gpu_field_is_filled_where_the_hardware_has_it(fake_nvml):
    """A Volta-style board that retires pages and has a fan: no Gpu field is left unread."""
    gpu = h100_gpu(0)
    gpu.update(
        unsupported=["remapped_rows"],
        fan_speed_pct=38,
        retired_pages_sbe=2,
        retired_pages_dbe=1,
        retired_pages_pending=True,
        ecc_errors_corrected_volatile=5,
        ecc_errors_uncorrected_aggregate=1,
        throttle_reasons_mask=0x4 | 0x20 | 0x400,
        display_active=True,
        compute_mode="exclusive_process",
    )
    scenario = {"driver_version": "535.183.01", "gpus": [gpu]}
    reading = read_in_child(fake_nvml(scenario)).reading

    read = reading.gpus[0]
    # identity_source is set only where the kernel driver named a GPU NVML could not.
    unread = [name for name, value in msgspec.structs.asdict(read).items()
              if value is None and name != "identity_source"]
    assert unread == [
        "remapped_rows_correctable",
        "remapped_rows_uncorrectable",
        "remapped_rows_pending",
        "remapped_rows_failure",
    ]
    assert read == expected_gpu(0, gpu)
    assert (read.retired_pages_sbe, read.retired_pages_dbe, read.retired_pages_pending) == (
        2,
        1,
        True,
    )
    assert read.throttle_reasons == ["sw_power_cap", "sw_thermal_slowdown", "unknown_0x400"]
    assert read.compute_mode == "exclusive_process"
    assert reading.driver is not None and reading.driver.cuda_driver_version is None
    assert reading.probe_errors == []


def test_gtx1650_laptop_unsupported_fields_are_none_without_probe_errors(fake_nvml):
    uvicorns = [31001, 31002, 31003]
    scenario = gtx1650_laptop(uvicorn_pids=uvicorns, daemon_pid=5552)
    reading = read_in_child(fake_nvml(scenario)).reading

    assert reading.status.available
    assert reading.probe_errors == []
    (gpu,) = reading.gpus
    assert gpu == expected_gpu(0, scenario["gpus"][0])
    assert gpu.name == "NVIDIA GeForce GTX 1650"
    assert gpu.compute_capability == "7.5"
    assert gpu.memory_total_bytes == 4096 * MIB
    assert gpu.memory_used_bytes == 585 * MIB
    for unsupported in (
        "serial",
        "fan_speed_pct",
        "power_limit_w",
        "power_default_limit_w",
        "mig_mode",
        "ecc_mode",
        "ecc_errors_uncorrected_volatile",
        "retired_pages_sbe",
        "remapped_rows_correctable",
    ):
        assert getattr(gpu, unsupported) is None, unsupported
    assert gpu.power_draw_w == 4.2
    assert reading.driver is not None and reading.driver.cuda_driver_version == "13.0"
    by_pid = {p.pid: p for p in reading.processes}
    assert [by_pid[pid].used_memory_bytes for pid in uvicorns] == [154 * MIB] * 3
    assert by_pid[5552].used_memory_bytes == 114 * MIB
    xorg = [p for p in reading.processes if p.type == "graphics"]
    assert len(xorg) == 1 and xorg[0].used_memory_bytes == 4 * MIB
    assert xorg[0].pid == absent_pids(1)[0]


def test_machine_with_nvml_but_no_gpu(fake_nvml):
    reading = read_in_child(fake_nvml({"driver_version": "550.90.07", "gpus": []})).reading
    assert reading.status.available
    assert reading.gpus == [] and reading.processes == [] and reading.probe_errors == []
    assert reading.driver is not None and reading.driver.driver_version == "550.90.07"


# ---------------------------------------------------------------------------- processes


def test_process_in_both_lists_is_merged_and_unknown_memory_is_none(fake_nvml):
    scenario = h100_node(1)
    scenario["gpus"][0]["processes"] = [
        process(7001, 2 * 1024**3, "compute+graphics"),
        process(7002, None, "compute"),
        process(7003, 16 * MIB, "graphics"),
    ]
    reading = read_in_child(fake_nvml(scenario)).reading
    assert [(p.pid, p.type, p.used_memory_bytes) for p in reading.processes] == [
        (7001, "compute+graphics", 2 * 1024**3),
        (7002, "compute", None),
        (7003, "graphics", 16 * MIB),
    ]


def test_more_processes_than_the_first_buffer_holds(fake_nvml):
    scenario = h100_node(1)
    scenario["gpus"][0]["processes"] = [process(20000 + i, MIB * (i + 1)) for i in range(150)]
    reading = read_in_child(fake_nvml(scenario)).reading
    assert [p.pid for p in reading.processes] == [20000 + i for i in range(150)]
    assert reading.processes[-1].used_memory_bytes == 150 * MIB
    assert reading.probe_errors == []


# ----------------------------------------------------------------------------- init failures


@pytest.mark.parametrize(
    ("code", "cause", "words"),
    [
        (NVML_ERROR_DRIVER_NOT_LOADED, "driver-not-loaded", "kernel driver is not loaded"),
        (NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version-mismatch", "different driver versions"),
        (NVML_ERROR_NO_PERMISSION, "no-permission", "not allowed"),
        (NVML_ERROR_INSUFFICIENT_RESOURCES, "insufficient-resources", "out of resources"),
        (NVML_ERROR_UNKNOWN, "unknown", "could not be initialised"),
    ],
)
def test_init_error_names_its_cause(fake_nvml, code, cause, words):
    reading = read_in_child(fake_nvml(broken_driver(code))).reading
    status = reading.status
    assert not status.available
    assert status.cause == cause
    assert status.message is not None and words in status.message
    assert status.message.startswith("nvmlInit failed")
    # The library was loaded, so the user learns which one answered.
    assert status.library_path is not None and "libnvidia-ml" in status.library_path
    assert reading.gpus == [] and reading.driver is None and reading.processes == []


def test_no_nvidia_library_at_all():
    if real_nvml_installed():
        pytest.skip("a real libnvidia-ml is registered with the loader and cannot be hidden")
    reading = read_in_child(no_nvml_env()).reading
    assert not reading.status.available
    assert reading.status.cause == "library-not-found"
    assert reading.status.message is not None
    assert "libnvidia-ml.so.1" in reading.status.message
    assert reading.status.library_path is None


def test_a_malformed_scenario_is_reported_not_mistaken_for_a_gpu(fake_nvml):
    """The fake refuses a misspelt field rather than answering 'not supported' for it."""
    scenario = h100_node(1)
    scenario["gpus"][0]["temprature_c"] = 40
    run = read_in_child(fake_nvml(scenario))
    assert not run.reading.status.available
    assert run.reading.status.cause == "unknown"
    assert 'unknown key "temprature_c" in gpus[0]' in run.stderr


# ------------------------------------------------------------------------------ faulty GPUs


def test_lost_gpu_among_four_others_fully_read(fake_nvml):
    scenario = h100_node(4, pids=[501, 502, 503, 504])
    scenario["gpus"][2]["lost"] = True
    reading = read_in_child(fake_nvml(scenario)).reading

    assert reading.status.available
    lost = reading.gpus[2]
    assert lost.lost is True and lost.uuid is None and lost.memory_total_bytes is None
    for index in (0, 1, 3):
        assert reading.gpus[index] == expected_gpu(index, scenario["gpus"][index])
    assert [p.pid for p in reading.processes] == [501, 502, 504]
    (error,) = reading.probe_errors
    assert (error.source, error.subject, error.call) == ("nvml", "gpu:2", "nvmlDeviceGetUUID")
    assert "lost" in error.message and "NVML_ERROR_GPU_IS_LOST" in error.message


def test_permission_denied_call_is_a_probe_error_and_none(fake_nvml):
    scenario = h100_node(2)
    scenario["gpus"][1]["errors"] = {"nvmlDeviceGetClockInfo": NVML_ERROR_NO_PERMISSION}
    reading = read_in_child(fake_nvml(scenario)).reading

    gpu = reading.gpus[1]
    assert gpu.sm_clock_mhz is None and gpu.memory_clock_mhz is None
    assert gpu.graphics_clock_mhz is None
    assert gpu.sm_clock_max_mhz == 1980  # other calls unaffected
    assert gpu.graphics_clock_max_mhz == 1980
    assert reading.gpus[0].sm_clock_mhz == 345
    assert len(reading.probe_errors) == 3  # SM, memory and graphics clock
    for error in reading.probe_errors:
        assert (error.source, error.subject, error.call) == (
            "nvml",
            "gpu:1",
            "nvmlDeviceGetClockInfo",
        )
        assert "NVML_ERROR_NO_PERMISSION" in error.message


def test_driver_version_error_is_reported_and_the_rest_read(fake_nvml):
    scenario = h100_node(1)
    scenario["errors"] = {"nvmlSystemGetDriverVersion": NVML_ERROR_UNKNOWN}
    reading = read_in_child(fake_nvml(scenario)).reading
    assert reading.driver is not None
    assert reading.driver.driver_version is None and reading.driver.cuda_driver_version == "12.4"
    (error,) = reading.probe_errors
    assert (error.subject, error.call) == ("driver", "nvmlSystemGetDriverVersion")
    assert reading.gpus[0].uuid is not None


# ------------------------------------------------------------------------------------ hangs


def test_hanging_call_is_bounded_and_names_the_call(fake_nvml):
    scenario = h100_node(2, pids=[801, 802])
    scenario["gpus"][1]["hang"] = ["nvmlDeviceGetTemperatureV"]
    run = read_in_child(fake_nvml(scenario), timeout_s=1.0)
    reading = run.reading

    assert 0.9 <= run.read_s < 1.0 + SLACK_S
    assert run.wall_s < 5.0  # the stuck daemon thread does not hold the process at exit
    assert reading.gpus[0] == expected_gpu(0, scenario["gpus"][0])
    stuck = reading.gpus[1]
    # What it read before the hang is kept: identity, memory, processes, power and ECC.
    assert stuck.uuid == scenario["gpus"][1]["uuid"]
    assert stuck.memory_total_bytes == scenario["gpus"][1]["memory_total_bytes"]
    assert stuck.power_draw_w == 71.5 and stuck.ecc_mode is True
    assert stuck.temperature_c is None and stuck.sm_clock_mhz is None
    assert [p.pid for p in reading.processes] == [801, 802]
    (error,) = reading.probe_errors
    assert (error.subject, error.call) == ("gpu:1", "nvmlDeviceGetTemperatureV")
    assert error.message == "NVML call nvmlDeviceGetTemperatureV did not return within 1 s"


def test_hanging_power_call_on_an_older_driver(fake_nvml):
    """Power read by the dedicated call (no field-values ids) and that call hangs."""
    scenario = h100_node(1)
    scenario["unknown_field_ids"] = [185, 186, 189, 190]
    scenario["gpus"][0]["hang"] = ["nvmlDeviceGetPowerUsage"]
    run = read_in_child(fake_nvml(scenario), timeout_s=0.5)
    (error,) = run.reading.probe_errors
    assert error.call == "nvmlDeviceGetPowerUsage"
    assert "did not return within 0.5 s" in error.message
    assert run.reading.gpus[0].power_draw_w is None
    assert run.read_s < 0.5 + SLACK_S


def test_hanging_init_is_a_timeout_and_is_not_retried_while_stuck(fake_nvml, tmp_path):
    scenario = h100_node(1)
    scenario["hang"] = ["nvmlInitWithFlags"]
    env = fake_nvml(scenario)
    log = tmp_path / "calls.log"
    env["FAKE_NVML_CALL_LOG"] = str(log)
    run = read_in_child(env, timeout_s=0.4, repeat=2)

    for reading in run.readings:
        assert not reading.status.available
        assert reading.status.cause == "timeout"
        assert reading.status.message is not None and "nvmlInit" in reading.status.message
    assert 0.7 <= run.read_s < 0.8 + SLACK_S
    assert run.wall_s < 5.0
    assert log.read_text().splitlines() == ["nvmlInitWithFlags"]  # one init, still stuck


def test_hanging_device_count(fake_nvml):
    scenario = h100_node(2)
    scenario["hang"] = ["nvmlDeviceGetCount_v2"]
    run = read_in_child(fake_nvml(scenario), timeout_s=0.4)
    assert run.reading.status.cause == "timeout"
    assert run.reading.probe_errors[0].call == "nvmlDeviceGetCount"
    assert run.wall_s < 5.0


def test_hanging_driver_version_call_leaves_the_gpus_read(fake_nvml):
    scenario = h100_node(2)
    scenario["hang"] = ["nvmlSystemGetNVMLVersion"]
    run = read_in_child(fake_nvml(scenario), timeout_s=0.5)
    reading = run.reading
    assert reading.status.available and reading.driver is None
    for index, gpu in enumerate(reading.gpus):
        assert gpu == expected_gpu(index, scenario["gpus"][index])
    (error,) = reading.probe_errors
    assert (error.subject, error.call) == ("driver", "nvmlSystemGetNVMLVersion")
    assert run.wall_s < 5.0


def test_a_hang_on_the_first_gpu_does_not_hold_up_the_others(fake_nvml):
    scenario = h100_node(3, pids=[901, 902, 903])
    scenario["gpus"][0]["hang"] = ["nvmlDeviceGetUUID"]
    run = read_in_child(fake_nvml(scenario), timeout_s=1.0)

    assert 0.9 <= run.read_s < 1.0 + SLACK_S
    assert run.reading.gpus[0].uuid is None
    for index in (1, 2):
        assert run.reading.gpus[index] == expected_gpu(index, scenario["gpus"][index])
    (error,) = run.reading.probe_errors
    assert (error.subject, error.call) == ("gpu:0", "nvmlDeviceGetUUID")


THREADS = """
import json, sys
from gpu_audit.collect.nvml import deadlines as nvml
if sys.argv[1] != "default":
    nvml.FAN_OUT_AFTER_S = float(sys.argv[1])
started = []
start = nvml._Worker.start
def recording_start(self):
    started.append(self.thread.name)
    return start(self)
nvml._Worker.start = recording_start
reading = nvml.read_nvml(timeout_s=5.0)
print(json.dumps({"threads": started, "uuids": [gpu.uuid for gpu in reading.gpus],
                  "errors": [error.message for error in reading.probe_errors]}))
"""


def threads_started(env: dict[str, str], fan_out_after: str) -> dict[str, Any]:
    """The worker threads one read started, and what it read."""
    completed = subprocess.run(
        [sys.executable, "-c", THREADS, fan_out_after],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_a_quick_driver_is_read_by_one_thread_in_turn(fake_nvml):
    """Eight threads passing the interpreter lock around would be slower than one."""
    scenario = h100_node(8)
    # A generous fan-out time, so that a loaded test machine cannot make the driver look slow.
    result = threads_started(fake_nvml(scenario), "2.0")
    gpu_threads = [name for name in result["threads"] if name.startswith("nvml-gpu")]
    assert gpu_threads == ["nvml-gpus"]
    assert result["uuids"] == [gpu["uuid"] for gpu in scenario["gpus"]]
    assert result["errors"] == []


def test_a_slow_driver_gets_a_thread_for_every_gpu_not_yet_begun(fake_nvml):
    scenario = h100_node(4)
    scenario["call_delay_ms"] = 20  # a GPU takes about 0.7 s, far past the fan-out time
    result = threads_started(fake_nvml(scenario), "default")
    assert {"nvml-gpu1", "nvml-gpu2", "nvml-gpu3"} <= set(result["threads"])
    assert result["uuids"] == [gpu["uuid"] for gpu in scenario["gpus"]]
    assert result["errors"] == []


CONCURRENT = """
import json, threading
from gpu_audit.collect.nvml import read_nvml
from gpu_audit.serial import to_jsonable
readings = []
threads = [threading.Thread(target=lambda: readings.append(read_nvml())) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"readings": [to_jsonable(r) for r in readings], "elapsed_s": 0}))
"""


def test_concurrent_reads_initialise_nvml_once(fake_nvml, tmp_path):
    scenario = h100_node(2)
    scenario["call_delay_ms"] = 5
    env = fake_nvml(scenario)
    log = tmp_path / "calls.log"
    env["FAKE_NVML_CALL_LOG"] = str(log)
    completed = subprocess.run(
        [sys.executable, "-c", CONCURRENT], env=env, capture_output=True, text=True, timeout=60
    )
    run = Run(completed, 0.0)
    assert len(run.readings) == 4
    for reading in run.readings:
        assert reading.status.available and reading.probe_errors == []
        assert [gpu.uuid for gpu in reading.gpus] == [g["uuid"] for g in scenario["gpus"]]
    calls = Counter(log.read_text().splitlines())
    assert calls["nvmlInitWithFlags"] == 1
    assert calls["nvmlShutdown"] == 1  # once, at exit


# ------------------------------------------------------------------- older drivers, fallbacks


def test_versioned_functions_fall_back_to_older_ones(fake_nvml, tmp_path):
    scenario = h100_node(4, pids=[901, 902, 903, 904])
    scenario["gpus"][0]["processes"].append(process(905, 8 * MIB, "graphics"))
    scenario["missing_symbols"] = [
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetMemoryInfo_v2",
        "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetTemperatureV",
    ]
    env = fake_nvml(scenario)
    log = tmp_path / "calls.log"
    env["FAKE_NVML_CALL_LOG"] = str(log)
    reading = read_in_child(env).reading

    assert reading.probe_errors == []
    assert reading.driver is not None and reading.driver.cuda_driver_version == "12.4"
    gpu = reading.gpus[0]
    # Memory info v1: the reservation is counted as used and not reported apart.
    assert gpu.memory_reserved_bytes is None
    assert gpu.memory_used_bytes == 40 * 1024**3 + 8 * MIB + 530 * MIB
    assert (
        gpu.memory_free_bytes == scenario["gpus"][0]["memory_total_bytes"] - gpu.memory_used_bytes
    )
    assert gpu.temperature_c == 31 and gpu.throttle_reasons == ["gpu_idle"]
    assert [(p.pid, p.type) for p in reading.processes] == [
        (901, "compute"),
        (905, "graphics"),
        (902, "compute"),
        (903, "compute"),
        (904, "compute"),
    ]
    assert all(p.used_memory_bytes is not None for p in reading.processes)
    calls = Counter(log.read_text().splitlines())
    # The plain (v1) entry point served all four GPUs; a missing version is not asked again
    # by every GPU (a few may race on the first try).
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 4
    assert calls["nvmlDeviceGetGraphicsRunningProcesses_v2"] == 4
    assert 1 <= calls["nvmlDeviceGetComputeRunningProcesses_v3"] <= 4


def test_driver_without_field_values_uses_the_dedicated_calls(fake_nvml):
    volta = h100_gpu(0)
    volta.update(
        unsupported=["remapped_rows"],
        retired_pages_sbe=3,
        retired_pages_dbe=0,
        retired_pages_pending=False,
        ecc_errors_corrected_aggregate=12,
    )
    scenario = {"gpus": [volta, h100_gpu(1)], "missing_symbols": ["nvmlDeviceGetFieldValues"]}
    reading = read_in_child(fake_nvml(scenario)).reading
    assert reading.probe_errors == []
    # The memory temperature is a field value only, with no call of its own: unknown here.
    assert reading.gpus[0] == expected_gpu(0, {**volta, "memory_temperature_c": None})
    assert reading.gpus[1] == expected_gpu(1, {**scenario["gpus"][1], "memory_temperature_c": None})


def test_driver_older_than_the_power_field_ids(fake_nvml):
    scenario = h100_node(1)
    scenario["unknown_field_ids"] = [185, 186, 189, 190]
    reading = read_in_child(fake_nvml(scenario)).reading
    assert reading.probe_errors == []
    assert reading.gpus[0] == expected_gpu(0, scenario["gpus"][0])


# ------------------------------------------------------------------------------ call economy


def test_a_slow_driver_is_queried_concurrently_and_sparingly(fake_nvml, tmp_path):
    """With 20 ms per call, 8 GPUs take about as long as one: each GPU has its own thread."""
    scenario = h100_node(8, pids=[1100 + i for i in range(8)])
    scenario["call_delay_ms"] = 20
    env = fake_nvml(scenario)
    log = tmp_path / "calls.log"
    env["FAKE_NVML_CALL_LOG"] = str(log)
    run = read_in_child(env)

    calls = log.read_text().splitlines()
    per_gpu = (len(calls) - 6) / 8  # init, count, three versions, shutdown at exit
    assert per_gpu <= 37, Counter(calls)
    # Sequentially this would take 8 x 37 x 20 ms = 5.9 s; concurrently about 37 x 20 ms.
    assert run.read_s < 0.02 * (per_gpu + 2) + SLACK_S
    assert run.reading.probe_errors == []


BACKGROUND = """
import json, sys, time
from gpu_audit.collect.nvml import start_read
from gpu_audit.serial import to_jsonable
pending = start_read(timeout_s=float(sys.argv[1]))
time.sleep(float(sys.argv[2]))  # the caller's other work: imports, host and process collection
started = time.monotonic()
reading = pending.result()
waited = time.monotonic() - started
print(json.dumps({"readings": [to_jsonable(reading)], "elapsed_s": waited}))
"""


def test_background_read_runs_while_the_caller_works(fake_nvml):
    scenario = h100_node(8)
    scenario["call_delay_ms"] = 20
    completed = subprocess.run(
        [sys.executable, "-c", BACKGROUND, "5", "1.5"],
        env=fake_nvml(scenario),
        capture_output=True,
        text=True,
        timeout=60,
    )
    run = Run(completed, 0.0)
    assert run.read_s < 0.3  # the read (about 0.7 s) was done while the caller slept
    assert [gpu.uuid for gpu in run.reading.gpus] == [g["uuid"] for g in scenario["gpus"]]


def test_background_read_of_a_hung_driver_is_bounded(fake_nvml):
    scenario = h100_node(1)
    scenario["hang"] = ["nvmlInitWithFlags"]
    completed = subprocess.run(
        [sys.executable, "-c", BACKGROUND, "0.5", "0"],
        env=fake_nvml(scenario),
        capture_output=True,
        text=True,
        timeout=60,
    )
    run = Run(completed, 0.0)
    assert run.reading.status.cause == "timeout"
    assert run.read_s < 0.5 + SLACK_S


# --------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(
    ("version", "text"),
    [(12040, "12.4"), (13000, "13.0"), (11080, "11.8"), (12090, "12.9"), (0, None), (None, None)],
)
def test_cuda_version_text(version, text):
    assert cuda_version_text(version) == text


def test_throttle_reason_names():
    assert throttle_reason_names(0) == []
    assert throttle_reason_names(0x1) == ["gpu_idle"]
    assert throttle_reason_names(0x8 | 0x40 | 0x80) == [
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]
    assert throttle_reason_names(0x1 | 0x1000) == ["gpu_idle", "unknown_0x1000"]


def test_reading_without_pynvml_says_what_is_missing(tmp_path: Path):
    """An environment where ``import pynvml`` fails (a broken install) still gives a reading."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pynvml.py").write_text("raise ImportError('broken')\n")
    env = no_nvml_env()
    env["PYTHONPATH"] = f"{shadow}:{env['PYTHONPATH']}"
    reading = read_in_child(env).reading
    assert reading.status.cause == "library-not-found"
    assert reading.status.message is not None and "nvidia-ml-py" in reading.status.message
