"""``validate --resume`` reads a run folder that may have been copied from elsewhere: nothing in
it may run code, and a folder another user controls is refused."""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_audit.errors import InputError
from gpu_audit.validate.state import (
    CHECKPOINT_FORMAT,
    Checkpoint,
    capture_rng,
    find_run,
    load_checkpoint,
    save_checkpoint,
)
from tests.validate.runs import REPO


class Plant:
    """Creates ``marker`` when unpickled, as a hostile checkpoint would run any command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "pwned"))


def envelope(**overrides) -> dict:
    base = {"format": CHECKPOINT_FORMAT, "leg": "v/full", "next_cycle": 3, "batch_scale": 1.0,
            "rng": {}, "state_codec": None, "state": b"", "saved_at": ""}
    return {**base, **overrides}


def test_a_planted_envelope_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    path = tmp_path / "v.full.ckpt"
    path.write_bytes(pickle.dumps(envelope(rng={"python": Plant(marker)})))
    with pytest.raises(InputError, match="delete it to restart the stage"):
        load_checkpoint(path)
    assert not marker.exists()


def test_planted_workload_state_runs_nothing_in_either_codec(tmp_path: Path, torch: Any) -> None:
    marker = tmp_path / "marker"
    buffer = io.BytesIO()
    torch.save({"weights": Plant(marker)}, buffer)
    for codec, state in (("torch", buffer.getvalue()), ("plain", pickle.dumps(Plant(marker))),
                         ("pickle", pickle.dumps(Plant(marker)))):
        path = tmp_path / f"{codec}.ckpt"
        path.write_bytes(pickle.dumps(envelope(state_codec=codec, state=state)))
        with pytest.raises(InputError, match="cannot read this checkpoint") as refused:
            load_checkpoint(path)
        assert "\n" not in str(refused.value)  # one line, however long torch's reason
        assert not marker.exists(), codec


def test_a_genuine_checkpoint_still_round_trips_with_numpy_rng(tmp_path: Path, torch: Any) -> None:
    import numpy

    numpy.random.seed(5)
    rng = capture_rng()
    expected = numpy.random.rand(2)
    path = tmp_path / "v.full.ckpt"
    save_checkpoint(path, Checkpoint(leg="v/full", next_cycle=4, batch_scale=1.0,
                                     workload_state={"w": torch.ones(2), "step": 4},
                                     has_workload_state=True, rng=rng))
    loaded = load_checkpoint(path)
    from gpu_audit.validate.state import restore_rng

    numpy.random.rand(5)
    restore_rng(loaded.rng)
    assert numpy.array_equal(numpy.random.rand(2), expected)
    assert torch.equal(loaded.workload_state["w"], torch.ones(2))


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "r"
    (run / "checkpoints").mkdir(parents=True)
    (run / "plan.json").write_text("{}")
    return run


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder away needs root")
def test_a_run_folder_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    assert find_run("r", tmp_path).path == run
    os.chown(run, 4242, 4242)
    with pytest.raises(InputError, match="owned by uid 4242, not by this user"):
        find_run("r", tmp_path)


def test_a_group_writable_run_folder_is_refused(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    run.chmod(0o775)
    with pytest.raises(InputError, match="writable by group or others"):
        find_run("r", tmp_path)


def test_a_world_writable_checkpoint_folder_is_refused(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    (run / "checkpoints").chmod(0o777)
    (run / "checkpoints" / "v.full.ckpt").write_bytes(pickle.dumps(envelope()))
    with pytest.raises(InputError, match="checkpoints is writable by group or others"):
        load_checkpoint(run / "checkpoints" / "v.full.ckpt")


def test_a_linked_checkpoint_is_not_followed(tmp_path: Path) -> None:
    run = _run_folder(tmp_path)
    (tmp_path / "elsewhere.ckpt").write_bytes(pickle.dumps(envelope()))
    (run / "checkpoints" / "v.full.ckpt").symlink_to(tmp_path / "elsewhere.ckpt")
    with pytest.raises(InputError, match="symbolic link"):
        load_checkpoint(run / "checkpoints" / "v.full.ckpt")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder away needs root")
def test_resume_refuses_another_users_folder_with_exit_3(tmp_path: Path, cli_env: dict) -> None:
    run = _run_folder(tmp_path)
    os.chown(run, 12345, 12345)
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "validate", "--resume", "r",
                           "--out", str(tmp_path)], env=cli_env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert "owned by uid 12345" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _planted_plan(run: Path, marker: Path) -> None:
    """A plan whose command writes ``marker``: what a resume would run if it obeyed it."""
    from gpu_audit.serial import dumps
    from gpu_audit.validate.plan import Plan
    from gpu_audit.validate.state import PLAN_SCHEMA

    del Plan  # the plan's content does not matter: it must never be read
    (run / "plan.json").write_text(dumps({"schema": PLAN_SCHEMA, "plan": {
        "script": {"command": ["/bin/sh", "-c", f"id > {marker}"]}}}))


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
@pytest.mark.parametrize("planted", ["plan-owner", "folder-group-writable", "parent-owner",
                                     "plan-link"])
def test_resume_as_root_never_runs_a_plan_another_user_could_write(
        tmp_path: Path, cli_env: dict, planted: str) -> None:
    """A root run folder (mode 755) whose plan another user owns or could replace: exit 3, and
    the plan's command never runs."""
    out = tmp_path / "out"
    run = _run_folder(out)
    marker = tmp_path / "marker"
    if planted == "plan-link":
        _planted_plan(tmp_path, marker)
        (run / "plan.json").unlink()
        (run / "plan.json").symlink_to(tmp_path / "plan.json")
    else:
        _planted_plan(run, marker)
    if planted == "plan-owner":
        os.chown(run / "plan.json", 4242, 4242)
    elif planted == "folder-group-writable":
        run.chmod(0o775)
    elif planted == "parent-owner":
        os.chown(out / "runs", 4242, 4242)
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "validate", "--resume", "r",
                           "--out", str(out)], env=cli_env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "refusing to resume" in done.stderr and "Traceback" not in done.stderr
    assert not marker.exists()


@pytest.mark.gpu
def test_cuda_random_states_and_tensors_round_trip_through_a_checkpoint(tmp_path: Path,
                                                                       torch: Any) -> None:
    torch.cuda.init()
    torch.cuda.manual_seed_all(11)
    rng = capture_rng()
    expected = torch.rand(3, device="cuda")
    path = tmp_path / "v.full.ckpt"
    save_checkpoint(path, Checkpoint(leg="v/full", next_cycle=2, batch_scale=1.0,
                                     workload_state={"w": torch.ones(4, device="cuda")},
                                     has_workload_state=True, rng=rng))
    loaded = load_checkpoint(path, map_location="cuda")
    from gpu_audit.validate.state import restore_rng

    torch.rand(10, device="cuda")
    restore_rng(loaded.rng)
    assert torch.equal(torch.rand(3, device="cuda"), expected)
    assert loaded.workload_state["w"].is_cuda
