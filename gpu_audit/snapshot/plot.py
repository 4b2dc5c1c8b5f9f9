"""Memory over the recorded history as a PNG; matplotlib is imported here, and only when asked."""

from __future__ import annotations

import io
from pathlib import Path

from gpu_audit.serial import write_atomic
from gpu_audit.snapshot.summary import SnapshotSummary
from gpu_audit.units import GIB, parse_utc


class PlotUnavailable(Exception):
    """matplotlib is not installed: the summary goes on without its plot."""


def has_history(summary: SnapshotSummary) -> bool:
    return any(d.trace is not None and d.trace.events for d in summary.devices)


def plot_history(summary: SnapshotSummary, path: Path, *, title: str) -> Path | None:
    """Reserved and allocated memory per device over time, OOMs marked; ``None`` without history.

    Raises :class:`PlotUnavailable` when matplotlib is missing.
    """
    devices = [d for d in summary.devices if d.trace is not None and d.trace.events]
    if not devices:
        return None
    try:
        import matplotlib
    except ImportError:
        raise PlotUnavailable("no plot: matplotlib is not installed (pip install matplotlib)") \
            from None

    matplotlib.use("Agg")  # files only: never open a window, never need a display
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 2.8 * len(devices) + 0.6), layout="constrained")
    axes = figure.subplots(len(devices), 1, squeeze=False)[:, 0]
    for ax, device in zip(axes, devices, strict=True):
        trace = device.trace
        assert trace is not None
        line = trace.timeline
        ax.step(line.time_s, [b / GIB for b in line.reserved_bytes], where="post",
                label="reserved (cached by PyTorch)", color="tab:orange")
        ax.step(line.time_s, [b / GIB for b in line.allocated_bytes], where="post",
                label="allocated (in use by tensors)", color="tab:blue")
        ax.fill_between(line.time_s, [b / GIB for b in line.allocated_bytes],
                        [b / GIB for b in line.reserved_bytes], step="post", alpha=0.15,
                        color="tab:orange", label="reserved but unallocated")
        oom_times = _oom_offsets(device)
        for i, offset in enumerate(oom_times):
            ax.axvline(offset, color="tab:red", linestyle="--",
                       label="out of memory" if i == 0 else None)
        start = f" (t=0 at {line.start})" if line.start else ""
        ax.set_title(f"device {device.device}{start}", fontsize=10, loc="left")
        ax.set_xlabel("seconds")
        ax.set_ylabel("GiB")
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    figure.suptitle(title, fontsize=11)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return write_atomic(path, buffer.getvalue())


def _oom_offsets(device) -> list[float]:
    """Seconds from the history's start for each OOM entry with a time."""

    trace = device.trace
    if trace is None or not trace.timeline.start:
        return []
    start = parse_utc(trace.timeline.start)
    offsets = []
    for oom in trace.ooms:
        if oom.at:
            at = parse_utc(oom.at)
            offsets.append((at - start).total_seconds())
    return offsets
