"""The plot of each GPU's sustained load (level 3): throughput and SM clock over time.

matplotlib is imported here alone (Agg backend), only when a level-3 report is written; without
matplotlib the report goes without plots.
"""

from __future__ import annotations

import io
from pathlib import Path

from gpu_audit.diag.results import DiagResult, GpuRun
from gpu_audit.serial import write_atomic

# What a plot's name adds to its report's stem, for the GPU indices a node can have: the old
# reports pruned by ``keep_reports`` take their plots along.
PLOT_ENDINGS = tuple(f"-gpu{index}.png" for index in range(64))


def write_plots(result: DiagResult, folder: Path, stem: str) -> dict[int, str]:
    """``<stem>-gpu<N>.png`` per GPU that ran the sustained load; GPU index -> file name."""
    runs = [r for r in result.gpus if r.ticks]
    if not runs:
        return {}
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    written = {}
    for run in runs:
        name = f"{stem}-gpu{run.index}.png"  # one of PLOT_ENDINGS
        _plot(plt, run, result.judgement.sustained.get(run.index) or {}, folder / name)
        written[run.index] = name
    return written


def _plot(plt, run: GpuRun, summary: dict, path: Path) -> None:
    figure, axis = plt.subplots(figsize=(9, 4))
    times = run.tick_times_s or list(range(1, len(run.ticks) + 1))
    axis.plot(times, run.ticks, color="tab:blue", linewidth=1.2, label="throughput (TFLOPS)")
    if summary.get("baseline_tflops"):
        bound = summary["baseline_tflops"] * (1 - summary["decay_bound_pct"] / 100)
        axis.axhline(bound, color="tab:red", linestyle=":", linewidth=1,
                     label=f"decay bound ({summary['decay_bound_pct']:g}%)")
    axis.set_xlabel("seconds under load")
    axis.set_ylabel("TFLOPS")
    axis.set_ylim(bottom=0)
    clocks = [(s["t_s"], s["sm_clock_mhz"]) for s in run.samples
              if s.get("sm_clock_mhz") is not None]
    handles, labels = axis.get_legend_handles_labels()
    if clocks:
        other = axis.twinx()
        other.plot([t for t, _ in clocks], [c for _, c in clocks], color="tab:orange",
                   linewidth=1, label="SM clock (MHz)")
        other.set_ylabel("MHz")
        other.set_ylim(bottom=0)
        more_handles, more_labels = other.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    axis.legend(handles, labels, loc="lower left", fontsize="small")
    axis.set_title(f"GPU {run.index} ({run.name or '?'}): sustained load")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    write_atomic(path, buffer.getvalue())
