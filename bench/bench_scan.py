"""How fast is ``gpu-audit scan`` next to nvitop and gpustat on the same (fake) 8-GPU node?

Every tool runs as a fresh process ("cold", as a user or a Slurm prolog runs it) against the fake
libnvidia-ml from ``tests/fakenvml`` playing a healthy 8x H100 node whose GPUs each hold one real
(sleeping) process, first answering at full speed, then with every NVML call delayed by 20 ms (a
slow or busy driver). Commands alternate within each round so drift hits all of them alike.

Each tool reads its compiled bytecode from a private cache that the first, uncounted round fills, as
an installed package would (the source tree otherwise gets recompiled on every run when
PYTHONDONTWRITEBYTECODE is set). ``read_nvml only`` times the NVML collector in a bare interpreter,
to tell its share of a scan from the command line's start-up.

``--installed`` times gpu-audit as users run it: the ``gpu-audit`` console script of this
interpreter's environment, installed with ``pip install .`` (not editable), with the source tree
off the path, its bytecode compiled at install time like the peers'.

Targets: cold, ``gpu-audit scan --json --no-report`` at most 0.75x the time of ``nvitop -1``;
with the slow driver at most 0.25x, thanks to querying the GPUs concurrently. Such a line runs
without typer (its options are parsed from their declarations, ``gpu_audit.cli.declared``), and
with a second CPU it reads NVML in a child process while it loads the rest
(``gpu_audit.collect.nvml.isolated``).

The targets are on wall time. On a machine shared with other jobs the wall times wander, so each
table also gives the median CPU time (user + system, all threads, and the NVML reader's child,
which the scan collects before it exits) of each command, which other jobs disturb much less, and
its ratio to nvitop's. The child makes the scan use more CPU time than it takes wall time.

    python3 bench/bench_scan.py [--runs 10] [--slow-runs 5] [--delay-ms 20] [--profile]
                                [--installed] [--check]

``--check`` also times ``gpu-audit check --json --no-report`` (the CI pre-run checklist: the same
scan, judged against the default policy), reported next to the scan; the targets stay the scan's.

Exit status: 0 when both targets are met, 1 when one is missed, 3 when a tool failed to run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakegpu import FakeNvmlUnavailable, build_fake_nvml, h100_node, scenario_env  # noqa: E402

GPUS = 8
COLD_TARGET = 0.75  # gpu-audit / nvitop, no delay
SLOW_TARGET = 0.25  # gpu-audit / nvitop, delayed driver


READ_NVML_ONLY = (
    "import json; from gpu_audit.collect.nvml import read_nvml; r = read_nvml(); "
    "print(json.dumps({'gpus': [g.index for g in r.gpus if g.uuid]}))"
)


@dataclass
class Tool:
    name: str
    argv: list[str]
    ok_codes: tuple[int, ...] = (0,)


def tools(installed: bool = False, check: bool = False) -> list[Tool]:
    found = []
    script = Path(sys.executable).parent / "gpu-audit"
    if installed and not script.exists():
        raise SystemExit(f"--installed: no {script}; run `pip install .` in this environment")
    command = [str(script)] if installed else [sys.executable, "-m", "gpu_audit"]
    scan = [*command, "scan", "--json", "--no-report"]
    # scan's exit code is its verdict (0 OK, 1 warning, 2 critical); 3 means it could not judge.
    found.append(Tool("gpu-audit scan", scan, (0, 1, 2)))
    if check:
        found.append(Tool("gpu-audit check", [*command, "check", "--json", "--no-report"],
                          (0, 1, 2)))
    # The NVML collector alone, to tell its share of a scan from the CLI's start-up.
    found.append(Tool("read_nvml only", [sys.executable, "-c", READ_NVML_ONLY]))
    for name, args in (("nvitop", ["-1"]), ("gpustat", ["--json"])):
        path = shutil.which(name)
        if path is None:
            raise SystemExit(f"{name} is not installed: pip install {name}")
        found.append(Tool(f"{name} {' '.join(args)}", [path, *args]))
    found.append(Tool("python -c pass", [sys.executable, "-c", "pass"]))
    return found


def check_output(tool: Tool, completed: subprocess.CompletedProcess[str]) -> str | None:
    """Why this run does not count, or None when it did the job."""
    if completed.returncode not in tool.ok_codes:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
        return f"exit {completed.returncode}: {' | '.join(tail)}"
    if tool.name in ("gpu-audit scan", "read_nvml only", "gpu-audit check"):
        try:
            document = json.loads(completed.stdout)
            gpus = (document["snapshot"] if tool.name == "gpu-audit check" else document)["gpus"]
        except (ValueError, KeyError, TypeError) as exc:
            tail = completed.stderr.strip().splitlines()[-3:]
            return f"no scan document on stdout ({exc}); stderr: {' | '.join(tail)}"
        if len(gpus) != GPUS:
            return f"saw {len(gpus)} GPUs, expected {GPUS}"
    return None


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_runs(
    tool_list: list[Tool], env: dict[str, str], runs: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of each run of each tool."""
    times: dict[str, list[float]] = {t.name: [] for t in tool_list}
    cpu: dict[str, list[float]] = {t.name: [] for t in tool_list}
    for round_no in range(runs + 1):  # round 0 warms caches and .pyc files; not counted
        order = tool_list[round_no % len(tool_list) :] + tool_list[: round_no % len(tool_list)]
        for tool in order:
            cpu_before = _children_cpu_s()
            started = time.perf_counter()
            completed = subprocess.run(
                tool.argv, env=env, capture_output=True, text=True, timeout=300, cwd=env.get("PWD")
            )
            elapsed = time.perf_counter() - started
            cpu_used = _children_cpu_s() - cpu_before
            problem = check_output(tool, completed)
            if problem:
                print(f"error: {tool.name} failed: {problem}", file=sys.stderr)
                raise SystemExit(3)
            if round_no:
                times[tool.name].append(elapsed)
                cpu[tool.name].append(cpu_used)
    return times, cpu


