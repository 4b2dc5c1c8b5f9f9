"""Helpers for tests that run ``gpu-audit validate`` as a user does: a subprocess, its run
folder, its exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.documents import assert_document

REPO = Path(__file__).resolve().parents[2]
TINY = "tests.validate.tiny_workloads"


def validate_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpu_audit", "validate", *args]


def run_validate(args: list[str], env: dict[str, str], timeout: float = 120
                 ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(validate_command(*args), env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


def start_validate(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(validate_command(*args), env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_dir(out: Path, run_id: str) -> Path:
    return out / "runs" / run_id


def state_of(run: Path) -> dict[str, Any]:
    state = json.loads((run / "state.json").read_text())
    assert_document(state)
    return state


def report_of(run: Path) -> dict[str, Any]:
    report = json.loads((run / "report.json").read_text())
    assert_document(report)  # every report a validate test reads matches its schema
    return report


def cycles_of(run: Path, leg: str) -> list[dict[str, Any]]:
    from gpu_audit.validate.state import load_records

    return [r for r in load_records(run / "cycles.jsonl").get(leg, []) if r["type"] == "cycle"]


def raw_cycle_lines(run: Path, leg: str) -> int:
    text = (run / "cycles.jsonl").read_text() if (run / "cycles.jsonl").exists() else ""
    return sum(1 for line in text.splitlines()
               if f'"leg":"{leg}"' in line and '"type":"cycle"' in line)


def wait_for_cycles(run: Path, leg: str, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while raw_cycle_lines(run, leg) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{leg} did not reach {count} cycles in {timeout} s")
        time.sleep(0.02)


def signal_after_cycles(runner: subprocess.Popen[str], run: Path, leg: str, cycles: int,
                        signum: int) -> str:
    """Send ``signum`` to a running ``validate`` once ``leg`` has logged ``cycles`` cycles; its
    stderr once it has exited (killed if it would not)."""
    try:
        wait_for_cycles(run, leg, cycles)
        runner.send_signal(signum)
        _, stderr = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    return stderr


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0); read its state
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def assert_each_cycle_once(run: Path, leg: str, planned: int) -> None:
    """No cycle lost, none counted twice: in the log, and in the workload's own state."""
    records = cycles_of(run, leg)
    assert [r["cycle"] for r in records] == list(range(planned))
    # Counter's state counts the cycles it has run; a resume from a checkpoint that lost or
    # repeated a cycle would show a value out of step with the cycle index.
    assert [r["metrics"]["value"] for r in records] == [c + 1 for c in range(planned)]
