"""``gpu-audit diff BEFORE AFTER`` as a user runs it, on canned scan and check documents and on
scans of a fake node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.check.engine import judge
from gpu_audit.config import CheckPolicy
from gpu_audit.model import Severity
from gpu_audit.report.check_document import check_document
from gpu_audit.report.jsonout import scan_document
from gpu_audit.rules import evaluate, exit_code
from gpu_audit.serial import dumps
from tests import builders as b
from tests import fakegpu
from tests.fakegpu import GIB, h100_node
from tests.procs import current_user, install_program, running

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

HOSTILE = "\x1b]0;owned\x07evil`|[x](http://e)<b>"


def save(tmp_path: Path, scan, name: str, kind: str = "scan") -> Path:
    if kind == "scan":
        findings = evaluate(scan)
        doc = scan_document(scan, findings, exit_code(findings, Severity.ERROR))
    else:
        doc = check_document(judge(scan, CheckPolicy(), user="alice"))
    path = tmp_path / name
    path.write_text(dumps(doc))
    return path


def job_pair(tmp_path: Path, after_kind: str = "scan") -> tuple[Path, Path]:
    before = b.scan(gpus=[b.gpu(0), b.gpu(1)], processes=[b.process(100, 500)])
    after = b.scan(
        gpus=[b.gpu(0), b.gpu(1, ecc_errors_uncorrected_volatile=3)],
        processes=[b.process(100, 500),
                   b.process(4242, 8192, gpu_index=1, user="alice", name=HOSTILE)],
        generated_at="2026-11-22T11:00:00Z")
    return save(tmp_path, before, "before.json"), save(tmp_path, after, "after.json", after_kind)


def diff(args: list[str], cwd: Path, cli_env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", "diff", *args], cwd=cwd,
                          env=cli_env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("after_kind", ["scan", "check"])
def test_json_reports_leak_counters_and_findings(tmp_path, cli_env, after_kind):
    before, after = job_pair(tmp_path, after_kind)
    done = diff([str(before), str(after), "--json", "--no-report", "--user", "alice"],
                tmp_path, cli_env)
    assert done.returncode == 2, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpu-audit.diff/1"
    assert {"tool_version", "generated_at", "hostname", "before", "after"} <= set(doc)
    assert doc["job_user"] == "alice"
    assert [p["pid"] for p in doc["processes_appeared"]] == [4242]
    assert doc["processes_left"] == []
    assert {c["counter"]: c["increase"] for c in doc["counter_changes"]} == \
        {"ecc_errors_uncorrected_volatile": 3}
    found = {f["id"]: f for f in doc["findings"]}
    assert found["job-vram-leak"]["evidence"]["used_memory_mib"] == 8192
    assert found["job-vram-leak"]["evidence"]["user"] == "alice"
    assert found["ecc-errors-increased"]["severity"] == "critical"
    assert "ecc-uncorrectable" in [f["id"] for f in doc["new_findings"]]
    assert doc["summary"]["exit_code"] == 2 and doc["summary"]["worst_severity"] == "critical"


def test_terminal_and_markdown_escape_foreign_text(tmp_path, cli_env):
    before, after = job_pair(tmp_path)
    text = diff([str(before), str(after), "--no-report"], tmp_path, cli_env)
    assert text.returncode == 2
    assert "Processes that appeared (1)" in text.stdout and "job-vram-leak" in text.stdout
    assert "\x1b" not in text.stdout and "\x07" not in text.stdout
    assert "\\x1b]0;owned" in text.stdout
    markdown = diff([str(before), str(after), "--markdown", "--no-report"], tmp_path, cli_env)
    assert markdown.stdout.startswith("# gpu-audit diff: node1")
    assert "[x](http" not in markdown.stdout and "<b>" not in markdown.stdout
    assert "\\[x\\](http" in markdown.stdout
    assert "## Counters that went up" in markdown.stdout


def test_report_files_are_written(tmp_path, cli_env):
    before, after = job_pair(tmp_path)
    done = diff([str(before), str(after), "--out", str(tmp_path / "out")], tmp_path, cli_env)
    assert done.returncode == 2
    (md,) = (tmp_path / "out").glob("diff-*.md")
    twin = json.loads(md.with_suffix(".json").read_text())
    assert twin["schema"] == "gpu-audit.diff/1"


def test_same_document_twice_is_ok(tmp_path, cli_env):
    before, _ = job_pair(tmp_path)
    done = diff([str(before), str(before), "--no-report"], tmp_path, cli_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No change that needs attention" in done.stdout


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.write_text("{"), "BEFORE: "),
    (lambda p: p.write_text('{"schema": "gpu-audit.fleet/1"}'), "not a gpu-audit scan document"),
    (lambda p: None, "no such file"),
])
def test_bad_input_is_one_line_and_exit_3(tmp_path, cli_env, make, message):
    _, after = job_pair(tmp_path)
    bad = tmp_path / "bad.json"
    make(bad)
    done = diff([str(bad), str(after), "--no-report"], tmp_path, cli_env)
    assert done.returncode == 3
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr


def test_swapped_or_foreign_documents_are_refused(tmp_path, cli_env):
    before, after = job_pair(tmp_path)
    swapped = diff([str(after), str(before), "--no-report"], tmp_path, cli_env)
    assert swapped.returncode == 3 and "give the earlier document first" in swapped.stderr
    other = save(tmp_path, b.with_host(b.scan(generated_at="2026-11-22T12:00:00Z"),
                                       hostname="node9"), "other.json")
    foreign = diff([str(before), str(other), "--no-report"], tmp_path, cli_env)
    assert foreign.returncode == 3 and "diff compares one machine" in foreign.stderr


def test_diff_ids_are_documented_in_rules(tmp_path, cli_env):
    listed = subprocess.run([sys.executable, "-m", "gpu_audit", "rules", "job-vram-leak"],
                            env=cli_env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0
    assert "Before and after a job (gpu-audit diff)" in listed.stdout


def test_secrets_in_a_document_are_redacted_again(tmp_path, cli_env):
    leaky = b.process(4242, 100, cmdline=["python", "train.py", "--hf-token", "hf_S3CR3Tvalue1"])
    before = save(tmp_path, b.scan(), "before.json")
    after = save(tmp_path, b.scan(processes=[leaky], generated_at="2026-11-22T11:00:00Z"),
                 "after.json")
    done = diff([str(before), str(after), "--json", "--no-report"], tmp_path, cli_env)
    assert "S3CR3T" not in done.stdout
    (appeared,) = json.loads(done.stdout)["processes_appeared"]
    assert appeared["cmdline"][:3] == ["python", "train.py", "--hf-token"]


def test_scans_of_a_fake_node_before_and_after_a_job(fake_nvml, cli_env, tmp_path):
    """Two real `scan --json` runs: ECC went up on GPU 1 and the job's process stayed on GPU 0."""
    def scan_to(name: str, scenario: dict) -> Path:
        done = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json",
                               "--no-report"], env=fake_nvml(scenario, base=cli_env),
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 1, 2), done.stderr
        (tmp_path / name).write_text(done.stdout)
        return tmp_path / name

    before = scan_to("before.json", h100_node(2))
    program = install_program(tmp_path / "bin", "python")
    with running([[str(program), "train.py"]]) as (pid,):
        after_node = h100_node(2, pids=[pid], process_memory_bytes=12 * GIB)
        after_node["gpus"][1]["ecc_errors_uncorrected_volatile"] = 1
        after = scan_to("after.json", after_node)
    done = diff([str(before), str(after), "--json", "--no-report", "--user", current_user()],
                tmp_path, cli_env)
    assert done.returncode == 2, done.stderr
    doc = json.loads(done.stdout)
    found = {f["id"]: f for f in doc["findings"]}
    assert found["job-vram-leak"]["evidence"]["pid"] == pid
    assert found["job-vram-leak"]["evidence"]["used_memory_mib"] == 12 * 1024
    assert found["ecc-errors-increased"]["evidence"]["uncorrected_increase"] == 1
