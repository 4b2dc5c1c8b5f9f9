"""The monitor: a daemon thread in the user's process that publishes its allocator state.

Every ``interval_s`` it reads the allocator (through an :class:`AllocatorSource`) and replaces
``<runtime dir>/<pid>.json`` atomically; ``gpu-audit scan`` joins that file to the process NVML
reports. Publishing costs one ``memory_stats()`` call per device and one small file write, on
the monitor's own thread; the training thread pays only for :meth:`Monitor.step`, an integer
increment.

The thread never raises into the program: a failure is logged once per kind, and after
:data:`MAX_CONSECUTIVE_FAILURES` failures in a row the monitor stops and removes its file. The
file is removed when the monitor stops and at interpreter exit; a forked child (a DataLoader
worker) inherits none of it and never removes its parent's file.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import socket
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpu_audit import __version__
from gpu_audit.knowledge.allocator import raw_settings
from gpu_audit.knowledge.memory import fragmentation
from gpu_audit.monitor import metrics
from gpu_audit.monitor.api import DEFAULT_HISTORY_ENTRIES, DEFAULT_MAX_OOM_SNAPSHOTS
from gpu_audit.monitor.folder import FolderChanged, PrivateFolder, supported
from gpu_audit.monitor.oom_snapshot import OomSnapshotter
from gpu_audit.monitor.sources import AllocatorReading, AllocatorSource, TorchAllocatorSource
from gpu_audit.publication import (
    DEFAULT_INTERVAL_S,
    SCHEMA,
    ensure_private_dir,
    pid_namespace,
    process_identity,
    publication_dir,
)
from gpu_audit.redact import redact_text
from gpu_audit.serial import write_atomic
from gpu_audit.units import utc_iso, utc_now

log = logging.getLogger("gpu_audit.monitor")

F = TypeVar("F", bound=Callable[..., Any])

HISTORY_SAMPLES = 24  # counters kept per device, so a scan sees whether retries are climbing
MAX_CONSECUTIVE_FAILURES = 20
DEFAULT_SNAPSHOT_DIR = Path("reports") / "oom-snapshots"


class Monitor:
    """Publishes this process's allocator state until stopped. Use through :func:`start`.

    Also a context manager (stops on exit) and a decorator (runs the function monitored).
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        snapshot_on_oom: bool = False,
        snapshot_dir: str | os.PathLike[str] | None = None,
        history_entries: int = DEFAULT_HISTORY_ENTRIES,
        max_oom_snapshots: int = DEFAULT_MAX_OOM_SNAPSHOTS,
        source: AllocatorSource | None = None,
        runtime_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(interval_s, (int, float)) or isinstance(interval_s, bool) \
                or not 0.01 <= interval_s <= 3600:
            raise ValueError(f"interval_s must be a number of seconds in [0.01, 3600], "
                             f"got {interval_s!r}")
        if history_entries < 1 or max_oom_snapshots < 0:
            raise ValueError("history_entries must be >= 1 and max_oom_snapshots >= 0")
        self.interval_s = float(interval_s)
        self.snapshot_on_oom = snapshot_on_oom
        self.snapshot_dir = Path(snapshot_dir or DEFAULT_SNAPSHOT_DIR).resolve()
        self.history_entries = history_entries
        self.max_oom_snapshots = max_oom_snapshots
        self._source = source if source is not None else TorchAllocatorSource()
        self._runtime_dir = Path(runtime_dir) if runtime_dir is not None else None
        self._steps = 0
        self._sequence = 0
        self._history: dict[int, deque[dict[str, Any]]] = {}
        self._failures = 0
        self._logged: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._owner_pid: int | None = None
        self._path: Path | None = None
        self._folder: PrivateFolder | None = None  # the runtime folder, held open
        self._identity: dict[str, Any] = {}
        self._oom: OomSnapshotter | None = None
        self._notes: list[str] = []

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() \
            and self._owner_pid == os.getpid()

    @property
    def publication_path(self) -> Path | None:
        """Where this process's state is published, once started (``None`` if it cannot be)."""
        return self._path

    @property
    def oom_snapshots(self) -> list[str]:
        return list(self._oom.written) if self._oom else []

    def start(self) -> Monitor:
        """Start publishing (idempotent). Never raises for an unusable folder: logs and goes on."""
        if self.running:
            return self
        other = active()
        if other is not None and other is not self and other.running:
            # One publication per process: a second monitor (a decorated function called while
            # another monitor runs) stays idle instead of fighting over the same file.
            self._log_once("already-running", "another monitor already publishes for this "
                           "process; this one stays idle")
            return self
        self._stop.clear()
        self._owner_pid = os.getpid()
        self._identity = self._own_identity()
        self._path = self._choose_path()
        if self.snapshot_on_oom:
            earlier = self._oom.written if self._oom else []
            self._oom = OomSnapshotter(self.snapshot_dir, history_entries=self.history_entries,
                                       max_snapshots=self.max_oom_snapshots)
            self._oom.written.extend(earlier)
            self._oom.install()
        self._thread = threading.Thread(target=self._run, name="gpu-audit-monitor", daemon=True)
        self._thread.start()
        _register(self)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop publishing and remove the file. Safe to call twice, from any thread."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
        self._thread = None
        if self._oom is not None:
            self._oom.uninstall()
        self._remove_file()
        _unregister(self)

    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __call__(self, func: F) -> F:
        @functools.wraps(func)
        def monitored(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return monitored  # type: ignore[return-value]

    # --- what the program calls --------------------------------------------------------------

    def step(self, n: int = 1) -> None:
        """Count training steps (published with the state; lets a scan relate retries to steps)."""
        self._steps += n  # just an increment: this runs on the training thread

    @property
    def steps(self) -> int:
        return self._steps

    def publish(self) -> Path | None:
        """Publish now, on the calling thread; the file written, or ``None``. Never raises."""
        try:
            return self._publish_once()
        except Exception as exc:  # whatever the allocator or the disk says, the caller goes on
            self._log_once(type(exc).__name__, f"publishing failed: {exc}")
            return None

    def dump_snapshot(self, reason: str = "requested") -> list[str]:
        """Write a memory snapshot and its summary now (needs ``snapshot_on_oom=True``)."""
        if self._oom is None:
            self._log_once("no-oom", "dump_snapshot() needs Monitor(snapshot_on_oom=True)")
            return []
        return self._oom.capture(reason, None, min_gap_s=0.0)

    # --- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                self._publish_once()
                self._failures = 0
            except Exception as exc:  # the monitor must never take the job down
                self._failures += 1
                self._log_once(type(exc).__name__, f"publishing failed: {exc!r}; retrying every "
                               f"{self.interval_s:g} s")
                if self._failures >= MAX_CONSECUTIVE_FAILURES:
                    log.warning("gpu_audit.monitor: %d failures in a row; the monitor has "
                                "stopped", self._failures)
                    self._remove_file()
                    return
            if self._stop.wait(self.interval_s):
                return

    def _publish_once(self) -> Path | None:
        reading = self._source.read()
        with self._lock:
            if self._owner_pid != os.getpid():
                return None  # a forked child: the file belongs to the parent
            if self._stop.is_set():
                return None  # stopping: never re-create the file stop() removes
            self._sequence += 1
            document = self._document(reading)
            if self._path is None:
                return None
            data = json.dumps(document, separators=(",", ":")).encode("utf-8")
            if self._folder is None:
                write_atomic(self._path, data)  # no descriptor-relative writes here
                return self._path
            try:
                self._folder.write_atomic(self._path.name, data)
            except FolderChanged as exc:
                # Never follow the path elsewhere: stop publishing, say why once.
                self._folder.close()
                self._folder, self._path = None, None
                self._log_once("folder-changed", f"stopped publishing: {exc}")
                return None
            return self._path

    def _document(self, reading: AllocatorReading) -> dict[str, Any]:
        now = utc_now(precise=True)
        settings = raw_settings(reading.settings)
        devices = [self._device_entry(d, reading, settings, now) for d in reading.devices]
        return {
            "schema": SCHEMA,
            "tool_version": __version__,
            "published_at": now,
            "sequence": self._sequence,
            **self._identity,
            "interval_s": self.interval_s,
            "step": self._steps if self._steps else None,
            "torch_version": reading.torch_version,
            "cuda_version": reading.cuda_version,
            "cuda_available": reading.cuda_available,
            "cuda_initialized": reading.cuda_initialized,
            "allocator_backend": reading.backend,
            "allocator_settings": redact_text(reading.settings) if reading.settings is not None
            else None,
            "expandable_segments": metrics.expandable_segments(settings)
            if reading.settings is not None else None,
            "devices": devices,
            "snapshot_on_oom": self.snapshot_on_oom,
            "history_recording": bool(self._oom and self._oom.recording),
            "oom_snapshots": self.oom_snapshots,
            "notes": [*self._notes, *(self._oom.notes if self._oom else [])],
        }

    def _device_entry(self, device: Any, reading: AllocatorReading, settings: dict[str, str],
                      now: str) -> dict[str, Any]:
        counters = metrics.counters_from_stats(device.stats)
        frag = fragmentation(counters["allocated_bytes"], counters["reserved_bytes"],
                                     counters["inactive_split_bytes"], counters["requested_bytes"])
        history = self._history.setdefault(device.index, deque(maxlen=HISTORY_SAMPLES))
        history.append({"at": now, "num_alloc_retries": counters["num_alloc_retries"],
                        "num_ooms": counters["num_ooms"],
                        "step": self._steps if self._steps else None})
        return {
            "index": device.index,
            "uuid": device.uuid,
            "pci_bus_id": device.pci_bus_id,
            "name": device.name,
            "total_memory_bytes": device.total_memory_bytes,
            "max_split_size_bytes": metrics.max_split_size_bytes(settings, device.stats),
            **counters,
            **frag,
            "history": list(history),
        }

    # --- identity and files ------------------------------------------------------------------

    @staticmethod
    def _own_identity() -> dict[str, Any]:
        pid = os.getpid()
        identity = process_identity(pid)
        return {
            "pid": pid,
            "uid": os.geteuid() if hasattr(os, "geteuid") else None,
            "hostname": socket.gethostname(),
            "pid_namespace": pid_namespace(),
            "start_ticks": identity.start_ticks if identity else None,
            "create_time_s": identity.create_time if identity else None,
            "start_time": utc_iso_from_epoch(identity.create_time) if identity else None,
        }

    def _choose_path(self) -> Path | None:
        if self._runtime_dir is not None:
            problem = ensure_private_dir(self._runtime_dir)
            folder = None if problem else self._runtime_dir
            problems = [f"{self._runtime_dir} {problem}"] if problem else []
        else:
            folder, problems = publication_dir()
        if folder is None:
            message = ("not publishing allocator state (gpu-audit scan will not see it): "
                       + "; ".join(problems))
            self._notes.append(message)
            self._log_once("no-folder", message)
            return None
        if self._folder is not None:
            self._folder.close()
            self._folder = None
        if supported():
            try:
                self._folder = PrivateFolder(folder)
            except OSError as exc:
                message = f"not publishing allocator state: {folder}: {exc.strerror or exc}"
                self._notes.append(message)
                self._log_once("no-folder", message)
                return None
        return folder / f"{os.getpid()}.json"

    def _remove_file(self) -> None:
        path = self._path
        if path is None or self._owner_pid != os.getpid():
            return
        with self._lock, contextlib.suppress(OSError):
            if self._folder is not None:
                folder, self._folder = self._folder, None
                try:
                    folder.check()  # only inside the folder still held and still ours
                    folder.unlink(path.name)
                finally:
                    folder.close()
            else:
                path.unlink()

    def _log_once(self, key: str, message: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning("gpu_audit.monitor: %s", message)


def utc_iso_from_epoch(epoch_s: float | None) -> str | None:
    import datetime as dt

    if epoch_s is None:
        return None
    return utc_iso(dt.datetime.fromtimestamp(epoch_s, dt.UTC), precise=True)


# --- the process-wide monitor ----------------------------------------------------------------

_active: Monitor | None = None
_active_lock = threading.Lock()


def _register(monitor: Monitor) -> None:
    global _active
    with _active_lock:
        _active = monitor


def _unregister(monitor: Monitor) -> None:
    global _active
    with _active_lock:
        if _active is monitor:
            _active = None


def active() -> Monitor | None:
    """The monitor running in this process, if any."""
    return _active


def _stop_at_exit() -> None:
    monitor = _active
    if monitor is not None:
        monitor.stop(timeout_s=1.0)


def _forget_after_fork() -> None:
    # The child has no monitor thread; its copy must neither publish nor remove the parent's file.
    global _active, _active_lock
    _active = None
    _active_lock = threading.Lock()


atexit.register(_stop_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def ensure_single(kwargs: dict[str, Any]) -> Monitor | None:
    """The running monitor when one exists (one file per process), warning if asked differently."""
    current = _active
    if current is None or not current.running:
        return None
    asked = {k: v for k, v in kwargs.items() if k in ("interval_s", "snapshot_on_oom")}
    differs = any(getattr(current, k) != v for k, v in asked.items())
    if differs:
        current._log_once("already-running", "a monitor is already running in this process; "
                          "keeping it (call stop() first to change its settings)")
    return current

