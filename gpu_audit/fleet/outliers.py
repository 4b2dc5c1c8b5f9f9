"""Outliers among same-model GPUs across the fleet, by robust statistics (median and MAD).

The per-GPU table is a pandas frame (pandas is imported here only, when a fleet has GPUs).
A GPU is an outlier on a metric when its modified z-score, 0.6745 * (x - median) / MAD, is
beyond 3.5 on the metric's bad side and it is at least a floor away from the median (so a
tight fleet does not flag a 1 °C difference). When the MAD is 0, the floor alone decides.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpu_audit.fleet.registry import FleetView, fleet_rule
from gpu_audit.model import Finding

Z_LIMIT = 3.5
MIN_PEERS = 3  # GPUs of one model needed before any of them can be called an outlier
BUSY_PCT = 50  # clocks are compared only between GPUs at least this busy


@dataclass(frozen=True)
class Metric:
    column: str
    label: str
    side: str  # "high" or "low": the bad side
    floor: float  # the least distance from the median that counts
    relative: bool = False  # floor is a fraction of the median
    remedy: str = ""


METRICS = (
    Metric("temperature_c", "temperature (°C)", "high", 10.0,
           remedy="check the node's airflow and fans; nvidia-smi -q -d TEMPERATURE"),
    Metric("power_draw_w", "power draw at similar utilisation (W)", "both", 0.25, relative=True,
           remedy="nvidia-smi -q -d POWER,PERFORMANCE   # a capped or throttled GPU"),
    Metric("sm_clock_mhz", "SM clock under load (MHz)", "low", 0.15, relative=True,
           remedy="nvidia-smi -q -d PERFORMANCE   # throttle reasons on that GPU"),
    Metric("ecc_errors_corrected_volatile", "corrected ECC errors since boot", "high", 100.0,
           remedy="nvidia-smi -q -d ECC; plan a GPU reset or replacement"),
    Metric("remapped_rows_correctable", "remapped rows", "high", 8.0,
           remedy="nvidia-smi -q -d ROW_REMAPPER; ask the vendor about the board"),
    Metric("pcie_width_current", "PCIe link width (lanes)", "low", 0.4, relative=True,
           remedy="reseat the GPU or its riser; lspci -vv shows LnkSta against LnkCap"),
)


def gpu_table(view: FleetView) -> Any:
    """One row per GPU of the counted nodes: node name plus the compared fields."""
    import pandas as pd

    rows = [{"node": n.name, **g} for n in view.live for g in n.gpus]
    frame = pd.DataFrame.from_records(rows)
    for column in ("utilization_pct", *(metric.column for metric in METRICS)):
        if column not in frame:
            frame[column] = None
        numbers = pd.to_numeric(frame[column], errors="coerce")
        # A reading that is not a finite number (a hand-edited "Infinity") is unknown.
        frame[column] = numbers.where(numbers.abs() != float("inf"))
    return frame


def find_outliers(view: FleetView) -> list[dict[str, Any]]:
    """Every (GPU, metric) outlier with the numbers behind the call."""
    if not any(n.gpus for n in view.live):
        return []
    frame = gpu_table(view)
    frame["model"] = frame["name"].fillna("?").astype(str)
    frame["util_band"] = (frame["utilization_pct"].fillna(-10) // 20).astype(int)
    found: list[dict[str, Any]] = []
    for metric in METRICS:
        part = frame
        groups = ["model"]
        if metric.column == "power_draw_w":
            groups = ["model", "util_band"]
        elif metric.column == "sm_clock_mhz":
            part = frame[frame["utilization_pct"] >= BUSY_PCT]
        part = part[part[metric.column].notna()]
        if part.empty:
            continue
        grouped = part.groupby(groups)[metric.column]
        size = grouped.transform("size")
        median = grouped.transform("median")
        deviation = part[metric.column] - median
        mad = deviation.abs().groupby([part[g] for g in groups]).transform("median")
        floor = metric.floor * median.abs() if metric.relative else metric.floor
        if metric.side == "high":
            bad = deviation >= floor
        elif metric.side == "low":
            bad = -deviation >= floor
        else:
            bad = deviation.abs() >= floor
        z = (0.6745 * deviation / mad.where(mad > 0)).round(2)
        bad &= (size >= MIN_PEERS) & ((mad == 0) | (z.abs() > Z_LIMIT))
        for idx in part.index[bad.to_numpy()]:
            row = part.loc[idx]
            found.append({
                "node": row["node"], "gpu": _int(row.get("index")), "uuid": row.get("uuid"),
                "model": row["model"], "metric": metric.column, "label": metric.label,
                "value": _num(row[metric.column]), "median": _num(median[idx]),
                "mad": _num(mad[idx]), "z": _num(z[idx]), "peers": int(size[idx]),
                "remedy": metric.remedy,
            })
    found.sort(key=lambda o: (o["node"], o["gpu"] if o["gpu"] is not None else -1, o["metric"]))
    return found


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return round(number, 2) if math.isfinite(number) else None


def _int(value: Any) -> int | None:
    number = _num(value)
    return None if number is None else int(number)


@fleet_rule("fleet-gpu-outlier")
def gpu_outlier(view: FleetView) -> Iterator[Finding]:
    """A GPU stands out from the other GPUs of its model in the fleet (a straggler candidate).

    Compared per GPU model with the median and the median absolute deviation (MAD):
    temperature (high), power draw among GPUs at similar utilisation (either side), SM clock
    among busy GPUs (low), corrected ECC errors and remapped rows (high), and the PCIe link
    width (low). The evidence gives the GPU's value, its peers' median and MAD, the modified
    z-score and the number of peers; at least 3 GPUs of a model are needed.

    Why it matters: in a data-parallel job every rank waits for the slowest GPU, so an outlier
    slows the whole job.

    Example: `gpu-node-05 gpu:3 temperature (°C): 86 vs median 64 of 31 NVIDIA A100-SXM4-80GB` -
    MAD 3, modified z-score 4.9.

    Fix: the remedy follows the metric: airflow and fans for temperature, power and throttle
    reasons (`nvidia-smi -q -d POWER,PERFORMANCE`) for power and clocks, a reset or replacement for
    ECC errors and remapped rows, a reseat for the link width.
    """
    for o in find_outliers(view):
        gpu = f"gpu:{o['gpu']}" if o["gpu"] is not None else "gpu"
        yield Finding(
            subject=f"node:{o['node']}/{gpu}",
            title=f"{o['node']} {gpu} {o['label']}: {o['value']:g} vs median {o['median']:g} "
                  f"of {o['peers']} {o['model']}",
            detail=f"MAD {o['mad']:g}, modified z-score "
                   f"{'n/a (MAD 0)' if o['z'] is None else format(o['z'], 'g')}.",
            remedy=o["remedy"],
            evidence={k: o[k] for k in ("metric", "value", "median", "mad", "z", "peers",
                                        "model", "uuid")},
        )
