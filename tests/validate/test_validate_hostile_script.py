"""``gpu-audit validate -- COMMAND`` over a script that attacks its supervisor through what the
script controls (tests/validate/scripts/hostile_streams.py): entries of its telemetry streams
folder that would block or never end, telemetry nested past any parser, output lines of
megabytes and more output than the stage log keeps. Run as a user runs it: a subprocess, its
run folder, its exit code."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from tests.validate.runs import (
    REPO,
    cycles_of,
    pid_alive,
    report_of,
    run_dir,
    run_validate,
    start_validate,
    state_of,
    wait_for_cycles,
)

SCRIPT = str(REPO / "tests" / "validate" / "scripts" / "hostile_streams.py")
PY = sys.executable
PATTERN = ("--cycle-pattern", "^cycle")


def validate(tmp_path: Path, env: dict[str, str], run_id: str, *args: str,
             timeout: float = 180) -> tuple[int, Path, float]:
    began = time.monotonic()
    done = run_validate(["--device", "cpu", "--no-plots", "--out", str(tmp_path), "--run-id",
                         run_id, *args], env, timeout=timeout)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, run_dir(tmp_path, run_id), time.monotonic() - began


def warnings_of(run: Path) -> list[str]:
    return [f["title"] for f in report_of(run)["findings"] if f["id"] == "stage-warning"]


def smoke(run: Path) -> dict:
    return state_of(run)["legs"]["default/smoke"]


def test_a_fifo_in_the_streams_folder_is_skipped_and_said(tmp_path, cli_env):
    """Opened for reading, a FIFO nobody writes to waits for a writer for ever: the stage would
    never end. It is skipped, the stage passes, the report says what was skipped."""
    code, run, took = validate(tmp_path, cli_env, "fifo", "--stage", "smoke", *PATTERN,
                               "--", PY, SCRIPT, "fifo")
    assert code == 0, warnings_of(run)
    assert smoke(run)["status"] == "passed"
    assert any("rank-7.jsonl (a FIFO)" in w for w in warnings_of(run))
    assert took < 120


def test_sigterm_ends_a_stage_whose_streams_folder_holds_a_fifo_promptly(tmp_path, cli_env):
    runner = start_validate(["--device", "cpu", "--no-plots", "--out", str(tmp_path),
                             "--run-id", "fifo-term", "--stage", "full", "--cycles", "400",
                             "--disable-quantum", *PATTERN, "--", PY, SCRIPT, "fifo",
                             "--cycles", "100000", "--sleep", "0.1"], cli_env)
    run = run_dir(tmp_path, "fifo-term")
    try:
        wait_for_cycles(run, "default/full", 3, timeout=120)
        began = time.monotonic()
        runner.send_signal(signal.SIGTERM)
        _, stderr = runner.communicate(timeout=90)
        took = time.monotonic() - began
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 130, stderr
    assert took < 60, f"{took:.1f} s from SIGTERM to exit"
    assert state_of(run)["legs"]["default/full"]["status"] == "interrupted"


def test_a_link_to_dev_zero_is_not_followed_and_not_blamed_on_the_workload(tmp_path, cli_env):
    """Followed, the link reads zeros without end (gigabytes of memory, then a dead worker
    judged as a crash of the workload); it is skipped and the stage passes."""
    code, run, _ = validate(tmp_path, cli_env, "zero", "--stage", "smoke", *PATTERN,
                            "--", PY, SCRIPT, "zero")
    assert code == 0, warnings_of(run)
    leg = smoke(run)
    assert leg["status"] == "passed" and leg["failure"] is None
    assert any("rank-8.jsonl (a symbolic link)" in w for w in warnings_of(run))
    assert [r["cycle"] for r in cycles_of(run, "default/smoke")] == [0, 1, 2]


def test_telemetry_nested_too_deep_is_counted_as_malformed(tmp_path, cli_env):
    code, run, _ = validate(tmp_path, cli_env, "deep", "--stage", "smoke", *PATTERN,
                            "--", PY, SCRIPT, "deep")
    assert code == 0, warnings_of(run)
    assert smoke(run)["status"] == "passed"
    (note,) = [w for w in warnings_of(run) if "rank-9" in w]
    assert "3 lines skipped as not telemetry" in note
    assert "2 not a JSON object of bounded size and nesting" in note
    assert "1 longer than 64 KiB" in note
    log = (run / "logs" / "default.smoke.log").read_text()
    assert "RecursionError" not in log and "Traceback" not in log


def test_long_lines_and_more_output_than_the_log_keeps(tmp_path, cli_env):
    """30 MB of 5 MB lines with a 4 MiB log cap: the log keeps its head and tail and says how
    much it left out, and a metric regex that would take quadratic time over a whole line
    (``.*loss=`` on a line without it) only sees the start of each."""
    cap = 4 * 1024 * 1024
    env = {**cli_env, "GPU_AUDIT_SCRIPT_LOG_MAX_BYTES": str(cap)}
    code, run, took = validate(tmp_path, env, "long", "--stage", "smoke", *PATTERN,
                               "--metric", r"loss=.*loss=(\S+)", "--", PY, SCRIPT, "long",
                               "--cycles", "{cycles}", "--lines", "2", "--line-mb", "5",
                               "--trailer", "200")
    assert code == 0, warnings_of(run)
    leg = smoke(run)
    assert leg["status"] == "passed"
    records = cycles_of(run, "default/smoke")
    assert [r["metrics"]["loss"] for r in records] == [1.0, 0.5, 0.3333]
    log_path = run / "logs" / "default.smoke.log"
    assert log_path.stat().st_size < cap + 64 * 1024
    log = log_path.read_text()
    assert "planted long in the streams folder\n" in log  # the head
    assert log.endswith("trailer 199\ndone\n") or "trailer 199\ndone\n" in log  # the tail
    printed = 3 * 2 * (5_000_000 + len("long 0.0 \n"))
    (note,) = [w for w in warnings_of(run) if "more than the stage log keeps" in w]
    dropped = int(note.split(", ")[-1].split()[0])
    assert dropped > printed - cap
    assert f"[gpu-audit: {dropped} bytes of the command's output left out here" in log
    assert any("output line(s) were longer than 16 KiB" in w for w in warnings_of(run))
    assert leg["duration_s"] < 60 and took < 150


def test_output_held_open_by_a_process_left_behind_is_ended_with_the_stage(tmp_path, cli_env):
    """The command exits, but a process it started in a session of its own (out of its process
    group) still holds its output: the stage ends at once instead of waiting for that output
    to end (or for the hang watchdog), and that process is ended with it and listed."""
    pid_file = tmp_path / "left-behind.pid"
    try:
        code, run, took = validate(tmp_path, cli_env, "detach", "--stage", "smoke",
                                   "--hang-min", "600", "--hang-max", "600", *PATTERN, "--",
                                   PY, SCRIPT, "detach", "--cycles", "{cycles}", "--pid-file",
                                   str(pid_file))
    finally:
        left = int(pid_file.read_text()) if pid_file.exists() else None
        survived = left is not None and pid_alive(left)
        if survived:
            os.kill(left, signal.SIGKILL)
    assert not survived, "the process the command left behind survived the stage"
    assert code == 0, warnings_of(run)
    assert smoke(run)["status"] == "passed"
    assert smoke(run)["ready"]["ended_processes"][0]["pid"] == left
    assert any(f"pid {left} 'sleep 600'" in w for w in warnings_of(run))
    assert not any("output was still open" in w for w in warnings_of(run))
    assert smoke(run)["duration_s"] < 60 and took < 120
