"""Hostile numbers given to ``gpu-audit`` on the command line and in its environment: time and
peak RSS of each refusal.

    python3 bench/bench_bounds_inputs.py

Runs, against the fake ``libnvidia-ml.so.1`` playing a 4-GPU H100 node (tests/fakenvml, built
on first use), ``scan``, ``check`` and ``diag`` with ``--gpus 0-99999999999`` and a 5,000-digit
index, ``check --slurm prolog`` with ``SLURM_JOB_GPUS=0-999999999``, ``diag --plant-fault`` with
a 5,000-digit offset, and ``snapshot`` of a memory snapshot holding a size of 10**5000. Each
runs in a child of a fresh wrapper process, so ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` there is
that command's own peak. ``scan --gpus 0`` (a good spec) is the baseline.

Before the bounds, the ranges took 10 GB and 33 s (the prolog) and 23.7 GB before the kernel
killed the scan. Goal: every refusal exits 3 in under 2 s and within 50 MiB of the baseline's
peak. The exit status is 0 when every case meets it, 1 otherwise.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakegpu import h100_node, scenario_env  # noqa: E402
from tests.snapshot.synthetic import finetune_oom_after_eval  # noqa: E402

GOAL_S = 2.0
GOAL_EXTRA_MIB = 50
HUGE = "9" * 5000

# Runs the command as its only child and reports its wall time and peak RSS (KiB on Linux).
WRAPPER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"wall_s": time.perf_counter() - started, "rc": done.returncode,
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "stderr": done.stderr}))
"""


def run(args: list[str], env: dict[str, str], cwd: Path) -> dict:
    command = [sys.executable, "-c", WRAPPER, sys.executable, "-m", "gpu_audit", *args]
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def snapshot_file(folder: Path) -> Path:
    snap = copy.deepcopy(finetune_oom_after_eval())
    segment = snap["segments"][0]
    segment["blocks"][0]["size"] += 10**5000
    segment["total_size"] += 10**5000
    path = folder / "huge-size.pickle"
    path.write_bytes(pickle.dumps(snap))
    return path


def cases(folder: Path) -> list[tuple[str, list[str], dict[str, str]]]:
    spool = ["--spool", str(folder / "spool")]
    return [
        ("scan --gpus 0-99999999999", ["scan", "--no-report", "--gpus", "0-99999999999"], {}),
        ("check --gpus 0-99999999999", ["check", "--no-report", "--gpus", "0-99999999999"], {}),
        ("diag --gpus 0-99999999999",
         ["diag", "--no-report", "--device", "cpu", "--gpus", "0-99999999999"], {}),
        ("scan --gpus <5000 digits>", ["scan", "--no-report", "--gpus", HUGE], {}),
        ("prolog SLURM_JOB_GPUS=0-999999999", ["check", "--slurm", "prolog", *spool],
         {"SLURM_JOB_ID": "4711", "SLURM_JOB_GPUS": "0-999999999"}),
        ("diag --plant-fault <5000 digits>:3",
         ["diag", "--no-report", "--device", "cpu", "--plant-fault", f"{HUGE}:3"], {}),
        ("snapshot with a size of 10**5000",
         ["snapshot", "--no-report", str(snapshot_file(folder))], {}),
    ]


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("GPU_AUDIT_", "SLURM_")) and k != "CUDA_VISIBLE_DEVICES"}
        env = scenario_env(h100_node(4), folder / "nvml", base)
        baseline = run(["scan", "--no-report", "--gpus", "0"], env, folder)
        print(f"{'case':40} {'exit':>4} {'wall s':>7} {'peak MiB':>9}")
        print(f"{'scan --gpus 0 (baseline)':40} {baseline['rc']:>4} {baseline['wall_s']:7.2f} "
              f"{baseline['peak_kib'] / 1024:9.1f}")
        ceiling = baseline["peak_kib"] / 1024 + GOAL_EXTRA_MIB
        missed = 0
        for name, args, extra in cases(folder):
            result = run(args, {**env, **extra}, folder)
            peak = result["peak_kib"] / 1024
            ok = result["rc"] == 3 and result["wall_s"] < GOAL_S and peak < ceiling
            missed += not ok
            print(f"{name:40} {result['rc']:>4} {result['wall_s']:7.2f} {peak:9.1f}"
                  f"{'' if ok else '  MISSED'}")
            print(f"    {result['stderr'].strip().splitlines()[-1][:110]}")
    print(f"goal: exit 3 in under {GOAL_S:g} s, peak under {ceiling:.0f} MiB "
          f"(baseline + {GOAL_EXTRA_MIB})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
