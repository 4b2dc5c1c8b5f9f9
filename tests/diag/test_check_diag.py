"""``check --diag 1``: diag's level 1 inside the CI checklist, each finding a line of its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpu_audit.check.engine import every_id
from gpu_audit.check.engine import judge as judge_check
from gpu_audit.check.results import CheckStatus, StageOutcome
from gpu_audit.config import CheckPolicy
from gpu_audit.diag.checklist import run_diag_stage
from gpu_audit.diag.runner import checklist_summary
from tests import builders as b
from tests import fakegpu
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml


def _diag_lines(report):
    return [r for r in report.results if r.id == "diag" or r.id.startswith("diag-")]


def test_diag_stage_in_test_mode_passes_and_becomes_one_line() -> None:
    pytest.importorskip("torch")
    scan = b.scan()
    stage = run_diag_stage(scan, 1, None, device="cpu")
    assert stage.status == "passed" and stage.evidence["gpus"] == [0]
    report = judge_check(scan, CheckPolicy(), stages=[stage])
    [line] = _diag_lines(report)
    assert line.status is CheckStatus.PASS and "level 1 on GPU 0" in line.summary


def test_diag_findings_become_failing_lines() -> None:
    finding = {"id": "diag-memory-error", "subject": "gpu:1", "severity": "critical",
               "title": "Memory error on GPU 1", "detail": "byte offset 4096 bit 3",
               "remedy": "Run diag again.", "evidence": {"offset_bytes": 4096, "bit": 3}}
    stage = StageOutcome("diag", "failed", "level 1 on GPU 1", evidence={"findings": [
        finding, {**finding, "id": "diag-model-unknown", "severity": "info"}]})
    report = judge_check(b.scan(), CheckPolicy(), stages=[stage])
    [line] = _diag_lines(report)
    assert (line.id, line.subject, line.status) == ("diag-memory-error", "gpu:1",
                                                    CheckStatus.FAIL)
    assert report.exit_code == 2
    ignoring = judge_check(b.scan(), CheckPolicy(ignore=("diag-memory-error",)), stages=[stage])
    [line] = _diag_lines(ignoring)
    assert (line.id, line.status) == ("diag", CheckStatus.PASS)
    assert "diag-memory-error" in every_id()


def test_busy_gpus_make_the_diag_line_unknown() -> None:
    scan = b.scan(processes=[b.process(4242, 1024)])
    stage = run_diag_stage(scan, 1, None, device="cpu")
    assert stage.status == "error" and "other processes are using" in stage.summary
    [line] = _diag_lines(judge_check(scan, CheckPolicy(), stages=[stage]))
    assert line.status is CheckStatus.UNKNOWN and "--gpus" in line.remedy


def test_level1_checklist_summary_lists_what_check_fails() -> None:
    scan = b.scan(gpus=[b.gpu(0, ecc_errors_uncorrected_volatile=3)])
    rows, code = checklist_summary(scan, None)
    assert code == 2 and rows and all(r["status"] in ("fail", "warn", "unknown") for r in rows)
    assert any(r["subject"] == "gpu:0" and r["status"] == "fail" for r in rows)
    healthy, code = checklist_summary(b.scan(), None)
    assert code == 0 and healthy == []


def test_check_diag_1_on_a_cpu_only_torch_is_unknown_with_the_install(fake_nvml, cli_env,
                                                                       tmp_path):
    pytest.importorskip("torch")
    from tests.conftest import cuda_available

    if cuda_available():
        pytest.skip("this machine has CUDA: the GPU tests cover it")
    env = fake_nvml(h100_node(1), base=cli_env)
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--diag", "1", "--json",
                           "--no-report"], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    # The machine is not at fault: no verdict, not a failure.
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    assert not [r for r in doc["checks"] if r["id"] == "diag-cuda-failed"]
    [line] = [r for r in doc["checks"] if r["id"] == "diag"]
    assert line["status"] == "unknown" and "CPU-only build" in line["summary"]
    assert "pip install" in line["remedy"] and "download.pytorch.org/whl/cu" in line["remedy"]
