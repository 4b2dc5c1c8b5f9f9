"""``gpu-audit scan`` as a user runs it: a subprocess, its stdout, its files, its exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_audit.model import Severity
from gpu_audit.report.jsonout import scan_document
from gpu_audit.rules import evaluate, exit_code
from tests import builders as b

DOCUMENTED_TOP_LEVEL = {
    "schema",
    "tool_version",
    "generated_at",
    "host",
    "driver",
    "gpus",
    "processes",
    "allocator",
    "probe_errors",
    "findings",
}
DOCUMENTED_HOST = {
    "hostname",
    "os",
    "kernel",
    "wsl",
    "container",
    "cpu_count",
    "memory_total_bytes",
    "memory_available_bytes",
    "swap_total_bytes",
    "swap_used_bytes",
}
DOCUMENTED_GPU = {
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "memory_total_bytes",
    "memory_used_bytes",
    "memory_free_bytes",
    "utilization_pct",
    "temperature_c",
    "power_draw_w",
}
DOCUMENTED_PROCESS = {
    "pid",
    "gpu_index",
    "gpu_uuid",
    "used_memory_bytes",
    "type",
    "name",
    "user",
    "cmdline",
    "status",
    "start_time",
    "container",
    "duplicate_group",
}
DOCUMENTED_FINDING = {"id", "severity", "subject", "title", "detail", "evidence", "remedy"}


def assert_documented_shape(doc: dict) -> None:
    """The scan document as DESIGN describes it: keys, units and null-for-unknown."""
    assert doc["schema"] == "gpu-audit.scan/1"
    assert doc.keys() >= DOCUMENTED_TOP_LEVEL
    assert doc["host"].keys() >= DOCUMENTED_HOST
    assert doc["generated_at"].endswith("Z")
    for gpu in doc["gpus"]:
        assert gpu.keys() >= DOCUMENTED_GPU
    for proc in doc["processes"]:
        assert proc.keys() >= DOCUMENTED_PROCESS
    for finding in doc["findings"]:
        assert finding.keys() >= DOCUMENTED_FINDING
        assert finding["severity"] in {"info", "warning", "error", "critical"}
        assert finding["id"] == finding["id"].lower() and " " not in finding["id"]

    def no_placeholders(value, path="$"):
        if isinstance(value, dict):
            for k, v in value.items():
                if k.endswith("_bytes") and v is not None:
                    assert isinstance(v, int), f"{path}.{k} must be an integer"
                no_placeholders(v, f"{path}.{k}")
        elif isinstance(value, list):
            for i, v in enumerate(value):
                no_placeholders(v, f"{path}[{i}]")
        else:
            assert value not in ("N/A", "n/a", "[N/A]"), f"{path} is a placeholder"

    no_placeholders(doc)


def run_scan(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_audit", "scan", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def saved_scan(tmp_path: Path, scan) -> Path:
    findings = evaluate(scan)
    doc = scan_document(scan, findings, exit_code(findings, Severity.ERROR))
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(doc))
    return path


def test_host_without_nvidia_library_reports_the_host_and_says_so(cli_env, tmp_path):
    cli_env["LD_LIBRARY_PATH"] = str(tmp_path)  # nothing there: no libnvidia-ml.so.1
    result = run_scan(["--json", "--no-report"], cli_env, tmp_path)
    assert "Traceback" not in result.stderr
    doc = json.loads(result.stdout)
    assert_documented_shape(doc)
    assert doc["gpus"] == [] and doc["driver"] is None
    assert doc["host"]["memory_total_bytes"] > 0
    (finding,) = [f for f in doc["findings"] if f["id"] == "nvml-unavailable"]
    assert finding["evidence"]["cause"] == "library-not-found"
    expected = 2 if finding["severity"] in ("error", "critical") else 1
    assert result.returncode == expected


def test_saved_scan_is_rejudged_with_the_same_findings(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    result = run_scan(["--from", str(saved), "--json", "--no-report"], cli_env, tmp_path)
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert_documented_shape(doc)
    (dup,) = [f for f in doc["findings"] if f["id"] == "duplicate-backend"]
    assert dup["evidence"]["reclaimable_bytes"] == 308 * 1024**2
    strict = run_scan(
        ["--from", str(saved), "--no-report", "--fail-on", "warning"], cli_env, tmp_path
    )
    assert strict.returncode == 2


def test_terminal_view_is_plain_when_piped_and_names_pids(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    result = run_scan(["--from", str(saved), "--no-report"], cli_env, tmp_path)
    assert "\x1b[" not in result.stdout
    padded = [line for line in result.stdout.splitlines() if line != line.rstrip()]
    assert padded == []
    assert "duplicate-backend" in result.stdout
    assert "kill 2202 2303" in result.stdout
    assert "GTX 1650" in result.stdout


def test_report_and_json_twin_are_written(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    out = tmp_path / "out"
    result = run_scan(["--from", str(saved), "--out", str(out)], cli_env, tmp_path)
    assert result.returncode == 1
    (md,) = out.glob("scan-*-node1.md")
    (twin,) = out.glob("scan-*-node1.json")
    assert md.stem == twin.stem
    assert "duplicate-backend" in md.read_text()
    assert json.loads(twin.read_text())["schema"] == "gpu-audit.scan/1"


def test_default_report_folder_is_reports(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    result = run_scan(["--from", str(saved)], cli_env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(list((tmp_path / "reports").glob("scan-*.md"))) == 1


def test_bad_input_is_a_clear_message_and_exit_3(cli_env, tmp_path):
    cases = {
        "no such file": ["--from", str(tmp_path / "missing.json")],
        "not JSON": ["--from", str(tmp_path / "garbage.json")],
        "not a gpu-audit scan document": ["--from", str(tmp_path / "other.json")],
        "--fail-on": ["--fail-on", "fatal"],
        "No such option": ["--frobnicate"],
    }
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "other.json").write_text('{"schema": "something-else/1"}')
    for message, args in cases.items():
        result = run_scan([*args, "--no-report"], cli_env, tmp_path)
        assert result.returncode == 3, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert "internal error" not in result.stderr, result.stderr


def test_bad_config_file_is_exit_3_naming_file_and_key(cli_env, tmp_path):
    (tmp_path / "gpu-audit.toml").write_text("min_free_vram = 5\n")
    saved = saved_scan(tmp_path, b.scan())
    result = run_scan(["--from", str(saved), "--no-report"], cli_env, tmp_path)
    assert result.returncode == 3
    assert "gpu-audit.toml:1" in result.stderr and "min_free_vram" in result.stderr


def test_environment_sets_thresholds_between_the_file_and_the_flags(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())  # worst finding: a warning
    (tmp_path / "gpu-audit.toml").write_text('fail_on = "critical"\n')
    base = ["--from", str(saved), "--no-report", "--json"]
    assert run_scan(base, cli_env, tmp_path).returncode == 1
    env = {**cli_env, "GPU_AUDIT_FAIL_ON": "warning"}
    assert run_scan(base, env, tmp_path).returncode == 2  # the variable beats the file
    assert run_scan([*base, "--fail-on", "error"], env, tmp_path).returncode == 1  # the flag wins
    quiet = {**cli_env, "GPU_AUDIT_IGNORE": "duplicate-backend,unattributed-vram,low-free-vram"}
    doc = json.loads(run_scan(base, quiet, tmp_path).stdout)
    assert not {f["id"] for f in doc["findings"]} & {"duplicate-backend", "unattributed-vram"}


def test_bad_environment_value_is_exit_3_naming_the_variable(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.scan())
    env = {**cli_env, "GPU_AUDIT_MIN_FREE_VRAM_PCT": "ten"}
    result = run_scan(["--from", str(saved), "--no-report"], env, tmp_path)
    assert result.returncode == 3
    assert "environment variable GPU_AUDIT_MIN_FREE_VRAM_PCT: key 'min_free_vram_pct' must be " \
        "a number, got 'ten'" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_an_unwritable_out_prints_no_verdict_before_exiting_3(cli_env, tmp_path):
    saved = saved_scan(tmp_path, b.gtx1650_three_uvicorn())
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_scan(["--from", str(saved), "--out", str(blocker / "reports")], cli_env,
                      tmp_path)
    assert result.returncode == 3
    assert "exit code" not in result.stdout
    assert "cannot write the report" in result.stderr and "Traceback" not in result.stderr
