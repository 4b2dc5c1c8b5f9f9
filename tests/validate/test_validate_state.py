"""The run folder's files: the append-only cycle log, resume markers, checkpoints, the lock."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_audit.errors import InputError, UsageError
from gpu_audit.validate.state import (
    Checkpoint,
    CycleLog,
    RunLock,
    capture_rng,
    load_checkpoint,
    load_records,
    repair_torn_tail,
    restore_rng,
    save_checkpoint,
)

REPO = Path(__file__).resolve().parents[2]


def cycle(leg: str, n: int, value: int | None = None) -> dict:
    return {"type": "cycle", "leg": leg, "cycle": n, "metrics": {"value": value or n + 1}}


def test_records_come_back_per_stage_in_cycle_order(tmp_path: Path) -> None:
    log = CycleLog(tmp_path / "cycles.jsonl")
    for n in range(3):
        log.append(cycle("default/smoke", n))
        log.append(cycle("default/full", n))
    log.close()
    records = load_records(tmp_path / "cycles.jsonl")
    assert [r["cycle"] for r in records["default/smoke"]] == [0, 1, 2]
    assert [r["cycle"] for r in records["default/full"]] == [0, 1, 2]


def test_a_resume_marker_supersedes_cycles_past_the_checkpoint(tmp_path: Path) -> None:
    """Cycles 0-6 were logged, the checkpoint said 5: 5 and 6 re-run and count once."""
    path = tmp_path / "cycles.jsonl"
    log = CycleLog(path)
    log.append({"type": "stage-start", "leg": "v/full", "from_cycle": 0})
    for n in range(7):
        log.append(cycle("v/full", n, value=100 + n))
    log.append({"type": "stage-start", "leg": "v/full", "from_cycle": 5})
    for n in range(5, 9):
        log.append(cycle("v/full", n, value=200 + n))
    log.close()
    records = load_records(path)["v/full"]
    assert [r["cycle"] for r in records] == list(range(9))
    assert [r["metrics"]["value"] for r in records] == [100, 101, 102, 103, 104, 205, 206, 207,
                                                        208]
    assert path.read_text().count('"cycle":6') == 2  # still append-only on disk


def test_a_line_torn_by_kill_9_is_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "cycles.jsonl"
    path.write_bytes(json.dumps(cycle("v/full", 0)).encode() + b'\n{"type":"cycle","leg":"v/fu')
    assert load_records(path)["v/full"][0]["cycle"] == 0  # readers ignore the torn tail
    log = CycleLog(path)  # the next writer removes it
    log.append(cycle("v/full", 1))
    log.close()
    assert [r["cycle"] for r in load_records(path)["v/full"]] == [0, 1]
    assert repair_torn_tail(path) == 0


def test_records_survive_kill_9_of_the_writer(tmp_path: Path) -> None:
    """Everything appended before a SIGKILL is in the file (flushed per record)."""
    path = tmp_path / "cycles.jsonl"
    script = (f"import os, signal, sys; sys.path.insert(0, {str(REPO)!r}); "
              "from gpu_audit.validate.state import CycleLog; "
              f"log = CycleLog(__import__('pathlib').Path({str(path)!r})); "
              "[log.append({'type': 'cycle', 'leg': 'v/full', 'cycle': n}) for n in range(200)]; "
              "os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert done.returncode == -9
    assert [r["cycle"] for r in load_records(path)["v/full"]] == list(range(200))


def test_checkpoint_round_trip_with_tensors_and_rng(tmp_path: Path, torch: Any) -> None:
    path = tmp_path / "checkpoints" / "v.full.ckpt"
    torch.manual_seed(3)
    rng = capture_rng()
    expected_next = torch.rand(3)
    state = {"weights": torch.arange(6.0).reshape(2, 3), "step": 7}
    save_checkpoint(path, Checkpoint(leg="v/full", next_cycle=40, batch_scale=0.5,
                                     workload_state=state, has_workload_state=True, rng=rng))
    loaded = load_checkpoint(path)
    assert loaded is not None
    assert (loaded.next_cycle, loaded.batch_scale, loaded.has_workload_state) == (40, 0.5, True)
    assert torch.equal(loaded.workload_state["weights"], state["weights"])
    torch.rand(10)
    restore_rng(loaded.rng)
    assert torch.equal(torch.rand(3), expected_next)
    assert not list(path.parent.glob(".*.tmp"))


def test_a_missing_checkpoint_is_none_and_a_damaged_one_says_what_to_do(tmp_path: Path) -> None:
    assert load_checkpoint(tmp_path / "none.ckpt") is None
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(b"not a pickle")
    with pytest.raises(InputError, match="delete it to restart the stage"):
        load_checkpoint(bad)


def test_a_second_runner_cannot_take_a_run_that_is_in_use(tmp_path: Path) -> None:
    first = RunLock(tmp_path / ".lock")
    first.acquire()
    started = time.monotonic()
    with pytest.raises(UsageError, match="in use by another gpu-audit process"):
        RunLock(tmp_path / ".lock").acquire(wait_s=0.5)
    assert time.monotonic() - started >= 0.5
    first.release()
    second = RunLock(tmp_path / ".lock")
    second.acquire(wait_s=0)
    second.release()


def test_the_lock_is_held_while_a_child_that_inherited_it_lives(tmp_path: Path) -> None:
    lock = RunLock(tmp_path / ".lock")
    lock.acquire()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             pass_fds=(lock.fd,))
    try:
        lock.release()  # the runner is gone, its worker is not
        with pytest.raises(UsageError):
            RunLock(tmp_path / ".lock").acquire(wait_s=0.3)
    finally:
        child.kill()
        child.wait()
    RunLock(tmp_path / ".lock").acquire(wait_s=2)


def test_a_finished_run_removes_its_lock_and_a_later_runner_locks_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / ".lock"
    first = RunLock(path)
    first.acquire()
    waiting = os.open(path, os.O_RDWR)  # a resume that opened the old file and waits on it
    first.release(remove=True)
    assert not path.exists()
    second = RunLock(path)
    second.acquire(wait_s=0)  # locks a new file, not the removed one the waiter holds open
    assert os.path.samestat(os.fstat(second.fd), os.stat(path))
    fcntl.flock(waiting, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the old inode is free...
    os.close(waiting)
    with pytest.raises(UsageError):  # ...but the run is locked through the file at the path
        RunLock(path).acquire(wait_s=0.3)
    second.release(remove=True)
