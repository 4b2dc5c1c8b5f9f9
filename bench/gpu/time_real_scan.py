"""How long does ``gpu-audit scan`` take on a real GPU, next to nvitop, gpustat and nvidia-smi?

    python3 bench/gpu/time_real_scan.py [--runs 10] [--json-out FILE]

Runs, as fresh processes and alternately, ``python -m gpu_audit scan --json --no-report``,
``python -m nvitop -1``, ``python -m gpustat --json``, ``nvidia-smi -q``, ``nvidia-smi -q -x``
and ``python -c pass`` (the interpreter's start-up) against the real driver. The first round
warms the caches and is not counted. Prints the median, minimum and maximum wall time of each
and the ratio of each median to nvitop's and to ``nvidia-smi -q``'s. A tool that is missing or
fails is reported and left out. Exit 0 when gpu-audit ran, 3 when it failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def commands() -> dict[str, list[str]]:
    py = sys.executable
    found = {
        "gpu-audit scan": [py, "-m", "gpu_audit", "scan", "--json", "--no-report"],
        "nvitop -1": [py, "-m", "nvitop", "-1"],
        "gpustat --json": [py, "-m", "gpustat", "--json"],
        "python -c pass": [py, "-c", "pass"],
    }
    if shutil.which("nvidia-smi"):
        found["nvidia-smi -q"] = ["nvidia-smi", "-q"]
        found["nvidia-smi -q -x"] = ["nvidia-smi", "-q", "-x"]
    return found


def once(argv: list[str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)
    return time.perf_counter() - start, done.returncode, done.stderr[-300:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    tools = commands()
    times: dict[str, list[float]] = {name: [] for name in tools}
    failed: dict[str, str] = {}
    for round_ in range(args.runs + 1):
        for name, argv_ in tools.items():
            if name in failed:
                continue
            try:
                seconds, code, err = once(argv_)
            except (OSError, subprocess.TimeoutExpired) as exc:
                failed[name] = str(exc)
                continue
            # scan exits 1/2 on warnings/errors about the machine: it still ran
            ok = code in (0, 1, 2) if name == "gpu-audit scan" else code == 0
            if not ok:
                failed[name] = f"exit {code}: {err.strip()}"
            elif round_:
                times[name].append(seconds)
    medians = {n: statistics.median(t) for n, t in times.items() if t}
    print(f"{'command':20} {'median s':>9} {'min s':>7} {'max s':>7} {'/nvitop':>8} "
          f"{'/smi -q':>8}")
    for name, values in times.items():
        if not values:
            continue
        ratio = [f"{medians[name] / medians[ref]:.2f}x" if ref in medians else "-"
                 for ref in ("nvitop -1", "nvidia-smi -q")]
        print(f"{name:20} {medians[name]:9.3f} {min(values):7.3f} {max(values):7.3f} "
              f"{ratio[0]:>8} {ratio[1]:>8}")
    for name, why in failed.items():
        print(f"FAILED {name}: {why}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"runs": args.runs, "seconds": times,
                                             "median_s": medians, "failed": failed}, indent=1))
    return 3 if "gpu-audit scan" in failed or "gpu-audit scan" not in medians else 0


if __name__ == "__main__":
    sys.exit(main())
