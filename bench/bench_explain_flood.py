"""Benchmark: ``gpu-audit explain`` on logs full of matching lines vs ``grep -E -c``.

A log where every line is a failure (an NCCL watchdog timeout on every step, a CUDA
out-of-memory retried in a loop, a kernel log of Xids) must cost a constant time per line, like
an ordinary log, since explain runs inside Slurm epilogs on inputs of up to 4 GiB. This writes,
into a temporary folder (deleted afterwards), floods of ``--lines`` copies of a few failure
lines, and a log of ordinary training lines, then runs on each, as fresh processes:

- ``gpu-audit explain FILE --json`` (``python -m gpu_audit`` from ``--source``, by default this
  repository), checking that it counts every line;
- ``grep -E -c -a`` with every literal needle of the signatures, as one extended regex.

It prints the seconds and peak RSS of each (``/usr/bin/time``'s, which counts the worker
processes of a large file too), the ratio of explain's time to grep's, explain's microseconds per
line and how its time grows from the smallest flood to the largest (linear: the ratio of their
sizes). Run from the repository root::

    python bench/bench_explain_flood.py                    # 100,000 and 300,000 lines
    python bench/bench_explain_flood.py --lines 20000 --kinds nccl
    python bench/bench_explain_flood.py --source /tmp/old  # another tree's gpu_audit

Exit status 0 when every flood was counted in full and explain's time grew at most 1.5 times
faster than the flood's size (a quadratic step shows as the square), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpu_audit.explain.signatures import SIGNATURES  # noqa: E402

FLOODS = {
    "nccl": "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.",
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
           "total capacity of 79.15 GiB of which 1.52 GiB is free. Including non-PyTorch memory, "
           "this process has 77.62 GiB memory in use. Of the allocated memory 60.12 GiB is "
           "allocated by PyTorch, and 16.98 GiB is reserved by PyTorch but unallocated.",
    "xid": "[ 5112.204870] NVRM: Xid (PCI:0000:00:1e): 48, pid='<unknown>', name=<unknown>, An "
           "uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at "
           "partition 6, subpartition 0.",
    "killed": "./train.sh: line 12: 48211 Killed                  python train.py",
}
ORDINARY = ("2026-11-27 10:{m:02d}:{s:02d},{ms:03d} INFO [trainer.py:412] step={i} loss=0.{i:06d} "
            "lr=1.0e-04 grad_norm=0.731 tokens/s=51234 mem_alloc=12.3GB")
GROWTH_SLACK = 1.5  # explain's time may grow this much faster than the flood's size
TIME = os.access("/usr/bin/time", os.X_OK)


def write_flood(path: Path, line: str, lines: int) -> None:
    block = (line + "\n").encode() * 1000
    with open(path, "wb") as handle:
        for _ in range(lines // 1000):
            handle.write(block)
        handle.write((line + "\n").encode() * (lines % 1000))


def write_ordinary(path: Path, lines: int) -> None:
    with open(path, "w") as handle:
        for start in range(0, lines, 1000):
            handle.write("".join(
                ORDINARY.format(m=i // 60 % 60, s=i % 60, ms=i % 1000, i=i) + "\n"
                for i in range(start, min(lines, start + 1000))))


def grep_pattern() -> str:
    """Every needle of every signature, as one extended regular expression."""
    needles = sorted({needle for sig in SIGNATURES for needle in sig.needles})
    return "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", n) for n in needles)


def measure(command: list[str], out: Path, timeout: float,
            env: dict[str, str] | None = None) -> tuple[float | None, float]:
    """(seconds, or None when it ran past ``timeout``; peak RSS in MiB).

    The command runs in ``out``'s folder: ``python -m`` looks for the package in its working
    folder first, which would shadow ``--source``. The peak comes from ``/usr/bin/time`` where
    there is one: a child forked from this Python process counts the parent's pages until it
    execs, which would hide a small tool's own peak.
    """
    rss_file = out.with_suffix(".rss")
    timer = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file)] if TIME else []
    with open(out, "wb") as stdout:
        started = time.perf_counter()
        child = subprocess.Popen([*timer, *command], stdout=stdout, stderr=subprocess.DEVNULL,
                                 env=env, cwd=out.parent)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            return None, float("nan")
        seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the fallback: the largest
    if TIME:
        usage = int(rss_file.read_text().split()[-1])
    return seconds, usage / 1024


def counted(document: Path) -> int | None:
    """Occurrences counted over all incidents of an explain JSON document."""
    try:
        return sum(i["count"] for i in json.loads(document.read_text())["incidents"])
    except (ValueError, KeyError):
        return None


def fmt(seconds: float | None) -> str:
    return "timed out" if seconds is None else f"{seconds:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[100_000, 300_000],
                        help="sizes of each flood, in lines")
    parser.add_argument("--kinds", nargs="+", choices=sorted(FLOODS),
                        default=["nccl", "oom", "xid"])
    parser.add_argument("--ordinary", type=int, default=300_000,
                        help="lines of the ordinary log (0: none)")
    parser.add_argument("--source", type=Path, default=REPO,
                        help="the folder that holds the gpu_audit package to run")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    args = parser.parse_args()
    if shutil.which("grep") is None:
        print("grep is not installed; nothing to compare against", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="gpu-audit-flood-"))
    env = dict(os.environ, PYTHONPATH=str(args.source.resolve()))
    explain = [sys.executable, "-m", "gpu_audit", "explain"]
    ok = True
    try:
        patterns = folder / "patterns.txt"
        patterns.write_text(grep_pattern() + "\n")
        grep = ["grep", "-E", "-c", "-a", "-f", str(patterns)]
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"## explain: floods of matching lines vs grep ({time.strftime('%Y-%m-%d')})\n")
        print(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.2f} "
              f"(other jobs share the CPUs), Python {platform.python_version()}. gpu_audit from "
              f"{args.source}. Command: `python bench/bench_explain_flood.py "
              f"{' '.join(sys.argv[1:])}`.\n")
        print("| log | lines | MB | explain s | explain peak RSS | µs/line | grep -E -c s | "
              "grep peak RSS | explain/grep | counted |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        runs = [(kind, lines) for kind in args.kinds for lines in sorted(args.lines)]
        if args.ordinary:
            runs.append(("ordinary", args.ordinary))
        timings: dict[str, list[tuple[int, float | None]]] = {}
        for kind, lines in runs:
            log = folder / f"{kind}-{lines}.log"
            if kind == "ordinary":
                write_ordinary(log, lines)
            else:
                write_flood(log, FLOODS[kind], lines)
            document = folder / "explain.json"
            seconds, rss = measure([*explain, str(log), "--json"], document, args.timeout, env)
            grep_s, grep_rss = measure([*grep, str(log)], folder / "grep.txt", args.timeout)
            count = counted(document) if seconds is not None else None
            if kind != "ordinary" and count != lines:
                ok = False
            timings.setdefault(kind, []).append((lines, seconds))
            ratio = f"{seconds / grep_s:.0f}x" if seconds and grep_s else "n/a"
            per_line = f"{seconds / lines * 1e6:.0f}" if seconds else "n/a"
            print(f"| {kind} | {lines:,} | {log.stat().st_size / 1e6:.0f} | {fmt(seconds)} | "
                  f"{rss:.0f} MiB | {per_line} | {fmt(grep_s)} | {grep_rss:.0f} MiB | {ratio} | "
                  f"{'n/a' if count is None else f'{count:,}'} |", flush=True)
            log.unlink()
        ok = report_growth(timings) and ok
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\nTarget (every flood counted in full, time at most {GROWTH_SLACK:g}x the growth of "
          f"the size): {'MET' if ok else 'MISSED'}.")
    return 0 if ok else 1


def report_growth(timings: dict[str, list[tuple[int, float | None]]]) -> bool:
    """Print how each flood's time grew with its size; False when it grew faster than linear
    by more than GROWTH_SLACK (or a run timed out)."""
    ok = True
    lines = []
    for kind, points in timings.items():
        if kind == "ordinary" or len(points) < 2:
            continue
        (small, small_s), (large, large_s) = points[0], points[-1]
        if small_s is None or large_s is None:
            lines.append(f"{kind}: a run timed out")
            ok = False
            continue
        growth = large_s / small_s
        ok = ok and growth <= GROWTH_SLACK * large / small
        lines.append(f"{kind}: {large / small:.1f}x the lines took {growth:.1f}x the time")
    if lines:
        print("\nGrowth from the smallest to the largest flood: " + "; ".join(lines) + ".")
    return ok


if __name__ == "__main__":
    sys.exit(main())
