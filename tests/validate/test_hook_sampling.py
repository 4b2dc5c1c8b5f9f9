"""The validate script hook reads CUDA figures at most once per interval on fast steps, and
always on the first cycle, a stop count's last one and at exit, without losing a peak or an
OOM between two reads (CPU only: the CUDA calls are answered by tests/validate/cuda_standin)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.validate.script.hook import (
    CUDA_SAMPLE_S,
    ENV_SAMPLE_MS,
    ENV_STREAMS,
    Hook,
    sample_interval,
)
from gpu_audit.validate.script.streams import Cycles
from tests.validate.cuda_standin import GIB, standin_torch
from tests.validate.runs import REPO

MS = 1 / 1024  # a "millisecond" that adds up exactly in binary floating point
INTERVAL = 50 * MS


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def hook_on_standin(folder: Path, *, stop_after: int | None = None,
                    sample_s: float = INTERVAL) -> tuple[Hook, Clock]:
    hook = Hook(str(folder), stop_after, None, sample_s)
    hook.torch = standin_torch()
    hook.clock = clock = Clock()
    return hook, clock


def records(folder: Path) -> list[dict]:
    (stream,) = folder.glob("pid-*.jsonl")
    return [json.loads(line) for line in stream.read_text().splitlines()]


def cycles(folder: Path) -> list[dict]:
    return [r for r in records(folder) if "ev" not in r]


def read(record: dict) -> bool:
    return "allocated_bytes" in record


def test_fast_steps_are_read_at_most_once_per_interval(tmp_path):
    hook, clock = hook_on_standin(tmp_path)
    for _ in range(200):  # 1 ms steps, a read every 50 ms at most
        hook.on_monitor_step()
        clock.now += MS
    written = cycles(tmp_path)
    assert len(written) == 200
    assert [r["n"] for r in written if read(r)] == [0, 50, 100, 150]
    assert hook.torch.cuda.reads == 4
    assert written[0]["device"]["name"] == "Stand-in GPU"  # the first read names the device
    assert all(r["allocated_bytes"] is not None for r in written if read(r))


def test_steps_slower_than_the_interval_are_all_read(tmp_path):
    hook, clock = hook_on_standin(tmp_path)
    for _ in range(10):
        hook.on_monitor_step()
        clock.now += 60 * MS
    assert all(read(r) for r in cycles(tmp_path)) and hook.torch.cuda.reads == 10


def test_a_zero_interval_reads_every_cycle(tmp_path):
    hook, _clock = hook_on_standin(tmp_path, sample_s=0.0)
    for _ in range(20):
        hook.on_monitor_step()  # the clock does not move at all
    assert all(read(r) for r in cycles(tmp_path))


def test_a_peak_and_an_oom_between_two_reads_are_reported_by_the_next_read(tmp_path):
    hook, clock = hook_on_standin(tmp_path)
    cuda = hook.torch.cuda
    cuda.malloc(2 * GIB)  # the model
    for n in range(160):
        if n == 17:  # an unread cycle's activations: 6 GiB, freed before the cycle ends
            cuda.malloc(6 * GIB)
            cuda.free(6 * GIB)
        if n == 23:
            cuda.out_of_memory()  # caught by the script, which skipped the batch
        hook.on_monitor_step()
        clock.now += MS
    written = {r["n"]: r for r in cycles(tmp_path)}
    assert not read(written[17]) and not read(written[23])
    assert written[0]["allocated_peak_bytes"] == 2 * GIB
    assert written[50]["allocated_peak_bytes"] == 8 * GIB  # the peak of cycle 17
    assert written[50]["reserved_peak_bytes"] == 8 * GIB and written[50]["ooms"] == 1
    assert written[50]["allocated_bytes"] == 2 * GIB
    # After a read the peaks start again: cycle 17's is not counted twice.
    later = [r for n, r in written.items() if n > 50 and read(r)]
    assert [r["n"] for r in later] == [100, 150]
    assert all(r["allocated_peak_bytes"] == 2 * GIB and r["ooms"] == 0 for r in later)


def test_the_last_cycle_of_a_stop_count_is_read(tmp_path):
    hook, clock = hook_on_standin(tmp_path, stop_after=12)
    with pytest.raises(SystemExit):
        for _ in range(20):
            hook.on_monitor_step()
            clock.now += MS
    written = cycles(tmp_path)
    assert [r["n"] for r in written if read(r)] == [0, 11]
    assert records(tmp_path)[-1] == {"ev": "stop", "n": 12}


def test_at_exit_the_cycles_since_the_last_read_are_read(tmp_path):
    hook, clock = hook_on_standin(tmp_path)
    for n in range(30):
        if n == 25:
            hook.torch.cuda.malloc(3 * GIB)
            hook.torch.cuda.free(3 * GIB)
        hook.on_monitor_step()
        clock.now += MS
    hook.read_unread()
    tail = records(tmp_path)[-1]
    assert tail["ev"] == "cuda" and tail["n"] == 29 and tail["allocated_peak_bytes"] == 3 * GIB
    hook.read_unread()  # nothing unread any more: nothing more written
    assert records(tmp_path)[-1] == tail


def test_nothing_is_written_at_exit_when_the_last_cycle_was_read(tmp_path):
    hook, _clock = hook_on_standin(tmp_path)
    hook.on_monitor_step()
    hook.read_unread()
    assert [r.get("ev") for r in records(tmp_path)] == ["hello", None]


@pytest.mark.parametrize(("text", "seconds"), [
    (None, CUDA_SAMPLE_S), ("", CUDA_SAMPLE_S), ("0", 0.0), ("250", 0.25),
    ("soon", CUDA_SAMPLE_S), ("-5", CUDA_SAMPLE_S), ("nan", CUDA_SAMPLE_S),
    ("1e9", CUDA_SAMPLE_S),
])
def test_the_interval_variable(text, seconds):
    assert sample_interval(text) == seconds


RAISING = """
import sys
from gpu_audit.validate.script import hook as hook_module
from tests.validate.cuda_standin import GIB, standin_torch

