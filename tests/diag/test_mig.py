"""A GPU in MIG mode is not tested as if it were the whole GPU (a slice judged against the full
GPU's figures would be a false alarm): diag leaves it untested, says so with a finding naming
it, and gives no verdict on it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpu_audit.diag.judge import judge
from gpu_audit.diag.results import WorkerOutcome
from tests import fakegpu
from tests.diag import recorded
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml


def test_an_untested_mig_gpu_is_an_info_finding_and_no_verdict() -> None:
    mig = recorded.h100_run(1, tests={}, mig_mode=True,
                            worker=WorkerOutcome(status="not-run", kind="mig",
                                                 reason="MIG mode is on"))
    out = judge(2, [recorded.healthy_h100(), mig])
    [finding] = out.findings
    assert (finding.id, finding.subject) == ("diag-mig-not-tested", "gpu:1")
    assert finding.severity.value == "info" and "nvidia-smi -L" in finding.remedy
    assert "-i 1 -mig 0" in finding.remedy and finding.evidence["gpu_uuid"] == mig.uuid
    assert out.unknown == ["GPU 1: not tested, MIG mode is on (diag-mig-not-tested)"]
    assert out.exit_code == 3
    assert {f.subject for f in out.figures} == {"gpu:0"}  # nothing judged for the MIG GPU


def run_diag(env, cwd, *args):
    return subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu",
                           "--json", "--no-report", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=180)


def test_diag_leaves_a_mig_gpu_untested_and_says_so(fake_nvml, cli_env, tmp_path) -> None:
    pytest.importorskip("torch")
    scenario = h100_node(2)
    scenario["gpus"][1]["mig_mode"] = True
    env = fake_nvml(scenario, base=cli_env)
    done = run_diag(env, tmp_path, "--level", "1")
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    # (the test mode has no table of models: the tested GPU has diag-model-unknown, info)
    [finding] = [f for f in doc["findings"] if f["id"] != "diag-model-unknown"]
    assert (finding["id"], finding["subject"]) == ("diag-mig-not-tested", "gpu:1")
    tested, mig = doc["gpus"]
    assert tested["worker"]["status"] == "done" and tested["tests"]["context"]["ok"]
    assert (mig["worker"]["status"], mig["worker"]["kind"]) == ("not-run", "mig")
    assert mig["tests"] == {} and mig["plan"] is None
    assert "not tested, MIG mode on: GPU 1" in done.stderr
    # Choosing the other GPUs gives a verdict.
    chosen = run_diag(env, tmp_path, "--level", "1", "--gpus", "0")
    assert chosen.returncode == 0, chosen.stderr
    assert [f["id"] for f in json.loads(chosen.stdout)["findings"]] == ["diag-model-unknown"]


def test_check_diag_reports_a_mig_gpu_as_unknown_with_its_remedy() -> None:
    pytest.importorskip("torch")
    from gpu_audit.check.engine import judge as judge_check
    from gpu_audit.check.results import CheckStatus
    from gpu_audit.config import CheckPolicy
    from gpu_audit.diag.checklist import run_diag_stage
    from tests import builders as b

    scan = b.scan(gpus=[b.gpu(0, mig_mode=True)])
    stage = run_diag_stage(scan, 1, None, device="cpu")
    assert stage.status == "error" and "MIG mode is on" in stage.summary
    [line] = [r for r in judge_check(scan, CheckPolicy(), stages=[stage]).results
              if r.id == "diag"]
    assert line.status is CheckStatus.UNKNOWN and "-i 0 -mig 0" in line.remedy
