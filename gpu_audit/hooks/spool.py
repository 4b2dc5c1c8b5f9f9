"""The hooks' state folder: the prolog's scan, kept for the epilog's diff.

It lives in a folder only the hook's user (root, under slurmd) may write: created ``0700`` when
missing (its parent must exist), and refused, with a one-line error, when it is a symbolic
link, not a folder, owned by another user, or writable by group or others; a record in it that
is a link or not a regular file of that user is refused too. A planted link cannot make the
hook read or overwrite another file.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from pathlib import Path

from gpu_audit.errors import InputError, UsageError

DEFAULT_SPOOL = Path("/var/spool/gpu-audit")
RECORD_LIMIT = 64 * 1024 * 1024
STALE_AFTER_S = 7 * 86400  # a prolog record whose epilog never came (a lost node) goes then
_JOB_ID = re.compile(r"[0-9]{1,20}(?:_[0-9]{1,10})?")


def open_spool(path: Path) -> Path:
    """``path``, created ``0700`` when missing, after checking that only we can write it."""
    path = Path(path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UsageError(f"spool folder {path}: cannot create it: {exc.strerror or exc}") \
            from None
    st = os.lstat(path)
    problem = None
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a folder"
    elif st.st_uid != os.geteuid():
        problem = f"is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    elif st.st_mode & 0o022:
        problem = f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    if problem:
        raise UsageError(f"spool folder {path} {problem}: refusing to keep hook state there")
    return path


def job_id(value: str | None) -> str:
    """A Slurm job id (``123`` or an array task's ``123_4``), checked before it names a file."""
    if value is None or not _JOB_ID.fullmatch(value.strip()):
        raise UsageError(f"SLURM_JOB_ID={value!r}: not a Slurm job id (the prolog and epilog "
                         "run with it set)")
    return value.strip()


def record_path(spool: Path, job: str) -> Path:
    return spool / f"prolog-{job}.json"


def read_record(path: Path) -> bytes | None:
    """The record's bytes; ``None`` when there is none. A link, or a file that is not ours or
    not regular, is an :class:`InputError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the prolog's record: {exc.strerror or exc}") \
            from None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise InputError(f"{path}: not a regular file of this user: refusing to read it")
        return handle.read(RECORD_LIMIT + 1)[:RECORD_LIMIT]


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def prune(spool: Path, now: float | None = None) -> list[Path]:
    """Remove hook records older than :data:`STALE_AFTER_S` (a job whose epilog never ran)."""
    now = time.time() if now is None else now
    removed = []
    for entry in spool.glob("*-*.json"):
        with contextlib.suppress(OSError):
            st = entry.lstat()
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > STALE_AFTER_S:
                entry.unlink()
                removed.append(entry)
    return removed
