"""A one-shot NVML read begun before the rest of a command loads: in a child process when it can.

``scan`` and ``check`` read NVML once, and most of their start-up is importing: pynvml (with
ctypes and its helpers) for the read, msgspec and the rest of gpu-audit for everything else.
Threads cannot run two imports at once (they share the interpreter lock), but a child process
can, on a second CPU. So, where the process may fork (a POSIX system, no thread running yet, more
than one CPU to run on), :func:`start_read` loads what both sides need (msgspec and the data
model) and forks: the child runs
:func:`~gpu_audit.collect.nvml.deadlines.read_nvml` (its deadline and threads unchanged) and sends
the reading back as one length-prefixed msgpack message, while the caller goes on loading and
collecting. Elsewhere the read runs on a daemon thread (:class:`.deadlines.PendingReading`).

Either way the reading arrives by the read's own deadline (plus a moment) or is reported as late,
and a driver call that never returns is reported, not waited on. In a child such a call cannot
hold up this process's exit, its NVML shutdown or its interpreter lock either.

pynvml, ctypes and the reading code load in the child only; this process needs none of them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import select
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from gpu_audit.bounds import MAX_NVML_MESSAGE_BYTES

if TYPE_CHECKING:
    from gpu_audit.collect.nvml.deadlines import PendingReading
    from gpu_audit.collect.nvml.reading import NvmlReading

# The child's read bounds itself by the deadline; this covers the child's start and its imports.
GRACE_S = 1.0
# The length prefix of the child's message (which may announce at most MAX_NVML_MESSAGE_BYTES).
_LENGTH_BYTES = 8
# prctl(2)'s request for a signal when the parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
_CHUNK = 1 << 16

# Children whose exit has not been collected yet (one stuck in the driver exits late).
_unreaped: list[int] = []
# Children whose reading nobody has received yet: a command that ends before it asks for the
# reading (an error, Ctrl-C) stops them at its exit rather than leave them reading for no one.
_unanswered: set[int] = set()
# How long this process waits at its exit for children that sent their reading to finish: they
# only release NVML by then, unless a driver call holds them (then init collects them).
REAP_AT_EXIT_S = 0.25


@functools.cache
def _watch_exit() -> None:
    # None stays a zombie, and the children's CPU time is counted in this process's.
    atexit.register(_end_at_exit)


def _end_at_exit() -> None:
    for pid in list(_unanswered):
        _stop(pid, within_s=0.0)
    _unanswered.clear()
    _reap(REAP_AT_EXIT_S)


def _may_fork() -> bool:
    """Forking is safe (no other thread whose locks the child would inherit held) and pays
    (another CPU runs the child)."""
    if not hasattr(os, "fork") or threading.active_count() != 1:
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus > 1


def start_read(timeout_s: float = 5.0, *, fork: bool = True) -> ForkedReading | PendingReading:
    """Start reading NVML and return at once; ``.result()`` gives the reading.

    A slow driver spends most of a read waiting and a quick one most of it importing, so a caller
    that starts the read first and then imports or collects everything else overlaps the two.
    ``fork=False`` keeps the read in this process (on a daemon thread) whatever the platform.
    """
    _reap()
    if fork and _may_fork():
        # What both processes need (msgspec, the data model) loads once, before the fork: the
        # child then only loads pynvml and reads, while this process loads everything else.
        import gpu_audit.collect.nvml.reading  # noqa: F401

        try:
            return ForkedReading(timeout_s)
        except OSError:  # no process to spare (a ulimit, a full pid table): read on a thread
            pass
    from gpu_audit.collect.nvml.deadlines import PendingReading

    return PendingReading(timeout_s)


class ForkedReading:
    """An NVML read under way in a child process; see :func:`start_read`."""

    def __init__(self, timeout_s: float) -> None:
        self.started = time.perf_counter()
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s + GRACE_S
        self._reading: NvmlReading | None = None
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:  # the child: never returns
            _child(read_end, write_end, timeout_s, parent=os.getppid())
        os.close(write_end)
        _watch_exit()
        _unanswered.add(pid)
        self._pid = pid
        self._fd = read_end

    def result(self) -> NvmlReading:
        """The reading; waits at most until the read's own deadline (plus a moment)."""
        if self._reading is None:
            self._reading = self._receive()
        return self._reading

    def _receive(self) -> NvmlReading:
        try:
            payload, problem = _read_message(self._fd, self._deadline)
        except BaseException:  # Ctrl-C while waiting: the reading has no one left to go to
            _stop(self._pid)
            raise
        finally:
            os.close(self._fd)
            _unanswered.discard(self._pid)
        if payload is None:
            return _failed(self._pid, problem, self._timeout_s)
        _collect(self._pid)
        import msgspec

        from gpu_audit.collect.nvml.reading import NvmlReading

        try:
            return msgspec.msgpack.decode(payload, type=NvmlReading)
        except msgspec.DecodeError as exc:
            return _unavailable("unknown", f"the NVML reading could not be decoded: {exc}")


