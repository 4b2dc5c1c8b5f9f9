"""A hung-up terminal stops ``validate`` cleanly, and every attempt's ``stage-start`` marker
supersedes the records of cycles it re-runs."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from gpu_audit.validate.state import load_records
from tests.validate.runs import (
    TINY,
    assert_each_cycle_once,
    run_dir,
    run_validate,
    signal_after_cycles,
    start_validate,
    state_of,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process control is POSIX here")


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_sighup_saves_state_like_sigterm_and_resume_finishes(tmp_path: Path,
                                                             cli_env: dict) -> None:
    args = ["--device", "cpu", "--workload", f"{TINY}:SlowCounter", "--out", str(tmp_path),
            "--progress", "plain", "--no-plots", "--run-id", "r", "--stage", "full",
            "--cycles", "40"]
    runner = start_validate(args, cli_env)
    run = run_dir(tmp_path, "r")
    stderr = signal_after_cycles(runner, run, "default/full", 8, signal.SIGHUP)
    assert runner.returncode == 130, stderr
    assert state_of(run)["status"] == "interrupted"
    resumed = run_validate(["--resume", "r", "--out", str(tmp_path), "--no-plots"], cli_env)
    assert resumed.returncode == 0, resumed.stderr
    assert_each_cycle_once(run, "default/full", 40)


def _line(**record) -> str:
    return json.dumps({"leg": "v/full", **record}) + "\n"


def test_stage_start_supersedes_cycles_from_an_earlier_attempt(tmp_path: Path) -> None:
    path = tmp_path / "cycles.jsonl"
    text = _line(type="stage-start", from_cycle=0, attempt=1)
    text += "".join(_line(type="cycle", cycle=c, attempt=1) for c in range(6))
    text += _line(type="stage-start", from_cycle=3, attempt=2)  # resumed from a checkpoint at 3
    text += _line(type="cycle", cycle=3, attempt=2)
    text += _line(type="cycle-failed", cycle=4, attempt=2)
    path.write_text(text)
    records = load_records(path)["v/full"]
    assert [(r["cycle"], r["attempt"], r["type"]) for r in records] == [
        (0, 1, "cycle"), (1, 1, "cycle"), (2, 1, "cycle"), (3, 2, "cycle"),
        (4, 2, "cycle-failed")]  # cycle 5 of the first attempt is gone


def test_a_marker_with_a_bad_cycle_number_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "cycles.jsonl"
    path.write_text(_line(type="cycle", cycle=0) + _line(type="stage-start", from_cycle="x"))
    assert [r["cycle"] for r in load_records(path)["v/full"]] == [0]

