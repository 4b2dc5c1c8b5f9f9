"""The publication: one small JSON file per monitored process, in a per-user runtime folder.

Shared by the writer (:mod:`gpu_audit.monitor.core`) and the reader
(:mod:`gpu_audit.collect.monitor_files`) so both agree on where the files live, how a folder is
judged private, and how a process is identified across PID reuse.

Location: ``$GPU_AUDIT_RUNTIME_DIR`` when set; otherwise ``$XDG_RUNTIME_DIR/gpu-audit`` and
``/tmp/gpu-audit-<uid>`` (the writer uses the first that works, the reader looks in both, since
a job started from cron has no ``XDG_RUNTIME_DIR`` while a login shell does). The folder must be
a real directory (not a symlink) owned by the user with mode 0700; files are ``<pid>.json``,
mode 0600, replaced atomically.

A process is identified by its PID plus its start time in clock ticks since boot
(``/proc/<pid>/stat`` field 22), which is exact and survives clock changes; ``create_time``
(seconds since the epoch, as psutil computes it) is the fallback where ``/proc`` is missing.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

import msgspec

from gpu_audit.lazy import regex

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = "gpu-audit.monitor/1"
SCHEMA_KIND = "gpu-audit.monitor/"
SCHEMA_MAJOR = 1
DEFAULT_INTERVAL_S = 5.0  # seconds between publications
ENV_RUNTIME_DIR = "GPU_AUDIT_RUNTIME_DIR"
FILE_NAME = regex(r"^(?P<pid>[1-9][0-9]{0,9})\.json$")
MAX_FILE_BYTES = 256 * 1024  # a publication is a few KiB; anything larger is not ours
CREATE_TIME_TOLERANCE_S = 2.0  # psutil's create_time moves with the boot-time estimate

# The sane range of each figure a publication states. The reader drops a figure outside it as
# malformed (and says so), so a corrupt or hostile file never shows ``inf%``, negative bytes or
# 9e27 TiB in a report. Byte counts: 1 EiB is far beyond any GPU's or host's memory.
MAX_PUBLISHED_BYTES = 2**60
MAX_PUBLISHED_COUNT = 2**63 - 1  # torch's allocator counters are int64
INTERVAL_RANGE_S = (0.01, 3600.0)  # what the writer accepts for interval_s
# Figures that are counts or indices (the others are named by their ending: _bytes, _pct, _s).
COUNT_FIELDS = frozenset({
    "index", "step", "sequence", "start_ticks", "segments", "allocations",
    "inactive_split_blocks", "oversize_allocations", "oversize_segments", "num_alloc_retries",
    "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
})


def figure_problem(name: str, value: object) -> str | None:
    """Why ``value`` is no sane figure for the published field ``name``: ``None`` when it is
    one, is unset (``None``), or ``name`` is not a figure (a UUID, a name, a time)."""
    if value is None:
        return None
    if name.endswith("_bytes"):
        return _whole_problem(value, MAX_PUBLISHED_BYTES, "2**60 (1 EiB)", "a byte count")
    if name in COUNT_FIELDS:
        return _whole_problem(value, MAX_PUBLISHED_COUNT, "2**63 - 1", "a count")
    if name.endswith("_pct"):
        return _number_problem(value, 0.0, 100.0, "a percentage")
    if name == "interval_s":
        return _number_problem(value, *INTERVAL_RANGE_S, "an interval in seconds")
    if name == "create_time_s":
        return _number_problem(value, 0.0, float(MAX_PUBLISHED_COUNT), "a time in seconds")
    return None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:24]}…"


def _whole_problem(value: object, high: int, high_text: str, what: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"{_shown(value)} is not {what}"
    return None if 0 <= value <= high else f"{_shown(value)} is outside 0 to {high_text}"


def _number_problem(value: object, low: float, high: float, what: str) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{_shown(value)} is not {what}"
    # A NaN fails both comparisons; an int too large for a float compares exactly.
    return None if low <= value <= high else f"{_shown(value)} is outside {low:g} to {high:g}"


def runtime_dir_candidates(environ: dict[str, str] | None = None) -> list[Path]:
    """Where publications may live for this user, most specific first."""
    from pathlib import Path  # here: a plain scan only asks whether they exist

    return [Path(folder) for folder in _candidate_folders(environ)]


def _candidate_folders(environ: dict[str, str] | None = None) -> list[str]:
    """:func:`runtime_dir_candidates` as plain strings."""
    env = os.environ if environ is None else environ
    override = env.get(ENV_RUNTIME_DIR)
    if override:
        return [override]
    if not hasattr(os, "geteuid"):
        return []  # no per-user ownership to rely on (Windows): publication is off
    candidates = []
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        candidates.append(os.path.join(xdg, "gpu-audit"))
    candidates.append(f"/tmp/gpu-audit-{os.geteuid()}")
    return candidates


def private_dir_problem(path: Path) -> str | None:
    """Why ``path`` is not a folder we may trust (``None`` when it is): never follows a symlink."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be examined: {exc.strerror or exc}"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link"
    return folder_status_problem(info)


