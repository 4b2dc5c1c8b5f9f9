"""Runs that end badly after doing their work: killed in teardown, or a full disk at a
checkpoint. Each must resume to a verdict, and the resume hint appears only where resuming
can help."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.validate.runs import (
    assert_each_cycle_once,
    report_of,
    run_dir,
    run_validate,
    state_of,
)

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process control is POSIX here")

WORKLOADS = "tests.validate.hardening_workloads"


def args(name: str, out: Path, *extra: str) -> list[str]:
    return ["--device", "cpu", "--workload", f"{WORKLOADS}:{name}", "--out", str(out),
            "--progress", "plain", "--no-plots", "--retry-backoff", "0", "--run-id", "r",
            "--stage", "full", *extra]


def test_a_stage_killed_after_its_last_cycle_finishes_on_resume(tmp_path: Path,
                                                                  cli_env: dict) -> None:
    env = {**cli_env, "HARDENING_KILL_IN_TEARDOWN": "1"}
    first = run_validate(args("KilledInTeardown", tmp_path, "--cycles", "4"), env)
    assert first.returncode == 2, first.stderr
    run = run_dir(tmp_path, "r")
    leg = state_of(run)["legs"]["default/full"]
    assert (leg["status"], leg["failure"], leg["cycles_done"]) == ("failed", "crash", 4)
    assert "resume: gpu-audit validate --resume r" in first.stderr  # resuming helps here

    resumed = run_validate(["--resume", "r", "--out", str(tmp_path), "--no-plots"], env)
    assert resumed.returncode == 0, resumed.stderr
    leg = state_of(run)["legs"]["default/full"]
    assert leg["status"] == "passed"
    assert_each_cycle_once(run, "default/full", 4)
    assert "resume:" not in resumed.stderr


def test_a_gate_failure_gets_no_resume_hint(tmp_path: Path, cli_env: dict) -> None:
    first = run_validate(args("KilledInTeardown", tmp_path, "--cycles", "3",
                              "--require", "value>100"), cli_env)
    assert first.returncode == 2, first.stderr
    assert state_of(run_dir(tmp_path, "r"))["legs"]["default/full"]["failure"] == "gate"
    assert "resume:" not in first.stderr
    again = run_validate(["--resume", "r", "--out", str(tmp_path), "--no-plots"], cli_env)
    assert again.returncode == 2 and "resume:" not in again.stderr


def test_a_full_disk_is_its_own_finding_and_the_run_resumes_once_freed(tmp_path: Path,
                                                                         cli_env: dict) -> None:
    marker = tmp_path / "disk-is-full"
    marker.touch()
    env = {**cli_env, "HARDENING_DISK_FULL": str(marker)}
    first = run_validate(args("DiskFillsUp", tmp_path, "--cycles", "8",
                              "--checkpoint-every", "10"), env)
    assert first.returncode == 3, first.stderr
    run = run_dir(tmp_path, "r")
    leg = state_of(run)["legs"]["default/full"]
    assert leg["failure"] == "disk-full", leg
    ids = {f["id"] for f in report_of(run)["findings"]}
    assert "disk-full" in ids and "workload-error" not in ids
    assert "resume: gpu-audit validate --resume r" in first.stderr
    assert "Traceback" not in first.stderr

    marker.unlink()  # space is back
    resumed = run_validate(["--resume", "r", "--out", str(tmp_path), "--no-plots"], env)
    assert resumed.returncode == 0, resumed.stderr
    assert_each_cycle_once(run, "default/full", 8)
