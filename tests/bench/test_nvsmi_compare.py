"""bench/gpu/nvsmi_compare.py: nvidia-smi's XML beside a real ``gpu-audit scan --json``.

The XML fixtures are written to describe the machines that the fake NVML plays here (same
values), one in the layout of current drivers, one in that of older ones, and one with the
temperature thresholds relative to T.Limit (the temperatures and offsets an H200 on r580.159
printed); the scan is the real command run against the fake. A disagreement planted on either
side must be reported.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakegpu

pytest_plugins = ["tests.fakegpu"]

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
H100_XML = FIXTURES / "h100_r580.xml"
GTX_XML = FIXTURES / "gtx1650_r525.xml"
TLIMIT_XML = FIXTURES / "h100_r580_tlimit.xml"  # thresholds relative to T.Limit, as on r580
OOM_PID = fakegpu.ABSENT_PID_BASE + 5


def _load():
    spec = importlib.util.spec_from_file_location("nvsmi_compare",
                                                  REPO / "bench" / "gpu" / "nvsmi_compare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["nvsmi_compare"] = module
    spec.loader.exec_module(module)
    return module


nvsmi = _load()


def h100_scenario() -> dict:
    """The machine h100_r580.xml describes: one idle H100 on r580 and one 40 GiB process."""
    scenario = fakegpu.h100_node(1)
    scenario.update(driver_version="580.95.05", nvml_version="13.580.95.05",
                    cuda_driver_version=13000)
    scenario["gpus"][0]["processes"].append(fakegpu.process(OOM_PID, 40 * fakegpu.GIB))
    return scenario


def gtx_scenario() -> dict:
    """The machine gtx1650_r525.xml describes (older driver, consumer part, N/A everywhere)."""
    scenario = fakegpu.gtx1650_laptop(fakegpu.absent_pids(3, 10))
    scenario.update(driver_version="525.147.05", nvml_version="12.525.147.05",
                    cuda_driver_version=12000)
    return scenario


@pytest.fixture
def scan_of(fake_nvml, cli_env, tmp_path):
    def scan(scenario: dict) -> Path:
        done = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report"],
                              env=fake_nvml(scenario, base=cli_env), cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 1, 2), done.stderr
        path = tmp_path / f"scan-{len(list(tmp_path.glob('scan-*')))}.json"
        path.write_text(done.stdout, encoding="utf-8")
        return path
    return scan


def run_compare(xml: Path, scan: Path, tmp_path: Path) -> tuple[int, str, dict]:
    out = tmp_path / "compare.json"
    done = subprocess.run([sys.executable, str(REPO / "bench" / "gpu" / "nvsmi_compare.py"),
                           str(xml), str(scan), "--json-out", str(out)],
                          capture_output=True, text=True, timeout=60)
    document = json.loads(out.read_text()) if out.exists() else {}
    return done.returncode, done.stdout + done.stderr, document


def status_of(document: dict, field: str) -> str:
    return next(r["status"] for r in document["rows"] if r["field"] == field)


def planted(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    path = tmp_path / f"planted-{source.name}"
    path.write_text(text.replace(old, new, 1))
    return path


def test_current_driver_layout_agrees_with_a_real_scan(scan_of, tmp_path):
    code, out, document = run_compare(H100_XML, scan_of(h100_scenario()), tmp_path)
    assert code == 0, out
    assert document["counts"]["disagree"] == 0
    assert document["counts"]["agree"] >= 45
    for field in ("memory_used_bytes", "memory_reserved_bytes", "memory_free_bytes",
                  "power_draw_w", "power_limit_w", "temperature_shutdown_c", "ecc_mode",
                  "ecc_errors_uncorrected_volatile", "remapped_rows_pending", "pcie_width_max",
                  "mig_mode", "persistence_mode", "compute_mode", "throttle_reasons",
                  "process_pids", f"process[{OOM_PID}].used_memory_bytes", "driver_version",
                  "memory_temperature_c", "memory_temperature_max_c", "power_min_limit_w",
                  "power_max_limit_w", "graphics_clock_mhz", "graphics_clock_max_mhz",
                  "ecc_mode_pending", "mig_mode_pending"):
        assert status_of(document, field) == "agree", field
    # Every field gpu-audit shows is compared: nothing nvidia-smi prints is left as a gap.
    assert document["counts"]["only-nvidia-smi"] == 0, [
        r["field"] for r in document["rows"] if r["status"] == "only-nvidia-smi"]


def test_older_driver_layout_and_not_available_values(scan_of, tmp_path):
    code, out, document = run_compare(GTX_XML, scan_of(gtx_scenario()), tmp_path)
    assert code == 0, out
    assert status_of(document, "power_draw_w") == "agree"  # <power_readings><power_draw>
    assert status_of(document, "throttle_reasons") == "agree"  # clocks_throttle_reasons
    assert status_of(document, "power_limit_w") == "absent-both"  # N/A on both sides
    assert status_of(document, "ecc_errors_corrected_volatile") == "absent-both"
    assert status_of(document, "process_pids") == "agree"
    for field in ("memory_temperature_c", "memory_temperature_max_c", "power_min_limit_w",
                  "power_max_limit_w", "ecc_mode_pending", "mig_mode_pending"):
        assert status_of(document, field) == "absent-both", field  # N/A on a GeForce
    assert status_of(document, "graphics_clock_max_mhz") == "agree"


def test_a_disagreement_planted_in_the_xml_is_reported(scan_of, tmp_path):
    xml = planted(tmp_path, H100_XML, "<gpu_temp_slow_threshold>90 C",
                  "<gpu_temp_slow_threshold>89 C")
    code, out, document = run_compare(xml, scan_of(h100_scenario()), tmp_path)
    assert code == 1
    assert [r["field"] for r in document["disagreements"]] == ["temperature_slowdown_c"]
    assert "disagree" in out


def test_a_disagreement_planted_in_the_scan_is_reported(scan_of, tmp_path):
    scenario = h100_scenario()
    scenario["gpus"][0]["power_limit_w"] = 650.0
    scenario["gpus"][0]["memory_reserved_bytes"] = 600 * fakegpu.MIB
    code, _, document = run_compare(H100_XML, scan_of(scenario), tmp_path)
    assert code == 1
    fields = {r["field"] for r in document["disagreements"]}
    assert {"power_limit_w", "memory_reserved_bytes"} <= fields


def test_new_fields_planted_in_the_xml_disagree(scan_of, tmp_path):
    xml = planted(tmp_path, H100_XML, "<gpu_temp_max_mem_threshold>95 C",
                  "<gpu_temp_max_mem_threshold>85 C")
    xml = planted(tmp_path, xml, "<min_power_limit>200.00 W", "<min_power_limit>250.00 W")
    xml = planted(tmp_path, xml, "<max_power_limit>700.00 W", "<max_power_limit>650.00 W")
    xml = planted(tmp_path, xml, "<graphics_clock>1980 MHz", "<graphics_clock>1755 MHz")
    xml = planted(tmp_path, xml, "<pending_ecc>Enabled", "<pending_ecc>Disabled")
    xml = planted(tmp_path, xml, "<pending_mig>Disabled", "<pending_mig>Enabled")
    xml = planted(tmp_path, xml, "<memory_temp>38 C", "<memory_temp>39 C")  # moves by itself
    code, _, document = run_compare(xml, scan_of(h100_scenario()), tmp_path)
    assert code == 1
    assert {r["field"] for r in document["disagreements"]} == {
        "memory_temperature_max_c", "power_min_limit_w", "power_max_limit_w",
        "graphics_clock_max_mhz", "ecc_mode_pending", "mig_mode_pending"}
    assert status_of(document, "memory_temperature_c") == "moving"


def test_new_fields_planted_in_the_scan_disagree(scan_of, tmp_path):
    scenario = h100_scenario()
    gpu = scenario["gpus"][0]
    gpu.update(memory_temperature_c=60, memory_temperature_max_c=85, power_min_limit_w=100.0,
               power_max_limit_w=600.0, graphics_clock_max_mhz=1755, ecc_mode_pending=False,
               mig_mode_pending=True)
    code, _, document = run_compare(H100_XML, scan_of(scenario), tmp_path)
    assert code == 1
    assert {r["field"] for r in document["disagreements"]} == {
        "memory_temperature_c", "memory_temperature_max_c", "power_min_limit_w",
        "power_max_limit_w", "graphics_clock_max_mhz", "ecc_mode_pending", "mig_mode_pending"}


def test_a_process_only_one_side_lists_is_a_disagreement(scan_of, tmp_path):
    scenario = h100_scenario()
    scenario["gpus"][0]["processes"].append(fakegpu.process(OOM_PID + 1, 2 * fakegpu.GIB))
    scenario["gpus"][0]["memory_used_bytes"] = 40 * fakegpu.GIB
    code, _, document = run_compare(H100_XML, scan_of(scenario), tmp_path)
    assert code == 1
    assert status_of(document, "process_pids") == "disagree"
    assert status_of(document, f"process[{OOM_PID + 1}]") == "disagree"


def test_current_readings_that_move_are_not_disagreements(scan_of, tmp_path):
    xml = planted(tmp_path, H100_XML, "<sm_clock>345 MHz", "<sm_clock>1755 MHz")
    xml = planted(tmp_path, xml, "<gpu_temp>31 C", "<gpu_temp>32 C")
    xml = planted(tmp_path, xml, "<average_power_draw>71.50 W", "<average_power_draw>72.90 W")
    code, out, document = run_compare(xml, scan_of(h100_scenario()), tmp_path)
    assert code == 0, out
    assert status_of(document, "sm_clock_mhz") == "moving"
    assert status_of(document, "temperature_c") == "moving"
    assert status_of(document, "power_draw_w") == "agree"  # within 2 W


def test_beyond_their_tolerance_moving_values_disagree(scan_of, tmp_path):
    xml = planted(tmp_path, H100_XML, "<gpu_temp>31 C", "<gpu_temp>40 C")
    xml = planted(tmp_path, xml, "<average_power_draw>71.50 W", "<average_power_draw>90.00 W")
    xml = planted(tmp_path, xml, "<sm_clock>1980 MHz", "<sm_clock>1755 MHz")  # a max clock
    code, _, document = run_compare(xml, scan_of(h100_scenario()), tmp_path)
    assert code == 1
    assert {r["field"] for r in document["disagreements"]} == {
        "temperature_c", "power_draw_w", "sm_clock_max_mhz"}


@pytest.mark.parametrize("text", ["N/A", "[N/A]", "Not Supported", "[Not Supported]",
                                  "[Unknown Error]", "Requested functionality has been deprecated"])
def test_unavailable_values_read_as_missing(text):
    gpu = nvsmi.ET.fromstring(f"<gpu><fan_speed>{text}</fan_speed></gpu>")
    assert isinstance(nvsmi.number(nvsmi.raw(gpu, "fan_speed")), nvsmi.Missing)
    assert nvsmi.raw(gpu, "nothing/here") is nvsmi.ABSENT


def test_units_and_words():
    gpu = nvsmi.ET.fromstring(
        "<gpu><a>81559 MiB</a><b>2 GiB</b><c>71.50 W</c><d>16x</d><e>P8</e>"
        "<f>Exclusive_Process</f><g>Ada Lovelace</g><h>Not Active</h></gpu>")
    assert nvsmi.mib(nvsmi.raw(gpu, "a")) == 81559
    assert nvsmi.mib(nvsmi.raw(gpu, "b")) == 2048
    assert nvsmi.number(nvsmi.raw(gpu, "c")) == 71.5
    assert nvsmi.integer(nvsmi.raw(gpu, "d")) == 16
    assert nvsmi.integer(nvsmi.raw(gpu, "e")) == 8
    assert nvsmi.word(nvsmi.raw(gpu, "f")) == "exclusive_process"
    assert nvsmi.first_word(nvsmi.raw(gpu, "g")) == "ada"
    assert nvsmi.flag(nvsmi.raw(gpu, "h")) is False


def test_ecc_totals_in_both_layouts():
    new = nvsmi.ET.fromstring(
        "<gpu><ecc_errors><volatile><sram_correctable>2</sram_correctable>"
        "<sram_uncorrectable_parity>1</sram_uncorrectable_parity>"
        "<sram_uncorrectable_secded>4</sram_uncorrectable_secded>"
        "<dram_correctable>3</dram_correctable><dram_uncorrectable>5</dram_uncorrectable>"
        "</volatile></ecc_errors></gpu>")
    assert nvsmi.ecc_total(new, "volatile", True) == 5
    assert nvsmi.ecc_total(new, "volatile", False) == 10
    summed = nvsmi.ET.fromstring(
        "<gpu><ecc_errors><aggregate><sram_uncorrectable>7</sram_uncorrectable>"
        "<sram_uncorrectable_parity>3</sram_uncorrectable_parity>"
        "<dram_uncorrectable>1</dram_uncorrectable><sram_threshold_exceeded>No"
        "</sram_threshold_exceeded></aggregate></ecc_errors></gpu>")
    assert nvsmi.ecc_total(summed, "aggregate", False) == 8
    old = nvsmi.ET.fromstring(
        "<gpu><ecc_errors><volatile><single_bit><device_memory>1</device_memory>"
        "<total>6</total></single_bit><double_bit><total>0</total></double_bit>"
        "</volatile></ecc_errors></gpu>")
    assert nvsmi.ecc_total(old, "volatile", True) == 6
    assert nvsmi.ecc_total(old, "volatile", False) == 0


def tlimit_scenario() -> dict:
    """The machine h100_r580_tlimit.xml describes: thresholds as NVML gives them in C."""
    scenario = h100_scenario()
    scenario["driver_version"] = "580.159.04"
    scenario["gpus"][0].update(temperature_c=33, temperature_shutdown_c=95,
                               temperature_slowdown_c=89, temperature_max_operating_c=87,
                               memory_temperature_c=36, memory_temperature_max_c=95)
    return scenario


def row_of(document: dict, field: str) -> dict:
    return next(r for r in document["rows"] if r["field"] == field)


def test_thresholds_relative_to_tlimit_are_derived_and_agree(scan_of, tmp_path):
    code, out, document = run_compare(TLIMIT_XML, scan_of(tlimit_scenario()), tmp_path)
    assert code == 0, out
    # T.Limit = 33 + 54 = 87; shutdown 87 - (-8), slowdown 87 - (-2), max operating 87 - 0.
    for field, value in (("temperature_shutdown_c", 95), ("temperature_slowdown_c", 89),
                         ("temperature_max_operating_c", 87)):
        row = row_of(document, field)
        assert (row["status"], row["gpu_audit"], row["nvidia_smi"]) == ("agree", value, value)
        assert row["note"].startswith("derived: T.Limit 87"), row
    # No memory T.Limit is printed: the memory threshold stays a gap, said so in the note.
    memory = row_of(document, "memory_temperature_max_c")
    assert memory["status"] == "only-gpu-audit" and memory["gpu_audit"] == 95
    assert "not derivable" in memory["note"]
    assert "temperature thresholds" not in {r["field"] for r in document["rows"]}
    assert document["counts"]["only-gpu-audit"] == 1


def test_a_wrong_threshold_beside_a_tlimit_layout_disagrees(scan_of, tmp_path):
    scenario = tlimit_scenario()
    scenario["gpus"][0].update(temperature_shutdown_c=92, temperature_slowdown_c=90)
    code, _, document = run_compare(TLIMIT_XML, scan_of(scenario), tmp_path)
    assert code == 1
    assert {r["field"] for r in document["disagreements"]} == {
        "temperature_shutdown_c", "temperature_slowdown_c"}
    assert row_of(document, "temperature_shutdown_c")["nvidia_smi"] == 95


def test_the_moving_temperature_cancels_out_of_derived_thresholds(scan_of, tmp_path):
    xml = planted(tmp_path, TLIMIT_XML, "<gpu_temp>33 C", "<gpu_temp>40 C")
    xml = planted(tmp_path, xml, "<gpu_temp_tlimit>54 C", "<gpu_temp_tlimit>47 C")
    code, _, document = run_compare(xml, scan_of(tlimit_scenario()), tmp_path)
    assert status_of(document, "temperature_max_operating_c") == "agree"
    assert status_of(document, "temperature_c") == "disagree"  # beyond 2 C: the only one
    assert code == 1 and len(document["disagreements"]) == 1


def test_a_tlimit_layout_without_the_margin_is_not_derived(scan_of, tmp_path):
    xml = planted(tmp_path, TLIMIT_XML, "<gpu_temp_tlimit>54 C", "<gpu_temp_tlimit>N/A")
    code, _, document = run_compare(xml, scan_of(tlimit_scenario()), tmp_path)
    assert code == 0
    row = row_of(document, "temperature_slowdown_c")
    assert row["status"] == "only-gpu-audit" and "not derivable" in row["note"]


def test_unreadable_input_is_one_line_and_exit_3(tmp_path):
    scan = tmp_path / "scan.json"
    scan.write_text('{"schema": "gpu-audit.scan/1", "gpus": []}')
    bad = tmp_path / "smi.xml"
    bad.write_text("<nvidia_smi_log><gpu>")
    done = subprocess.run([sys.executable, str(REPO / "bench" / "gpu" / "nvsmi_compare.py"),
                           str(bad), str(scan)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and "not XML" in done.stderr
    done = subprocess.run([sys.executable, str(REPO / "bench" / "gpu" / "nvsmi_compare.py"),
                           str(H100_XML), str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "not JSON" in done.stderr


def test_a_line_before_the_document_is_skipped(scan_of, tmp_path):
    xml = tmp_path / "lost.xml"
    xml.write_text("Unable to determine the device handle for GPU 0000:9A:00.0: Unknown Error\n"
                   + H100_XML.read_text())
    code, out, _ = run_compare(xml, scan_of(h100_scenario()), tmp_path)
    assert code == 0, out
