"""The validation report's plots: memory and fragmentation per cycle, every variant on one figure.

matplotlib is imported inside :func:`write_plots` alone (Agg backend); a missing matplotlib only
skips the plots. Each figure overlays the variants of an allocator sweep (one line per variant),
so a sweep writes ``memory.png`` and ``fragmentation.png``, not a pair per variant.

The memory axis takes its unit from the spread of the plotted values (:func:`memory_unit`), not
from their size: 30 MiB of jitter on a 4 GiB process reads as 4096 to 4126 MiB, not as a climb
from 4.00 to 4.03 GiB. The axis spans at least :data:`MIN_MEMORY_SPAN` (:func:`memory_limits`),
so 400 KiB of page-level noise is drawn as the flat line it is, not zoomed into a jump. Stage
names sit at each stage's first cycle, moved down a row when they would print over the previous
name (:func:`label_rows`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from gpu_audit.serial import write_atomic
from gpu_audit.units import GIB, KIB, MIB, fmt_bytes
from gpu_audit.validate.plan import Plan, leg_key

# Stage labels closer than this share of the axis width go on separate rows.
LABEL_MIN_GAP = 0.12
LABEL_ROWS = 4
# The least the memory axis spans: less is page-level noise for a training process (the caching
# allocator itself reserves in blocks of 2 and 20 MiB), which a zoomed axis shows as a jump.
MIN_MEMORY_SPAN = 16 * MIB


def memory_limits(values: list[float | None]) -> tuple[float, float] | None:
    """The memory axis's (bottom, top) in bytes: the values' range, widened about its middle to
    :data:`MIN_MEMORY_SPAN` when narrower, never below 0; ``None`` without a value."""
    numbers = [v for v in values if isinstance(v, (int, float))]
    if not numbers:
        return None
    low, high = min(numbers), max(numbers)
    if high - low >= MIN_MEMORY_SPAN:
        return low, high
    bottom = max(0.0, (low + high - MIN_MEMORY_SPAN) / 2)
    return bottom, bottom + MIN_MEMORY_SPAN


def memory_unit(values: list[float | None]) -> tuple[int, str]:
    """The unit (bytes, name) for values that spread as far as ``values`` do: the largest of
    GiB, MiB and KiB that the spread (max - min) reaches at least once."""
    numbers = [v for v in values if isinstance(v, (int, float))]
    spread = max(numbers) - min(numbers) if numbers else 0
    for size, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if spread >= size:
            return size, name
    return KIB, "KiB"


def label_rows(positions: list[float], min_gap: float = LABEL_MIN_GAP,
               rows: int = LABEL_ROWS) -> list[int]:
    """A row for each label at ``positions`` (axis fractions, ascending): the first row whose
    last label is at least ``min_gap`` to the left, else the row used longest ago."""
    last: list[float | None] = [None] * rows
    chosen = []
    for x in positions:
        row = next((r for r in range(rows) if last[r] is None or x - last[r] >= min_gap),  # type: ignore[operator]
                   None)
        if row is None:
            row = min(range(rows), key=lambda r: last[r])  # type: ignore[arg-type,return-value]
        last[row] = x
        chosen.append(row)
    return chosen


def write_plots(cycles: dict[str, list[dict[str, Any]]], folder: Path,
                plan: Plan) -> tuple[list[str], str | None]:
    """``memory.png`` (and ``fragmentation.png`` when CUDA figures exist), every variant on
    each, from the completed cycles of each leg. Returns (paths, note)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return [], "Plots skipped: matplotlib is not installed (`pip install matplotlib`)."
    runs = []  # (label, series, boundaries)
    for variant in plan.variants:
        series: list[dict[str, Any]] = []
        boundaries: list[tuple[int, str]] = []
        for stage in plan.stages:
            done = cycles.get(leg_key(variant.label, stage.name), [])
            if done:
                boundaries.append((len(series), stage.name))
                series.extend(done)
        if series:
            runs.append((variant.label, series, boundaries))
    if not runs:
        return [], "No cycles ran, so there is nothing to plot."
    several = len(plan.variants) > 1
    marks = max(runs, key=lambda run: len(run[1]))[2]
    length = max(len(run[1]) for run in runs)
    cuda = any(r.get("reserved_bytes") is not None for _, series, _ in runs for r in series)
    written = [_memory_figure(plt, runs, marks, length, cuda, several, folder / "memory.png")]
    if cuda:
        written.append(_fragmentation_figure(plt, runs, marks, length, several, plan,
                                             folder / "fragmentation.png"))
    return written, None


