"""Checkpoints of a validation stage: the workload's state, the cycle to resume at and the
random-number states, written atomically by a background writer and read back without trusting
the file.

A run folder may come from elsewhere (downloaded, copied from a shared disk), so reading a
checkpoint must not run code: the envelope is plain data read without resolving any global
(:mod:`gpu_audit.plain_pickle`), random states are stored as bytes and lists, and the workload's
state is read by ``torch.load(weights_only=True)`` (tensors, containers, numbers) or, when torch
was not loaded, as plain data.

Taking a checkpoint costs the cycle loop only a copy of the workload's state into host memory
(:func:`host_copy`); serialising it and writing it happen on the writer's thread. On a GPU the
state of a mid-sized model runs to hundreds of megabytes, and serialising it on the cycle's
thread cost more than the cycles themselves in a short stage.
"""

from __future__ import annotations

import contextlib
import copy
import io
import pickle
import random
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpu_audit.errors import InputError
from gpu_audit.plain_pickle import loads_plain
from gpu_audit.serial import write_atomic
from gpu_audit.trust import MissingFolder, StateDir
from gpu_audit.units import utc_now

if TYPE_CHECKING:
    from gpu_audit.validate.state import CycleLog

# 2: the envelope is plain data (random states as bytes and lists), read without resolving any
# global; workload state through torch.load(weights_only=True) or as plain data.
CHECKPOINT_FORMAT = 2
# A workload's state (its model's weights) is read whole, as torch.load does; past this it is
# not a validation workload's checkpoint.
CHECKPOINT_LIMIT = 16 * 1024**3


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


@dataclass(frozen=True)
class SerialisedState:
    """A workload's state already serialised (``codec``: "torch" or "plain")."""

    data: bytes
    codec: str


