"""``gpu-audit validate -- COMMAND`` ends every process the command started with the stage (a
daemon, a child in a session of its own, torchrun's ranks), names the line each rank of a hung
command waits on, lets the last step of a stopped script finish (its evaluation, its file), and
reports the true peak memory of a run too short to sample from outside."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import psutil
import pytest

from gpu_audit.validate.script.outside import FAST_FOR_S, FIRST_INTERVAL_S, INTERVAL_S, intervals
from gpu_audit.validate.script.stacks import describe, library_frame, order, waiting_line
from tests.validate.runs import cycles_of, report_of, state_of
from tests.validate.test_validate_script import PY, TORCHRUN, findings_of, script, validate

MIB = 1024 * 1024


def registered_pids(run: Path, leg: str = "default.smoke") -> set[int]:
    """Every Python of the command, from the registrations the hook wrote."""
    folder = run / "streams" / leg / "attempt-1"
    return {int(p.name[len("proc-"):-len(".txt")]) for p in folder.glob("proc-*.txt")}


def alive(pids: set[int]) -> set[int]:
    running = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.add(pid)
        except psutil.Error:
            continue
    return running


def ended_processes(run: Path) -> list[dict]:
    return report_of(run)["variants"][0]["stages"][0]["worker"]["ended_processes"]


def test_a_daemon_and_a_child_in_its_own_session_end_with_the_stage(tmp_path, cli_env):
    """The script passes (every step ran; the daemon holding its output does not make the stage
    hang), and neither process it left survives the stage: both are listed in the report."""
    done, run = validate(tmp_path, cli_env, "left", "--stage", "smoke", "--",
                         PY, script("leaves_processes.py"), "--steps", "{cycles}",
                         "--pids", "{run_dir}/pids", timeout=90)
    pids_file = run / "scratch" / "default.smoke" / "pids"
    daemon, own_session = (int(p) for p in pids_file.read_text().split())
    assert not alive({daemon, own_session}), "a process the command started survived the stage"
    assert done.returncode == 0, done.stdout + done.stderr
    ended = {e["pid"]: e for e in ended_processes(run)}
    assert set(ended) == {daemon, own_session}
    assert ended[daemon]["found"] == "registered" and "leaves_processes.py" in \
        ended[daemon]["command"]
    assert ended[own_session]["command"] == "sleep 300"
    assert {e["signal"] for e in ended.values()} <= {"SIGTERM", "SIGKILL"}
    warnings = state_of(run)["legs"]["default/smoke"]["ready"]["warnings"]
    assert any(f"pid {daemon}" in w and f"pid {own_session}" in w for w in warnings)


def test_torchrun_rank_hang_names_rank_0s_line_and_ends_every_rank(tmp_path, cli_env):
    """Rank 1 waits in a barrier, rank 0 in its next backward: the finding names rank 0's line
    in the script (not the launcher's), the limit is not stretched by the start-up, and no
    rank survives (they run in sessions of their own)."""
    if not Path(TORCHRUN).exists():
        pytest.skip("torchrun is not installed beside this Python")
    done, run = validate(tmp_path, cli_env, "ddp-hang", "--stage", "smoke", "--hang-min", "2",
                         "--hang-factor", "2", "--", TORCHRUN, "--nproc-per-node", "2",
                         script("ddp_rank_hangs.py"), timeout=150)
    pids = registered_pids(run)
    assert not alive(pids), "a process of the command survived the stage"
    if not cycles_of(run, "default/smoke"):
        log = (run / "logs" / "default.smoke.log").read_text()[-400:]
        pytest.skip(f"torchrun could not start 2 gloo ranks on this machine: {log}")
    assert done.returncode == 2, done.stdout + done.stderr
    finding = findings_of(report_of(run), "stage-hung")[0]
    source = script("ddp_rank_hangs.py")
    backward = next(i for i, line in enumerate(Path(source).read_text().splitlines(), 1)
                    if "loss.backward()" in line)
    barrier = next(i for i, line in enumerate(Path(source).read_text().splitlines(), 1)
                   if "dist.barrier()" in line)
    assert "rank 0 (pid" in finding["detail"]
    assert f'ddp_rank_hangs.py", line {backward} in main' in finding["detail"]
    assert f'ddp_rank_hangs.py", line {barrier} in main' in finding["detail"]  # rank 1's
    assert "api.py" not in finding["detail"].split("waiting in")[0]
    leg = state_of(run)["legs"]["default/smoke"]
    processes = leg["failure_detail"]["processes"]
    assert processes[0]["rank"] == 0 and processes[0]["own"]
    # The limit follows the cycles after the first (whose time includes torchrun's start-up).
    later = [r["cycle_s"] for r in cycles_of(run, "default/smoke")[1:]]
    assert leg["failure_detail"]["limit_s"] <= max([2.0, *(2 * t for t in later)]) + 1e-6
    ranks = {p["pid"] for p in processes if p["rank"] is not None}
    assert ranks and ranks <= {e["pid"] for e in ended_processes(run)}
    log = (run / "logs" / "default.smoke.log").read_text()
    assert "--- gpu-audit: stacks of rank 1" in log


def test_a_stopped_lbfgs_script_finishes_its_last_step_evaluation_and_file(tmp_path, cli_env):
    """Stopped after the stage's 3 steps: step 2's closure evaluations, its held-out evaluation
    (a forward after the step), its print and its file all happen; step 3 never updates."""
    done, run = validate(tmp_path, cli_env, "lbfgs", "--stage", "smoke", "--",
                         PY, script("lbfgs_files.py"), "--out", "{run_dir}")
    assert done.returncode == 0, done.stdout + done.stderr
    written = sorted(p.name for p in (run / "scratch" / "default.smoke").glob("prediction-*"))
    assert written == ["prediction-0.txt", "prediction-1.txt", "prediction-2.txt"]
    log = (run / "logs" / "default.smoke.log").read_text()
    assert "step 2 test loss=" in log and "step 3 " not in log
    assert [r["cycle"] for r in cycles_of(run, "default/smoke")] == [0, 1, 2]


def test_a_short_run_reports_its_true_peak_memory(tmp_path, cli_env):
    """A script with no optimizer holds 512 MiB for a moment: the peak comes from its own
    reading (ru_maxrss as it exits), not from a sample that missed the moment."""
    done, run = validate(tmp_path, cli_env, "peak", "--stage", "smoke", "--",
                         PY, script("fit_no_optimizer.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = cycles_of(run, "default/smoke")
    assert record["whole_stage"] and record["rss_bytes"] >= 512 * MIB


# -- the parts ----------------------------------------------------------------------------------

DUMP = """Thread 0x00007f2b3c5ff640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f2b4a6d8740 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/autograd/graph.py", line 769 in _engine_run
  File "/venv/lib/python3.11/site-packages/torch/_tensor.py", line 521 in backward
  File "/home/me/train.py", line 42 in train
  File "/home/me/train.py", line 60 in <module>
"""


def test_the_waiting_line_is_the_main_threads_own_frame():
    line = waiting_line(DUMP)
    assert line == {"where": 'File "/home/me/train.py", line 42 in train',
                    "innermost": 'File "/venv/lib/python3.11/site-packages/torch/autograd/'
                                 'graph.py", line 769 in _engine_run', "own": True}
    assert describe({"pid": 7, "rank": 0, **line}).startswith(
        'rank 0 (pid 7) at File "/home/me/train.py", line 42 in train, waiting in')


def test_a_launcher_is_never_the_answer():
    import sys

    launcher = (f'  File "{sys.prefix}/lib/python3.11/site-packages/torch/distributed/elastic/'
                'agent/server/api.py", line 923 in _invoke_run\n'
                f'  File "{sys.prefix}/bin/torchrun", line 8 in <module>\n')
    dump = "Current thread 0x01 (most recent call first):\n" + launcher
    entry = waiting_line(dump)
    assert not entry["own"] and library_frame(f'File "{sys.prefix}/bin/torchrun", line 8')
    assert library_frame('File "/usr/lib/python3/dist-packages/x.py", line 1 in f')
    ranks = order([{"pid": 1, "rank": None, **entry},
                   {"pid": 3, "rank": 1, **waiting_line(DUMP)},
                   {"pid": 2, "rank": 0, **waiting_line(DUMP)}])
    assert [e["pid"] for e in ranks] == [2, 3, 1]


def test_the_outside_sampler_starts_fast_then_backs_off():
    waits = list(itertools.islice(intervals(), 40))
    fast = round(FAST_FOR_S / FIRST_INTERVAL_S)
    assert waits[:fast] == [FIRST_INTERVAL_S] * fast
    assert waits[fast] == 2 * FIRST_INTERVAL_S and waits[-1] == INTERVAL_S
    assert waits == sorted(waits)


def test_registration_names_the_process_and_its_session(tmp_path):
    """The hook's registration file: one JSON line a Python writes as it starts."""
    import os
    import subprocess
    import sys

    from gpu_audit.validate.script.launch import INJECT_DIR
    from tests.validate.runs import REPO

    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")}
    env.update(PYTHONPATH=os.pathsep.join([INJECT_DIR, str(REPO)]),
               GPU_AUDIT_SCRIPT_STREAMS=str(tmp_path), RANK="3")
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], env=env,
                           capture_output=True, text=True, timeout=60, start_new_session=True)
    pid = int(child.stdout)
    lines = (tmp_path / f"proc-{pid}.txt").read_text().splitlines()
    facts = json.loads(lines[0])
    assert facts["pid"] == pid and facts["sid"] == pid and facts["rank"] == 3
    assert json.loads(lines[-1])["ev"] == "exit" and json.loads(lines[-1])["rss_peak_bytes"] > 0


