"""What does ``gpu-audit validate`` add to each cycle, next to a bare loop calling the same
workload?

Per cycle the validation harness wraps the workload's ``cycle`` in the OOM retrier, samples
telemetry (RSS every cycle, swap at most every 0.5 s, allocator counters on CUDA), appends and
flushes one JSON line (fsynced at most once a second), reports to the runner (at most four times a
second) and, every 10% of the stage, copies the workload's state into host memory for a background
thread to serialise and write.
This benchmark runs a stage through the real runner and worker and, alternately, the same
workload in a bare ``for`` loop in a fresh interpreter, and compares the time per cycle after two
warm-up cycles (process start, imports and set-up are paid once per stage, not per cycle, and are
reported apart: the time to the end of the first cycle).
The overhead is the validation run's wall time per cycle minus the time its own records show
inside the workload's ``cycle``: on a shared machine the bare and validated runs drift apart by
more than the harness costs, while this difference is measured within one run. Of the repeats the
least is taken (other load only ever adds time); the median is printed too.

Workloads: the built-in reference workload (classical mode: transformer + recurrent workspace;
tens of milliseconds per cycle on a CPU), and ``spin`` (a fixed 5 ms busy cycle, which shows the
harness's cost with no noise from the workload itself).

    python3 bench/bench_validate.py [--cycles 500] [--repeats 5] [--device cpu]

It also times the harness floor: the worker's loop around a cycle that does nothing, in this
process, which gives the overhead without the noise of a shared machine.

Target: overhead under 2% of the bare cycle time for the reference workload. Exit status 0 when
it is met, 1 when it is missed, 3 when a run failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TARGET_PCT = 2.0
WARMUP = 2
SPIN_S = 0.005
WORKLOADS = {
    "reference": "gpu_audit.validate.workloads.reference:ReferenceWorkload",
    "spin": f"{Path(__file__).resolve()}:SpinWorkload",
}


class SpinWorkload:
    """Exactly ``SPIN_S`` of busy CPU per cycle, nothing allocated."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        started = time.perf_counter()
        while time.perf_counter() - started < SPIN_S:
            pass
        return {"spin_s": SPIN_S}


BARE_LOOP = """
import json, sys, time
sys.path.insert(0, {repo!r})
from gpu_audit.validate.protocol import WorkloadContext, load_workload, qubit_cap
from gpu_audit.validate.telemetry import host_memory_available
if {device!r}.startswith("cuda"):
    import torch
workload = load_workload({spec!r})
budget = host_memory_available()
ctx = WorkloadContext(device={device!r}, quantum="off", stage="classical", cycles={cycles},
                      seed=0, memory_budget_bytes=budget, max_qubits=None)
if hasattr(workload, "setup"):
    workload.setup(ctx)
ends = []
for index in range({cycles}):
    ctx.cycle = index
    workload.cycle(ctx)
    if {device!r}.startswith("cuda"):
        torch.cuda.synchronize()
    ends.append(time.perf_counter())
print(json.dumps(ends))
"""


