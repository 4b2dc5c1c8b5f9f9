"""The parts behind a script that resumes itself and a failed command's report, each alone:
where the hook says a script resumed, one record per cycle in the log, reading a command's
error, and the findings' titles and details."""

from __future__ import annotations

import json
import sys

import pytest

from gpu_audit.config import Policy
from gpu_audit.validate.command_error import read_error, reading
from gpu_audit.validate.findings import validate_findings
from gpu_audit.validate.plan import ValidateOptions, build_plan
from gpu_audit.validate.script import hook as hook_module
from gpu_audit.validate.script.spec import make_spec
from gpu_audit.validate.state import (
    CycleLog,
    DeviceChoice,
    LegState,
    RunState,
    cycles_reached,
    load_records,
)

torch = pytest.importorskip("torch")


def _stepped(optimizer_class, steps: int):
    model = torch.nn.Linear(2, 1)
    optimizer = optimizer_class(model.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        optimizer.step()
    return optimizer


def test_the_optimizers_step_count_says_where_a_script_resumed() -> None:
    assert hook_module._resumed_from(_stepped(torch.optim.AdamW, 1), None) is None  # fresh
    assert hook_module._resumed_from(_stepped(torch.optim.AdamW, 201), None) == (
        200, "the optimizer's step count")
    # SGD keeps no step count: a counter of the checkpoint it loaded says it.
    loaded = hook_module._step_counter({"model": {}, "iter_num": 200})
    assert loaded == (200, "'iter_num' in the checkpoint it loaded")
    assert hook_module._resumed_from(_stepped(torch.optim.SGD, 1), loaded) == loaded
    assert hook_module._step_counter({"scheduler": {"last_epoch": 7}})[0] == 7
    assert hook_module._step_counter({"step": True}) is None
    assert hook_module._step_counter([1, 2]) is None


def test_the_hook_numbers_cycles_from_where_the_script_resumed(tmp_path, monkeypatch) -> None:
    """A resumed attempt: the checkpoint the script loads says 200; the stage is 203 long and
    the hook stops the script after cycle 202 (3 steps), its records numbered 200..202."""
    hook = hook_module.Hook(str(tmp_path), stop_after=203, emulate_bytes=None,
                            stage_cycles=203, resumed=True)
    # Not on_torch(): its optimizer and forward hooks are global to this test process.
    monkeypatch.setattr(torch, "load", torch.load)  # the hook's wrapper goes when this ends
    hook._watch_loads(torch)
    path = tmp_path / "ckpt.pt"
    torch.save({"iter_num": 200}, path)
    torch.load(path)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        hook.on_optimizer_step(optimizer)
    lines = [json.loads(line) for line in
             (tmp_path / f"pid-{hook.pid}.jsonl").read_text().splitlines()]
    cycles = [r for r in lines if "n" in r and "ev" not in r]
    assert [r["n"] for r in cycles] == [200, 201, 202]
    assert cycles[0]["resumed_at"] == 200 and cycles[0]["first"] is True
    assert hook.stop_pending


def test_a_resume_at_or_past_the_stage_length_is_not_one(tmp_path) -> None:
    hook = hook_module.Hook(str(tmp_path), stop_after=None, emulate_bytes=None,
                            stage_cycles=50)
    hook.on_optimizer_step(_stepped(torch.optim.AdamW, 80))
    assert hook.count == 1  # counted from 0: a checkpoint from another, longer run


def test_a_new_stage_start_takes_the_superseded_records_out_of_the_file(tmp_path) -> None:
    path = tmp_path / "cycles.jsonl"
    log = CycleLog(path)
    log.append({"type": "stage-start", "leg": "default/smoke", "from_cycle": 0})
    for n in range(3):
        log.append({"type": "cycle", "leg": "default/smoke", "cycle": n, "attempt": 1})
    for n in range(5):
        log.append({"type": "cycle", "leg": "default/classical", "cycle": n, "attempt": 1})
    log.supersede("default/classical", {"type": "stage-start", "leg": "default/classical",
                                        "from_cycle": 2, "attempt": 2})
    log.append({"type": "cycle", "leg": "default/classical", "cycle": 2, "attempt": 2})
    log.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    classical = [(r["cycle"], r["attempt"]) for r in lines
                 if r["leg"] == "default/classical" and r["type"] == "cycle"]
    assert classical == [(0, 1), (1, 1), (2, 2)]
    assert len([r for r in lines if r["leg"] == "default/smoke"]) == 4
    records = load_records(path)["default/classical"]
    assert cycles_reached(records) == 3
    assert cycles_reached([{"type": "cycle", "cycle": 599}]) == 600  # resumed, earlier unlogged


def test_a_python_error_is_read_with_its_last_frames_and_the_users_frame() -> None:
    lib = f"{sys.prefix}/lib/python3.11/site-packages/torch/serialization.py"
    tail = "\n".join([
        "gpu-audit: running python train.py",
        "Traceback (most recent call last):",
        '  File "/home/u/train.py", line 40, in <module>',
        "    main()",
        '  File "/home/u/train.py", line 12, in main',
        "    state = torch.load(path)",
        "            ^^^^^^^^^^^^^^^^",
        f'  File "{lib}", line 1470, in load',
        "    raise pickle.UnpicklingError(_get_wo_message(str(e))) from None",
        "_pickle.UnpicklingError: Weights only load failed.",
        "gpu-audit worker: stage default/smoke failed: the command exited with code 1"])
    error = read_error(tail)
    assert error["error_line"] == "_pickle.UnpicklingError: Weights only load failed."
    assert error["exception"] == "_pickle.UnpicklingError"
    assert error["user_frame"] == "/home/u/train.py:12"
    assert [f["line"] for f in error["frames"]] == [40, 12, 1470]
    assert error["frames"][1]["code"] == "state = torch.load(path)"
    assert reading(error) == ("the script raised _pickle.UnpicklingError (Weights only load "
                              "failed.) in your code at /home/u/train.py:12")


def test_an_argparse_error_and_plain_output_are_read_too() -> None:
    error = read_error("usage: main.py [-h] [--model MODEL]\n"
                       "main.py: error: unrecognized arguments: --modle LSTM\n")
    assert error["kind"] == "arguments"
    assert "argument parser refused" in reading(error)
    error = read_error("loading data\nno GPU found, giving up\n")
    assert error["error_line"] == "no GPU found, giving up" and reading(error) is None
    assert read_error("gpu-audit: running x\n") is None


def _script_findings(legs: dict[str, LegState], **options):
    plan = build_plan(ValidateOptions(command=["python", "train.py"], **options), Policy(),
                      environ={})
    state = RunState(run_id="r", status="failed", started_at="2026-01-01T00:00:00Z",
                     device=DeviceChoice(requested="cpu", resolved="cpu"), legs=legs)
    return plan, validate_findings(plan, state, {})


def test_an_oom_is_titled_by_whether_it_was_retried() -> None:
    oom = LegState(status="failed", failure="oom", attempts=1, reason="out of memory",
                   failure_detail={"script": True})
    _, findings = _script_findings({"default/smoke": oom}, stages=["smoke"])
    (finding,) = [f for f in findings if f.id == "oom-unrecovered"]
    assert finding.title == "stage smoke: the command ran out of memory"
    oom.failure_detail["retries"] = [{"batch": 32}, {"batch": 16}, {"batch": 8}]
    _, findings = _script_findings({"default/smoke": oom}, stages=["smoke"])
    assert [f.title for f in findings if f.id == "oom-unrecovered"] == [
        "stage smoke: the command ran out of memory, also after 2 retries at half the {batch}"]


def test_a_warning_of_several_stages_is_one_finding_that_lists_them() -> None:
    warning = "cycles counted from optimizer steps"
    legs = {f"default/{name}": LegState(status="passed", attempts=1,
                                        ready={"warnings": [warning]})
            for name in ("smoke", "classical")}
    _, findings = _script_findings(legs, stages=["smoke", "classical"], cycles=4,
                                   disable_quantum=True)
    (finding,) = [f for f in findings if f.id == "stage-warning"]
    assert finding.title == warning and finding.subject == "stage:smoke"
    assert finding.detail == "Noted by 2 stages: smoke, classical."


def test_the_command_is_shown_as_written() -> None:
    spec = make_spec(["python", "train.py", "--cycles", "{cycles}", "{quantum}", "--name",
                      "a b", "--out={run_dir}/x"])
    assert spec.display() == ("python train.py --cycles {cycles} {quantum} --name 'a b' "
                              "--out={run_dir}/x")