def test_only_processes_started_since_the_command_are_ever_ended(tmp_path):
    """A registration naming a process that existed before the command, or this process (the
    supervisor's place), is not followed; the command's own processes are found."""
    import os
    import subprocess

    from gpu_audit.validate.script.processes import CommandProcesses, snapshot

    before = subprocess.Popen(["sleep", "60"])
    existing = snapshot()
    command = subprocess.Popen(["sleep", "60"])
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        for pid in (before.pid, os.getpid(), command.pid):
            facts = json.dumps({"pid": pid, "sid": pid})
            (tmp_path / f"proc-{pid}.txt").write_text(facts + "\n")
        processes = CommandProcesses(command.pid, folder, existing=existing)
        found = {proc.pid for proc in processes.alive()}
        assert command.pid in found
        assert before.pid not in found and os.getpid() not in found
        ended = processes.end(grace_s=5)
        assert [(e["pid"], e["signal"]) for e in ended] == [(command.pid, "SIGTERM")]
        assert not alive({command.pid}) and before.poll() is None
    finally:
        os.close(folder)
        for proc in (before, command):
            proc.kill()
            proc.wait()


def test_no_sample_is_kept_from_before_the_commands_code_starts():
    """Until the command's first Python registers, the sampler keeps nothing (a bare
    interpreter's few MiB are not the script's memory); then it samples at once, fast."""
    import subprocess
    import time

    from gpu_audit.validate.script.outside import OutsideSampler

    child = subprocess.Popen(["sleep", "30"])
    try:
        sampler = OutsideSampler(child.pid, nvml=False, code_started=False).start()
        time.sleep(0.5)
        assert sampler.current()["rss_bytes"] is None and "rss_bytes" not in sampler.peaks
        sampler.code_started()
        time.sleep(0.5)
        assert sampler.current()["rss_bytes"] > 0 and sampler.peaks["rss_bytes"] > 0
        sampler.stop()
    finally:
        child.kill()
        child.wait()
