"""Process and host figures read straight from Linux's ``/proc``, as psutil reads them.

A scan needs a handful of facts per GPU process (name, state, start, parent, owner, command
line, resident memory, listening ports) and a few host figures (memory, swap, boot time).
Importing psutil for them costs every scan more than all of the reading (some 55 million
instructions); on Linux they are read here instead, with psutil's exact rules (its
``_pslinux``): the same files, the same parsing, the same arithmetic and the same errors. Where
``/proc`` is not there (another system, a sandbox) the callers use psutil as before.

Every read is bounded and never blocks: files are opened without following a link and without
waiting (``O_NOFOLLOW | O_NONBLOCK``), small files are read up to :data:`MAX_PROC_FILE_BYTES` and a
command line up to :data:`MAX_CMDLINE_BYTES` (psutil reads it whole; Linux caps the argument
area at a quarter of the stack limit, unbounded with ``ulimit -s unlimited``, so a longer one is
cut there, possibly inside its last argument). ``/proc/net/tcp`` is streamed line by line.
"""

from __future__ import annotations

import errno
import os
import sys
from itertools import islice

from gpu_audit.bounds import (
    MAX_CMDLINE_BYTES,
    MAX_PROC_FDS,
    MAX_PROC_FILE_BYTES,
    MAX_PROC_STAT_BYTES,
)

PROC = "/proc"
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
    | getattr(os, "O_CLOEXEC", 0)
_ENCODING, _ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
# psutil's names for the state letters of /proc/PID/stat (any other letter is "?").
STATUSES = {
    "R": "running", "S": "sleeping", "D": "disk-sleep", "T": "stopped", "t": "tracing-stop",
    "Z": "zombie", "X": "dead", "x": "dead", "K": "wake-kill", "W": "waking", "I": "idle",
    "P": "parked",
}
_TCP_LISTEN = b"0A"


class Error(Exception):
    """What psutil's ``psutil.Error`` is: the process could not be looked at."""


class NoSuchProcess(Error):
    """The process is gone (or lives in another PID namespace)."""


class ZombieProcess(NoSuchProcess):
    """The process exited and was not reaped: what it no longer has cannot be read."""


class AccessDenied(Error):
    """The kernel refuses this file to this user."""


def usable(root: str = PROC) -> bool:
    """Whether ``root`` is a Linux ``/proc`` to read (else psutil answers)."""
    return sys.platform.startswith("linux") and os.path.exists(f"{root}/stat")


