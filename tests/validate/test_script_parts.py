"""The pieces of ``validate -- COMMAND`` without a process: placeholders, metrics, the plan,
how streams and output lines become cycle records, and the hook inside a Python process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.errors import UsageError
from gpu_audit.validate.plan import ValidateOptions, build_plan
from gpu_audit.validate.script.hook import MARKER
from gpu_audit.validate.script.launch import INJECT_DIR, cuda_visible_devices, python_of
from gpu_audit.validate.script.spec import expand, make_spec, parse_metrics
from gpu_audit.validate.script.streams import Cycles, StreamReader

REPO = Path(__file__).resolve().parents[2]
pytest_plugins = ["tests.fakegpu"]


def test_placeholders_expand_per_stage():
    spec = make_spec(["python", "run.py", "--cycles", "{cycles}", "{quantum}", "--out={run_dir}",
                      "{resume}", "--tag", "{stage}-{{x}}"],
                     resume_flag="--resume-from {run_dir}/ckpt")
    first = expand(spec, stage="smoke", cycles=3, quantum="off", run_dir="/r", resumed=False)
    assert first == ["python", "run.py", "--cycles", "3", "--disable-quantum", "--out=/r",
                     "--tag", "smoke-{x}"]
    again = expand(spec, stage="full", cycles=500, quantum="full", run_dir="/r", resumed=True)
    assert again == ["python", "run.py", "--cycles", "500", "--out=/r", "--resume-from",
                     "/r/ckpt", "--tag", "full-{x}"]
    lite = make_spec(["x", "{quantum}"], quantum_flags={"lite": "--quantum lite"})
    assert expand(lite, stage="s", cycles=1, quantum="lite", run_dir="/", resumed=False) == [
        "x", "--quantum", "lite"]
    assert spec.counts_its_cycles and not lite.counts_its_cycles


@pytest.mark.parametrize("command, message", [
    (["python", "t.py", "{batch}"], "give the batch size to start from with --batch N"),
    (["python", "t.py", "{steps}"], "unknown placeholder {steps}"),
    (["python", "t.py", "--n={cycle}"], "unknown placeholder {cycle}"),
    ([], "no command after `--`"),
])
def test_bad_commands_are_usage_errors(command, message):
    with pytest.raises(UsageError, match=message.replace("{", r"\{").replace("}", r"\}")):
        make_spec(command)


def test_metric_parsing():
    assert parse_metrics(["loss=loss[=:]\\s*([0-9.eE+-]+)"]) == {
        "loss": "loss[=:]\\s*([0-9.eE+-]+)"}
    for bad in ("loss", "1x=(a)", "x=([", "x=(a)(b)"):
        with pytest.raises(UsageError):
            parse_metrics([bad])


def test_plan_keeps_the_script_and_rejects_a_second_workload(tmp_path):
    plan = build_plan(ValidateOptions(command=["python", "t.py"], cycles=5,
                                      disable_quantum=True), cwd=tmp_path)
    assert plan.script is not None and plan.workload == "command: python t.py"
    with pytest.raises(UsageError, match="two different workloads"):
        build_plan(ValidateOptions(command=["python", "t.py"], workload="a.b:C"), cwd=tmp_path)
    with pytest.raises(UsageError, match="--cycle-pattern"):
        build_plan(ValidateOptions(cycle_pattern="^x"), cwd=tmp_path)


def test_cuda_visible_devices_and_python_detection(tmp_path):
    assert cuda_visible_devices("cuda:1", None) == "1"
    assert cuda_visible_devices("cuda:1", "3,5") == "5"
    assert cuda_visible_devices("cpu", "0") == ""
    assert cuda_visible_devices("cuda", "2") is None
    launcher = tmp_path / "launcher"
    launcher.write_text(f"#!{sys.executable}\nprint(1)\n")
    assert python_of(str(launcher)) == sys.executable
    shell = tmp_path / "run.sh"
    shell.write_text("#!/bin/sh\necho\n")
    assert python_of(str(shell)) is None


def _cycles(**kwargs):
    written, restarts = [], []
    cycles = Cycles({"type": "cycle"}, emit=written.append, restart=restarts.append,
                    outside=lambda: {"rss_bytes": 1, "swap_used_bytes": 0}, started=0.0,
                    **{"cycle_pattern": None, "metrics": {"loss": r"loss=(\S+)"}, **kwargs})
    return cycles, written, restarts


def test_optimizer_cycles_take_the_lines_printed_after_their_step():
    cycles, written, _ = _cycles()
    cycles.line("loading loss=9", 0.0)  # before the first step: cycle 0
    for n in range(3):
        cycles.stream("pid-1", {"n": n, "src": "optimizer", "t": n, "cycle_s": 0.1}, n)
        cycles.line(f"{MARKER}pid-1 optimizer {n}", n)
        cycles.line(f"step {n} loss={n}.5", n)
    cycles.flush(10.0)
    assert [r["cycle"] for r in written] == [0, 1]  # cycle 2's lines may still come
    cycles.finish(3.0)
    assert [r["metrics"] for r in written] == [{"loss": 0.5}, {"loss": 1.5}, {"loss": 2.5}]


def test_monitor_cycles_take_the_lines_printed_before_their_step_and_outrank_optimizers():
    cycles, written, restarts = _cycles()
    cycles.stream("pid-1", {"n": 0, "src": "optimizer", "t": 0, "cycle_s": 0.1}, 0)
    cycles.line(f"{MARKER}pid-1 optimizer 0", 0)
    for n in range(2):
        cycles.line(f"work {n} loss={n}.25", n)
        cycles.stream("pid-1", {"n": n, "src": "monitor", "t": n, "cycle_s": 0.1}, n)
        cycles.line(f"{MARKER}pid-1 monitor {n}", n)
        cycles.stream("pid-1", {"n": n + 1, "src": "optimizer", "t": n, "cycle_s": 0.1}, n)
    cycles.finish(2.0)
    assert restarts and [(r["cycle"], r["source"]) for r in written] == [(0, "monitor"),
                                                                        (1, "monitor")]
    assert [r["metrics"] for r in written] == [{"loss": 0.25}, {"loss": 1.25}]


def test_pattern_cycles_other_ranks_and_whole_stage():
    cycles, written, _ = _cycles(cycle_pattern=r"^cycle")
    cycles.line("prep loss=4", 0.5)
    cycles.line("cycle 0 done", 1.0)
    cycles.line("cycle 1 loss=2", 1.5)
    assert [(r["cycle"], r["metrics"], r["cycle_s"]) for r in written] == [
        (0, {"loss": 4.0}, 1.0), (1, {"loss": 2.0}, 0.5)]

    cycles, written, _ = _cycles()
    cycles.stream("rank-1", {"n": 0, "src": "optimizer", "t": 0, "cycle_s": 0.2,
                             "rss_bytes": 7}, 0)
    cycles.stream("rank-0", {"n": 0, "src": "optimizer", "t": 0, "cycle_s": 0.1}, 0)
    cycles.finish(1.0)
    assert written[0]["ranks"] == {"rank-1": {"cycle_s": 0.2, "rss_bytes": 7}}

    cycles, written, _ = _cycles()
    cycles.line("final loss=0.3", 1.0)
    record = cycles.finish(5.0)
    assert record is not None and record["whole_stage"] and record["metrics"] == {"loss": 0.3}


def test_stream_reader_skips_a_half_written_line(tmp_path):
    stream = tmp_path / "rank-0.jsonl"
    stream.write_text('{"n": 0}\n{"n": 1')
    reader = StreamReader(tmp_path)
    assert reader.read() == [("rank-0", {"n": 0})]
    with open(stream, "a") as handle:
        handle.write("}\n")
    assert reader.read() == [("rank-0", {"n": 1})]


HOOKED = """
import sys
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
other = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(50):
    opt.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
    other.step()  # a second optimizer does not count twice
    print("after", i, flush=True)
