"""Judging the sustained load of ``gpu-audit diag --level 3`` (pure).

The load's throughput (one figure per second) is compared with its own first seconds, which
needs no table: a GPU that loses more than :data:`DECAY_BOUND` of its speed fails. The NVML
samples taken every second beside it say why: clocks, temperature, power, throttle reasons. Any
error counter that moves during the load (ECC, remapped rows, retired pages, an Xid in the kernel
log) fails the GPU too.
"""

from __future__ import annotations

import statistics
from typing import Any

from gpu_audit.diag.catalogue import diag_finding
from gpu_audit.diag.results import DiagJudgement, GpuRun
from gpu_audit.model import Severity

DECAY_BOUND = 0.10  # the largest loss of throughput against the first seconds that passes
WARMUP_TICKS = 1  # the first second (clocks ramping, caches cold) is not the baseline
BASELINE_TICKS = 5
# Reasons a healthy, cooled GPU within its power limit never shows under load.
UNEXPECTED_THROTTLES = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                        "hw_power_brake_slowdown")
POWER_CAP_SHARE = 0.90  # a power cap while drawing less than this share of the limit is odd
MIN_ODD_SAMPLES = 3
COUNTERS = ("ecc_errors_corrected_volatile", "ecc_errors_uncorrected_volatile",
            "remapped_rows_correctable", "remapped_rows_uncorrectable", "retired_pages_sbe",
            "retired_pages_dbe")
FLAGS = ("remapped_rows_pending", "retired_pages_pending")


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _column(samples: list[dict[str, Any]], name: str) -> list[Any]:
    return [s.get(name) for s in samples if s.get(name) is not None]


def summarise(gpu: GpuRun) -> dict[str, Any]:
    """The sustained load in numbers: baseline and tail throughput, decay, clocks, heat."""
    ticks = gpu.ticks
    tail_n = max(2, len(ticks) // 5)
    baseline_ticks = ticks[WARMUP_TICKS:WARMUP_TICKS + BASELINE_TICKS] \
        if len(ticks) >= WARMUP_TICKS + BASELINE_TICKS + tail_n else ticks[:2]
    baseline, tail = _median(baseline_ticks), _median(ticks[-tail_n:])
    decay = 1 - tail / baseline if baseline and tail is not None else None
    clocks = _column(gpu.samples, "sm_clock_mhz")
    reasons: dict[str, int] = {}
    for sample in gpu.samples:
        for name in sample.get("throttle_reasons") or []:
            reasons[name] = reasons.get(name, 0) + 1
    head_n = max(1, min(BASELINE_TICKS, len(clocks) // 5 or 1))
    return {
        "ticks": len(ticks),
        "samples": len(gpu.samples),
        "baseline_tflops": round(baseline, 4) if baseline is not None else None,
        "tail_tflops": round(tail, 4) if tail is not None else None,
        "decay_pct": round(100 * decay, 1) if decay is not None else None,
        "decay_bound_pct": 100 * DECAY_BOUND,
        "sm_clock_first_mhz": _median(clocks[WARMUP_TICKS:WARMUP_TICKS + head_n] or clocks[:1]),
        "sm_clock_last_mhz": _median(clocks[-max(1, len(clocks) // 5):]) if clocks else None,
        "temperature_max_c": max(_column(gpu.samples, "temperature_c"), default=None),
        "power_max_w": max(_column(gpu.samples, "power_draw_w"), default=None),
        "power_limit_w": gpu.power_limit_w,
        "throttle_reasons": reasons,
    }


def judge_sustained(out: DiagJudgement, gpu: GpuRun) -> None:
    if not gpu.ticks and not gpu.samples:
        return
    summary = summarise(gpu)
    out.sustained[gpu.index] = summary
    label = f"GPU {gpu.index}" + (f" ({gpu.name})" if gpu.name else "")
    decay = summary["decay_pct"]
    if decay is not None and decay > 100 * DECAY_BOUND:
        reasons = ", ".join(sorted(summary["throttle_reasons"])) or "none reported"
        out.findings.append(diag_finding(
            "diag-thermal-decay", gpu.subject, f"Throughput decayed {decay:g}% under load on "
                                               f"{label}",
            f"{summary['baseline_tflops']:g} TFLOPS in the first seconds, "
            f"{summary['tail_tflops']:g} at the end ({decay:g}% lower; bound "
            f"{summary['decay_bound_pct']:g}%); SM clock {summary['sm_clock_first_mhz']} -> "
            f"{summary['sm_clock_last_mhz']} MHz, up to {summary['temperature_max_c']} C; "
            f"throttle reasons: {reasons}",
            "Check cooling (fans, airflow, dust, the server's fan profile) and the power limit "
            f"(`nvidia-smi -q -i {gpu.index} -d TEMPERATURE,POWER,PERFORMANCE`); rerun "
            f"`gpu-audit diag --level 3 --gpus {gpu.index}` after.", summary))
    _throttles(out, gpu, summary, label)
    _counters(out, gpu, label)


def _throttles(out: DiagJudgement, gpu: GpuRun, summary: dict[str, Any], label: str) -> None:
    seen = {r: n for r, n in summary["throttle_reasons"].items() if r in UNEXPECTED_THROTTLES}
    if seen:
        out.findings.append(diag_finding(
            "diag-throttle-unexpected", gpu.subject, f"Slowdown under load on {label}",
            "NVML reported " + ", ".join(f"{r} in {n} of {summary['samples']} samples"
                                         for r, n in sorted(seen.items()))
            + f" (up to {summary['temperature_max_c']} C, {summary['power_max_w']} W)",
            "Thermal: check cooling and airflow; hardware slowdown or power brake: check the "
            "power supply and cables (`nvidia-smi -q -d PERFORMANCE` shows the reason while "
            "it is active).", {**summary, "unexpected_reasons": seen}))
    odd = [s for s in gpu.samples if "sw_power_cap" in (s.get("throttle_reasons") or [])
           and s.get("power_draw_w") is not None and s.get("power_limit_w")
           and s["power_draw_w"] < POWER_CAP_SHARE * s["power_limit_w"]]
    if len(odd) >= MIN_ODD_SAMPLES:
        out.findings.append(diag_finding(
            "diag-throttle-unexpected", gpu.subject, f"Power cap below the power limit on "
                                                     f"{label}",
            f"software power cap in {len(odd)} samples while drawing "
            f"{max(s['power_draw_w'] for s in odd):g} W of a {odd[0]['power_limit_w']:g} W "
            "limit", f"Check the enforced limit: `nvidia-smi -q -i {gpu.index} -d POWER` "
            "(enforced vs default limit); a platform or BMC power cap may be set.",
            {"samples": len(odd), "power_limit_w": odd[0]["power_limit_w"]},
            severity=Severity.WARNING))


def _counters(out: DiagJudgement, gpu: GpuRun, label: str) -> None:
    moved: dict[str, Any] = {}
    for name in COUNTERS:
        values = _column(gpu.samples, name)
        if len(values) >= 2 and values[-1] > values[0]:
            moved[name] = {"before": values[0], "after": values[-1]}
    for name in FLAGS:
        values = _column(gpu.samples, name)
        if values and values[-1] and not values[0]:
            moved[name] = {"before": values[0], "after": values[-1]}
    if gpu.new_xids:
        moved["xid"] = [{"xid": x.get("xid"), "message": x.get("message")}
                        for x in gpu.new_xids]
    if moved:
        out.findings.append(diag_finding(
            "diag-counter-moved", gpu.subject, f"Error counters moved under load on {label}",
            "; ".join(f"{k} {v['before']} -> {v['after']}" if isinstance(v, dict) else
                      f"Xid {', '.join(str(x['xid']) for x in v)}" for k, v in moved.items()),
            f"Run `nvidia-smi -q -i {gpu.index} -d ECC,ROW_REMAPPER,PAGE_RETIREMENT` and "
            "`gpu-audit explain` on the kernel log; take the GPU out of service and contact the "
            "vendor if errors repeat.", {"moved": moved}))
