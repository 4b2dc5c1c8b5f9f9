"""The one-shot NVML read in a child process (gpu_audit.collect.nvml.isolated): the same reading
as a read on a thread, the same deadline, and nothing of the child's in the caller's output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpu_audit.bounds import MAX_NVML_MESSAGE_BYTES
from gpu_audit.collect.nvml import isolated
from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]

SEVERAL_CPUS = len(os.sched_getaffinity(0)) > 1
needs_two_cpus = pytest.mark.skipif(not SEVERAL_CPUS, reason="a read forks only with a second CPU")

# Run as its own process: a pytest worker runs threads of its own, so it never forks a read.
# {setup} runs first: a patch the child inherits, a thread, a narrower CPU set.
SCRIPT = """
import json, os, signal, sys, threading, time
{setup}
from gpu_audit.collect.nvml.isolated import start_read
from gpu_audit.serial import to_jsonable
started = time.monotonic()
pending = start_read(timeout_s=float(sys.argv[1]), fork=sys.argv[2] == "fork")
reading = pending.result()
print(json.dumps({{
    "kind": type(pending).__name__,
    "pid": getattr(pending, "_pid", None),
    "reading": to_jsonable(reading),
    "waited_s": time.monotonic() - started,
    "pynvml_here": "pynvml" in sys.modules,
}}))
"""


def read(env: dict[str, str], *, setup: str = "", timeout_s: float = 5.0,
         fork: bool = True) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(setup=setup), str(timeout_s),
         "fork" if fork else "thread"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert len(lines) == 1, completed.stdout  # the child's own output never reaches ours
    return json.loads(lines[0])


def gone(pid: int, within_s: float = 2.0) -> bool:
    give_up = time.monotonic() + within_s
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > give_up:
            return False
        time.sleep(0.02)
    return True


@needs_two_cpus
def test_a_forked_read_gives_what_a_read_on_a_thread_gives(fake_nvml):
    env = fake_nvml(h100_node(8, pids=[4100 + i for i in range(8)]))
    forked = read(env)
    threaded = read(env, fork=False)
    assert (forked["kind"], threaded["kind"]) == ("ForkedReading", "PendingReading")
    assert forked["reading"] == threaded["reading"]
    assert len(forked["reading"]["gpus"]) == 8 and len(forked["reading"]["processes"]) == 8
    # The caller never loads pynvml: the child did the reading.
    assert (forked["pynvml_here"], threaded["pynvml_here"]) == (False, True)
    assert gone(forked["pid"])  # collected at the caller's exit, not left a zombie


def test_one_cpu_reads_on_a_thread(fake_nvml):
    setup = "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})"
    result = read(fake_nvml(h100_node(2)), setup=setup)
    assert result["kind"] == "PendingReading"
    assert len(result["reading"]["gpus"]) == 2


def test_a_process_already_running_threads_does_not_fork(fake_nvml):
    # A child of a threaded process could inherit a lock another thread holds.
    setup = "threading.Thread(target=threading.Event().wait, daemon=True).start()"
    result = read(fake_nvml(h100_node(2)), setup=setup)
    assert result["kind"] == "PendingReading"


@needs_two_cpus
def test_a_hung_driver_call_in_the_child_is_reported_by_the_deadline(fake_nvml):
    scenario = h100_node(2)
    scenario["gpus"][1]["hang"] = ["nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"]
    started = time.monotonic()
    result = read(fake_nvml(scenario), timeout_s=0.5)
    assert time.monotonic() - started < 0.5 + 1.5  # the caller exits too: nothing waits on it
    assert result["kind"] == "ForkedReading"
    reading = result["reading"]
    assert reading["status"]["available"] is True
    assert len(reading["gpus"]) == 2 and reading["gpus"][0]["uuid"]
    late = [e for e in reading["probe_errors"] if e.get("timed_out")]
    assert [e["subject"] for e in late] == ["gpu:1"]
    assert "nvmlDeviceGetMemoryInfo" in late[0]["message"]
    assert gone(result["pid"])


@needs_two_cpus
def test_a_child_that_dies_is_reported_with_how(fake_nvml):
    setup = ("import gpu_audit.collect.nvml.deadlines as d\n"
             "d.read_nvml = lambda timeout_s: os.kill(os.getpid(), signal.SIGKILL)")
    result = read(fake_nvml(h100_node(1)), setup=setup)
    status = result["reading"]["status"]
    assert result["kind"] == "ForkedReading"
    assert (status["available"], status["cause"]) == (False, "unknown")
    assert status["message"] == (
        "the NVML reader process ended without a reading (killed by SIGKILL)")


@needs_two_cpus
def test_a_child_that_never_answers_is_stopped_after_the_deadline(fake_nvml):
    setup = ("import gpu_audit.collect.nvml.deadlines as d\n"
             "d.read_nvml = lambda timeout_s: time.sleep(120)")
    result = read(fake_nvml(h100_node(1)), setup=setup, timeout_s=0.2)
    status = result["reading"]["status"]
    assert (status["available"], status["cause"]) == (False, "timeout")
    assert status["message"] == "reading NVML did not finish within 0.2 s"
    assert 0.2 + isolated.GRACE_S - 0.1 < result["waited_s"] < 0.2 + isolated.GRACE_S + 1.5
    assert gone(result["pid"])  # killed, not left sleeping


@needs_two_cpus
def test_what_the_child_prints_stays_out_of_the_output(fake_nvml):
    setup = ("import gpu_audit.collect.nvml.deadlines as d\n"
             "real = d.read_nvml\n"
             "def noisy(timeout_s):\n"
             "    print('noise from the driver', flush=True)\n"
             "    return real(timeout_s)\n"
             "d.read_nvml = noisy")
    result = read(fake_nvml(h100_node(1)), setup=setup)  # read() checks stdout is one line
    assert result["kind"] == "ForkedReading" and len(result["reading"]["gpus"]) == 1


# -------------------------------------------------------------------- the message, as read


def pipe_with(data: bytes, *, close: bool = True) -> int:
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    if close:
        os.close(write_end)
    return read_end


def test_a_whole_message_is_read_past_its_length_prefix():
    fd = pipe_with((5).to_bytes(8, "big") + b"hello" + b"trailing")
    assert isolated._read_message(fd, time.monotonic() + 5) == (b"hello", "")


def test_a_message_announcing_too_much_is_refused_before_reading_it():
    fd = pipe_with((MAX_NVML_MESSAGE_BYTES + 1).to_bytes(8, "big"), close=False)
    payload, problem = isolated._read_message(fd, time.monotonic() + 5)
    assert payload is None and problem.startswith(f"announced {MAX_NVML_MESSAGE_BYTES + 1}")


def test_a_message_cut_short_is_an_ended_child():
    fd = pipe_with((100).to_bytes(8, "big") + b"only part")
    assert isolated._read_message(fd, time.monotonic() + 5) == (None, "ended")


def test_a_silent_child_is_late_at_the_deadline():
    fd = pipe_with(b"", close=False)
    started = time.monotonic()
    assert isolated._read_message(fd, started + 0.2) == (None, "timeout")
    assert 0.15 < time.monotonic() - started < 2


@needs_two_cpus
def test_a_fork_refused_falls_back_to_a_thread(fake_nvml):
    setup = ("import errno\n"
             "def refused():\n"
             "    raise BlockingIOError(errno.EAGAIN, 'Resource temporarily unavailable')\n"
             "os.fork = refused")
    result = read(fake_nvml(h100_node(2)), setup=setup)
    assert result["kind"] == "PendingReading"
    assert len(result["reading"]["gpus"]) == 2


# ------------------------------------------------- a command that ends before its reading arrives


def scan_stuck_in_init(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """A ``scan`` whose reader child is stuck in nvmlInit far from its deadline, and that
    child's pid."""
    scan = subprocess.Popen([sys.executable, "-m", "gpu_audit", "scan", "--json",
                             "--timeout", "60"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    children = Path(f"/proc/{scan.pid}/task/{scan.pid}/children")
    give_up = time.monotonic() + 30
    while time.monotonic() < give_up:
        pids = children.read_text().split() if children.exists() else []
        if pids:
            time.sleep(0.3)  # into the hung call
            return scan, int(pids[0])
        time.sleep(0.02)
    scan.kill()
    raise AssertionError("scan never forked its reader")


@needs_two_cpus
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_the_reader_ends_with_the_command_however_it_is_stopped(fake_nvml, how):
    # Sent to the command's pid alone, as `kill PID` does (Ctrl-C signals the whole group):
    # before, the child kept reading for no one until its own deadline, a minute later.
    scenario = h100_node(1)
    scenario["hang"] = ["nvmlInitWithFlags", "nvmlInit_v2", "nvmlInit"]
    scan, child = scan_stuck_in_init(fake_nvml(scenario))
    os.kill(scan.pid, getattr(signal, how))
    _, err = scan.communicate(timeout=30)
    assert gone(child, within_s=5.0)
    assert b"Traceback" not in err
    if how == "SIGINT":
        assert scan.returncode == 130
