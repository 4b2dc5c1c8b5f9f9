"""Every process a command started, found wherever it went, and ended with its stage.

Found three ways, and remembered while the stage runs (a process that has left the tree is
still known):

- registration: each Python the command starts writes ``<streams>/proc-<pid>.txt`` as it starts
  (:mod:`.hook`), forked children included;
- the process tree: the command's process and its descendants, walked by the outside sampler;
- sessions: the supervisor's own session (the runner starts it in one of its own, and the
  command runs in it) and every session one of the command's processes created (torchrun's
  ranks, a daemon's ``setsid``), whatever the parent of its processes is now (PID 1 included).

Only a process of this user that started no earlier than the command is ever signalled, never
by name, never the supervisor or one of its ancestors; a pid remembered is checked against its
start time before it is signalled (pids are reused). :meth:`CommandProcesses.end` sends SIGTERM,
waits a grace period, then sends SIGKILL, and lists what it ended (for the report).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import threading
import time
from dataclasses import dataclass
from typing import Any

from gpu_audit.redact import redact_text
from gpu_audit.validate.script.hook import PROC_PREFIX, PROC_SUFFIX

MAX_PROC_FILE_BYTES = 1024 * 1024  # of a registration file read at a time: its dumps included
MAX_PROC_FILES = 4096
COMMAND_CHARS = 200  # of a process's command line kept in the report
_OPEN_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
               | getattr(os, "O_NOCTTY", 0))
_PROC_NAME = re.compile(rf"^{PROC_PREFIX}(\d+){re.escape(PROC_SUFFIX)}$")
HOW = {"registered": "registered by the gpu-audit hook as it started",
       "tree": "in the command's process tree", "session": "in a session the command started"}


@dataclass
class Known:
    create_time: float
    how: str  # a key of HOW
    rank: int | None = None


class CommandProcesses:
    """The command's processes (see the module's docstring). ``folder_fd``: the streams
    folder, where the registrations are; ``None``: tree and sessions only."""

    def __init__(self, root_pid: int, folder_fd: int | None, subreaper: bool = False,
                 existing: set[int] | None = None) -> None:
        """``existing``: the pids there were before the command started (:func:`snapshot`),
        never the command's."""
        import psutil

        self.root_pid = root_pid
        self.folder_fd = folder_fd
        self.me = os.getpid()
        self.uid = os.getuid()
        self.lock = threading.Lock()
        self.known: dict[int, Known] = {}
        self.sessions: set[int] = set()
        if os.getsid(0) == self.me:  # the runner made this session for the stage
            self.sessions.add(self.me)
        self.excluded = _ancestors() | (existing or set())
        self.registrations: dict[int, int] = {}  # pid -> bytes of its file read so far
        self.subreaper = subreaper  # see become_subreaper(), called before the command began
        try:
            self.since = psutil.Process(root_pid).create_time()
        except psutil.Error:  # gone already: its descendants are not older than now
            self.since = time.time()
        self.excluded.discard(root_pid)
        self.note(root_pid, "tree")

    # -- finding them -----------------------------------------------------------------------

    def note(self, pid: int, how: str, rank: int | None = None) -> bool:
        """Remember ``pid`` when it is one the command may have started; whether it was."""
        import psutil

        if pid in self.excluded or pid <= 1:
            return False
        with self.lock:
            if pid in self.known:
                if rank is not None:
                    self.known[pid].rank = rank
                if how == "registered":  # the surest account wins, whichever look came first
                    self.known[pid].how = how
                return True
        try:
            proc = psutil.Process(pid)
            created = proc.create_time()
            if proc.uids().real != self.uid or created < self.since:
                return False
        except psutil.Error:
            return False
        with self.lock:
            self.known.setdefault(pid, Known(created, how, rank))
        return True

    def note_tree(self) -> list[Any]:
        """The command's process and its descendants now (remembered); the processes."""
        import psutil

        try:
            # With the supervisor a subreaper, what the command orphaned is its child.
            top = psutil.Process(self.me if self.subreaper else self.root_pid)
            tree = [proc for proc in top.children(recursive=True)]
        except psutil.Error:
            return []
        for proc in tree:
            if self.note(proc.pid, "tree") and self.subreaper and proc.pid != self.root_pid:
                _reap(proc)
        return tree

    def read_registrations(self) -> list[int]:
        """New ``proc-<pid>.txt`` files: the pids they register (those remembered)."""
        new: list[int] = []
        for name, pid in self._proc_files():
            if pid in self.registrations:
                continue
            text = self._read(name, 0, 4096)
            self.registrations[pid] = 0
            first = text.split("\n", 1)[0]
            try:
                facts = json.loads(first)
            except ValueError:
                continue
            if not isinstance(facts, dict) or facts.get("pid") != pid:
                continue
            rank = facts.get("rank") if type(facts.get("rank")) is int else None
            if self.note(pid, "registered", rank):
                new.append(pid)
                sid = facts.get("sid")
                if sid == pid:
                    with self.lock:
                        self.sessions.add(pid)
        return new

    def rss_peaks(self) -> dict[int, int]:
        """The peak resident memory each registered Python wrote as it exited, by pid."""
        peaks: dict[int, int] = {}
        for name, pid in self._proc_files():
            for line in self._read(name, 0, MAX_PROC_FILE_BYTES).splitlines():
                if line.startswith('{"ev":"exit"'):
                    with contextlib.suppress(ValueError, TypeError):
                        peak = json.loads(line).get("rss_peak_bytes")
                        if type(peak) is int and 0 < peak < 2**62:
                            peaks[pid] = max(peaks.get(pid, 0), peak)
        return peaks

    def alive(self) -> list[Any]:
        """Every process of the command still running (see the module's docstring)."""
        import psutil

        self.read_registrations()
        self.note_tree()
        with self.lock:
            # A session's id is its leader's pid, not reused while the session lasts: one a
            # process of the command created is the command's, its leader gone or not.
            leaders = set(self.known) | self.sessions
            known = dict(self.known)
        found: dict[int, Any] = {}
        for pid, facts in known.items():
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == facts.create_time and proc.status() != "zombie":
                    found[pid] = proc
        for proc in psutil.process_iter():
            if proc.pid in found or proc.pid in self.excluded or proc.pid <= 1:
                continue
            if _sid(proc.pid) in leaders and self.note(proc.pid, "session"):
                with contextlib.suppress(psutil.Error):
                    if proc.status() != "zombie":
                        found[proc.pid] = proc
        return list(found.values())

    # -- signals ------------------------------------------------------------------------------

    def send(self, signum: int, procs: list[Any] | None = None) -> list[Any]:
        """``signum`` to each of ``procs`` (every process of the command still running when
        ``None``); the processes it was sent to."""
        procs = self.alive() if procs is None else procs
        for proc in procs:
            with contextlib.suppress(Exception):
                proc.send_signal(signum)
        return procs

    def terminate(self, exclude: int | None = None) -> list[dict[str, Any]]:
        """SIGTERM to every process of the command still running; those but ``exclude`` (the
        command's own process), described."""
        procs = self.alive()
        described = [{**self._describe(proc), "signal": "SIGTERM"} for proc in procs
                     if proc.pid != exclude]
        self.send(signal.SIGTERM, procs)
        return described

    def end(self, grace_s: float) -> list[dict[str, Any]]:
        """SIGTERM to every process of the command still running, SIGKILL to those still
        there after ``grace_s``; what was ended, one entry each (pid, redacted command line,
        how it was found, the signal that ended it)."""
        import psutil

        procs = self.alive()
        if not procs:
            return []
        described = {proc.pid: self._describe(proc) for proc in procs}
        self.send(signal.SIGTERM, procs)
        _, stubborn = psutil.wait_procs(procs, timeout=grace_s)
        for proc in stubborn:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(stubborn, timeout=grace_s)
        killed = {proc.pid for proc in stubborn}
        return [{**described[proc.pid], "signal": "SIGKILL" if proc.pid in killed else "SIGTERM"}
                for proc in procs]

    def kill(self, exclude: int | None = None) -> list[dict[str, Any]]:
        """SIGKILL to every process of the command still running (the grace period after
        SIGTERM is over); those but ``exclude`` (the command's own process), described."""
        import psutil

        procs = self.alive()
        described = [{**self._describe(proc), "signal": "SIGKILL"} for proc in procs
                     if proc.pid != exclude]
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        return described

    def _describe(self, proc: Any) -> dict[str, Any]:
        import psutil

        try:
            words = proc.cmdline() or [proc.name()]
        except psutil.Error:
            words = ["?"]
        command = redact_text(" ".join(words))
        if len(command) > COMMAND_CHARS:
            command = command[:COMMAND_CHARS] + "…"
        facts = self.known.get(proc.pid)
        return {"pid": proc.pid, "command": command,
                "found": facts.how if facts else "session",
                "rank": facts.rank if facts else None}

    # -- stacks -------------------------------------------------------------------------------

    def stack_offsets(self) -> dict[int, int]:
        """How much of each registration file there is now (the dumps that follow are new)."""
        return {pid: self._size(name) for name, pid in self._proc_files()}

    def stacks_since(self, offsets: dict[int, int]) -> list[dict[str, Any]]:
        """Each registered process's stack dump written since ``offsets``: its pid, rank and
        the dump's text, rank 0 first, then the other ranks, then processes without a rank."""
        dumps = []
        for name, pid in self._proc_files():
            text = self._read(name, offsets.get(pid, 0), MAX_PROC_FILE_BYTES)
            dump = "\n".join(line for line in text.splitlines() if not line.startswith("{"))
            if "(most recent call first)" in dump:
                facts = self.known.get(pid)
                dumps.append({"pid": pid, "rank": facts.rank if facts else None, "text": dump})
        dumps.sort(key=lambda d: (d["rank"] is None, d["rank"] or 0, d["pid"]))
        return dumps

    # -- the registration files ----------------------------------------------------------------

    def _proc_files(self) -> list[tuple[str, int]]:
        if self.folder_fd is None:
            return []
        try:
            names = os.listdir(self.folder_fd)
        except OSError:
            return []
        found = [(name, int(match[1])) for name in names if (match := _PROC_NAME.match(name))]
        return sorted(found)[:MAX_PROC_FILES]

    def _size(self, name: str) -> int:
        try:
            info = os.stat(name, dir_fd=self.folder_fd, follow_symlinks=False)
        except OSError:
            return 0
        return info.st_size if stat.S_ISREG(info.st_mode) else 0

    def _read(self, name: str, offset: int, limit: int) -> str:
        """Up to ``limit`` bytes of a registration file from ``offset`` (its last ``limit``
        bytes when more): only a regular file of this user with one link is read, opened
        without following a link or waiting for a writer (as the streams are)."""
        try:
            before = os.stat(name, dir_fd=self.folder_fd, follow_symlinks=False)
            if not _readable(before):
                return ""
            fd = os.open(name, _OPEN_FLAGS, dir_fd=self.folder_fd)
        except OSError:
            return ""
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino) \
                    or not _readable(info):
                return ""
            start = max(offset, info.st_size - limit)
            return os.pread(fd, limit, start).decode("utf-8", "replace")
        except OSError:
            return ""
        finally:
            os.close(fd)