def _memory_figure(plt: Any, runs: list[Any], marks: list[tuple[int, str]], length: int,
                   cuda: bool, several: bool, path: Path) -> str:
    if cuda and several:
        fields = [("reserved_bytes", "reserved")]
    elif cuda:
        fields = [("allocated_bytes", "allocated"), ("reserved_bytes", "reserved"),
                  ("reserved_peak_bytes", "reserved (peak in cycle)")]
    else:
        fields = [("rss_bytes", "host RSS")]
    values = [r.get(name) for _, series, _ in runs for r in series for name, _ in fields]
    limits = memory_limits(values)
    unit, unit_name = memory_unit(list(limits) if limits else values)
    numbers = [v for v in values if isinstance(v, (int, float))]
    spread = max(numbers) - min(numbers) if numbers else 0
    figure, axis = plt.subplots(figsize=(9, 4.5))
    for label, series, _ in runs:
        xs = list(range(len(series)))
        for name, what in fields:
            shown = f"{label}: {what}" if several else what
            axis.plot(xs, [_scaled(r.get(name), unit) for r in series], label=shown,
                      linewidth=1)
    what = "GPU memory" if cuda else "Host memory"
    axis.set_title(f"{what} per cycle{'' if cuda else ' (CPU run)'}; spread "
                   f"{fmt_bytes(spread)}")
    axis.set_ylabel(unit_name)
    if limits is not None and limits[1] - limits[0] == MIN_MEMORY_SPAN:
        axis.set_ylim(limits[0] / unit, limits[1] / unit)
    _finish(axis, marks, length)
    return _save(plt, figure, path)


def _fragmentation_figure(plt: Any, runs: list[Any], marks: list[tuple[int, str]], length: int,
                          several: bool, plan: Plan, path: Path) -> str:
    figure, axis = plt.subplots(figsize=(9, 4))
    for label, series, _ in runs:
        xs = list(range(len(series)))
        axis.plot(xs, [r.get("fragmentation_pct") for r in series],
                  label=f"{label}: inactive split / reserved" if several else
                  "inactive split / reserved", linewidth=1)
        if not several:
            axis.plot(xs, [r.get("cache_slack_pct") for r in series],
                      label="(reserved - allocated) / reserved", linewidth=0.8)
    axis.axhline(plan.max_fragmentation_pct, color="red", linestyle=":", linewidth=1,
                 label="gate")
    axis.set_ylim(0, 100)
    axis.set_ylabel("%")
    axis.set_title("Fragmentation per cycle")
    _finish(axis, marks, length)
    return _save(plt, figure, path)


def _finish(axis: Any, marks: list[tuple[int, str]], length: int) -> None:
    axis.set_xlim(0, max(1, length - 1))
    _stage_marks(axis, marks, length)
    axis.set_xlabel("cycle (all stages in order)")
    axis.legend(loc="best", fontsize="small")
    axis.figure.tight_layout()


def _stage_marks(axis: Any, marks: list[tuple[int, str]], length: int) -> None:
    """A dashed line at each stage's first cycle, its name beside it, below the plot area's
    top, on a lower row when it would print over the previous name."""
    width = max(1, length - 1)
    rows = label_rows([x / width for x, _ in marks])
    for (x, name), row in zip(marks, rows, strict=True):
        axis.axvline(x, color="grey", linestyle="--", linewidth=0.6)
        axis.annotate(name, (x, 1), xycoords=("data", "axes fraction"),
                      xytext=(3, -4 - 11 * row), textcoords="offset points", fontsize="x-small",
                      va="top", ha="left", color="dimgrey",
                      bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none",
                            "alpha": 0.85})


def _save(plt: Any, figure: Any, path: Path) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    write_atomic(path, buffer.getvalue())
    return str(path)


def _scaled(value: Any, unit: int) -> float | None:
    return value / unit if isinstance(value, (int, float)) else None
