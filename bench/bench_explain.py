"""Benchmark: ``gpu-audit explain`` throughput on a large synthetic training log vs ``grep -E -c``.

Writes a synthetic multi-rank training log (progress bars with carriage returns, ANSI colour,
NCCL INFO chatter, warnings, long JSON lines, a few non-UTF-8 bytes, and a handful of real
failure messages) into a temporary folder, then times:

- gpu-audit's classifier in-process (``explain_sources``), with its worker processes (one per
  CPU) and with one process, the numbers that matter for scale;
- the CLI end to end (``python -m gpu_audit explain FILE --json``, interpreter start included);
- ``grep -E -c`` with the same signature set: every literal "needle" the signatures look for,
  as one extended regex, in the default locale and in ``LC_ALL=C``.

The log is deleted afterwards. Run from the repository root::

    python bench/bench_explain.py            # ~200 MB
    python bench/bench_explain.py --mb 50    # quicker

It prints MB/s for each and the ratio of gpu-audit's time to grep's, as a markdown section
for bench/RESULTS.md. Exit status 0 when the classifier is within 1.5x of the faster grep and
found every planted failure, 1 otherwise. The engine that ran (GNU grep's anchors, or the
Python passes) is named in the table.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpu_audit.explain import explain_sources, grepscan  # noqa: E402
from gpu_audit.explain.parallel import PARALLEL_MIN_BYTES, default_workers  # noqa: E402
from gpu_audit.explain.signatures import SIGNATURES  # noqa: E402

NOISE = (
    "2026-11-22 10:{m:02d}:{s:02d},{ms:03d} INFO [trainer.py:412] step={i} loss={l:.4f} "
    "lr=1.0e-04 grad_norm={g:.3f} tokens/s={t} mem_alloc=12.3GB",
    "[rank{r}]:2026-11-22 10:{m:02d}:{s:02d} INFO Train Epoch: 3 [{i}/500000 (45%)]\tLoss: {l:.6f}",
    "Epoch 3:  45%|\u2588\u2588\u2588\u2588\u258c     | {i}/1000000 [02:15<02:45,  3.33it/s, "
    "loss={l:.3f}]\r",
    "node0{r}:{p}:{p} [{r}] NCCL INFO Channel {c:02d}/24 : 0 1 2 3 4 5 6 7",
    "\x1b[32m2026-11-22 10:{m:02d}:{s:02d}\x1b[0m | \x1b[1mINFO    \x1b[0m | "
    "data.loader:fetch:88 - loaded shard {i} with 4096 samples",
    "{{'loss': {l:.4f}, 'grad_norm': {g:.3f}, 'learning_rate': 4.9e-05, 'epoch': 0.{i}}}",
    "  File \"/home/user/project/train.py\", line {c}, in forward",
    "wandb: Syncing run glorious-sun-{i}",
    "[default{r}]:[W reducer.cpp:1346] Warning: find_unused_parameters=True was specified in "
    "DDP constructor, but did not find any unused parameters in the forward pass.",
    "huggingface/tokenizers: The current process just got forked, after parallelism has "
    "already been used. Disabling parallelism to avoid deadlocks...",
    "Token indices sequence length is longer than the specified maximum sequence length for "
    "this model ({t} > 512). Running this sequence through the model will result in indexing "
    "errors",
    "[rank{r}]: eval step {i}: accuracy={l:.4f} f1={g:.4f} samples=8192 device='cuda:{r}'",
)
FAILURES = (
    "[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r} "
    "has a total capacity of 79.15 GiB of which 1.06 GiB is free. Including non-PyTorch memory, "
    "this process has 78.08 GiB memory in use. Of the allocated memory 52.10 GiB is allocated "
    "by PyTorch, and 25.31 GiB is reserved by PyTorch but unallocated.",
    "[rank{r}]:[E1122 10:00:00.000000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum={i}, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
    "Nov 22 10:00:00 node01 kernel: [12345.678] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
    "GPU has fallen off the bus.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
)
TARGET_RATIO = 1.5
EXPECTED_INCIDENTS = len(FAILURES)  # each failure kind is one incident, however often it recurs
LONG_LINE = "{\"config\": {" + ", ".join(f"\"k{i}\": \"{'v' * 40}\"" for i in range(400)) + "}}"


def write_log(path: Path, megabytes: int, seed: int = 7) -> int:
    """A synthetic log of about ``megabytes`` MiB; returns the failure lines written."""
    rng = random.Random(seed)
    target = megabytes << 20
    written = failures = i = 0
    with open(path, "wb") as handle:
        batch: list[bytes] = []
        while written < target:
            i += 1
            values = dict(m=i // 60 % 60, s=i % 60, ms=i % 1000, i=i, l=rng.random(),
                          g=rng.random() * 3, t=rng.randint(1000, 99999), r=i % 8,
                          p=4000 + i % 8, c=i % 24)
            if i % 50_000 == 25_000:
                line = FAILURES[failures % len(FAILURES)].format(**values).encode()
                failures += 1
            elif i % 50_000 == 0:
                line = LONG_LINE.encode()
            elif i % 100_003 == 0:
                line = b"binary garbage \xff\xfe\x00 from a crashed writer"
            else:
                line = rng.choice(NOISE).format(**values).encode()
            batch.append(line + b"\n")
            written += len(line) + 1
            if len(batch) >= 4096:
                handle.write(b"".join(batch))
                batch.clear()
        handle.write(b"".join(batch))
    return failures


def grep_pattern() -> str:
    """Every needle of every signature, as one extended regular expression."""
    needles = sorted({needle for sig in SIGNATURES for needle in sig.needles})
    return "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", n) for n in needles)


def best_of(runs: int, func) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        started = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - started)
    return best, result


def run_grep(pattern_file: Path, log: Path, c_locale: bool) -> tuple[float, int]:
    env = dict(os.environ)
    if c_locale:
        env["LC_ALL"] = "C"

    def once() -> int:
        done = subprocess.run(["grep", "-E", "-c", "-a", "-f", str(pattern_file), str(log)],
                              capture_output=True, text=True, env=env, check=False)
        return int(done.stdout.strip() or 0)

    return best_of(3, once)  # type: ignore[return-value]


def run_anchor_grep(grep: str, log: Path, folder: Path) -> None:
    """The search explain's grep engine runs, alone (its output read, nothing more)."""
    patterns = folder / "anchors.txt"
    patterns.write_bytes(grepscan.grep_patterns())
    with open(log, "rb") as handle:
        subprocess.run(grepscan.grep_command(grep, str(patterns)), stdin=handle,
                       capture_output=True, env={"LC_ALL": "C"}, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the synthetic log in MiB")
    parser.add_argument("--runs", type=int, default=3, help="timed runs (best is kept)")
    args = parser.parse_args()
    if shutil.which("grep") is None:
        print("grep is not installed; nothing to compare against", file=sys.stderr)
        return 2
    folder = Path(tempfile.mkdtemp(prefix="gpu-audit-bench-"))
    try:
        log = folder / "train.log"
        failures = write_log(log, args.mb)
        size = log.stat().st_size
        mb = size / 1e6
        patterns = folder / "patterns.txt"
        patterns.write_text(grep_pattern() + "\n")

        grep = grepscan.find_grep()
        cpu: list[float] = []

        def explain_default():  # type: ignore[no-untyped-def]
            started = time.process_time()
            done = explain_sources([str(log)], torch_version=None)
            cpu.append(time.process_time() - started)
            return done

        seconds, result = best_of(args.runs, explain_default)
        engine = result.inputs[0].engine  # type: ignore[union-attr]
        python_cpu = min(cpu)
        anchors_s = (best_of(args.runs, lambda: run_anchor_grep(grep, log, folder))[0]
                     if grep else None)
        saved, grepscan.GREP_PATHS = grepscan.GREP_PATHS, ()  # the Python passes
        try:
            python_s, _ = best_of(args.runs, lambda: explain_sources([str(log)],
                                                                     torch_version=None))
            one_worker, _ = best_of(args.runs, lambda: explain_sources(
                [str(log)], torch_version=None, workers=1))
        finally:
            grepscan.GREP_PATHS = saved
        incidents = result.incidents  # type: ignore[union-attr]
        env = dict(os.environ, PYTHONPATH=str(REPO))
        cli_seconds, _ = best_of(args.runs, lambda: subprocess.run(
            [sys.executable, "-m", "gpu_audit", "explain", str(log), "--json"],
            capture_output=True, env=env, check=False))
        grep_s, grep_lines = run_grep(patterns, log, c_locale=False)
        grep_c_s, _ = run_grep(patterns, log, c_locale=True)

        workers = default_workers()
        rows = [
            (f"gpu-audit explain (in-process, default: engine {engine})", seconds),
            ("  its grep alone (the anchors' search, output read and dropped)", anchors_s),
            ("  its Python process's CPU time (grep's not included)", python_cpu),
            (f"gpu-audit explain, Python passes ({workers} worker processes from "
             f"{PARALLEL_MIN_BYTES >> 20} MiB)", python_s),
            ("gpu-audit explain, Python passes, 1 process", one_worker),
            ("gpu-audit explain (CLI, incl. start-up)", cli_seconds),
            (f"grep -E -c, {os.environ.get('LANG', 'default')} locale", grep_s),
            ("grep -E -c, LC_ALL=C", grep_c_s),
        ]
        print(f"## explain: log throughput vs grep ({time.strftime('%Y-%m-%d')})\n")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, no GPU, load average "
              f"{load:.2f} (other jobs share the CPUs), Python {platform.python_version()}. "
              f"Command: `python bench/bench_explain.py --mb {args.mb} --runs {args.runs}` "
              f"(best of {args.runs}). Synthetic log: {mb:.0f} MB, "
              f"{result.inputs[0].lines:,} lines, {failures} failure lines; "  # type: ignore[union-attr]
              f"{len(incidents)} incidents found; grep matched {grep_lines} lines with "
              f"{len(grep_pattern().split('|'))} alternatives.\n")
        print("| what | seconds | MB/s | time vs grep (default locale) | vs grep (LC_ALL=C) |")
        print("|---|---|---|---|---|")
        for name, secs in rows:
            if secs is None:
                continue
            print(f"| {name} | {secs:.2f} | {mb / secs:.0f} | {secs / grep_s:.2f}x | "
                  f"{secs / grep_c_s:.2f}x |")
        ratio = seconds / min(grep_s, grep_c_s)
        met = ratio <= TARGET_RATIO and len(incidents) == EXPECTED_INCIDENTS
        print(f"\nTarget (classifier within {TARGET_RATIO:g}x of the faster grep, every failure "
              f"found): {'MET' if met else 'MISSED'} ({ratio:.2f}x, {len(incidents)} of "
              f"{EXPECTED_INCIDENTS} incidents).")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