def snapshot() -> set[int]:
    """The pids of every process now (taken before the command starts)."""
    import psutil

    try:
        return set(psutil.pids())
    except (psutil.Error, OSError):
        return set()


def become_subreaper() -> bool:
    """Make this process the one a descendant's orphans are given to (Linux's
    ``PR_SET_CHILD_SUBREAPER``), so a daemon the command starts stays in its tree; whether it
    is. Called before the command starts; a no-op elsewhere."""
    if not os.path.exists("/proc/self"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _reap(proc: Any) -> None:
    """An orphan given to this process that has ended: its exit status collected."""
    import psutil

    with contextlib.suppress(psutil.Error, OSError):
        if proc.ppid() == os.getpid() and proc.status() == psutil.STATUS_ZOMBIE:
            os.waitpid(proc.pid, os.WNOHANG)


def _readable(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and info.st_nlink == 1


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _ancestors() -> set[int]:
    """This process and its ancestors: never ended, whatever a registration claims."""
    import psutil

    pids = {os.getpid(), 0, 1}
    with contextlib.suppress(psutil.Error):
        pids |= {proc.pid for proc in psutil.Process().parents()}
    return pids


def ended_sentence(ended: list[dict[str, Any]]) -> str:
    """The stage's warning about the processes it had to end."""
    shown = "; ".join(
        f"pid {e['pid']}" + (f" (rank {e['rank']})" if e.get("rank") is not None else "")
        + f" {e['command']!r}, {HOW.get(e['found'], e['found'])}, ended by {e['signal']}"
        for e in ended[:10])
    more = f"; and {len(ended) - 10} more" if len(ended) > 10 else ""
    return (f"gpu-audit ended {len(ended)} process{'' if len(ended) == 1 else 'es'} of the command "
            "besides its main one, still running as the stage ended (report.json: the stage's "
            f"worker.ended_processes): {shown}{more}")
