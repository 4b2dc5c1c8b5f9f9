"""A validation run on disk: its folder, plan, state, per-cycle log, checkpoints and lock.

``reports/runs/<run-id>/`` holds:

- ``plan.json``: the checked plan (written once);
- ``state.json``: each stage's status, rewritten atomically as the run moves on;
- ``cycles.jsonl``: one JSON line per cycle, append-only, flushed per cycle, fsynced at least
  once a second and always before a checkpoint claims the cycles it covers;
- ``checkpoints/<variant>.<stage>.ckpt``: the workload's state and the cycle to resume at,
  written atomically every 10% of a stage (:mod:`gpu_audit.validate.checkpoints`);
- ``logs/<variant>.<stage>.log``: the worker's stderr;
- the report, its JSON twin and its plots.

Resuming never loses or double-counts a cycle. A checkpoint saying "resume at cycle c" is written
only after the records of cycles < c are on disk. Every attempt of a stage appends a
``stage-start`` marker naming the cycle it starts from (c on resume, from the checkpoint):
records of that stage with ``cycle >= c`` written before the marker are superseded (the workload
state they came from is gone), and the re-run cycles replace them.
Readers apply markers in file order, so the log stays append-only and still reads consistently.
A line torn by ``kill -9`` mid-write is cut off by the next writer before it appends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import logging
import os
import re
import secrets
import socket
import time
from pathlib import Path
from typing import Any

import msgspec

from gpu_audit.errors import InputError, UsageError
from gpu_audit.serial import dumps, from_jsonable
from gpu_audit.trust import MissingFolder, StateDir
from gpu_audit.units import utc_now, utc_stamp
from gpu_audit.validate.checkpoints import (  # noqa: F401 - where the run's files are read
    CHECKPOINT_FORMAT,
    Checkpoint,
    CheckpointWriter,
    capture_rng,
    checkpoint_bytes,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from gpu_audit.validate.plan import Plan

LOG = logging.getLogger("gpu_audit.validate")
STATE_SCHEMA = "gpu-audit.validate-state/1"
PLAN_SCHEMA = "gpu-audit.validate-plan/1"
FSYNC_INTERVAL_S = 1.0
# The per-cycle log read back on resume and for the report: 500 cycles take well under 1 MiB.
CYCLE_LOG_LIMIT = 256 * 1024**2

try:  # POSIX; elsewhere runs are not locked against a second runner
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


# "No space left on device" and "disk quota exceeded": the run stops and resumes once freed.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# Failures a resume cannot change once every cycle of the stage is logged: the verdict on them.
FINAL_FAILURES = frozenset({"gate"})


def disk_full_reason(what: str, exc: OSError) -> str:
    where = f" ({exc.filename})" if exc.filename else ""
    return (f"cannot {what}: {exc.strerror or exc}{where}; free some space and continue with "
            "--resume RUN (every cycle logged so far is kept)")


def can_resume(leg: LegState, planned_cycles: int) -> bool:
    """Whether ``--resume`` would run or finish this stage again (not: it passed, or it failed
    on its merits with every cycle done)."""
    if leg.status == "passed":
        return False
    if leg.status == "failed" and leg.failure in FINAL_FAILURES:
        return not (planned_cycles > 0 and leg.cycles_done >= planned_cycles)
    return leg.status != "skipped"


def new_run_id(now: dt.datetime | None = None, host: str | None = None) -> str:
    """``20261122T101500Z-myhost-3fa2``: sortable, unique, safe as a folder name."""
    stamp = utc_stamp(now)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", host or socket.gethostname()) or "host"
    return f"{stamp}-{name}-{secrets.token_hex(2)}"


def leg_file(key: str) -> str:
    """``max-split-128/full`` -> ``max-split-128.full`` (a file-name stem)."""
    return key.replace("/", ".")


class LegState(msgspec.Struct):
    """How one (variant, stage) pair stands."""

    status: str = "pending"  # pending, running, passed, failed, interrupted, skipped
    attempts: int = 0
    reason: str | None = None
    failure: str | None = None  # import, cuda, oom, hang, crash, error, gate
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    worker_pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    cycles_done: int = 0
    ready: dict[str, Any] = msgspec.field(default_factory=dict)  # what the worker found first
    # memory at OOM, traceback...
    failure_detail: dict[str, Any] = msgspec.field(default_factory=dict)
    stderr_tail: str | None = None
    explanation: list[dict[str, Any]] = msgspec.field(default_factory=list)
    # os.getloadavg() (1, 5, 15 min) when the stage's last attempt started and ended
    load_avg: dict[str, list[float] | None] = msgspec.field(default_factory=dict)


class DeviceChoice(msgspec.Struct):
    requested: str
    resolved: str | None = None  # "cpu" or "cuda:N"
    name: str | None = None
    total_memory_bytes: int | None = None
    free_memory_bytes: int | None = None
    fallback_reason: str | None = None
    candidates: list[dict[str, Any]] = msgspec.field(default_factory=list)


class RunState(msgspec.Struct):
    run_id: str
    status: str  # running, passed, failed, interrupted
    started_at: str
    device: DeviceChoice
    legs: dict[str, LegState]
    updated_at: str | None = None
    finished_at: str | None = None
    resumes: int = 0
    exit_code: int | None = None
    hostname: str | None = None
    schema: str = STATE_SCHEMA


class PlanDocument(msgspec.Struct):
    """``plan.json``: the checked plan a run follows, read back on resume."""

    schema: str
    plan: Plan


class RunDir:
    """Paths and file access for one run folder.

    What the run reads back as a decision (its plan, which names the command a resume executes;
    its state; its cycle log; its checkpoints) is read through gpu-audit's trust rule
    (:mod:`gpu_audit.trust`): the folder is opened once, from ``/`` down, each folder owned by
    this user or root and writable by nobody else, and those files are read and written
    relative to its descriptor, never through a link. A run folder another user could change is
    refused (exit 3) before anything in it is read.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._folder: StateDir | None = None

    @property
    def run_id(self) -> str:
        return self.path.name

    plan_path = property(lambda self: self.path / "plan.json")
    state_path = property(lambda self: self.path / "state.json")
    cycles_path = property(lambda self: self.path / "cycles.jsonl")
    lock_path = property(lambda self: self.path / ".lock")

    @property
    def folder(self) -> StateDir:
        """The run folder, opened through the trust walk on first use and then held for the
        life of the process (one descriptor, closed on exec)."""
        if self._folder is None:
            self._folder = StateDir.open(self.path)
        return self._folder

    def checkpoint_path(self, key: str) -> Path:
        return self.path / "checkpoints" / f"{leg_file(key)}.ckpt"

    def log_path(self, key: str) -> Path:
        return self.path / "logs" / f"{leg_file(key)}.log"

    def scratch_dir(self, key: str) -> Path:
        return self.path / "scratch" / leg_file(key)

    def remove_empty_scratch(self) -> None:
        """Drop the stages' scratch folders the workload left empty (and ``scratch/`` itself)."""
        root = self.path / "scratch"
        for folder in sorted(root.glob("*"), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty: the workload's own files stay
        with contextlib.suppress(OSError):
            root.rmdir()

    def write_plan(self, plan: Plan) -> None:
        self.folder.write_atomic("plan.json", dumps(PlanDocument(schema=PLAN_SCHEMA, plan=plan))
                                 + "\n", mode=0o644)

    def read_plan(self) -> Plan:
        data = self._read_json("plan.json")
        if data.get("schema") != PLAN_SCHEMA:
            raise InputError(f"{self.plan_path}: not a gpu-audit validation plan "
                             f"(schema {data.get('schema')!r})")
        return from_jsonable(Plan, data["plan"], where=str(self.plan_path))

    def write_state(self, state: RunState) -> None:
        state.updated_at = utc_now()
        self.folder.write_atomic("state.json", dumps(state) + "\n", mode=0o644)

    def read_state(self) -> RunState:
        data = self._read_json("state.json")
        if data.get("schema") != STATE_SCHEMA:
            raise InputError(f"{self.state_path}: not a gpu-audit validation state "
                             f"(schema {data.get('schema')!r})")
        return from_jsonable(RunState, data, where=str(self.state_path))

    def _read_json(self, name: str) -> dict[str, Any]:
        data = self.folder.read_json(name)
        if data is None:
            raise InputError(f"{self.path / name}: missing; this is not a complete validation "
                             "run folder")
        if not isinstance(data, dict):
            raise InputError(f"{self.path / name}: expected a JSON object")
        return data


def find_run(spec: str, out: Path) -> RunDir:
    """``--resume RUN``: a run id under ``<out>/runs/`` or a path to a run folder, refused when
    another user could have changed it (:class:`RunDir`)."""
    candidates = [Path(spec), out / "runs" / spec]
    for path in candidates:
        if (path / "plan.json").exists() or (path / "plan.json").is_symlink():
            run = RunDir(path)
            try:
                run.folder.read("plan.json")  # the walk, and the plan judged, before anything
            except InputError as exc:
                raise InputError(f"--resume {spec}: {exc}; refusing to resume a run folder "
                                 "someone else could change: copy what you need and start a "
                                 "new run") from None
            return run
    runs = sorted(p.name for p in (out / "runs").glob("*") if (p / "plan.json").is_file()) \
        if (out / "runs").is_dir() else []
    hint = f" (runs under {out / 'runs'}: {', '.join(runs[-5:])})" if runs else ""
    raise UsageError(f"--resume {spec!r}: no validation run found there{hint}")


class RunLock:
    """An exclusive lock on a run folder, held by the runner and inherited by its worker.

    The worker inherits the locked file descriptor, so a worker still finishing after its runner
    was killed keeps the run locked, and a resume waits for it instead of racing it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait_s: float = 30.0) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_s
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if fcntl is None:
                self.fd = fd
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if self._still_the_lock_file(fd):
                    self.fd = fd
                    return
                os.close(fd)  # its holder finished and removed it: lock the new one
                continue
            except OSError:
                os.close(fd)
                if time.monotonic() >= deadline:
                    raise UsageError(
                        f"run {self.path.parent.name} is in use by another gpu-audit process "
                        f"(its lock {self.path} is held); wait for it to finish or stop it"
                    ) from None
                time.sleep(0.2)

    def _still_the_lock_file(self, fd: int) -> bool:
        """Whether ``fd`` is the file at :attr:`path` (a finished run removes its lock file)."""
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            return False

    def release(self, *, remove: bool = False) -> None:
        """Let go of the lock; ``remove`` deletes the lock file first, for a run whose worker
        has ended (a worker still holding the inherited lock must keep its file)."""
        if self.fd is not None:
            if remove:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


class CycleLog:
    """The append-only per-cycle log, written by one worker at a time.

    Each record is written and flushed at once, so a killed process loses nothing: the kernel
    has it. fsync, which costs a few hundred microseconds to milliseconds, runs at most once a
    second from :meth:`append`, and always in :meth:`sync`, which the worker calls before every
    checkpoint: the records a checkpoint vouches for are on disk before it is, and records after
    the last checkpoint are re-run on resume anyway. (Not a background fsync thread: waking a
    thread every cycle costs the cycle loop a GIL hand-over of up to 5 ms.)
    """

    def __init__(self, path: Path, fsync_interval_s: float = FSYNC_INTERVAL_S) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(path)
        self._file = open(path, "ab")  # noqa: SIM115 - lives as long as the log
        self._interval = fsync_interval_s
        self._synced_at = time.monotonic()

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, separators=(",", ":"), allow_nan=False,
                          default=_json_default).encode("utf-8") + b"\n"
        self._file.write(line)
        self._file.flush()
        now = time.monotonic()
        if now - self._synced_at >= self._interval:
            os.fsync(self._file.fileno())
            self._synced_at = now

    def supersede(self, leg: str, marker: dict[str, Any]) -> None:
        """Append ``marker`` (``leg``'s ``stage-start`` or ``resume`` record, from cycle
        ``from_cycle`` on), first taking out of the file the records of ``leg`` it supersedes
        (that cycle and later ones): the file keeps one record per cycle, and not only once
        :func:`load_records` has applied the markers. The one writer is this process."""
        self._file.flush()
        with StateDir.open(self.path.parent) as folder:
            raw = folder.read(self.path.name, limit=CYCLE_LOG_LIMIT) or b""
            kept, dropped = without_superseded(raw, leg, int(marker.get("from_cycle", 0)))
            if dropped:
                self._file.close()
                folder.write_atomic(self.path.name, kept, mode=0o644)
                self._file = open(self.path, "ab")  # noqa: SIM115 - lives as long as the log
        self.append(marker)

    def renumber(self, leg: str, attempt: int, by: int) -> None:
        """Move ``leg``'s cycle records of ``attempt`` (and its ``stage-start``) ``by`` cycles
        on: a command found to have resumed itself once it ended (see the script
        supervisor)."""
        self._file.flush()
        with StateDir.open(self.path.parent) as folder:
            raw = folder.read(self.path.name, limit=CYCLE_LOG_LIMIT) or b""
            lines = []
            for line in raw.splitlines(keepends=True):
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if isinstance(record, dict) and record.get("leg") == leg \
                        and record.get("attempt") == attempt:
                    if record.get("type") in ("cycle", "cycle-failed") \
                            and isinstance(record.get("cycle"), int):
                        record["cycle"] += by
                    elif record.get("type") == "stage-start":
                        record["from_cycle"] = by
                    line = json.dumps(record, separators=(",", ":"), allow_nan=False,
                                      default=_json_default).encode("utf-8") + b"\n"
                lines.append(line)
            self._file.close()
            folder.write_atomic(self.path.name, b"".join(lines), mode=0o644)
            self._file = open(self.path, "ab")  # noqa: SIM115 - lives as long as the log

    def sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())
        self._synced_at = time.monotonic()

    def close(self) -> None:
        if self._file.closed:
            return
        self._file.flush()
        with contextlib.suppress(OSError):
            os.fsync(self._file.fileno())
        self._file.close()


def repair_torn_tail(path: Path) -> int:
    """Cut a last line left unterminated by a kill mid-write; returns the bytes removed."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb+") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return 0
        keep = 0
        step = 65536
        position = size
        while position > 0:
            start = max(0, position - step)
            handle.seek(start)
            block = handle.read(position - start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            position = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return size - keep


def load_records(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Cycle records per leg, in cycle order, with resume markers applied."""
    legs: dict[str, dict[int, dict[str, Any]]] = {}
    try:
        folder = StateDir.open(path.parent)
    except MissingFolder:
        return {}
    with folder:
        raw = folder.read(path.name, limit=CYCLE_LOG_LIMIT)
    if raw is None:
        return {}
    lines = raw.split(b"\n")
    if lines and lines[-1] != b"":
        lines = lines[:-1]  # an unterminated (torn) last line is not a record
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            # Only a crash of the whole machine can leave this (a torn tail is cut on open);
            # the cycles around it are still good.
            LOG.warning("%s:%d: skipping a damaged line", path, number)
            continue
        kind = record.get("type")
        leg = record.get("leg")
        if not isinstance(leg, str):
            continue
        if kind in ("stage-start", "resume"):
            try:
                start = int(record.get("from_cycle", 0))
            except (TypeError, ValueError):
                continue
            kept = legs.get(leg, {})
            legs[leg] = {c: r for c, r in kept.items() if c < start}
        elif kind in ("cycle", "cycle-failed") and isinstance(record.get("cycle"), int):
            legs.setdefault(leg, {})[record["cycle"]] = record
    return {leg: [by_cycle[c] for c in sorted(by_cycle)] for leg, by_cycle in legs.items()}


def completed_cycles(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("type") == "cycle"]


def cycles_reached(records: list[dict[str, Any]]) -> int:
    """How far a stage got: one past its highest completed cycle. The same as the number of
    its records, but for a command that resumed itself at cycle N (its cycles are numbered
    from N, and those before it may have no record: see docs/validate-scripts.md)."""
    numbers = [r["cycle"] for r in records
               if r.get("type") == "cycle" and isinstance(r.get("cycle"), int)]
    return max(numbers) + 1 if numbers else 0


def without_superseded(raw: bytes, leg: str, start: int) -> tuple[bytes, int]:
    """``raw`` (a cycle log) without ``leg``'s cycle records from cycle ``start`` on, and how
    many were taken out; a line that is not a record is kept as it is."""
    kept: list[bytes] = []
    dropped = 0
    needle = json.dumps(leg).encode()
    for line in raw.splitlines(keepends=True):
        if needle in line:
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if isinstance(record, dict) and record.get("leg") == leg \
                    and record.get("type") in ("cycle", "cycle-failed") \
                    and isinstance(record.get("cycle"), int) and record["cycle"] >= start:
                dropped += 1
                continue
        kept.append(line)
    return b"".join(kept), dropped


def _json_default(value: Any) -> Any:
    # numpy / torch scalars that slipped through become plain numbers
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