def report(
    label: str, measured: tuple[dict[str, list[float]], dict[str, list[float]]], target: float
) -> bool:
    times, cpu = measured
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    cpu_medians = {name: statistics.median(ts) for name, ts in cpu.items()}
    ours = medians["gpu-audit scan"]
    nvitop = medians["nvitop -1"]
    gpustat = medians["gpustat --json"]
    print(f"\n{label} ({len(next(iter(times.values())))} runs each, median wall time)")
    print(
        f"| {'command':<16} | {'median s':>8} | {'min s':>6} | {'max s':>6} | {'vs nvitop':>9} |"
        f" {'vs gpustat':>10} | {'CPU s':>6} | {'CPU vs nvitop':>13} |"
    )
    print(f"|{'-' * 18}|{'-' * 9}:|{'-' * 7}:|{'-' * 7}:|{'-' * 10}:|{'-' * 11}:|{'-' * 7}:|"
          f"{'-' * 14}:|")
    for name, ts in times.items():
        print(
            f"| {name:<16} | {medians[name]:8.3f} | {min(ts):6.3f} | {max(ts):6.3f} |"
            f" {medians[name] / nvitop:8.2f}x | {medians[name] / gpustat:9.2f}x |"
            f" {cpu_medians[name]:6.3f} | {cpu_medians[name] / cpu_medians['nvitop -1']:12.2f}x |"
        )
    ratio = ours / nvitop
    met = ratio <= target
    print(
        f"target: gpu-audit <= {target:.2f}x nvitop; measured {ratio:.2f}x -> "
        f"{'met' if met else 'MISSED'} (CPU time: "
        f"{cpu_medians['gpu-audit scan'] / cpu_medians['nvitop -1']:.2f}x)"
    )
    return met