def _read_message(fd: int, deadline: float) -> tuple[bytes | None, str]:
    """The child's one message, or ``None`` and why there is none (``"timeout"`` when late)."""
    received = bytearray()
    expected: int | None = None
    poller = select.poll()  # not select(): a descriptor numbered past 1023 is fine
    poller.register(fd, select.POLLIN)
    while expected is None or len(received) < expected:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not poller.poll(remaining * 1000):
            return None, "timeout"
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return None, "ended"
        received += chunk
        if expected is None and len(received) >= _LENGTH_BYTES:
            length = int.from_bytes(received[:_LENGTH_BYTES], "big")
            if length > MAX_NVML_MESSAGE_BYTES:
                return None, f"announced {length} bytes, more than {MAX_NVML_MESSAGE_BYTES}"
            expected = _LENGTH_BYTES + length
    return bytes(received[_LENGTH_BYTES:expected]), ""


def _failed(pid: int, problem: str, timeout_s: float) -> NvmlReading:
    if problem == "timeout":
        # Silent past its own deadline and the grace (stuck before its threads began, say):
        # stopped, never waited on.
        _stop(pid)
        return _unavailable("timeout", f"reading NVML did not finish within {timeout_s:g} s")
    if problem != "ended":
        _stop(pid)
        return _unavailable("unknown", f"the NVML reader process sent a bad message: {problem}")
    status = _collect(pid, REAP_AT_EXIT_S)  # its pipe closed: it is exiting
    how = "" if status is None else f" ({_exit_text(status)})"
    return _unavailable("unknown", f"the NVML reader process ended without a reading{how}")


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _unavailable(cause: str, message: str) -> NvmlReading:
    from gpu_audit.collect.nvml.reading import NvmlReading
    from gpu_audit.model import NvmlStatus

    status = NvmlStatus(available=False, cause=cause, message=message)
    return NvmlReading(status=status, driver=None, gpus=[], processes=[], probe_errors=[])


def _stop(pid: int, within_s: float = 0.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)  # our own child, by the pid fork gave us
    _collect(pid, within_s)


def _collect(pid: int, within_s: float = 0.0) -> int | None:
    """The child's wait status once it has exited, waiting at most ``within_s``; else ``None``,
    and it is collected later (:func:`_reap`)."""
    give_up = time.monotonic() + within_s
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() >= give_up:
            _unreaped.append(pid)
            return None
        time.sleep(0.001)


def _reap(within_s: float = 0.0) -> None:
    """Collect the children still exiting, waiting at most ``within_s`` for them all."""
    give_up = time.monotonic() + within_s
    waiting = list(_unreaped)
    _unreaped.clear()
    for pid in waiting:
        _collect(pid, max(0.0, give_up - time.monotonic()))


def _child(read_end: int, write_end: int, timeout_s: float, parent: int) -> None:
    """Read NVML, send the reading, exit: never returns into the caller's code."""
    code = 1
    try:
        os.close(read_end)
        _end_with(parent)
        # The reading travels by the pipe only: nothing the driver or a library prints may mix
        # into the command's own output.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        import msgspec

        from gpu_audit.collect.nvml.deadlines import read_nvml, shutdown

        payload = msgspec.msgpack.encode(read_nvml(timeout_s))
        message = len(payload).to_bytes(_LENGTH_BYTES, "big") + payload
        view = memoryview(message)
        while view:
            view = view[os.write(write_end, view):]
        os.close(write_end)
        code = 0
        shutdown()  # as a read on a thread does at exit: skipped while a call is stuck
    finally:
        os._exit(code)  # no atexit handlers, no buffers of the caller's flushed twice


def _end_with(parent: int) -> None:
    """Have the kernel kill this child when the command's process ends, however it ends (a
    SIGKILL or SIGTERM to the command alone runs none of its exit handlers)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # pynvml loads it in this process anyway

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the command ended before the request above took effect
        os._exit(1)