hook = hook_module.install()
hook.torch = standin_torch()
for step in range(1000):
    hook.on_monitor_step()
    if step == 40:
        hook.torch.cuda.malloc(7 * GIB)  # the step that runs out of memory
        hook.torch.cuda.out_of_memory()
        raise MemoryError("CUDA out of memory. Tried to allocate 7.00 GiB")
"""


def test_a_script_that_raises_gets_the_figures_of_its_last_cycles(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")}
    env.update({ENV_STREAMS: str(tmp_path), ENV_SAMPLE_MS: "60000", "PYTHONPATH": str(REPO)})
    done = subprocess.run([sys.executable, "-c", RAISING], env=env, capture_output=True,
                          text=True, timeout=60, cwd=REPO)
    assert done.returncode == 1 and "CUDA out of memory" in done.stderr
    written = records(tmp_path)
    assert [r["n"] for r in written if read(r) and "ev" not in r] == [0]
    tail = written[-1]
    assert tail["ev"] == "cuda" and tail["n"] == 40
    assert tail["allocated_peak_bytes"] == 7 * GIB and tail["ooms"] == 1


def test_the_supervisor_gives_the_late_figures_to_the_last_cycle():
    emitted: list[dict] = []
    stream = Cycles({"type": "cycle"}, cycle_pattern=None, metrics={}, emit=emitted.append,
                    restart=lambda reason: None, outside=dict, started=0.0)
    marker = "\x1egpu-audit-cycle pid-1 monitor {}"
    figures = {"allocated_bytes": GIB, "allocated_peak_bytes": GIB, "ooms": 0}
    stream.stream("pid-1", {"n": 0, "src": "monitor", "t": 1.0, "cycle_s": 0.001,
                            **figures}, 1.0)
    stream.line(marker.format(0), 1.0)
    stream.stream("pid-1", {"n": 1, "src": "monitor", "t": 1.001, "cycle_s": 0.001}, 1.0)
    stream.line(marker.format(1), 1.001)
    stream.flush(5.0)
    assert [c["cycle"] for c in emitted] == [0]  # cycle 1, unread, waits for its figures
    stream.stream("pid-1", {"n": 2, "src": "monitor", "t": 1.002, "cycle_s": 0.001}, 1.0)
    stream.line(marker.format(2), 1.002)
    stream.flush(5.0)
    assert [c["cycle"] for c in emitted] == [0, 1]  # a later cycle came: 1 is written as is
    assert emitted[1]["allocated_peak_bytes"] is None
    stream.stream("pid-1", {"ev": "cuda", "n": 2, "allocated_bytes": GIB,
                            "allocated_peak_bytes": 5 * GIB, "ooms": 1}, 6.0)
    stream.finish(1.0)
    assert [c["cycle"] for c in emitted] == [0, 1, 2]
    assert emitted[2]["allocated_peak_bytes"] == 5 * GIB and emitted[2]["ooms"] == 1


FAST_CUDA_LOOP = """
import sys
import torch
from gpu_audit import monitor

x = torch.ones(1024, device="cuda")
for step in range(int(sys.argv[1])):
    if step == 37:
        spike = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")  # 256 MiB
        del spike
    y = x * 2
    monitor.step()
torch.cuda.synchronize()
"""


@pytest.mark.gpu
def test_on_cuda_fast_steps_are_sampled_and_a_spike_between_reads_is_kept(tmp_path, cli_env):
    from tests.validate.runs import cycles_of, run_dir, run_validate

    loop = tmp_path / "loop.py"
    loop.write_text(FAST_CUDA_LOOP)
    done = run_validate(["--device", "cuda", "--no-plots", "--out", str(tmp_path), "--run-id",
                         "sampled", "--stage", "full", "--cycles", "400", "--disable-quantum",
                         "--", sys.executable, str(loop), "{cycles}"], cli_env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    records = cycles_of(run_dir(tmp_path, "sampled"), "default/full")
    assert len(records) == 400
    read_ones = [r for r in records if r["allocated_peak_bytes"] is not None]
    assert records[0] in read_ones and records[-1] in read_ones  # first and last
    assert len(read_ones) < len(records) / 2  # microsecond steps: a read per interval only
    assert max(r["allocated_peak_bytes"] for r in read_ones) >= 256 * 1024 * 1024
