"""Logs full of matching lines: each line costs the same, every line is counted, memory stays put.

explain runs in Slurm epilogs on logs of up to 4 GiB; a training loop that logs an NCCL
watchdog timeout or an out-of-memory on every step must not make it slower per line than an
ordinary log, nor make it keep every occurrence.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit.explain import ExplainResult, classify_text, explain_sources, parallel
from gpu_audit.explain.classify import MAX_KEYED, MAX_LOCATIONS

WATCHDOG = ("[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
       "capacity of 79.15 GiB of which 1.52 GiB is free. Including non-PyTorch memory, this "
       "process has 77.62 GiB memory in use. Of the allocated memory 60.12 GiB is allocated by "
       "PyTorch, and 16.98 GiB is reserved by PyTorch but unallocated.")
XID = ("[ 5112.204870] NVRM: Xid (PCI:0000:00:1e): 48, pid='<unknown>', name=<unknown>, An "
       "uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.")
TRACEBACK = ('Traceback (most recent call last):\n  File "train.py", line 10, in <module>\n'
             "    loss.backward()\n"
             "RuntimeError: CUDA error: an illegal memory access was encountered")


def _write(path: Path, line: str, copies: int) -> Path:
    path.write_text((line + "\n") * copies)
    return path


def _cpu_seconds(log: Path) -> tuple[float, ExplainResult]:
    started = time.process_time()
    result = explain_sources([str(log)], torch_version=None, workers=1)
    return time.process_time() - started, result


@pytest.mark.slow
def test_a_flood_of_watchdog_timeouts_costs_little_per_line(tmp_path: Path) -> None:
    # 60,000 lines take about 10 s of CPU on an idle core of the 2-core machine CI runs on, and
    # ten times as many lines cost ten times as much. Re-reading every line's neighbours for
    # each match made each line cost five times as much; searching the whole 4 MiB block for
    # a carriage return made a line's cost grow with the block it is in. CPU time, not wall
    # time: other jobs waiting for the cores do not count.
    lines = 60_000
    small, _ = _cpu_seconds(_write(tmp_path / "small.log", WATCHDOG, lines // 10))
    spent, result = _cpu_seconds(_write(tmp_path / "watchdog.log", WATCHDOG, lines))
    (timeout,) = result.incidents
    assert timeout.signature == "nccl/watchdog-timeout"
    assert timeout.count == lines and result.inputs[0].lines == lines
    assert len(timeout.line_numbers) == MAX_LOCATIONS and timeout.ranks == [0]
    assert spent < 15 * small, f"{lines} lines took {spent:.1f} s, a tenth of them {small:.1f} s"
    assert spent < 25, f"{lines} watchdog lines took {spent:.1f} s of CPU"


@pytest.mark.parametrize(("line", "signature"), [
    (OOM, "cuda-oom/caching-allocator"),
    (XID, "gpu-hardware/xid"),
    ("./train.sh: line 12: 48211 Killed                  python train.py",
     "host-oom/shell-killed"),
    (TRACEBACK, "illegal-memory-access/illegal-address"),
])
def test_floods_of_other_failures_are_counted_in_full(line: str, signature: str) -> None:
    copies = 4_000
    (incident,) = classify_text((line + "\n") * copies, torch_version=None)
    assert (incident.signature, incident.count) == (signature, copies)
    assert len(incident.line_numbers) == len(incident.locations) == MAX_LOCATIONS


def test_the_cli_reports_the_count_of_a_flood_not_every_copy(tmp_path: Path) -> None:
    lines = 5_000
    log = _write(tmp_path / "watchdog.log", WATCHDOG, lines)
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "explain", str(log), "--json"],
                          capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 1, done.stderr  # a failure was found
    (incident,) = json.loads(done.stdout)["incidents"]
    assert incident["count"] == lines
    assert incident["line_numbers"] == list(range(1, MAX_LOCATIONS + 1))


def test_distinct_values_past_the_cap_share_one_incident() -> None:
    # thousands of different "Xids" (a garbled or hostile log) must not open an incident each
    values = [100 + i for i in range(MAX_KEYED + 300)]
    log = "".join(f"[ 12.{i:06d}] NVRM: Xid (PCI:0000:00:1e): {xid}, pid=12, name=python\n"
                  for i, xid in enumerate(values * 2))
    found = classify_text(log, torch_version=None)
    assert len(found) == MAX_KEYED + 1
    assert sum(i.count for i in found) == 2 * len(values)
    (rest,) = [i for i in found if i.count > 2]
    assert rest.count == 2 * 300 and f"more than {MAX_KEYED} different values" in rest.explanation
    kept = sorted(i.numbers["xid"] for i in found if i is not rest)
    assert kept == values[:MAX_KEYED]


def test_a_dense_range_is_read_again_by_the_parent_with_the_same_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mixed.log"
    with open(path, "w") as handle:
        for i in range(3_000):
            handle.write(f"step {i} loss 0.{i:04d}\n")
            if 1_000 <= i < 1_600:
                handle.write(WATCHDOG.replace("SeqNum=1", f"SeqNum={i}") + "\n")
            if i % 500 == 250:
                handle.write(OOM + "\n")
    sequential = explain_sources([str(path)], torch_version=None, workers=1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(parallel, "RANGE_BYTES", 20_000)
    monkeypatch.setattr(parallel, "RANGE_CANDIDATE_BYTES", 30_000)  # the flood's ranges
    dense = parallel.scan_range(str(path), 0, path.stat().st_size)
    assert dense == (None, 0, 0)
    split = explain_sources([str(path)], torch_version=None, workers=2)
    assert [(i.signature, i.count, i.locations, i.numbers) for i in split.incidents] == [
        (i.signature, i.count, i.locations, i.numbers) for i in sequential.incidents]
    assert split.inputs == sequential.inputs
    assert [i.count for i in sequential.incidents] == [6, 600]
