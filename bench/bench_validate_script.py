"""What does ``gpu-audit validate -- COMMAND`` add to each cycle of an unmodified script?

The script is a plain torch training loop on the CPU (an MLP, one optimizer step per cycle) that
times its own steps and prints their median when it ends, in two shapes run side by side: a fast
step (about 10-20 ms with one thread) and a slow one (the same step after a 100 ms wait standing
for data loading, ``--sleep``). Each runs bare (``python loop.py --steps N``) and, alternately,
under ``gpu-audit validate --device cpu --stage full --disable-quantum --cycles N -- python
loop.py --steps {cycles}``: injected ``sitecustomize``, the optimizer hook writing one telemetry
line and one output marker per step, the supervisor reading the output and the stream and
sampling RSS/swap from outside, the runner watching. The overhead is the difference of the
median step times (after the warm-up steps), as a percentage of the bare one. Bare and validated
runs alternate, and each validated run is compared with the bare run just before it: the median
of these paired differences is the figure judged (on a shared machine the load drifts between
repeats by more than the harness costs; a pair, run back to back, mostly shares it). The least
time of each side over the repeats and the medians are printed too.

It also times the hook's own work per cycle (the optimizer post-hook with its record, written to
a file, and the marker) in this process, without torch's step: the harness floor; and the same
with CUDA figures answered by the stand-in of tests/validate/cuda_standin.py (no GPU needed),
read on every cycle and sampled (at most one read per ``CUDA_SAMPLE_S``), with how many cycles
were read. The stand-in's ``memory_stats()`` is a small dict, far cheaper than torch's: those
figures show how many reads the sampling saves, not what a read costs on a real GPU.

    python3 bench/bench_validate_script.py [--steps 300] [--slow-steps 40] [--repeats 5]

Target: overhead under 2% of the bare step time, for each shape. Exit status 0 when it is met,
1 when it is missed, 3 when a run failed.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TARGET_PCT = 2.0
WARMUP = 5
LOOP = """
import argparse, statistics, time
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--sleep", type=float, default=0.0)
args = parser.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                            torch.nn.Linear(1024, 1024), torch.nn.GELU(),
                            torch.nn.Linear(1024, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
inputs, target = torch.randn(256, 512), torch.randn(256, 1)
times = []
for step in range(args.steps):
    began = time.perf_counter()
    if args.sleep:
        time.sleep(args.sleep)
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(inputs), target)
    loss.backward()
    optimizer.step()
    times.append(time.perf_counter() - began)
    print(f"step {step} loss={loss.item():.5f}")
print(f"BENCH cpu_s={time.process_time():.6f}")
print(f"BENCH median_step_s={statistics.median(times[WARMUP:]):.9f}")
""".replace("WARMUP", str(WARMUP))
RESULT = re.compile(r"BENCH median_step_s=([0-9.]+)")
CPU = re.compile(r"BENCH cpu_s=([0-9.]+)")
SLOW_SLEEP_S = 0.1


def bare(loop: Path, steps: int, env: dict[str, str], extra: list[str]) -> float:
    done = subprocess.run([sys.executable, str(loop), "--steps", str(steps), *extra], env=env,
                          capture_output=True, text=True, timeout=900)
    match = RESULT.search(done.stdout)
    if done.returncode != 0 or not match:
        raise RuntimeError(f"bare run failed: {done.stderr[-2000:]}")
    return float(match[1])


def validated(loop: Path, steps: int, env: dict[str, str], out: Path, run: str,
              extra: list[str]) -> float:
    return validated_cpu(loop, steps, env, out, run, extra)[0]


def validated_cpu(loop: Path, steps: int, env: dict[str, str], out: Path, run: str,
                  extra: list[str]) -> tuple[float, float, float]:
    """The median step time of a validated run, the script's own CPU seconds, and the CPU
    seconds of gpu-audit's processes (runner, supervisor: all the run's CPU but the script's)."""
    import resource

    run_id = f"bench-{run}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "gpu_audit", "validate", "--device", "cpu", "--stage", "full",
         "--disable-quantum", "--cycles", str(steps), "--no-plots", "--progress", "none",
         "--out", str(out), "--run-id", run_id, "--", sys.executable, str(loop),
         "--steps", "{cycles}", *extra], env=env, capture_output=True, text=True, timeout=900)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    log = (out / "runs" / run_id / "logs" / "default.full.log").read_text()
    match, cpu = RESULT.search(log), CPU.search(log)
    if done.returncode != 0 or not match or not cpu:
        raise RuntimeError(f"validated run failed (exit {done.returncode}): "
                           f"{done.stdout[-1500:]}{log[-1500:]}")
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(match[1]), float(cpu[1]), total - float(cpu[1])


def bare_cpu(loop: Path, steps: int, env: dict[str, str]) -> float:
    done = subprocess.run([sys.executable, str(loop), "--steps", str(steps)], env=env,
                          capture_output=True, text=True, timeout=900)
    cpu = CPU.search(done.stdout)
    if done.returncode != 0 or not cpu:
        raise RuntimeError(f"bare run failed: {done.stderr[-2000:]}")
    return float(cpu[1])


