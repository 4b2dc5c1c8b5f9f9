"""Memory temperature, power-limit range, graphics clocks and pending ECC/MIG modes: the fake
answers them as a driver does (through the real pynvml), and the collector reads them."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.collect.test_nvml import read_in_child
from tests.fakegpu import gtx1650_laptop, h100_node

pytest_plugins = ["tests.fakegpu"]

PYNVML = """
import json, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
def ask(fn, *args):
    try:
        return fn(h, *args)
    except pynvml.NVMLError as exc:
        return "error %d" % exc.value
(temp,) = pynvml.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])
print(json.dumps({
    "memory_temp": [temp.nvmlReturn, temp.value.uiVal],
    "mem_max": ask(pynvml.nvmlDeviceGetTemperatureThreshold,
                   pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX),
    "constraints": ask(pynvml.nvmlDeviceGetPowerManagementLimitConstraints),
    "graphics": ask(pynvml.nvmlDeviceGetClockInfo, pynvml.NVML_CLOCK_GRAPHICS),
    "graphics_max": ask(pynvml.nvmlDeviceGetMaxClockInfo, pynvml.NVML_CLOCK_GRAPHICS),
    "ecc": ask(pynvml.nvmlDeviceGetEccMode),
    "mig": ask(pynvml.nvmlDeviceGetMigMode),
}))
"""


def pynvml_answers(env: dict[str, str]) -> dict:
    done = subprocess.run([sys.executable, "-c", PYNVML], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_fake_answers_the_new_calls_as_a_driver_does(fake_nvml):
    scenario = h100_node(1)
    scenario["gpus"][0].update(graphics_clock_mhz=1755, mig_mode_pending=True,
                               ecc_mode_pending=False)
    answers = pynvml_answers(fake_nvml(scenario))
    assert answers == {
        "memory_temp": [0, 38],
        "mem_max": 95,
        "constraints": [200000, 700000],  # milliwatts
        "graphics": 1755,
        "graphics_max": 1980,  # follows the SM clock when the scenario leaves it out
        "ecc": [1, 0],
        "mig": [0, 1],
    }


def test_a_consumer_card_answers_not_supported(fake_nvml):
    answers = pynvml_answers(fake_nvml(gtx1650_laptop([4_194_401, 4_194_402, 4_194_403])))
    not_supported = "error 3"
    assert answers["memory_temp"][0] == 3
    assert answers["mem_max"] == not_supported
    assert answers["constraints"] == not_supported
    assert answers["ecc"] == not_supported and answers["mig"] == not_supported
    assert answers["graphics"] == 300  # the graphics clock is there on every GPU


def test_the_collector_reads_every_new_field(fake_nvml):
    scenario = h100_node(2)
    scenario["gpus"][1].update(memory_temperature_c=93, graphics_clock_mhz=1410,
                               graphics_clock_max_mhz=1755, power_min_limit_w=250.5,
                               power_max_limit_w=650.0, ecc_mode_pending=False,
                               mig_mode_pending=True)
    reading = read_in_child(fake_nvml(scenario)).reading
    assert reading.probe_errors == []
    first, second = reading.gpus
    assert (first.memory_temperature_c, first.memory_temperature_max_c) == (38, 95)
    assert (first.power_min_limit_w, first.power_max_limit_w) == (200.0, 700.0)
    assert (first.graphics_clock_mhz, first.graphics_clock_max_mhz) == (345, 1980)
    assert (first.ecc_mode, first.ecc_mode_pending) == (True, True)
    assert (first.mig_mode, first.mig_mode_pending) == (False, False)
    assert (second.memory_temperature_c, second.memory_temperature_max_c) == (93, 95)
    assert (second.power_min_limit_w, second.power_max_limit_w) == (250.5, 650.0)
    assert (second.graphics_clock_mhz, second.graphics_clock_max_mhz) == (1410, 1755)
    assert (second.ecc_mode, second.ecc_mode_pending) == (True, False)
    assert (second.mig_mode, second.mig_mode_pending) == (False, True)


def test_a_consumer_card_reads_none_without_probe_errors(fake_nvml):
    reading = read_in_child(fake_nvml(gtx1650_laptop([4_194_401, 4_194_402, 4_194_403]))).reading
    assert reading.probe_errors == []
    (gpu,) = reading.gpus
    for field in ("memory_temperature_c", "memory_temperature_max_c", "power_min_limit_w",
                  "power_max_limit_w", "ecc_mode_pending", "mig_mode_pending"):
        assert getattr(gpu, field) is None, field
    assert (gpu.graphics_clock_mhz, gpu.graphics_clock_max_mhz) == (300, 2100)


def test_the_power_range_and_pending_ecc_fall_back_to_their_dedicated_calls(fake_nvml, tmp_path):
    """A driver older than the power-range field ids, and one answering the pending-ECC field
    "not supported": the dedicated calls give the same values, and are asked only then."""
    scenario = h100_node(2)
    scenario["unknown_field_ids"] = [187, 188]
    scenario["gpus"][1]["unsupported_field_ids"] = [2]
    scenario["gpus"][1]["ecc_mode_pending"] = False
    env = fake_nvml(scenario)
    log = tmp_path / "calls.log"
    env["FAKE_NVML_CALL_LOG"] = str(log)
    reading = read_in_child(env).reading
    assert reading.probe_errors == []
    for gpu in reading.gpus:
        assert (gpu.power_min_limit_w, gpu.power_max_limit_w) == (200.0, 700.0)
    assert [g.ecc_mode_pending for g in reading.gpus] == [True, False]
    calls = log.read_text().splitlines()
    assert calls.count("nvmlDeviceGetPowerManagementLimitConstraints") == 2
    assert calls.count("nvmlDeviceGetEccMode") == 1  # GPU 1 only


def test_with_the_power_range_as_field_values_the_dedicated_call_is_not_made(fake_nvml, tmp_path):
    env = fake_nvml(h100_node(2))
    log = tmp_path / "calls.log"
    env["FAKE_NVML_CALL_LOG"] = str(log)
    reading = read_in_child(env).reading
    assert [g.power_max_limit_w for g in reading.gpus] == [700.0, 700.0]
    calls = log.read_text().splitlines()
    assert "nvmlDeviceGetPowerManagementLimitConstraints" not in calls
    assert "nvmlDeviceGetEccMode" not in calls


def test_memory_temperature_unsupported_as_a_field_is_none(fake_nvml):
    scenario = h100_node(1)
    scenario["gpus"][0]["unsupported_field_ids"] = [82]
    reading = read_in_child(fake_nvml(scenario)).reading
    assert reading.probe_errors == []
    assert reading.gpus[0].memory_temperature_c is None
    assert reading.gpus[0].memory_temperature_max_c == 95