def read_bounded(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``, opened without following a link or blocking."""
    fd = os.open(path, _FLAGS)
    try:
        chunks, size = [], 0
        while size < limit:
            chunk = os.read(fd, min(limit - size, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def boot_time(root: str = PROC) -> float:
    """psutil's ``boot_time()``: the ``btime`` line of ``/proc/stat``."""
    for line in read_bounded(f"{root}/stat", MAX_PROC_STAT_BYTES).split(b"\n"):
        if line.startswith(b"btime"):
            return float(line.strip().split()[1])
    raise RuntimeError(f"line 'btime' not found in {root}/stat")


class BootClock:
    """The boot time, read once for all the processes of one scan (psutil reads it per call)."""

    def __init__(self, root: str = PROC) -> None:
        self.root = root
        self._boot: float | None = None

    def boot_time(self) -> float:
        if self._boot is None:
            self._boot = boot_time(self.root)
        return self._boot


class Process:
    """One process as psutil's ``Process`` sees it, for the calls a scan makes.

    Errors follow psutil's ``wrap_exceptions``: a refused file raises :class:`AccessDenied`; a
    missing one :class:`ZombieProcess` if the process is a zombie, :class:`NoSuchProcess` if its
    ``stat`` is gone too, else the plain ``OSError``.
    """

    def __init__(self, pid: int, root: str = PROC, clock: BootClock | None = None) -> None:
        self.pid, self.root, self._clock = pid, root, clock or BootClock(root)
        self._stat_fields: tuple[bytes, list[bytes]] | None = None
        if pid < 0 or pid > 0x7FFFFFFF:
            raise NoSuchProcess(pid)
        try:
            self._stat()  # psutil's constructor reads the start time: a gone PID fails here
        except AccessDenied:  # psutil goes on without it: each call then says so
            return

    def _path(self, name: str) -> str:
        return f"{self.root}/{self.pid}/{name}"

    def _read(self, name: str, limit: int = MAX_PROC_FILE_BYTES) -> bytes:
        try:
            return read_bounded(self._path(name), limit)
        except OSError as err:
            raise self._translated(err) from err

    def _translated(self, err: OSError) -> Exception:
        """psutil's ``wrap_exceptions``: the error a failed read of this process raises."""
        if isinstance(err, PermissionError):
            return AccessDenied(self.pid)
        if isinstance(err, (ProcessLookupError, FileNotFoundError)):
            if self._is_zombie():
                return ZombieProcess(self.pid)
            if isinstance(err, ProcessLookupError) or not os.path.exists(self._path("stat")):
                return NoSuchProcess(self.pid)
        return err

    def _is_zombie(self) -> bool:
        try:
            data = read_bounded(self._path("stat"), MAX_PROC_FILE_BYTES)
        except OSError:
            return False
        rpar = data.rfind(b")")
        return data[rpar + 2:rpar + 3] == b"Z"

    def _stat(self) -> tuple[bytes, list[bytes]]:
        if self._stat_fields is None:
            data = self._read("stat")
            rpar = data.rfind(b")")
            self._stat_fields = data[data.find(b"(") + 1:rpar], data[rpar + 2:].split()
        return self._stat_fields

    def name(self) -> str:
        """The kernel's name (``comm``, 15 characters at most), or the command's own file name
        where that name is a truncation of it, as psutil's ``name()`` reports it."""
        name = self._stat()[0].decode(_ENCODING, _ERRORS)
        if len(name) >= 15:
            try:
                cmdline = self.cmdline()
            except (AccessDenied, ZombieProcess):
                return name
            if cmdline:
                extended = os.path.basename(cmdline[0])
                if extended.startswith(name):
                    return extended
        return name

    def status(self) -> str:
        return STATUSES.get(self._stat()[1][0].decode(), "?")

    def ppid(self) -> int:
        return int(self._stat()[1][1])

    def create_time(self) -> float:
        # psutil: the start in clock ticks since boot, in seconds, plus the boot time
        return float(self._stat()[1][19]) / os.sysconf("SC_CLK_TCK") + self._clock.boot_time()

    def username(self) -> str:
        """The name of the real uid (``/proc/PID/status``), or the uid as text."""
        import pwd

        for line in self._read("status").split(b"\n"):
            if line.startswith(b"Uid:\t"):
                real = int(line.split(b"\t")[1])
                break
        else:
            raise IndexError("no Uid line")  # psutil fails the same way (its findall()[0])
        try:
            return pwd.getpwuid(real).pw_name
        except KeyError:
            return str(real)

    def cmdline(self) -> list[str]:
        """psutil's ``cmdline()``: NUL-separated (or space-separated after setproctitle)."""
        raw = self._read("cmdline", MAX_CMDLINE_BYTES)
        # psutil reads it in text mode: universal newlines turn \r\n and \r into \n
        data = raw.decode(_ENCODING, _ERRORS)
        if "\r" in data:
            data = data.replace("\r\n", "\n").replace("\r", "\n")
        if not data:
            if self._is_zombie():
                raise ZombieProcess(self.pid)
            return []
        sep = "\x00" if data.endswith("\x00") else " "
        if data.endswith(sep):
            data = data[:-1]
        args = data.split(sep)
        if sep == "\x00" and len(args) == 1 and " " in data:
            args = data.split(" ")
        return args

    def rss(self) -> int:
        """psutil's ``memory_info().rss``: the second figure of ``statm``, in pages."""
        fields = self._read("statm").split(b"\n", 1)[0].split()[:7]
        if len(fields) != 7:
            raise ValueError(f"{self._path('statm')}: {len(fields)} fields")
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")

    def listen_ports(self) -> list[int]:
        """The TCP ports this process listens on (IPv4 and IPv6), sorted: what psutil's
        ``net_connections("inet")`` gives with status LISTEN. UDP has no listening state."""
        try:
            inodes = self._socket_inodes()
            if not inodes:
                return []
            ports: set[int] = set()
            for table in ("tcp", "tcp6"):
                path = f"{self.root}/net/{table}"
                if table.endswith("6") and not os.path.exists(path):
                    continue
                ports.update(self._listening(path, inodes))
            os.stat(f"{self.root}/{self.pid}")  # psutil: gone by now is an error, not a list
        except OSError as err:
            raise self._translated(err) from err
        return sorted(ports)

    def _socket_inodes(self) -> set[bytes]:
        fd_dir = self._path("fd")
        entries = os.scandir(fd_dir)
        inodes: set[bytes] = set()
        with entries:
            names = [entry.name for entry in islice(entries, MAX_PROC_FDS)]
        for fd in names:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")  # the link's text; nothing is followed
            except (FileNotFoundError, ProcessLookupError):
                continue
            except OSError as err:
                if err.errno in (errno.EINVAL, errno.ENAMETOOLONG):
                    continue
                raise
            if target.startswith("socket:["):
                inodes.add(target[8:-1].encode())
        return inodes

    @staticmethod
    def _listening(path: str, inodes: set[bytes]) -> set[int]:
        ports: set[int] = set()
        with open(path, "rb", buffering=1 << 16) as table:  # streamed: a busy server's is big
            table.readline()
            for line in table:
                fields = line.split()
                if len(fields) < 10:
                    raise RuntimeError(f"error while parsing {path}; malformed line {line!r}")
                if fields[3] == _TCP_LISTEN and fields[9] in inodes:
                    port = int(fields[1].rpartition(b":")[2], 16)
                    if port:
                        ports.add(port)
        return ports


def read_memory(root: str = PROC) -> tuple[int, int, int, int, int, int] | None:
    """psutil's (``virtual_memory().total``, ``.available``, ``swap_memory().total``, ``.used``,
    ``.sin``, ``.sout``) from ``meminfo`` and ``vmstat``; ``None`` where psutil would take
    another route (an old kernel without MemAvailable, no swap lines, no vmstat counters), which
    the caller then asks psutil itself."""
    mems: dict[bytes, int] = {}
    for line in read_bounded(f"{root}/meminfo", MAX_PROC_FILE_BYTES).splitlines():
        fields = line.split()
        if len(fields) < 2:
            return None
        mems[fields[0]] = int(fields[1]) * 1024
    total, avail = mems.get(b"MemTotal:"), mems.get(b"MemAvailable:")
    swap_total, swap_free = mems.get(b"SwapTotal:"), mems.get(b"SwapFree:")
    if total is None or b"MemFree:" not in mems or not avail or swap_total is None \
            or swap_free is None:
        return None
    if avail > total:
        avail = mems[b"MemFree:"]  # psutil: a container's MemAvailable above its total
    swap_in = swap_out = None
    for line in read_bounded(f"{root}/vmstat", MAX_PROC_FILE_BYTES).split(b"\n"):
        if line.startswith(b"pswpin"):
            swap_in = int(line.split(b" ")[1]) * 4 * 1024
        elif line.startswith(b"pswpout"):
            swap_out = int(line.split(b" ")[1]) * 4 * 1024
        if swap_in is not None and swap_out is not None:
            return total, avail, swap_total, swap_total - swap_free, swap_in, swap_out
    return None