def serialise_state(state: Any) -> SerialisedState:
    """The state through torch.save if torch is loaded, else pickled as plain data (read back
    without resolving any global)."""
    torch = sys.modules.get("torch")
    buffer = io.BytesIO()
    if torch is not None:
        torch.save(state, buffer)
        return SerialisedState(buffer.getvalue(), "torch")
    pickle.dump(state, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return SerialisedState(buffer.getvalue(), "plain")


class _NotCopyable(Exception):
    """A state holding an object :func:`host_copy` does not copy."""


_ATOMS = (int, float, complex, bool, str, bytes, type(None))


def host_copy(state: Any) -> Any:
    """A copy of a workload's state that shares nothing the workload goes on changing.

    Tensors are copied into host memory (a tensor named twice is copied once and stays one, as
    torch.save would keep it), dicts, lists and tuples are rebuilt around their copied values
    (a dict's attributes too: ``state_dict()`` keeps its version metadata there), numbers,
    strings and torch's dtypes, devices and sizes are kept, numpy arrays copied. Any other
    object raises :class:`_NotCopyable`: it might hold device memory that a deep copy would
    double.
    """
    torch = sys.modules.get("torch")
    memo: dict[int, Any] = {}

    def walk(value: Any) -> Any:
        if isinstance(value, _ATOMS):
            return value
        if id(value) in memo:
            return memo[id(value)]
        kind = type(value)
        if torch is not None and isinstance(value, (torch.dtype, torch.device, torch.Size)):
            return value  # immutable
        if torch is not None and isinstance(value, torch.Tensor):
            out = value.detach().to("cpu", copy=True)
        elif kind.__module__ == "numpy":
            out = copy.deepcopy(value)
        elif kind in (dict, OrderedDict):
            out = kind()
            memo[id(value)] = out
            out.update((key, walk(item)) for key, item in value.items())
            if getattr(value, "__dict__", None):
                out.__dict__.update(walk(vars(value)))
        elif kind is list:
            out = []
            memo[id(value)] = out
            out.extend(walk(item) for item in value)
        elif kind is tuple:
            out = tuple(walk(item) for item in value)
        else:
            raise _NotCopyable(kind.__qualname__)
        memo[id(value)] = out
        return out

    return walk(state)


def detached_state(state: Any) -> Any:
    """The workload's state, detached so that serialising it can wait for the writer's thread:
    a :func:`host_copy`, or, for a state holding other objects, the state serialised now."""
    try:
        return host_copy(state)
    except _NotCopyable:
        return serialise_state(state)


def checkpoint_bytes(checkpoint: Checkpoint) -> bytes:
    """The checkpoint file's content; the workload's state goes through torch.save if loaded.

    Serialising copies the state, so the caller may go on changing it once this returns.
    """
    state_bytes, codec = b"", None
    if checkpoint.has_workload_state:
        state = checkpoint.workload_state
        serialised = state if isinstance(state, SerialisedState) else serialise_state(state)
        state_bytes, codec = serialised.data, serialised.codec
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

    Serialising, writing and fsyncing a checkpoint can take tens of milliseconds (seconds for a
    large model or on a busy disk); the cycle loop only copies the state and goes on. The order
    that makes resume exact is kept: the log is fsynced, with every record appended so far,
    before the checkpoint that vouches for them is renamed into place. A crash before that
    leaves the previous checkpoint, and the records after it are re-run on resume.
    """

    def __init__(self, log: CycleLog) -> None:
        self.log = log
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def submit(self, path: Path, checkpoint: Checkpoint) -> None:
        """Write ``checkpoint`` in the background. It is serialised there, so its state must not
        change once submitted: pass the workload's state through :func:`detached_state`."""
        self.wait()  # one in flight at a time; a failed write surfaces here
        self._thread = threading.Thread(target=self._write, args=(path, checkpoint),
                                        name="checkpoint-writer")
        self._thread.start()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _write(self, path: Path, checkpoint: Checkpoint) -> None:
        try:
            # The host copy is let go once serialised: a large model's state is then held
            # three times at most (copy, buffer, bytes), as when it was serialised in place.
            state, checkpoint.workload_state = checkpoint.workload_state, None
            if checkpoint.has_workload_state and not isinstance(state, SerialisedState):
                state = serialise_state(state)
            checkpoint.workload_state = state
            del state
            data = checkpoint_bytes(checkpoint)
            checkpoint.workload_state = None
            self.log.sync()
            write_atomic(path, data)
        except BaseException as exc:
            self._error = exc


_NOT_PLAIN = "a checkpoint holds plain data only, so this one was not written by gpu-audit"


def load_checkpoint(path: Path, map_location: str | None = None) -> Checkpoint | None:
    """The checkpoint at ``path``, or ``None`` if there is none.

    It is read through gpu-audit's trust rule (:mod:`gpu_audit.trust`: this user's or root's,
    writable by nobody else, in such folders all the way down, never through a link). Nothing in
    it can run code: the envelope is plain data read without resolving any global,
    the workload's state is read by ``torch.load(weights_only=True)`` (tensors, containers,
    numbers) or as plain data. A workload whose state holds other objects cannot resume.
    """
    try:
        folder = StateDir.open(path.parent)  # a checkpoint another user could change: exit 3
    except MissingFolder:
        return None  # no checkpoint written yet
    with folder:
        raw = folder.read(path.name, limit=CHECKPOINT_LIMIT)
    if raw is None:
        return None
    try:
        envelope = loads_plain(raw, refuse=_NOT_PLAIN)
        if not isinstance(envelope, dict):
            raise ValueError("not a checkpoint")
        if envelope.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"format {envelope.get('format')!r}, written by another version "
                             "of gpu-audit")
        state = None
        codec = envelope.get("state_codec")
        if codec == "torch":
            import torch

            state = torch.load(io.BytesIO(envelope["state"]), map_location=map_location,
                               weights_only=True)
        elif codec == "plain":
            state = loads_plain(envelope["state"], refuse=_NOT_PLAIN)
        elif codec is not None:
            raise ValueError(f"unknown state codec {codec!r}")
    except Exception as exc:
        lines = str(exc).strip().splitlines()  # torch's weights-only refusal runs to a page
        why = lines[0] if lines else ""
        if "weights_only" in str(exc) or "Weights only" in str(exc):
            why = ("it holds objects other than tensors, containers and numbers, which are not "
                   "loaded, since loading them could run code")
        raise InputError(f"{path}: cannot read this checkpoint ({type(exc).__name__}: {why}); "
                         "delete it to restart the stage from its first cycle") from None
    return Checkpoint(leg=envelope["leg"], next_cycle=int(envelope["next_cycle"]),
                      batch_scale=float(envelope.get("batch_scale", 1.0)), workload_state=state,
                      has_workload_state=codec is not None, rng=envelope.get("rng") or {},
                      saved_at=envelope.get("saved_at", ""))


def capture_rng() -> dict[str, Any]:
    """Random-number states to restore on resume (Python's, and torch's and numpy's if they
    are loaded), as plain data: byte strings, lists and numbers."""
    states: dict[str, Any] = {"python": random.getstate()}
    torch = sys.modules.get("torch")
    if torch is not None:
        states["torch"] = bytes(torch.get_rng_state().tolist())
        if torch.cuda.is_initialized():
            states["cuda"] = [bytes(s.tolist()) for s in torch.cuda.get_rng_state_all()]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        name, keys, pos, has_gauss, cached = numpy.random.get_state()
        states["numpy"] = (str(name), [int(k) for k in keys], int(pos), int(has_gauss),
                           float(cached))
    return states


def restore_rng(states: dict[str, Any]) -> None:
    if "python" in states:
        random.setstate(states["python"])
    torch = sys.modules.get("torch")
    if torch is not None:
        def tensor(raw: bytes) -> Any:
            return torch.tensor(list(raw), dtype=torch.uint8)

        if "torch" in states:
            torch.set_rng_state(tensor(states["torch"]))
        if "cuda" in states and torch.cuda.is_initialized():
            with contextlib.suppress(RuntimeError):  # a different device count: keep fresh
                torch.cuda.set_rng_state_all([tensor(s) for s in states["cuda"]])
    numpy = sys.modules.get("numpy")
    if numpy is not None and "numpy" in states:
        name, keys, pos, has_gauss, cached = states["numpy"]
        numpy.random.set_state((name, numpy.array(keys, dtype=numpy.uint32), pos, has_gauss,
                                cached))
