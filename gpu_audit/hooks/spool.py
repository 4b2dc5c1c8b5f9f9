"""The hooks' state folder: the prolog's scan, kept for the epilog's diff.

It lives in a folder only the hook's user (root, under slurmd) may write: created ``0700`` when
missing (its parent must exist), and opened once through gpu-audit's trust rule
(:mod:`gpu_audit.trust`): every folder from ``/`` down to it owned by root or this user and
writable by nobody else, the spool itself not a link. Every record is then created, read,
renamed and pruned relative to the folder's descriptor, never by path again: renaming the spool
away and putting a link in its place changes nothing, and a record that is a link, a FIFO or
another user's file is refused at once, never followed, waited on or replaced through.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path

from gpu_audit.diff import DiffReport
from gpu_audit.diff.drain import node_problems
from gpu_audit.errors import InputError, UsageError
from gpu_audit.serial import dumps
from gpu_audit.trust import MissingFolder, StateDir

DEFAULT_SPOOL = Path("/var/spool/gpu-audit")
RECORD_LIMIT = 64 * 1024 * 1024
STALE_AFTER_S = 7 * 86400  # a prolog record whose epilog never came (a lost node) goes then
_JOB_ID = re.compile(r"[0-9]{1,20}(?:_[0-9]{1,10})?")
# What the hooks write into the spool (the only files prune may remove).
_RECORD = re.compile(r"(?:prolog|epilog)-[0-9]{1,20}(?:_[0-9]{1,10})?\.json")


def open_spool(path: Path) -> StateDir:
    """The spool folder ``path``, held open (created ``0700`` when missing), after the trust
    walk; :class:`UsageError` (exit 3) with the reason otherwise."""
    try:
        return StateDir.open(Path(path), create_mode=0o700)
    except MissingFolder as exc:
        raise UsageError(f"spool folder {path}: cannot create it: {exc.path} does not exist") \
            from None
    except InputError as exc:
        raise UsageError(f"spool folder: {exc}: refusing to keep hook state there") from None
    except OSError as exc:
        raise UsageError(f"spool folder {path}: cannot create it: {exc.strerror or exc}") \
            from None


def job_id(value: str | None) -> str:
    """A Slurm job id (``123`` or an array task's ``123_4``), checked before it names a file."""
    if value is None or not _JOB_ID.fullmatch(value.strip()):
        raise UsageError(f"SLURM_JOB_ID={value!r}: not a Slurm job id (the prolog and epilog "
                         "run with it set)")
    return value.strip()


def record_name(job: str) -> str:
    return f"prolog-{job}.json"


def diff_name(job: str) -> str:
    return f"epilog-{job}.json"


def keep_diff(spool: StateDir, job: str, report: DiffReport) -> str | None:
    """Keep the epilog's diff as ``epilog-<job>.json`` when it shows a node problem (a leak,
    a counter that went up, a GPU gone: something an admin reads it for), and return its name;
    ``None`` (nothing written) when it shows none, e.g. when the only problem is a scan finding
    the node had before the job too."""
    if not node_problems([*report.findings, *report.new_findings]):
        return None
    # rich loads only when the job left a problem to record (most epilogs have none).
    from gpu_audit.diff.render import diff_document

    name = diff_name(job)
    with _changing(spool, "write", name):
        spool.write_atomic(name, dumps(diff_document(report)) + "\n")
    return name


def keep_record(spool: StateDir, job: str, text: str) -> None:
    """Keep the prolog's scan for the epilog."""
    name = record_name(job)
    with _changing(spool, "write", name):
        spool.write_atomic(name, text)


@contextlib.contextmanager
def _changing(spool: StateDir, action: str, name: str) -> Iterator[None]:
    """A spool that refuses a change (a read-only disk, an immutable folder, a full disk) is
    bad input to the hook: :class:`UsageError` (exit 3) naming the folder, never a crash."""
    try:
        yield
    except OSError as exc:
        raise UsageError(f"spool folder {spool.path}: cannot {action} {name}: "
                         f"{exc.strerror or exc}") from None


def read_record(spool: StateDir, job: str) -> bytes | None:
    """The prolog's record for ``job``; ``None`` when there is none. A link, a FIFO, or a file
    that is not a private regular file of this user (or root) is an :class:`InputError`."""
    name = record_name(job)
    try:
        return spool.read(name, limit=RECORD_LIMIT)
    except InputError as exc:
        raise InputError(f"cannot read the prolog's record: {exc}") from None


def remove(spool: StateDir, job: str) -> None:
    with _changing(spool, "remove", record_name(job)):
        spool.unlink(record_name(job))


def prune(spool: StateDir, now: float | None = None) -> list[str]:
    """Remove hook records older than :data:`STALE_AFTER_S` (a job whose epilog never ran);
    only regular files named as the hooks name them, never through a link."""
    now = time.time() if now is None else now
    removed = []
    for name, st in spool.regular_files():
        if _RECORD.fullmatch(name) and now - st.st_mtime > STALE_AFTER_S:
            try:
                spool.unlink(name)
            except OSError:
                continue
            removed.append(name)
    return sorted(removed)