class CycleClock:
    """A progress sink for the runner that notes when each cycle's event arrives."""

    def __init__(self) -> None:
        self.ends: list[tuple[int, float]] = []

    def stage_started(self, key: str, description: str, planned: int, start: int) -> None:
        self.ends = []

    def resumed(self, key: str, start: int) -> None:
        pass

    def cycle(self, key: str, event: dict[str, Any]) -> None:
        self.ends.append((event["cycle"], time.perf_counter()))

    def stage_finished(self, key: str, status: str, reason: str | None) -> None:
        if status != "passed":
            raise RuntimeError(f"the benchmark stage {status}: {reason}")

    def note(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


def per_cycle(ends: list[tuple[int, float]]) -> float:
    """Seconds per cycle after the warm-up, from (cycle index, time its end was seen) pairs.

    The worker reports cycles to the runner at most every 0.25 s, so not every index is there.
    """
    later = [(index, at) for index, at in ends if index >= WARMUP - 1]
    if len(later) < 2:  # a stage shorter than one event interval: count from the first cycle
        later = ends
    (first, start), (last, end) = later[0], later[-1]
    return (end - start) / (last - first)


def harness_run(spec: str, cycles: int, device: str, out: Path) -> tuple[float, float, float]:
    """(seconds per cycle, seconds of it inside the workload's ``cycle``, seconds from the start
    to the end of the first cycle)."""
    from gpu_audit.validate.plan import ValidateOptions, build_plan
    from gpu_audit.validate.runner import Runner
    from gpu_audit.validate.start import resolve_device, start_run
    from gpu_audit.validate.state import completed_cycles, load_records

    # The full stage with quantum off: as many cycles as asked, checkpoints every 10% of them.
    plan = build_plan(ValidateOptions(stages=["full"], cycles=cycles, device=device,
                                      disable_quantum=True, workload=spec), environ={})
    run, state = start_run(plan, out)
    state.device = resolve_device(plan.device)
    clock = CycleClock()
    started = time.perf_counter()
    code = Runner(run, plan, state, progress=clock).execute()
    if code != 0:
        raise RuntimeError(f"the harness run failed (exit {code}); see {run.path}")
    records = completed_cycles(load_records(run.cycles_path)["default/full"])[WARMUP:]
    inside = statistics.fmean(r["cycle_s"] for r in records)
    return per_cycle(clock.ends), inside, clock.ends[0][1] - started


def bare_run(spec: str, cycles: int, device: str) -> tuple[float, float]:
    script = BARE_LOOP.format(repo=str(REPO), spec=spec, cycles=cycles, device=device)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=3600, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"the bare loop failed: {done.stderr.strip()[-500:]}")
    # perf_counter is the system's monotonic clock, so the child's readings compare with ours.
    ends = json.loads(done.stdout.strip().splitlines()[-1])
    return per_cycle(list(enumerate(ends))), ends[0] - started


class NoWork:
    """A cycle that does nothing: what remains is the harness."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        return {}


def harness_floor(cycles: int = 20000) -> float:
    """Seconds per cycle of the worker's own loop (telemetry, log, event, retrier, checkpoints
    every 10%), run in this process on a cycle that does nothing."""
    from gpu_audit.validate.channels import Control, Events
    from gpu_audit.validate.plan import ValidateOptions, build_plan
    from gpu_audit.validate.stage import StageWorker
    from gpu_audit.validate.start import start_run

    class Clock(Events):
        def __init__(self, fd: int) -> None:
            super().__init__(fd)
            self.ends: list[tuple[int, float]] = []

        def send(self, event: dict[str, Any]) -> None:
            if event.get("ev") == "cycle":
                self.ends.append((event["cycle"], time.perf_counter()))
            super().send(event)

    with tempfile.TemporaryDirectory() as folder:
        plan = build_plan(ValidateOptions(stages=["full"], cycles=cycles, device="cpu",
                                          workload=f"{Path(__file__).resolve()}:NoWork"),
                          environ={})
        run, _ = start_run(plan, Path(folder))
        clock = Clock(os.open(os.devnull, os.O_WRONLY))
        StageWorker(run.path, "default/full", "cpu", 1, clock, Control()).run_stage()
        return per_cycle(clock.ends)


def component_costs(device: str) -> dict[str, float]:
    """Microseconds per call of the harness's own per-cycle steps, in this process."""
    from gpu_audit.validate.state import CycleLog
    from gpu_audit.validate.telemetry import Telemetry

    telemetry = Telemetry(device)
    record = {"type": "cycle", "leg": "default/classical", "cycle": 1, "cycle_s": 0.01,
              **telemetry.sample(), "metrics": {"loss": 1.0}}
    with tempfile.TemporaryDirectory() as folder:
        log = CycleLog(Path(folder) / "cycles.jsonl")
        costs = {
            "telemetry.sample": _time_calls(telemetry.sample),
            "cycle log append (write + flush)": _time_calls(lambda: log.append(record)),
            "json line": _time_calls(lambda: json.dumps(record, separators=(",", ":"))),
        }
        log.close()
    return costs


