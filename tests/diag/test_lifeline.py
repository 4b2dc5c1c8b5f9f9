"""Diag workers die with gpu-audit, also when gpu-audit is killed outright (SIGKILL): each of the
three guards alone stops a worker within seconds, and the whole command's workers go with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from gpu_audit.diag import lifeline
from tests import fakegpu
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and process groups: POSIX")

# A parent that starts one lifeline-holding worker as diag's supervisor does (its own session,
# stdin a pipe only the parent holds), prints the worker's pid, and waits to be killed.
PARENT = """
import json, subprocess, sys, os
from gpu_audit.diag.lifeline import parent_environment
env = {**os.environ, **parent_environment()}
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, env=env, start_new_session=True)
line = worker.stdout.readline()
print(json.dumps({"worker": worker.pid, "armed": json.loads(line)}), flush=True)
import time
time.sleep(120)
"""
WORKER = """
import json, sys, time
from gpu_audit.diag import lifeline
armed = lifeline.hold(guards={guards!r})
print(json.dumps(armed), flush=True)
time.sleep(120)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie that its new parent has not reaped yet counts as exited)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, within_s: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < within_s:
        if gone(pid):
            return time.monotonic() - started
        time.sleep(0.05)
    return None


def kill_leftover(pid: int) -> None:
    """A worker a failing test left running: its group is killed by its id."""
    if not gone(pid):
        os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("guards", [("pdeathsig",), ("pipe",), ("pid",)])
def test_each_guard_alone_stops_the_worker_when_its_parent_is_killed(guards) -> None:
    if guards == ("pdeathsig",) and not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    parent = subprocess.Popen([sys.executable, "-c", PARENT,
                               textwrap.dedent(WORKER.format(guards=guards))],
                              stdout=subprocess.PIPE, text=True)
    try:
        started = json.loads(parent.stdout.readline())
        worker = started["worker"]
        assert started["armed"] == list(guards)
        time.sleep(0.3)
        assert not gone(worker)
        parent.kill()
        parent.wait(timeout=10)
        assert wait_gone(worker, 5.0) is not None, f"{guards}: the worker outlived its parent"
    finally:
        parent.kill()
        parent.wait(timeout=10)
        if "worker" in locals():
            kill_leftover(worker)


def test_a_parent_dead_before_the_guards_are_up_ends_the_worker_at_once() -> None:
    deaths: list[str] = []
    not_my_parent = {lifeline.PARENT_ENV: f"{os.getppid() + 1000003}:deathsig"}
    lifeline.hold(not_my_parent, on_death=lambda: deaths.append("dead"), guards=("pid",))
    assert deaths == ["dead"]


def test_nothing_is_armed_without_a_parent_and_deathsig_only_from_the_main_thread() -> None:
    assert lifeline.hold({}) == []
    assert lifeline.parent_environment() == {lifeline.PARENT_ENV: f"{os.getpid()}:deathsig"}
    seen: list[dict] = []
    thread = threading.Thread(target=lambda: seen.append(lifeline.parent_environment()))
    thread.start()
    thread.join()
    # A thread's exit would fire PR_SET_PDEATHSIG: workers it starts rely on the other guards.
    assert seen == [{lifeline.PARENT_ENV: str(os.getpid())}]
    assert lifeline.parse(f"{os.getpid()}") == (os.getpid(), False)
    assert lifeline.parse("x:deathsig") == (None, False)


# The runner's supervisor with one real worker in a long test that sends nothing while it runs
# (a memory test over 256 MiB): killed outright, nothing but the guards can stop that worker.
SUPERVISOR = """
import json, sys
from gpu_audit.diag.results import DiagOptions
from gpu_audit.diag.runner import plan_for
from gpu_audit.diag.supervise import Child, run_children, worker_args
plan = {**plan_for(None, DiagOptions(level=2, device="cpu"), None), "memtest_bytes": 256 << 20,
        "memtest_timeout_s": 600}
def show(event):
    print(json.dumps(event), flush=True)
child = Child("gpu:0", worker_args("cpu", "gpu", plan), {"CUDA_VISIBLE_DEVICES": ""},
              startup_s=120, on_event=show)
run_children([child])
"""


def test_a_worker_in_a_silent_test_dies_with_its_killed_supervisor(tmp_path) -> None:
    pytest.importorskip("torch")
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISOR], stdout=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    workers: list[psutil.Process] = []
    try:
        for line in proc.stdout:
            if json.loads(line).get("test") == "memtest":
                break
        workers = psutil.Process(proc.pid).children()
        assert len(workers) == 1 and "gpu_audit.diag.worker" in _cmdline(workers[0])
        time.sleep(0.5)
        assert not gone(workers[0].pid), "the memory test ended too soon to prove anything"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert wait_gone(workers[0].pid, 3.0) is not None, "the worker outlived its supervisor"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        for worker in workers:
            kill_leftover(worker.pid)


def test_diag_killed_outright_takes_its_workers_with_it(fake_nvml, cli_env, tmp_path) -> None:
    pytest.importorskip("torch")
    env = fake_nvml(h100_node(1), base=cli_env)
    proc = subprocess.Popen([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu",
                             "--level", "3", "--duration", "120", "--no-report"], env=env,
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not workers:
            time.sleep(0.2)
            workers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                       if "sustain" in _cmdline(p)]
        assert workers, "the sustained-load worker did not start"
        time.sleep(1.0)
        assert not gone(workers[0].pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        for worker in workers:
            assert wait_gone(worker.pid, 5.0) is not None, "a worker outlived diag"
    finally:
        proc.kill()
        proc.wait(timeout=10)
        for worker in workers:
            kill_leftover(worker.pid)


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []
