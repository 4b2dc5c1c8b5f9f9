"""Gates and summaries over a stage's per-cycle records: pure functions, no I/O.

Default gates (what users asked for): every planned cycle completed, no unrecovered OOM,
fragmentation under the policy's ``alloc_fragmentation_pct`` (50%), swap used under
``max_swap_used_gib`` (2 GiB). ``--require`` adds gates on the workload's own metrics or on any
telemetry field: ``phi>0.3`` (every cycle), ``mean(phi)>0.3``, ``classical:min(phi)>=0.3``,
``reserved_peak_bytes<6GiB``.

Fragmentation is the non-releasable kind: inactive-split bytes over reserved bytes at the end of
a cycle. The cache slack ((reserved - allocated) / reserved) is reported too, but it counts cache
that ``empty_cache`` could return and reads near 100% for any loop that frees its tensors at the
end of a cycle, so it would make a useless gate.

Summaries (:func:`summarize`, :func:`drift`) are pandas aggregates over :func:`cycle_frame`;
pandas is imported when a stage is first summarised, never when this module is.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpu_audit.errors import UsageError
from gpu_audit.knowledge.allocator.limits import FRAGMENTATION_MIN_BYTES
from gpu_audit.units import MIB, fmt_bytes, fmt_pct, parse_size, plural

if TYPE_CHECKING:
    import pandas as pd

_OPS = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}
AGGREGATES = ("mean", "median", "min", "max", "first", "last")
_REQUIRE = re.compile(
    r"^\s*(?:(?P<stage>[a-z][a-z-]*)\s*:\s*)?"
    r"(?:(?P<agg>[a-z]+)\(\s*(?P<inner>[A-Za-z_][\w.]*)\s*\)|(?P<name>[A-Za-z_][\w.]*))"
    r"\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<limit>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\s*[A-Za-z]*)\s*$"
)
DRIFT_WARMUP_FRACTION = 0.1
DRIFT_MIN_POINTS = 10
# Fewest completed cycles a drift finding (reserved-drift, rss-drift) is raised from: below it a
# least-squares line through a handful of points after the warm-up follows one-off steps (a
# cache filling, the host's allocator growing an arena) as readily as a leak, so the slope is
# still reported but not judged.
DRIFT_MIN_CYCLES = 30
DRIFT_MIN_R2 = 0.5


@dataclass(frozen=True)
class Requirement:
    """A ``--require`` gate: ``[stage:][agg(]metric[)] op limit``."""

    text: str
    metric: str
    op: str
    limit: float
    aggregate: str | None = None  # None: every cycle must satisfy it
    stage: str | None = None  # None: every stage with cycles


@dataclass(frozen=True)
class GateResult:
    name: str
    passed: bool | None  # None: does not apply here (no CUDA figures on the CPU, ...)
    detail: str
    value: float | None = None
    limit: float | None = None


@dataclass(frozen=True)
class Drift:
    """A least-squares line through a per-cycle series, after the warm-up cycles."""

    slope_per_cycle: float
    r2: float
    points: int


@dataclass(frozen=True)
class LegSummary:
    cycles_done: int
    median_cycle_s: float | None
    iqr_cycle_s: float | None  # interquartile range of the cycle times: their run-to-run spread
    p95_cycle_s: float | None
    max_cycle_s: float | None
    total_cycle_s: float
    peak_allocated_bytes: int | None
    peak_reserved_bytes: int | None
    worst_fragmentation_pct: float | None
    # The worst share among the cycles holding FRAGMENTATION_MIN_BYTES or more in split blocks:
    # what the fragmentation gate judges (None: no cycle did, or no CUDA figures).
    worst_judged_fragmentation_pct: float | None
    worst_cache_slack_pct: float | None
    alloc_retries: int | None
    ooms: int | None
    oom_retries: int
    min_batch_scale: float
    max_swap_used_bytes: int | None
    max_rss_bytes: int | None
    reserved_drift: Drift | None
    rss_drift: Drift | None


def parse_requirement(text: str, stage_names: Sequence[str] = ()) -> Requirement:
    """Parse one ``--require`` expression; raises :class:`UsageError` with the expected form."""
    match = _REQUIRE.match(text)
    if not match:
        raise UsageError(f"--require {text!r}: expected METRIC OP NUMBER, e.g. 'phi>0.3', "
                         f"'mean(phi)>=0.5' or 'classical:min(phi)>0.3' (OP: > >= < <= == !=)")
    aggregate = match["agg"]
    if aggregate is not None and aggregate not in AGGREGATES:
        raise UsageError(f"--require {text!r}: unknown aggregate {aggregate!r} "
                         f"(use one of: {', '.join(AGGREGATES)})")
    stage = match["stage"]
    if stage is not None and stage_names and stage not in stage_names:
        raise UsageError(f"--require {text!r}: unknown stage {stage!r} "
                         f"(stages: {', '.join(stage_names)})")
    limit_text = match["limit"].replace(" ", "")
    number = re.match(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", limit_text)
    assert number is not None  # the pattern above guarantees a number
    if number.end() < len(limit_text):
        try:
            limit = float(parse_size(limit_text))
        except ValueError:
            raise UsageError(f"--require {text!r}: {limit_text!r} is neither a number nor a "
                             "size like 6GiB") from None
    else:
        limit = float(limit_text)
    return Requirement(text=text.strip(), metric=match["inner"] or match["name"], op=match["op"],
                       limit=limit, aggregate=aggregate, stage=stage)


def metric_value(record: dict[str, Any], name: str) -> float | None:
    """A workload metric, or else a telemetry field, of one cycle record."""
    metrics = record.get("metrics") or {}
    value = metrics.get(name, record.get(name))
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def check_requirement(req: Requirement, records: Sequence[dict[str, Any]]) -> GateResult:
    values = [(r.get("cycle"), metric_value(r, req.metric)) for r in records]
    present = [(cycle, v) for cycle, v in values if v is not None]
    name = f"require {req.text}"
    if not present:
        return GateResult(name, False, f"no cycle reported a numeric {req.metric!r}",
                          None, req.limit)
    compare = _OPS[req.op]
    if req.aggregate is None:
        failing = [(cycle, v) for cycle, v in present if not compare(v, req.limit)]
        if failing:
            cycle, value = failing[0]
            return GateResult(name, False, f"{len(failing)} of {len(present)} cycles fail it; "
                              f"first: cycle {cycle} with {req.metric}={value:g}", value, req.limit)
        worst = min(v for _, v in present) if req.op in (">", ">=") else max(
            v for _, v in present)
        return GateResult(name, True, f"all {len(present)} cycles meet it", worst, req.limit)
    numbers = [v for _, v in present]
    value = {
        "mean": statistics.fmean, "median": statistics.median, "min": min, "max": max,
        "first": lambda xs: xs[0], "last": lambda xs: xs[-1],
    }[req.aggregate](numbers)
    verdict = compare(value, req.limit)
    return GateResult(name, verdict, f"{req.aggregate}({req.metric}) = {value:g} over "
                      f"{len(numbers)} cycles", value, req.limit)


# The per-cycle telemetry a summary reads: counts of whole things, then measurements.
_WHOLE = ("allocated_peak_bytes", "reserved_peak_bytes", "reserved_bytes", "rss_bytes",
          "swap_used_bytes", "alloc_retries", "ooms", "inactive_split_bytes")
_REAL = ("cycle_s", "fragmentation_pct", "cache_slack_pct", "batch_scale")


def cycle_frame(records: Sequence[dict[str, Any]],
                columns: Sequence[str] = ("cycle", *_WHOLE, *_REAL)) -> pd.DataFrame:
    """One row per cycle record, one float column per field; a field a record lacks, or holds
    no number in (``None`` on the CPU), is NaN, which every aggregate below skips."""
    import pandas as pd

    frame = pd.DataFrame(list(records), columns=list(columns))
    return frame.apply(pd.to_numeric, errors="coerce").astype("float64")


def summarize(records: Sequence[dict[str, Any]]) -> LegSummary:
    frame = cycle_frame(records)
    times = frame["cycle_s"].dropna().sort_values(ignore_index=True)
    peaks = frame.max()
    totals = frame.sum(min_count=1)
    p95_index = max(0, math.ceil(0.95 * len(times)) - 1)  # nearest rank
    oom_retries = sum(len(r.get("oom_retries") or []) for r in records)
    # A missing or zero scale is the full batch.
    scales = frame["batch_scale"].replace(0.0, 1.0).fillna(1.0)
    return LegSummary(
        # How far the stage got: a command that resumed itself numbers its cycles from where
        # it resumed, and the cycles before may have no record.
        cycles_done=max([len(records), *(r["cycle"] + 1 for r in records
                                          if isinstance(r.get("cycle"), int))]),
        median_cycle_s=plain_float(times.median()),
        iqr_cycle_s=plain_float(times.quantile(0.75) - times.quantile(0.25)),
        p95_cycle_s=plain_float(times.iloc[p95_index]) if len(times) else None,
        max_cycle_s=plain_float(peaks["cycle_s"]),
        total_cycle_s=float(times.sum()),
        peak_allocated_bytes=plain_int(peaks["allocated_peak_bytes"]),
        peak_reserved_bytes=plain_int(peaks["reserved_peak_bytes"]),
        worst_fragmentation_pct=plain_float(peaks["fragmentation_pct"]),
        worst_judged_fragmentation_pct=plain_float(frame.loc[
            frame["inactive_split_bytes"] >= FRAGMENTATION_MIN_BYTES, "fragmentation_pct"].max()),
        worst_cache_slack_pct=plain_float(peaks["cache_slack_pct"]),
        alloc_retries=plain_int(totals["alloc_retries"]),
        ooms=plain_int(totals["ooms"]),
        oom_retries=oom_retries,
        min_batch_scale=float(scales.min()) if len(scales) else 1.0,
        max_swap_used_bytes=plain_int(peaks["swap_used_bytes"]),
        max_rss_bytes=plain_int(peaks["rss_bytes"]),
        reserved_drift=_drift(frame, "reserved_bytes"),
        rss_drift=_drift(frame, "rss_bytes"),
    )


def drift(records: Sequence[dict[str, Any]], field_name: str) -> Drift | None:
    """Slope (per cycle) and R² of ``field_name`` after the first 10% of cycles."""
    return _drift(cycle_frame(records, ("cycle", field_name)), field_name)


def _drift(frame: pd.DataFrame, field_name: str) -> Drift | None:
    points = frame[["cycle", field_name]].dropna()
    points = points.iloc[int(len(points) * DRIFT_WARMUP_FRACTION):]
    if len(points) < DRIFT_MIN_POINTS:
        return None
    cycles, values = points["cycle"], points[field_name]
    if cycles.var() == 0:
        return None
    slope = cycles.cov(values) / cycles.var()
    r2 = 1.0 if values.var() == 0 else cycles.corr(values) ** 2
    return Drift(slope_per_cycle=float(slope), r2=float(r2), points=len(points))


def is_leak_suspect(found: Drift | None, horizon_cycles: int, budget_bytes: int | None, *,
                    cycles: int | None = None) -> bool:
    """A steady rise (R² >= 0.5) over at least :data:`DRIFT_MIN_CYCLES` completed cycles
    (``cycles``; by default the points of the fit plus the warm-up) that, kept up over
    ``horizon_cycles``, would take 2% of the memory budget (at least 64 MiB; 256 MiB when the
    budget is unknown)."""
    if found is None or found.slope_per_cycle <= 0 or found.r2 < DRIFT_MIN_R2:
        return False
    if cycles is None:
        cycles = math.ceil(found.points / (1 - DRIFT_WARMUP_FRACTION))
    if cycles < DRIFT_MIN_CYCLES:
        return False
    threshold = max(64 * MIB, 0.02 * budget_bytes) if budget_bytes else 256 * MIB
    return found.slope_per_cycle * horizon_cycles >= threshold


def default_gates(records: Sequence[dict[str, Any]], summary: LegSummary, *, planned: int,
                  completed: bool, unrecovered_oom: str | None, max_fragmentation_pct: float,
                  max_swap_used_bytes: int) -> list[GateResult]:
    gates = [
        GateResult("cycles-complete", completed and summary.cycles_done >= planned,
                   f"{summary.cycles_done} of {planned} cycles completed",
                   summary.cycles_done, planned),
        GateResult("no-unrecovered-oom", unrecovered_oom is None,
                   unrecovered_oom or (f"{plural(summary.oom_retries, 'OOM')} recovered by retrying"
                                       if summary.oom_retries else "no out-of-memory error")),
    ]
    frag = summary.worst_fragmentation_pct
    if frag is None:
        gates.append(GateResult("fragmentation", None,
                                "no CUDA allocator figures (the stage ran on the CPU)",
                                None, max_fragmentation_pct))
    elif summary.worst_judged_fragmentation_pct is None:
        gates.append(GateResult("fragmentation", True,
                                f"worst inactive-split share of reserved memory "
                                f"{fmt_pct(frag, decimals=1)}, but never "
                                f"{fmt_bytes(FRAGMENTATION_MIN_BYTES)} or more in split blocks "
                                f"(limit {fmt_pct(max_fragmentation_pct)} above that)",
                                frag, max_fragmentation_pct))
    else:
        judged = summary.worst_judged_fragmentation_pct
        gates.append(GateResult("fragmentation", judged < max_fragmentation_pct,
                                f"worst inactive-split share of reserved memory "
                                f"{fmt_pct(judged, decimals=1)} "
                                f"(limit {fmt_pct(max_fragmentation_pct)}, judged where "
                                f"{fmt_bytes(FRAGMENTATION_MIN_BYTES)} or more is split)",
                                judged, max_fragmentation_pct))
    swap = summary.max_swap_used_bytes
    if swap is None:
        gates.append(GateResult("swap", None, "swap use unknown", None, max_swap_used_bytes))
    else:
        gates.append(GateResult("swap", swap <= max_swap_used_bytes,
                                f"highest swap use {fmt_bytes(swap)} "
                                f"(limit {fmt_bytes(max_swap_used_bytes)})",
                                swap, max_swap_used_bytes))
    return gates


def requirement_applies(req: Requirement, stage: str) -> bool:
    return req.stage is None or req.stage == stage


def plain_int(value: float) -> int | None:
    """A pandas aggregate of whole units as a plain ``int`` (``None`` for NaN: nothing to count)."""
    return None if math.isnan(value) else int(value)


def plain_float(value: float) -> float | None:
    """A pandas aggregate as a plain ``float`` (``None`` for NaN: nothing was measured)."""
    return None if math.isnan(value) else float(value)
