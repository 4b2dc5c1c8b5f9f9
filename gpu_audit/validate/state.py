"""A validation run on disk: its folder, plan, state, per-cycle log, checkpoints and lock.

``reports/runs/<run-id>/`` holds:

- ``plan.json``: the checked plan (written once);
- ``state.json``: each stage's status, rewritten atomically as the run moves on;
- ``cycles.jsonl``: one JSON line per cycle, append-only, flushed per cycle, fsynced at least
  once a second and always before a checkpoint claims the cycles it covers;
- ``checkpoints/<variant>.<stage>.ckpt``: the workload's state and the cycle to resume at,
  written atomically every 10% of a stage;
- ``logs/<variant>.<stage>.log``: the worker's stderr;
- the report, its JSON twin and its plots.

Resuming never loses or double-counts a cycle. A checkpoint saying "resume at cycle c" is written
only after the records of cycles < c are on disk. On resume the worker restores that state and
appends a ``resume`` marker: records of that stage with ``cycle >= c`` written before the marker
are superseded (the workload state they came from is gone), and the re-run cycles replace them.
Readers apply markers in file order, so the log stays append-only and still reads consistently.
A line torn by ``kill -9`` mid-write is cut off by the next writer before it appends.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import logging
import os
import pickle
import random
import re
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_audit.errors import InputError, UsageError
from gpu_audit.serial import dumps, from_jsonable, write_atomic
from gpu_audit.units import utc_now, utc_stamp
from gpu_audit.validate.plan import Plan

LOG = logging.getLogger("gpu_audit.validate")
STATE_SCHEMA = "gpu-audit.validate-state/1"
PLAN_SCHEMA = "gpu-audit.validate-plan/1"
CHECKPOINT_FORMAT = 1
FSYNC_INTERVAL_S = 1.0

try:  # POSIX; elsewhere runs are not locked against a second runner
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


def new_run_id(now: dt.datetime | None = None, host: str | None = None) -> str:
    """``20261122T101500Z-myhost-3fa2``: sortable, unique, safe as a folder name."""
    stamp = utc_stamp(now)
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", host or socket.gethostname()) or "host"
    return f"{stamp}-{name}-{secrets.token_hex(2)}"


def leg_file(key: str) -> str:
    """``max-split-128/full`` -> ``max-split-128.full`` (a file-name stem)."""
    return key.replace("/", ".")


@dataclass
class LegState:
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
    ready: dict[str, Any] = field(default_factory=dict)  # what the worker found at start-up
    failure_detail: dict[str, Any] = field(default_factory=dict)  # memory at OOM, traceback...
    stderr_tail: str | None = None
    explanation: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class DeviceChoice:
    requested: str
    resolved: str | None = None  # "cpu" or "cuda:N"
    name: str | None = None
    total_memory_bytes: int | None = None
    free_memory_bytes: int | None = None
    fallback_reason: str | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunState:
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


class RunDir:
    """Paths and file access for one run folder."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    plan_path = property(lambda self: self.path / "plan.json")
    state_path = property(lambda self: self.path / "state.json")
    cycles_path = property(lambda self: self.path / "cycles.jsonl")
    lock_path = property(lambda self: self.path / ".lock")

    def checkpoint_path(self, key: str) -> Path:
        return self.path / "checkpoints" / f"{leg_file(key)}.ckpt"

    def log_path(self, key: str) -> Path:
        return self.path / "logs" / f"{leg_file(key)}.log"

    def scratch_dir(self, key: str) -> Path:
        return self.path / "scratch" / leg_file(key)

    def write_plan(self, plan: Plan) -> None:
        write_atomic(self.plan_path, dumps({"schema": PLAN_SCHEMA, "plan": plan}) + "\n")

    def read_plan(self) -> Plan:
        data = _read_json(self.plan_path)
        if data.get("schema") != PLAN_SCHEMA:
            raise InputError(f"{self.plan_path}: not a gpu-audit validation plan "
                             f"(schema {data.get('schema')!r})")
        return from_jsonable(Plan, data["plan"], where=str(self.plan_path))

    def write_state(self, state: RunState) -> None:
        state.updated_at = utc_now()
        write_atomic(self.state_path, dumps(state) + "\n")

    def read_state(self) -> RunState:
        data = _read_json(self.state_path)
        if data.get("schema") != STATE_SCHEMA:
            raise InputError(f"{self.state_path}: not a gpu-audit validation state "
                             f"(schema {data.get('schema')!r})")
        return from_jsonable(RunState, data, where=str(self.state_path))


def find_run(spec: str, out: Path) -> RunDir:
    """``--resume RUN``: a run id under ``<out>/runs/`` or a path to a run folder."""
    candidates = [Path(spec), out / "runs" / spec]
    for path in candidates:
        if (path / "plan.json").is_file():
            return RunDir(path)
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
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is None:
            self.fd = fd
            return
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise UsageError(
                        f"run {self.path.parent.name} is in use by another gpu-audit process "
                        f"(its lock {self.path} is held); wait for it to finish or stop it"
                    ) from None
                time.sleep(0.2)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
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
        raw = path.read_bytes()
    except FileNotFoundError:
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
        if kind == "resume":
            start = int(record.get("from_cycle", 0))
            kept = legs.get(leg, {})
            legs[leg] = {c: r for c, r in kept.items() if c < start}
        elif kind in ("cycle", "cycle-failed") and isinstance(record.get("cycle"), int):
            legs.setdefault(leg, {})[record["cycle"]] = record
    return {leg: [by_cycle[c] for c in sorted(by_cycle)] for leg, by_cycle in legs.items()}


