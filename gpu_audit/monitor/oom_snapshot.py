"""Snapshots on out-of-memory: record allocation history, and on an OOM write what it shows.

``Monitor(snapshot_on_oom=True)`` asks PyTorch to keep a bounded history of allocations with
their Python stacks (``torch.cuda.memory._record_memory_history``) and attaches an OOM observer
(``torch._C._cuda_attach_out_of_memory_observer``). When the allocator gives up, the observer
runs just before ``torch.cuda.OutOfMemoryError`` is raised: it pickles
``torch.cuda.memory._snapshot()`` (the file pytorch.org/memory_viz and ``gpu-audit snapshot``
read) and writes a markdown summary beside it. It never raises, so the OOM propagates exactly
as it would have.

Both hooks apply to an initialised allocator only, so when CUDA is not initialised yet they
are queued with ``torch.cuda._lazy_call`` and run as CUDA starts. Two cases the observer cannot
see are covered by a chained ``sys.excepthook``/``threading.excepthook``: an OOM whose report
failed in NVML (a ``RuntimeError`` "NVML_SUCCESS == ... INTERNAL ASSERT FAILED" that skips the
observers) and a torch without the observer hook; those get their snapshot when the exception
goes uncaught, after the unwinding. On a machine or a torch build without CUDA nothing is
recorded: a host out-of-memory is a ``MemoryError`` or the kernel's OOM killer, which no
allocator snapshot describes; the monitor says so once and carries on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gpu_audit.knowledge.oom import CUDA_OOM_KINDS, oom_kind
from gpu_audit.serial import write_atomic
from gpu_audit.units import fmt_bytes, utc_now, utc_stamp

log = logging.getLogger("gpu_audit.monitor")

def is_oom_exception(exc: BaseException) -> bool:
    """A CUDA out-of-memory, including the one masked by a failed NVML report."""
    return oom_kind(exc) in CUDA_OOM_KINDS


def _stem(when: float) -> str:
    stamp = utc_stamp(when)
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", socket.gethostname()) or "host"
    return f"oom-{stamp}-{host}-pid{os.getpid()}"


class OomSnapshotter:
    """Records history and writes ``oom-*.pickle`` plus ``oom-*.md`` into ``directory``."""

    def __init__(self, directory: Path, *, history_entries: int = 100_000,
                 max_snapshots: int = 3, min_interval_s: float = 30.0) -> None:
        self.directory = Path(directory).resolve()
        self.history_entries = history_entries
        self.max_snapshots = max_snapshots
        self.min_interval_s = min_interval_s
        self.written: list[str] = []
        self.recording = False
        self.observer_attached = False
        self.notes: list[str] = []
        self.enabled = True
        self._captures = 0
        self._last_capture = -1e18
        self._lock = threading.Lock()
        self._previous_hooks: tuple[Any, Any] | None = None

    # --- set-up ------------------------------------------------------------------------------

    def install(self) -> None:
        """Arrange history and the observer; never raises (problems become ``notes``)."""
        try:
            import torch
        except Exception as exc:  # torch missing or broken: there is nothing to record
            self._note(f"snapshot_on_oom: torch cannot be imported ({exc}); no snapshot will "
                       "be taken")
            return
        if not getattr(torch.version, "cuda", None) or not torch.cuda.is_available():
            self._note("snapshot_on_oom: no CUDA device in this process, so there is no "
                       "allocator history to record; a host out-of-memory (MemoryError or the "
                       "kernel's OOM killer) is not covered by a memory snapshot")
            return
        self._install_excepthooks()
        lazy_call = getattr(torch.cuda, "_lazy_call", None)
        if lazy_call is not None and not torch.cuda.is_initialized():
            lazy_call(self._attach)  # runs inside CUDA's lazy initialisation
        else:
            self._attach()

    def _attach(self) -> None:
        # Runs inside torch's lazy CUDA initialisation when queued: must never raise there.
        try:
            import torch

            self._record_history(torch)
            attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
            if attach is None:
                self._note("snapshot_on_oom: this torch has no OOM observer hook; a snapshot is "
                           "taken when an OOM goes uncaught, or call monitor.dump_snapshot() "
                           "in your except block")
                return
            attach(self.on_oom)
            self.observer_attached = True
        except Exception as exc:  # e.g. backend:cudaMallocAsync refuses OOM observers
            self._note(f"snapshot_on_oom: could not attach to the allocator: {exc}")

    def _record_history(self, torch: Any) -> None:
        record = torch.cuda.memory._record_memory_history
        try:
            record(enabled="all", context="all", stacks="python",
                   max_entries=self.history_entries)
        except TypeError:  # the legacy signature (torch 2.0)
            record(True, trace_alloc_max_entries=self.history_entries,
                   trace_alloc_record_context=True)
        self.recording = True

    def _install_excepthooks(self) -> None:
        previous_sys, previous_thread = sys.excepthook, threading.excepthook

        def sys_hook(exc_type, exc, tb):
            try:
                self._on_uncaught(exc)
            finally:
                previous_sys(exc_type, exc, tb)

        def thread_hook(args):
            try:
                self._on_uncaught(args.exc_value)
            finally:
                previous_thread(args)

        sys.excepthook, threading.excepthook = sys_hook, thread_hook
        self._previous_hooks = (previous_sys, previous_thread)
        self._hooks = (sys_hook, thread_hook)

    def uninstall(self) -> None:
        """Stop taking snapshots. PyTorch cannot detach an observer, so it becomes a no-op."""
        self.enabled = False
        if self._previous_hooks is not None:
            # Put the previous hooks back only if nobody chained on top of ours since.
            if sys.excepthook is self._hooks[0]:
                sys.excepthook = self._previous_hooks[0]
            if threading.excepthook is self._hooks[1]:
                threading.excepthook = self._previous_hooks[1]
            self._previous_hooks = None

    def _note(self, message: str) -> None:
        self.notes.append(message)
        log.warning("gpu_audit.monitor: %s", message)

    # --- capture -----------------------------------------------------------------------------

    def on_oom(self, device: int, alloc_size: int, device_limit: int, device_free: int) -> None:
        """The allocator's OOM observer: arguments as PyTorch passes them. Never raises."""
        # Anything escaping from here would replace the program's OutOfMemoryError.
        with contextlib.suppress(BaseException):
            self.capture("out of memory", {
                "device": device, "request_bytes": alloc_size,
                "device_limit_bytes": device_limit, "device_free_bytes": device_free,
            })

    def _on_uncaught(self, exc: BaseException | None) -> None:
        try:
            if exc is not None and is_oom_exception(exc):
                self.capture(f"uncaught {type(exc).__name__}", None, min_gap_s=5.0)
        except BaseException:  # the previous hook must still run, whatever happened here
            pass

    def capture(self, reason: str, event: dict[str, Any] | None,
                min_gap_s: float | None = None) -> list[str]:
        """Write the snapshot and its summary now; the paths written (none when rate-limited)."""
        now = time.monotonic()
        with self._lock:
            gap = self.min_interval_s if min_gap_s is None else min_gap_s
            if (not self.enabled or self._captures >= self.max_snapshots
                    or now - self._last_capture < gap):
                return []
            self._last_capture = now
            self._captures += 1
        try:
            import torch

            snap = torch.cuda.memory._snapshot()
        except Exception as exc:  # a broken context after the OOM: say so and carry on
            log.warning("gpu_audit.monitor: could not take a memory snapshot: %s", exc)
            return []
        return self.write(snap, reason, event)

    def write(self, snap: Any, reason: str, event: dict[str, Any] | None) -> list[str]:
        """Pickle ``snap`` and write its markdown summary; never raises."""
        stem = _stem(time.time())
        for n in range(2, 100):  # two captures within one second keep both
            if not (self.directory / f"{stem}.pickle").exists():
                break
            stem = f"{_stem(time.time())}-{n}"
        paths: list[str] = []
        try:
            pickle_path = write_atomic(self.directory / f"{stem}.pickle",
                                       pickle.dumps(snap))  # as _dump_snapshot does
            paths.append(str(pickle_path))
            log.warning("gpu_audit.monitor: %s: memory snapshot written to %s", reason,
                        pickle_path)
        except Exception as exc:  # disk full, read-only folder, ...
            log.warning("gpu_audit.monitor: %s: could not write the snapshot to %s: %s", reason,
                        self.directory, exc)
            return paths
        try:
            markdown = self._summary_markdown(snap, reason, event, pickle_path.name)
            paths.append(str(write_atomic(self.directory / f"{stem}.md", markdown)))
        except Exception as exc:  # the pickle is what matters; say why there is no summary
            log.warning("gpu_audit.monitor: could not summarise the snapshot: %s", exc)
        with self._lock:
            self.written.extend(paths)
        return paths

    @staticmethod
    def _summary_markdown(snap: Any, reason: str, event: dict[str, Any] | None,
                          pickle_name: str) -> str:
        # Loaded in the training process only when an out-of-memory snapshot is summarised.
        from gpu_audit.snapshot.render import render_markdown
        from gpu_audit.snapshot.summary import summarize

        preface = [f"Reason: {reason} in pid {os.getpid()}."]
        if event:
            preface.append(
                f"Device {event['device']}: the allocator asked the driver for "
                f"{fmt_bytes(event['request_bytes'])} (a whole segment, not the tensor's size) "
                f"with {fmt_bytes(event['device_free_bytes'])} free of "
                f"{fmt_bytes(event['device_limit_bytes'])} allowed."
            )
        preface += ["", f"Open `{pickle_name}` at https://pytorch.org/memory_viz, or run "
                    f"`gpu-audit snapshot {pickle_name}` for this summary with a plot.", ""]
        return render_markdown(summarize(snap), title=f"Out of memory: {pickle_name}",
                               generated_at=utc_now(precise=True), source=pickle_name,
                               preface=preface)