def where_the_time_goes(loop: Path, folder: Path, env: dict[str, str], steps: int) -> None:
    """CPU per step, from a long and a short run of the fast shape (their difference leaves
    the start-up out): the script's own bare and validated (what the hook adds inside it), and
    gpu-audit's processes' (what competes with the script for the machine's cores)."""
    short = max(WARMUP + 5, steps // 4)
    _, script_long, ours_long = validated_cpu(loop, steps, env, folder, "cpu-long", [])
    _, script_short, ours_short = validated_cpu(loop, short, env, folder, "cpu-short", [])
    bare_long, bare_short = bare_cpu(loop, steps, env), bare_cpu(loop, short, env)
    span = steps - short
    bare_step = (bare_long - bare_short) / span
    script_step = (script_long - script_short) / span
    ours_step = (ours_long - ours_short) / span
    print(f"where the time goes (fast step, CPU per step from {steps} and {short} steps):")
    print(f"  script bare {bare_step * 1e3:.3f} ms, script validated {script_step * 1e3:.3f} ms "
          f"({100 * (script_step - bare_step) / bare_step:+.2f}%: the hook, inside it)")
    print(f"  gpu-audit's processes {ours_step * 1e3:.3f} ms per step "
          f"({100 * ours_step / bare_step:.2f}% of the bare step's CPU; it costs the step "
          "only where no core is free for it); start-up, per run: "
          f"{ours_short - ours_step * short:.2f} s CPU")


def hook_floor(cycles: int = 20000, cuda: bool = False,
               sample_s: float | None = None) -> tuple[float, int]:
    """Seconds per cycle of the hook's own work (record, stream write, marker) in-process, and
    the cycles whose CUDA figures were read (``cuda``: from the stand-in)."""
    from gpu_audit.validate.script.hook import CUDA_SAMPLE_S, Hook

    with tempfile.TemporaryDirectory() as folder:
        hook = Hook(folder, None, None, CUDA_SAMPLE_S if sample_s is None else sample_s)
        if cuda:
            from tests.validate.cuda_standin import standin_torch

            hook.torch = standin_torch()
        hook.marks = None
        optimizer = object()
        hook.on_optimizer_step(optimizer)  # opens the stream
        with open(os.devnull, "wb") as sink:
            saved = os.dup(1)
            os.dup2(sink.fileno(), 1)
            try:
                hook.marks = "\x1egpu-audit-cycle bench %s %d\n"
                began = time.perf_counter()
                for _ in range(cycles):
                    hook.on_optimizer_step(optimizer)
                elapsed = time.perf_counter() - began
            finally:
                os.dup2(saved, 1)
                os.close(saved)
        reads = hook.torch.cuda.reads - 1 if cuda else 0  # less the stream-opening cycle's
    return elapsed / cycles, reads


def side_by_side(loop: Path, folder: Path, env: dict[str, str], shape: str, steps: int,
                 repeats: int, extra: list[str]) -> tuple[list[float], list[float]]:
    """Bare and validated runs of one shape, alternating: (bare times, validated times)."""
    bare_times: list[float] = []
    validated_times: list[float] = []
    for run in range(repeats):
        bare_times.append(bare(loop, steps, env, extra))
        validated_times.append(validated(loop, steps, env, folder, f"{shape}-{run}", extra))
    return bare_times, validated_times


def report(shape: str, steps: int, bare_times: list[float],
           validated_times: list[float]) -> float:
    """One shape's lines; the median of the paired overheads, in percent."""
    best_bare, best_validated = min(bare_times), min(validated_times)
    pairs = [100.0 * (v - b) / b for b, v in zip(bare_times, validated_times, strict=True)]
    paired = statistics.median(pairs)
    overhead = 100.0 * (best_validated - best_bare) / best_bare
    print(f"{shape} step ({steps} steps):")
    print(f"  bare step:       min {best_bare * 1e3:.3f} ms, median "
          f"{statistics.median(bare_times) * 1e3:.3f} ms")
    print(f"  validated step:  min {best_validated * 1e3:.3f} ms, median "
          f"{statistics.median(validated_times) * 1e3:.3f} ms")
    print(f"  per-step overhead: {paired:+.2f}% of the bare step, median of the pairs "
          f"({', '.join(f'{p:+.2f}%' for p in pairs)}; target < {TARGET_PCT:g}%); "
          f"{overhead:+.2f}% between the least times")
    return paired


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="fast-step shape's steps")
    parser.add_argument("--slow-steps", type=int, default=40, help="slow-step shape's steps")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONUNBUFFERED"] = "1"  # what validate gives the script: the bare run matches it
    floor, _ = hook_floor()
    every, every_reads = hook_floor(cuda=True, sample_s=0.0)
    sampled, sampled_reads = hook_floor(cuda=True)
    shapes = [("fast", args.steps, []), ("slow", args.slow_steps, ["--sleep", str(SLOW_SLEEP_S)])]
    results: dict[str, tuple[list[float], list[float]]] = {}
    with tempfile.TemporaryDirectory() as folder:
        loop = Path(folder) / "loop.py"
        loop.write_text(LOOP)
        try:
            for shape, steps, extra in shapes:
                results[shape] = side_by_side(loop, Path(folder), env, shape, steps,
                                              args.repeats, extra)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 3
    print(f"host: {platform.node()} ({platform.machine()}, {os.cpu_count()} CPUs), "
          f"python {platform.python_version()}, repeats {args.repeats}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    overheads = [report(shape, steps, *results[shape]) for shape, steps, _ in shapes]
    with tempfile.TemporaryDirectory() as folder:
        loop = Path(folder) / "loop.py"
        loop.write_text(LOOP)
        try:
            where_the_time_goes(loop, Path(folder), env, args.steps)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 3
    best_fast = min(results["fast"][0])
    print(f"load average:    {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"hook floor:      {floor * 1e6:.1f} us per cycle "
          f"({100 * floor / best_fast:.3f}% of the bare fast step)")
    print(f"stand-in CUDA:   read every cycle {every * 1e6:.1f} us per cycle "
          f"({every_reads} of 20000 cycles read); sampled {sampled * 1e6:.1f} us per cycle "
          f"({sampled_reads} of 20000 read)")
    return 0 if all(o < TARGET_PCT for o in overheads) else 1


if __name__ == "__main__":
    sys.exit(main())