def completed_cycles(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("type") == "cycle"]


@dataclass
class Checkpoint:
    leg: str
    next_cycle: int
    batch_scale: float
    workload_state: Any = None
    has_workload_state: bool = False
    rng: dict[str, Any] = field(default_factory=dict)
    saved_at: str = ""


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Write a checkpoint atomically (temporary file, fsync, rename)."""
    write_atomic(path, checkpoint_bytes(checkpoint))


def checkpoint_bytes(checkpoint: Checkpoint) -> bytes:
    """The checkpoint file's content; the workload's state goes through torch.save if loaded.

    Serialising copies the state, so the caller may go on changing it once this returns.
    """
    state_bytes, codec = b"", None
    if checkpoint.has_workload_state:
        torch = sys.modules.get("torch")
        buffer = io.BytesIO()
        if torch is not None:
            torch.save(checkpoint.workload_state, buffer)
            codec = "torch"
        else:
            pickle.dump(checkpoint.workload_state, buffer, protocol=pickle.HIGHEST_PROTOCOL)
            codec = "pickle"
        state_bytes = buffer.getvalue()
    envelope = {
        "format": CHECKPOINT_FORMAT,
        "leg": checkpoint.leg,
        "next_cycle": checkpoint.next_cycle,
        "batch_scale": checkpoint.batch_scale,
        "rng": checkpoint.rng,
        "state_codec": codec,
        "state": state_bytes,
        "saved_at": utc_now(),
    }
    return pickle.dumps(envelope, protocol=pickle.HIGHEST_PROTOCOL)


class CheckpointWriter:
    """Writes checkpoints on a background thread, one at a time, each after syncing the log.

    Writing and fsyncing a checkpoint can take tens of milliseconds (much more on a busy disk);
    the cycle loop only serialises the state and goes on. The order that makes resume exact is
    kept: the log is fsynced, with every record appended so far, before the checkpoint that
    vouches for them is renamed into place. A crash before that leaves the previous checkpoint,
    and the records after it are re-run on resume.
    """

    def __init__(self, log: CycleLog) -> None:
        self.log = log
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, path: Path, data: bytes) -> None:
        self.wait()  # one in flight at a time; a failed write surfaces here
        self._thread = threading.Thread(target=self._write, args=(path, data),
                                        name="checkpoint-writer")
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _write(self, path: Path, data: bytes) -> None:
        try:
            self.log.sync()
            write_atomic(path, data)
        except BaseException as exc:
            self._error = exc


def load_checkpoint(path: Path, map_location: str | None = None) -> Checkpoint | None:
    """The checkpoint at ``path``, or ``None`` if there is none.

    The file was written by this run's own worker into the user's run folder, so unpickling it
    trusts no one new.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        envelope = pickle.loads(raw)
        if envelope.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"format {envelope.get('format')!r}")
        state = None
        codec = envelope.get("state_codec")
        if codec == "torch":
            import torch

            state = torch.load(io.BytesIO(envelope["state"]), map_location=map_location,
                               weights_only=False)
        elif codec == "pickle":
            state = pickle.loads(envelope["state"])
    except Exception as exc:
        raise InputError(f"{path}: cannot read this checkpoint ({type(exc).__name__}: {exc}); "
                         "delete it to restart the stage from its first cycle") from None
    return Checkpoint(leg=envelope["leg"], next_cycle=int(envelope["next_cycle"]),
                      batch_scale=float(envelope.get("batch_scale", 1.0)), workload_state=state,
                      has_workload_state=codec is not None, rng=envelope.get("rng") or {},
                      saved_at=envelope.get("saved_at", ""))


def capture_rng() -> dict[str, Any]:
    """Random-number states to restore on resume (Python's, and torch's if it is loaded)."""
    states: dict[str, Any] = {"python": random.getstate()}
    torch = sys.modules.get("torch")
    if torch is not None:
        states["torch"] = torch.get_rng_state()
        if torch.cuda.is_initialized():
            states["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        states["numpy"] = numpy.random.get_state()
    return states


def restore_rng(states: dict[str, Any]) -> None:
    if "python" in states:
        random.setstate(states["python"])
    torch = sys.modules.get("torch")
    if torch is not None:
        if "torch" in states:
            torch.set_rng_state(states["torch"])
        if "cuda" in states and torch.cuda.is_initialized():
            with contextlib.suppress(RuntimeError):  # a different device count: keep fresh
                torch.cuda.set_rng_state_all(states["cuda"])
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in states:
        numpy.random.set_state(states["numpy"])


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: missing; this is not a complete validation run folder") \
            from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def _json_default(value: Any) -> Any:
    # numpy / torch scalars that slipped through become plain numbers
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
