"""A failed stage of ``check --stages`` tells where its log can be read, with and without
``--no-report``: the remedy never points at a log that is gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_audit.validate.checklist import outcomes_from_document
from tests.validate.test_check_stages_command import FAILING, PY, SEED_LIKE, configure
from tests.validate.test_checklist import document, stage


def failed_smoke(tail: str | None) -> dict:
    return stage("smoke", "failed", failure="error", reason="the command exited with code 1",
                 worker={"log": "/runs/r1/logs/default-smoke.log", "stderr_tail": tail,
                         "explanation": []})


def test_the_remedy_names_the_kept_log_or_the_tail_in_the_evidence():
    (kept,) = outcomes_from_document(document(failed_smoke("boom")), ["smoke"], "/runs/r1")
    assert "read the stage's log, /runs/r1/logs/default-smoke.log" in kept.remedy
    (gone,) = outcomes_from_document(document(failed_smoke("boom")), ["smoke"])
    assert "`log_tail` in this check's evidence" in gone.remedy and "log_tail" in gone.evidence
    assert "/runs/r1" not in gone.remedy
    (bare,) = outcomes_from_document(document(failed_smoke(None)), ["smoke"])
    assert "gpu-audit validate --stage" in bare.remedy


def run_check(folder: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--stages", "smoke",
                           "--json", "--no-report"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=180)
    assert "Traceback" not in done.stderr, done.stderr
    return done, json.loads(done.stdout)


def test_no_report_keeps_a_failed_stages_log_where_its_remedy_says(tmp_path, cli_env):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(cli_env, TMPDIR=str(temp))
    (tmp_path / "train.py").write_text(FAILING)
    configure(tmp_path, [PY, "train.py"])
    done, doc = run_check(tmp_path, env)
    assert done.returncode == 2, done.stdout + done.stderr
    smoke = next(c for c in doc["checks"] if c["id"] == "stage-smoke")
    assert smoke["status"] == "fail"
    log = Path(smoke["evidence"]["log"])
    assert f"read the stage's log, {log}" in smoke["remedy"]
    assert log.is_file() and "the loss became NaN at step 2" in log.read_text()
    assert log.is_relative_to(temp) and not (tmp_path / "reports").exists()


def test_no_report_leaves_no_run_folder_when_the_stages_pass(tmp_path, cli_env):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(cli_env, TMPDIR=str(temp))
    configure(tmp_path, [PY, SEED_LIKE, "--cycles", "{cycles}", "{quantum}"])
    done, doc = run_check(tmp_path, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [c["status"] for c in doc["checks"] if c["id"] == "stage-smoke"] == ["pass"]
    assert list(temp.iterdir()) == []
