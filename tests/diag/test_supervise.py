"""The workers' deadlines: a test past its limit is killed and reported hung, a worker that dies
is reported with its last words, and every worker's process group is gone afterwards."""

from __future__ import annotations

import sys
import time

import psutil

from gpu_audit.diag.supervise import Child, run_children

HANG = """
import json, os, sys, time, subprocess
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60.4242)"])
print(json.dumps({"ev": "phase", "test": "memtest", "limit_s": 0.5}), flush=True)
print(json.dumps({"ev": "grandchild", "pid": grandchild.pid}), flush=True)
time.sleep(60)
"""
DIE = """
import json, sys, os
print(json.dumps({"ev": "phase", "test": "matmul-fp8", "limit_s": 30}), flush=True)
print("cuBLAS error: the GPU fell off the bus", file=sys.stderr, flush=True)
os.abort()
"""
DONE = """
import json
print(json.dumps({"ev": "ready", "torch_version": "9.9"}))
print(json.dumps({"ev": "phase", "test": "context", "limit_s": 30}))
print(json.dumps({"ev": "result", "test": "context", "record": {"ok": True}}))
print(json.dumps({"ev": "done"}))
"""


def child(key: str, script: str, seen: list | None = None) -> Child:
    return Child(key, [sys.executable, "-c", script], {}, startup_s=30,
                 on_event=None if seen is None else seen.append)


def test_hung_dead_and_finished_workers_side_by_side() -> None:
    started = time.monotonic()
    hung, dead, done = child("hang", HANG), child("die", DIE), child("done", DONE)
    run_children([hung, dead, done])
    assert time.monotonic() - started < 15
    assert (hung.outcome.status, hung.outcome.test, hung.outcome.limit_s) == \
        ("hung", "memtest", 0.5)
    assert dead.outcome.status == "died" and dead.outcome.test == "matmul-fp8"
    assert dead.outcome.returncode < 0 and "fell off the bus" in dead.outcome.log_tail
    assert done.outcome.status == "done" and done.outcome.returncode == 0
    assert done.results == {"context": {"ok": True}}
    assert done.outcome.ready == {"torch_version": "9.9"}
    for c in (hung, dead, done):
        assert not psutil.pid_exists(c.proc.pid) or \
            psutil.Process(c.proc.pid).status() == psutil.STATUS_ZOMBIE


def test_a_hung_workers_children_are_killed_too() -> None:
    seen: list = []
    hung = child("hang", HANG)
    hung.on_event = seen.append
    run_children([hung])
    assert hung.outcome.status == "hung"
    # The grandchild shares the worker's process group: it is gone as well.
    deadline = time.monotonic() + 5
    pids = [p.pid for p in psutil.process_iter() if "time.sleep(60.4242)" in " ".join(
        _cmdline(p))]
    while pids and time.monotonic() < deadline:
        time.sleep(0.1)
        pids = [pid for pid in pids if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not pids


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []
