"""The fleet report for people: a terminal summary, the markdown report and the files beside it.

Summary first (how many nodes, how many fit, each unfit or silent node on one line), then the
skew findings, the outlier table, the heat map, the process table and the node table. Beside the
markdown: the per-GPU table as CSV (always) and as Parquet (when pyarrow is installed:
``pip install 'gpu-audit[parquet]'``), and the per-node heat map as PNG, linked from the
markdown (which is written again with the link).

The heat map has one row per node, a first column for the node's own verdict (OK 0, WARNING
1.5, CRITICAL 3: an unfit node is red whatever its peers), and one column per judged GPU quantity.
A cell is the node's worst GPU on that quantity, measured against the median of the fleet's GPUs
of the same model and scaled by the quantity's floor (the least distance the outlier rule
counts): 0 is at the median or on the good side, 1 is a floor away on the bad side, and the
colour saturates at 3; a GPU without enough same-model peers, or without the reading, is grey.
In each cell, where the map is small enough, the raw value (the own verdict's: its worst
finding). Large fleets show the nodes furthest from their peers. pandas and matplotlib (Agg)
are imported only when these files are written.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_audit.fleet.judge import FleetReport
from gpu_audit.fleet.nodes import Node
from gpu_audit.fleet.outliers import METRICS, MIN_PEERS, gpu_table
from gpu_audit.fleet.registry import FleetView
from gpu_audit.redact import redact_text
from gpu_audit.report.escape import (
    Markdown,
    md_cell,
    md_code,
    md_document,
    md_row,
    md_text,
    terminal,
)
from gpu_audit.report.remedy import wrapped
from gpu_audit.serial import write_atomic
from gpu_audit.units import fmt_bytes, plural

NODES_LISTED = 50  # unfit/unknown nodes listed one per line before "... and N more"
# Findings whose nodes the summary lists one per line (not repeated among the fleet findings).
LISTED_AS_NODES = ("fleet-node-unfit", "fleet-node-unknown", "fleet-nodes-missing")


def _cell(text: object) -> str:
    """Text from the nodes for markdown (a cell, or prose on one line): redacted, escaped."""
    return md_cell(redact_text(str(text)))


def _row(*cells: object) -> str:
    """A table row of text from the nodes: every cell redacted and escaped (numbers too: a
    document may hold a string where a number belongs) but the :class:`Markdown` ones."""
    return md_row(c if isinstance(c, Markdown) else redact_text("" if c is None else str(c))
                  for c in cells)


def _plain(text: object) -> str:
    """One terminal line of text that came from the nodes (names, reasons, titles)."""
    return terminal(redact_text(str(text)), newlines=False)


def headline(report: FleetReport) -> str:
    c = report.counts()
    fit = c["ok"] + c["warning"]
    dup = f", {plural(c['duplicates'], 'duplicate document')}" if c["duplicates"] else ""
    told = report.expectation
    missing = f", {told.missing_count} missing of {told.expected} expected" if told else ""
    return (f"fleet {report.status}: {plural(c['nodes'], 'node')}, {fit} fit ({c['warning']} with "
            f"warnings), {c['critical']} unfit, {c['unknown']} unknown{missing}{dup}")


def _problem_lines(report: FleetReport) -> list[str]:
    """One line per unfit or silent node, then per expected node that sent no document."""
    bad = [n for n in report.counted if n.status in ("CRITICAL", "UNKNOWN")]
    bad.sort(key=lambda n: (n.status != "CRITICAL", n.name))
    lines = [f"{n.status:<8} {_plain(n.name)}: {_plain(n.reason or 'no reason recorded')}"
             for n in bad[:NODES_LISTED]]
    if len(bad) > NODES_LISTED:
        lines.append(f"... and {len(bad) - NODES_LISTED} more (see the JSON report)")
    return lines + _missing_lines(report)


def _missing_lines(report: FleetReport) -> list[str]:
    told = report.expectation
    if told is None or not told.missing_count:
        return []
    if not told.missing:  # only a count was expected
        return [f"{'MISSING':<8} {told.missing_count} of {told.expected} expected nodes sent no "
                f"document ({told.found} found)"]
    lines = [f"{'MISSING':<8} {_plain(name)}: expected, sent no document"
             for name in told.missing[:NODES_LISTED]]
    if told.missing_count > len(lines):
        lines.append(f"... and {told.missing_count - len(lines)} more missing (see the JSON "
                     "report's expected.missing)")
    return lines


def render_terminal(report: FleetReport, *, verbose: bool = False,
                    width: int | None = None) -> str:
    """Plain text: the headline, one line per unfit/unknown node, then the fleet findings.
    ``width`` (a terminal's): a node's line wraps between words under its name; without it
    (a log, a pipe) each stays one line."""
    lines = [headline(report)]
    for line in _problem_lines(report):
        lines += wrapped("  " + line, width, indent=" " * 11) if width else ["  " + line]
    others = [f for f in report.findings if f.id not in LISTED_AS_NODES]
    if others:
        lines.append("fleet findings:")
        for f in others:
            sev = f.severity.value if f.severity else "info"
            lines.append(f"  {sev:<8} {f.id:<24} {_plain(f.title)}")
            if verbose:
                lines += [f"           {_plain(f.detail)}", f"           fix: {_plain(f.remedy)}"]
    if verbose:
        lines.append("nodes:")
        lines += [f"  {n.status:<8} {_plain(n.name)}  ({_plain(n.source)})" for n in report.nodes]
    return "\n".join(lines) + "\n"


def gpu_frame(report: FleetReport) -> Any:
    """The per-GPU table of the counted nodes, a pandas frame (None when no node has a GPU)."""
    view = FleetView(report.nodes)
    if not any(n.gpus for n in view.live):
        return None
    frame = gpu_table(view)
    return frame.drop(columns=["name"]).assign(model=frame["name"])


def _process_table(report: FleetReport) -> list[str]:
    """Duplicate servers and leftover or foreign processes, by host and pid."""
    found = [f for f in report.findings
             if f.id in ("fleet-duplicate-backends", "fleet-leftover-processes")]
    rows = [r for f in found for r in f.evidence.get("processes", [])]
    if not rows:
        return []
    lines = ["", "## Duplicate backends and leftover processes", ""]
    lines += [f"- **{f.id}**: {_cell(f.title)}. {_cell(f.detail)}" for f in found]
    lines += ["", "| host | pid | kind | user | program | GPU | memory | node's verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kind = f"{r['kind']}" + (" (keep: oldest)" if r.get("keep") else "")
        lines.append(_row(r["host"], r["pid"], kind, r.get("user"), r.get("name"),
                          r.get("gpu_index"), fmt_bytes(r.get("used_memory_bytes")),
                          r.get("status")))
    shown = sum(f.evidence.get("count", 0) for f in found)
    if shown > len(rows):
        lines += ["", f"{shown - len(rows)} more in the JSON report's counts."]
    return lines


def _node_row(node: Node) -> str:
    status = f"duplicate of {node.duplicate_of}" if node.duplicate_of else node.status
    return _row(node.name, status, len(node.gpus) if node.answered else None,
                node.driver_version, node.cuda_driver_version, node.torch_version,
                node.tool_version, node.reason)


def render_markdown(report: FleetReport, *, plot: str | None = None) -> str:
    """The markdown report; ``plot`` is the file name of the heat map written beside it."""
    lines = [f"# gpu-audit fleet report ({_cell(report.source)})", "",
             f"**{md_text(headline(report))}** (exit code {report.exit_code})", "",
             f"Generated {md_text(report.generated_at)}."]
    problems = _problem_lines(report)
    if problems:
        lines += ["", "## Unfit, unknown and missing nodes", ""]
        lines += [f"- {_cell(p)}" for p in problems]
    skews = [f for f in report.findings if f.id.endswith("-skew") or f.id == "fleet-gpu-mismatch"]
    if skews:
        lines += ["", "## Skew between nodes", "", "| finding | values | nodes off the majority |",
                  "|---|---|---|"]
        for f in skews:
            values = ", ".join(f"{k}: {v}" for k, v in f.evidence.get("values", {}).items())
            off = ", ".join(f.evidence.get("nodes", []))
            if f.evidence.get("majority") is None:  # a tie: no value is the reference
                off = "no majority" + (f"; off the tied values: {off}" if off else "")
            lines.append(_row(Markdown(md_code(f.id)), values, off))
    outliers = [f for f in report.findings if f.id == "fleet-gpu-outlier"]
    if outliers:
        lines += ["", "## GPU outliers (median/MAD per GPU model)", "",
                  "| GPU | metric | value | median | MAD | z | peers |",
                  "|---|---|---|---|---|---|---|"]
        for f in outliers:
            e = f.evidence
            lines.append(_row(f.subject, e["metric"], e["value"], e["median"], e["mad"],
                              e["z"], e["peers"]))
    if plot:
        lines += ["", "## Per-node heat map", "",
                  "Each node's own verdict (red: unfit), then its worst GPU per judged "
                  "quantity against the median of its GPU model across the fleet (0: at the "
                  "median, 1: one outlier floor away on the bad side; grey: no peers or no "
                  f"reading). [{plot}]({plot})", "", f"![per-node heat map]({plot})"]
    lines += _process_table(report)
    rest = [f for f in report.findings if f not in skews and f not in outliers
            and f.id not in (*LISTED_AS_NODES, "fleet-duplicate-backends",
                             "fleet-leftover-processes")]
    if rest:
        lines += ["", "## Other fleet findings", ""]
        lines += [f"- **{f.id}** ({f.severity.value if f.severity else 'info'}): "
                  f"{_cell(f.title)}. {_cell(f.detail)}" for f in rest]
    lines += ["", "## Nodes", "",
              "| node | verdict | GPUs | driver | CUDA | torch | gpu-audit | reason |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [_node_row(n) for n in report.nodes]
    return md_document("\n".join(lines) + "\n")


# ------------------------------------------------------- files beside the markdown report

PARQUET_HINT = "pip install 'gpu-audit[parquet]'"


def parquet_engine() -> bool:
    """Whether pandas can write Parquet here (pyarrow installed and importable)."""
    try:
        if importlib.util.find_spec("pyarrow") is None:
            return False
        import pyarrow  # noqa: F401
    except (ImportError, ValueError):  # ValueError: a module without a spec in sys.modules
        return False
    return True


# What write_gpu_tables puts beside a report ``<stem>.md``: ``<stem><ending>``; retention
# deletes them with their report.
BESIDE_REPORT = ("-gpus.csv", "-gpus.parquet", "-heatmap.png")


def write_gpu_tables(report: FleetReport, md: Path,
                     note: Callable[[str], None] | None = None) -> list[Path]:
    """Write the per-GPU CSV, its Parquet twin and the heat map beside ``md``; returns the
    files written. ``note`` hears what was not written and why."""
    written: list[Path] = []
    frame = gpu_frame(report)
    if frame is None:
        return written
    written.append(write_atomic(md.with_name(md.stem + BESIDE_REPORT[0]),
                                frame.to_csv(index=False)))
    parquet = md.with_name(md.stem + BESIDE_REPORT[1])
    if parquet_engine():
        buffer = io.BytesIO()
        try:
            _uniform(frame).to_parquet(buffer, index=False)
        except (ValueError, TypeError, OverflowError) as exc:  # pyarrow's Arrow errors too
            if note:
                note(f"per-GPU table written as CSV only: Parquet failed ({exc})")
        else:
            written.append(write_atomic(parquet, buffer.getvalue()))
    elif note:
        note(f"per-GPU table written as CSV only: Parquet needs pyarrow ({PARQUET_HINT})")
    png = heatmap_png(report)
    if png is not None:
        plot = write_atomic(md.with_name(md.stem + BESIDE_REPORT[2]), png)
        written.append(plot)
        write_atomic(md, render_markdown(report, plot=plot.name))
    return written


def _uniform(frame):
    """The frame with every text column of one type: documents from several gpu-audit versions
    may give one field as a bool here and a string there, which Parquet cannot store."""
    frame = frame.copy()
    # object columns, and pandas 3's own text dtype ("str"), which select_dtypes(include="object")
    # still returns with a deprecation warning
    text = [name for name, dtype in frame.dtypes.items() if str(dtype) in ("object", "str")]
    for column in text:
        kinds = {type(v) for v in frame[column] if v is not None and v == v}
        if len(kinds) > 1:
            frame[column] = frame[column].map(lambda v: v if v is None or v != v else str(v))
    return frame


# ---------------------------------------------------------------------- the heat map

NODES_DRAWN = 60  # rows of the map; a larger fleet shows its nodes furthest from their peers
ANNOTATED = 40  # raw values are written in the cells up to this many rows
SATURATION = 3.0
# The first column: the node's own verdict, on the same scale (a CRITICAL node is as red as a
# GPU three floors from its peers), so an unfit GPU without peers never looks all green.
OWN = "own verdict (worst finding)"
OWN_SCORES = {"OK": 0.0, "WARNING": SATURATION / 2, "CRITICAL": SATURATION}
LABEL_WIDTH = 16  # characters per line of a column's label


def node_scores(report: FleetReport) -> tuple[Any, Any] | None:
    """(scores, values): per node (index) and column, the node's own verdict (:data:`OWN`:
    scored by :data:`OWN_SCORES`, its worst finding's id as the value), then per metric the
    node's worst GPU as a floor-scaled distance from its model's median, and that GPU's raw
    value; None without GPUs. A distance needs peers: a GPU whose model has fewer than
    :data:`~gpu_audit.fleet.outliers.MIN_PEERS` GPUs in the fleet, or no reading, has none
    (NaN, drawn grey), never 0 (green)."""
    view = FleetView(report.nodes)
    if not any(n.gpus for n in view.live):
        return None
    frame = gpu_table(view)
    frame["model"] = frame["name"].fillna("?").astype(str)
    drawn = [n for n in view.live if n.gpus]
    scores = {OWN: {n.name: OWN_SCORES.get(n.status, float("nan")) for n in drawn}}
    values = {OWN: {n.name: (n.worst[0]["id"] if n.worst and n.worst[0]["id"] else n.status)
                    for n in drawn}}
    for metric in METRICS:
        column = frame[metric.column]
        by_model = column.groupby(frame["model"])
        median = by_model.transform("median")
        peers = by_model.transform("count")
        deviation = column - median
        floor = (metric.floor * median.abs()).where(median.abs() > 0) if metric.relative \
            else metric.floor
        if metric.side == "high":
            bad = deviation
        elif metric.side == "low":
            bad = -deviation
        else:
            bad = deviation.abs()
        score = (bad / floor).clip(lower=0).where(peers >= MIN_PEERS)
        worst = score.fillna(-1).groupby(frame["node"]).idxmax()
        scores[metric.label] = score.loc[worst.to_numpy()].set_axis(worst.index)
        values[metric.label] = column.loc[worst.to_numpy()].set_axis(worst.index)
    import pandas as pd

    order = [n.name for n in drawn]
    score_frame = pd.DataFrame(scores).reindex(order)
    value_frame = pd.DataFrame(values).reindex(order)
    if len(order) > NODES_DRAWN:
        top = score_frame.max(axis=1).fillna(0).sort_values(ascending=False, kind="stable")
        keep = [n for n in order if n in set(top.index[:NODES_DRAWN])]
        score_frame, value_frame = score_frame.loc[keep], value_frame.loc[keep]
    return score_frame, value_frame


def heatmap_figure(report: FleetReport) -> Any:
    """The heat map as a matplotlib figure (the caller closes it), None when no node has a GPU.
    Its layout keeps every label inside the figure: the x labels wrapped and slanted so they
    never overlap, the colour bar's label beside the bar."""
    scored = node_scores(report)
    if scored is None:
        return None
    scores, values = scored
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows, cols = scores.shape
    total = sum(1 for n in FleetView(report.nodes).live if n.gpus)
    fig, ax = plt.subplots(figsize=(3.0 + 1.2 * cols, 2.4 + 0.28 * rows), dpi=100,
                           layout="constrained")
    # No peers or no reading: grey, not "at the median".
    cmap = matplotlib.colormaps["RdYlGn_r"].with_extremes(bad="#d0d0d0")
    grid = np.ma.masked_invalid(scores.to_numpy(dtype=float))
    image = ax.imshow(grid, cmap=cmap, vmin=0, vmax=SATURATION, aspect="auto",
                      interpolation="nearest")
    ax.set_xticks(range(cols), [textwrap.fill(str(c), LABEL_WIDTH) for c in scores.columns],
                  fontsize=7, rotation=30, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(rows), [_label(n) for n in scores.index], fontsize=7)
    if rows <= ANNOTATED:
        for r in range(rows):
            for c in range(cols):
                ax.text(c, r, _cell_text(values.iat[r, c]), ha="center", va="center",
                        fontsize=6)
    shown = f" ({rows} of {total} nodes furthest from their peers)" if rows < total else ""
    ax.set_title(textwrap.fill(f"Worst GPU per node vs its model's median{shown}", 70),
                 fontsize=9)
    bar = fig.colorbar(image, ax=ax, shrink=0.8)
    bar.set_label("distance on the bad side (outlier floors);\nown verdict: 1.5 warning, "
                  "3 unfit", fontsize=8)
    return fig


def heatmap_png(report: FleetReport) -> bytes | None:
    """The heat map as PNG bytes (None when no node has a GPU)."""
    fig = heatmap_figure(report)
    if fig is None:
        return None
    import matplotlib.pyplot as plt

    try:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _cell_text(value: object) -> str:
    """A cell's raw value: a number, the own verdict's finding id (short), or n/a."""
    if value is None or value != value:
        return "n/a"
    if isinstance(value, str):
        text = "".join(ch if ch.isprintable() else "?" for ch in redact_text(value))
        text = text.replace("$", "\\$")
        return text if len(text) <= 14 else text[:13] + "…"
    return f"{value:g}"


def _label(name: object) -> str:
    """A node name fit for an axis label (printable, short)."""
    text = "".join(ch if ch.isprintable() else "?" for ch in redact_text(str(name)))
    text = text.replace("$", "\\$")  # matplotlib would read $...$ as mathtext
    return text if len(text) <= 32 else text[:31] + "…"