def no_runtime_dir() -> bool:
    """True when none of this user's runtime folders exists, so there is nothing to read (the
    reader, :mod:`gpu_audit.collect.monitor_files`, need not even be imported). A folder that
    cannot be examined counts as existing: the reader reports why it could not look."""
    try:
        return all(private_dir_problem(path) == "does not exist"
                   for path in _candidate_folders())
    except Exception:  # let the reader say what went wrong
        return False


def folder_status_problem(info: os.stat_result) -> str | None:
    """Why a folder with this status is not private to us: a directory we own, mode 0700."""
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"belongs to uid {info.st_uid}, not to this user (uid {os.geteuid()})"
    if info.st_mode & 0o077:
        return f"has mode {stat.S_IMODE(info.st_mode):04o}; it must be 0700"
    return None


def ensure_private_dir(path: Path) -> str | None:
    """Create ``path`` with mode 0700 if missing; ``None`` when it is usable, else why not."""
    created = False
    try:
        os.mkdir(path, 0o700)
        created = True
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot be created: {exc.strerror or exc}"
    if created:
        try:
            os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
        except OSError as exc:
            return f"cannot be made private: {exc.strerror or exc}"
    return private_dir_problem(path)


def publication_dir(environ: dict[str, str] | None = None) -> tuple[Path | None, list[str]]:
    """The folder the writer uses, or ``None`` plus the reason each candidate was refused."""
    problems = []
    for candidate in runtime_dir_candidates(environ):
        if not candidate.parent.is_dir():
            problems.append(f"{candidate}: its parent folder does not exist")
            continue
        problem = ensure_private_dir(candidate)
        if problem is None:
            return candidate, problems
        problems.append(f"{candidate} {problem}")
    if not problems:
        problems.append("this platform has no per-user file ownership")
    return None, problems


class ProcessIdentity(msgspec.Struct, frozen=True):
    pid: int
    start_ticks: int | None  # /proc/<pid>/stat field 22: clock ticks after boot
    create_time: float | None  # seconds since the epoch


def _start_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall; field 3 (state) is index 0 here
    except (IndexError, ValueError):
        return None


def process_identity(pid: int) -> ProcessIdentity | None:
    """How to recognise ``pid`` later, or ``None`` when no such process exists (now)."""
    ticks = _start_ticks(pid)
    try:
        import psutil

        create_time = psutil.Process(pid).create_time()
    except Exception:  # NoSuchProcess, AccessDenied, ZombieProcess, or no psutil at all
        create_time = None
        if ticks is None and not _pid_exists(pid):
            return None
    return ProcessIdentity(pid, ticks, create_time)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it is just not ours
    except OSError:
        return False
    return True


def same_process(published: ProcessIdentity, live: ProcessIdentity) -> bool:
    """Whether a live PID is still the process that published (not a reused PID)."""
    if published.start_ticks is not None and live.start_ticks is not None:
        return published.start_ticks == live.start_ticks
    if published.create_time is not None and live.create_time is not None:
        return abs(published.create_time - live.create_time) <= CREATE_TIME_TOLERANCE_S
    return False  # nothing to compare: cannot rule out a reused PID, so do not trust it


def pid_namespace() -> str | None:
    """``pid:[4026531836]``: publications from another PID namespace name PIDs we cannot see."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
