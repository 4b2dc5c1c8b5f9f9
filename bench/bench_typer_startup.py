"""What does a ``gpu-audit`` start cost under each typer release, and with each source tree?

Times, as fresh processes under the fake libnvidia-ml from ``tests/fakenvml`` playing a healthy
8x H100 node (as ``bench/bench_scan.py`` sets it up), the median of N runs of

- ``gpu-audit scan --json --no-report`` (the lean path: parsed from the declarations, no typer),
- ``gpu-audit --help`` (typer builds the whole app),
- ``gpu-audit diff --help`` (typer builds one command),

for every pair of interpreter (one per installed typer release) and source tree given. Commands
alternate within each round so drift hits all of them alike; each pair reads its bytecode from a
private cache filled by a first, uncounted round. Wall and CPU time (user + system) are given;
on a shared machine the CPU time wanders less.

    python3 bench/bench_typer_startup.py \\
        --python typer-0.28=/work/main/.venv/bin/python \\
        --python typer-0.29.2=/work/venv-settings/bin/python \\
        [--tree now=. --tree before=/tmp/old-tree] [--runs 15]

A tree is a checkout of the repository (``git archive REV | tar -x -C DIR`` makes one).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakegpu import h100_node, scenario_env  # noqa: E402

COMMANDS = {
    "scan --json --no-report": ["scan", "--json", "--no-report"],
    "--help": ["--help"],
    "diff --help": ["diff", "--help"],
}


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        name, equals, path = value.partition("=")
        if not equals:
            raise SystemExit(f"{flag} {value!r}: expected NAME=PATH")
        pairs[name] = path
    return pairs


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(python: str, tree: str, args: list[str], env: dict[str, str],
         cwd: Path) -> tuple[float, float]:
    cpu = _children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run([python, "-m", "gpu_audit", *args], env={**env, "PYTHONPATH": tree},
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1, 2):
        raise SystemExit(f"{python} {args} failed ({done.returncode}): {done.stderr[-500:]}")
    return wall, _children_cpu_s() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--only", choices=list(COMMANDS), action="append",
                        help="time only this command (repeatable)")
    args = parser.parse_args()
    commands = {name: COMMANDS[name] for name in args.only or COMMANDS}
    pythons = _pairs(args.python, "--python") or {"this": sys.executable}
    trees = {name: str(Path(path).resolve())
             for name, path in (_pairs(args.tree, "--tree") or {"now": str(REPO)}).items()}
    with tempfile.TemporaryDirectory() as tmp:
        here = Path(tmp)
        base = scenario_env(h100_node(8), here, {**os.environ, "NO_COLOR": "1"})
        cases = [(p, t, c) for p in pythons for t in trees for c in commands]
        times: dict[tuple[str, str, str], list[tuple[float, float]]] = {k: [] for k in cases}
        for round_no in range(args.runs + 1):
            for case in cases:
                python, tree, command = case
                env = {**base, "PYTHONPYCACHEPREFIX": str(here / f"pyc-{python}-{tree}")}
                result = _run(pythons[python], trees[tree], commands[command], env, here)
                if round_no:  # the first round fills the bytecode caches
                    times[case].append(result)
    print(f"median of {args.runs} runs, fake NVML 8x H100; wall ms / CPU ms")
    print(f"| typer | tree | {' | '.join(commands)} |")
    print(f"|---|---|{'---|' * len(commands)}")
    for python in pythons:
        for tree in trees:
            cells = []
            for command in commands:
                runs = times[(python, tree, command)]
                wall = statistics.median(w for w, _ in runs) * 1000
                cpu = statistics.median(c for _, c in runs) * 1000
                cells.append(f"{wall:.0f} / {cpu:.0f}")
            print(f"| {python} | {tree} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