print("not stopped")
"""


def test_the_hook_counts_one_optimizer_and_stops_between_steps(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")}
    env.update(PYTHONPATH=os.pathsep.join([INJECT_DIR, str(REPO)]),
               GPU_AUDIT_SCRIPT_STREAMS=str(tmp_path), GPU_AUDIT_SCRIPT_STOP_AFTER="3")
    done = subprocess.run([sys.executable, "-c", HOOKED], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["after 0", "after 1", "after 2"]
    assert "not stopped" not in done.stdout and "after 3" not in done.stdout
    (stream,) = tmp_path.glob("pid-*.jsonl")
    records = [json.loads(line) for line in stream.read_text().splitlines()]
    assert records[0]["ev"] == "hello" and records[-1] == {"ev": "stop", "n": 3}
    assert [r["n"] for r in records[1:-1]] == [0, 1, 2]
    assert MARKER not in done.stdout  # stdout is not the supervisor's pipe: no markers


def test_a_broken_hook_never_breaks_the_script(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")  # the stream folder cannot be made: a file is in the way
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")}
    env.update(PYTHONPATH=os.pathsep.join([INJECT_DIR, str(REPO)]),
               GPU_AUDIT_SCRIPT_STREAMS=str(blocked / "streams"))
    code = "from gpu_audit import monitor\nfor i in range(3):\n    monitor.step()\nprint('ok')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok"
    assert done.stderr.count("gpu-audit validate hook: disabled") == 1
    assert "not started" not in done.stderr  # its registration failed too, silently


SAMPLE = """
import json, sys
from gpu_audit.validate.script.outside import OutsideSampler
sampler = OutsideSampler(int(sys.argv[1]), nvml=True)
sampler.sample(with_nvml=True)
print(json.dumps({**sampler.latest, "note": sampler.nvml_note}))
"""


def test_memory_of_a_program_that_is_not_python_is_sampled_from_outside(fake_nvml, cli_env):
    """NVML's per-process figure for the command's process tree (fake driver), and its RSS."""
    from tests.fakegpu import h100_node

    child = subprocess.Popen(["sleep", "30"])
    try:
        env = fake_nvml(h100_node(n=2, pids=[child.pid, 999_999], process_memory_bytes=3 << 30),
                        base=cli_env)
        done = subprocess.run([sys.executable, "-c", SAMPLE, str(child.pid)], env=env,
                              capture_output=True, text=True, timeout=60)
    finally:
        child.kill()
        child.wait()
    assert done.returncode == 0, done.stderr
    sample = json.loads(done.stdout)
    assert sample["nvml_used_bytes"] == 3 << 30  # its own process only, not pid 999999
    assert sample["rss_bytes"] > 0 and sample["note"] is None