def profile_scan(env: dict[str, str]) -> None:
    """Where a scan's time goes: the slowest imports, then the hottest functions."""
    scan = [sys.executable, "-X", "importtime", "-m", "gpu_audit", "scan", "--json", "--no-report"]
    completed = subprocess.run(scan, env=env, capture_output=True, text=True, timeout=300,
                               cwd=env.get("PWD"))
    rows = []
    for line in completed.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    print("\nslowest imports (cumulative microseconds):")
    for cumulative, name in sorted(rows, reverse=True)[:20]:
        print(f"  {cumulative:>8}  {name}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "scan.prof"
        # main(), not run(): after a plain line run() ends the process without the
        # interpreter's teardown, which would leave no profile behind.
        code = (
            "import cProfile; from gpu_audit.cli.app import collect_garbage_rarely, main;"
            " collect_garbage_rarely();"
            f" cProfile.run(\"main(['scan', '--json', '--no-report'])\", {str(out)!r})"
        )
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300,
                       cwd=env.get("PWD"))
        if out.exists():
            buffer = io.StringIO()
            pstats.Stats(str(out), stream=buffer).sort_stats("cumulative").print_stats(25)
            print("\nhottest calls (cumulative):")
            print(buffer.getvalue())


def start_sleepers(count: int) -> list[subprocess.Popen[bytes]]:
    """Real processes for the fake GPUs to list, so every tool looks them up as on a real node."""
    return [subprocess.Popen(["sleep", "3600"]) for _ in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="timed rounds at full speed")
    parser.add_argument("--slow-runs", type=int, default=5, help="timed rounds, slow driver")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="per-call delay, slow driver")
    parser.add_argument("--profile", action="store_true", help="profile one gpu-audit scan")
    parser.add_argument("--installed", action="store_true",
                        help="time the installed gpu-audit, not the source tree")
    parser.add_argument("--check", action="store_true",
                        help="also time `gpu-audit check --json --no-report`")
    args = parser.parse_args()

    try:
        build_fake_nvml()
    except FakeNvmlUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    tool_list = tools(args.installed, args.check)
    sleepers = start_sleepers(GPUS)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-scan-") as tmp:
            # Installed packages carry compiled bytecode; gpu-audit runs from the source tree. So
            # that no tool pays for compiling its modules on every run (PYTHONDONTWRITEBYTECODE
            # would make gpu-audit do just that), all write their bytecode into a private cache
            # during the uncounted first round and read it from there afterwards.
            base = dict(os.environ, NO_COLOR="1", COLUMNS="120")
            base.pop("PYTHONDONTWRITEBYTECODE", None)
            base["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
            scenario = h100_node(GPUS, pids=[p.pid for p in sleepers])
            fast_env = scenario_env(scenario, Path(tmp), base)
            slow_env = scenario_env({**scenario, "call_delay_ms": args.delay_ms}, Path(tmp), base)
            if args.installed:  # the installed package, not the checkout, and its own bytecode
                for env in (fast_env, slow_env):
                    env.pop("PYTHONPATH", None)
                    env.pop("PYTHONPYCACHEPREFIX", None)
                    env["PWD"] = tmp
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"fake node: {GPUS}x H100, one sleeping process per GPU; "
                f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}"
            )
            cold = report(
                "cold, fast driver", time_runs(tool_list, fast_env, args.runs), COLD_TARGET
            )
            slow = report(
                f"cold, slow driver ({args.delay_ms:g} ms per NVML call)",
                time_runs(tool_list, slow_env, args.slow_runs),
                SLOW_TARGET,
            )
            if args.profile:
                print("\n--- profile, fast driver ---")
                profile_scan(fast_env)
                print("\n--- profile, slow driver ---")
                profile_scan(slow_env)
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()
    return 0 if cold and slow else 1


if __name__ == "__main__":
    sys.exit(main())