def _time_calls(fn: Any, number: int = 2000) -> float:
    started = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - started) / number * 1e6


def machine() -> str:
    cpus = os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    try:
        import importlib.metadata

        torch = importlib.metadata.version("torch")
    except Exception:
        torch = "not installed"
    text = f"{platform.machine()}, {cpus} CPUs, Python {platform.python_version()}, torch {torch}"
    return text + (f", load average {load:.1f} at start" if load is not None else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workloads", default="reference,spin")
    args = parser.parse_args(argv)
    if args.cycles <= WARMUP + 1:
        parser.error(f"--cycles must be above {WARMUP + 1}")

    print(f"machine: {machine()}; device {args.device}; {args.cycles} cycles x "
          f"{args.repeats} repeats, alternating")
    verdict = 0
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.workloads.split(","):
            spec = WORKLOADS[name]
            bare: list[float] = []
            harness: list[float] = []
            added: list[float] = []
            bare_start: list[float] = []
            harness_start: list[float] = []
            try:
                for repeat in range(args.repeats):
                    b, b_first = bare_run(spec, args.cycles, args.device)
                    h, inside, h_first = harness_run(spec, args.cycles, args.device,
                                                     Path(folder) / f"{name}-{repeat}")
                    bare.append(b)
                    harness.append(h)
                    added.append(h - inside)
                    bare_start.append(b_first)
                    harness_start.append(h_first)
            except RuntimeError as exc:
                print(f"{name}: {exc}", file=sys.stderr)
                return 3
            b_med, h_med = statistics.median(bare), statistics.median(harness)
            # The least added time over the repeats: a busy machine only ever adds to it (the
            # reasoning behind timeit's min); the median is printed beside it.
            overhead = 100 * min(added) / b_med
            rows.append((name, b_med, h_med, min(added), statistics.median(added), overhead,
                         statistics.median(bare_start), statistics.median(harness_start)))
            if name == "reference" and overhead >= TARGET_PCT:
                verdict = 1
    print()
    print(f"{'workload':<10} {'bare ms/cycle':>14} {'validate ms/cycle':>18} "
          f"{'added ms/cycle (min, median)':>29} {'overhead':>9} "
          f"{'to 1st cycle: bare s':>21} {'validate s':>11}")
    for name, b_med, h_med, added_min, added_med, overhead, b_first, h_first in rows:
        added_text = f"{added_min * 1000:.3f}, {added_med * 1000:.3f}"
        print(f"{name:<10} {b_med * 1000:>14.3f} {h_med * 1000:>18.3f} {added_text:>29} "
              f"{overhead:>8.2f}% {b_first:>21.2f} {h_first:>11.2f}")
    print("(added: wall time per cycle of a validation run minus the time its own records show "
          "inside the workload's cycle; overhead: least added / median bare. The bare and "
          "validate columns also move with whatever else the machine runs.)")
    floor = harness_floor()
    print(f"\nharness floor (the worker loop around a cycle that does nothing): "
          f"{floor * 1e6:.1f} us per cycle")
    for name, b_med, *_ in rows:
        print(f"  = {100 * floor / b_med:.2f}% of a bare {name} cycle (checkpoints excluded: "
              "they come every 10% of a stage and are in 'added')")
    for step, micros in component_costs(args.device).items():
        print(f"  of which {step}: {micros:.1f} us")
    target = next((r for r in rows if r[0] == "reference"), None)
    if target is not None:
        print(f"\ntarget: overhead under {TARGET_PCT:g}% for the reference workload: "
              f"{'met' if verdict == 0 else 'MISSED'} ({target[5]:.2f}%)")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
