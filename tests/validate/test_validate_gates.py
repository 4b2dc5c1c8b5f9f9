"""Gates, summaries and findings from hand-built cycle records: no processes, no I/O."""

from __future__ import annotations

import pytest

from gpu_audit.config import Policy
from gpu_audit.errors import UsageError
from gpu_audit.model import Severity
from gpu_audit.validate.findings import leg_gates, validate_findings
from gpu_audit.validate.gates import (
    check_requirement,
    drift,
    is_leak_suspect,
    parse_requirement,
    summarize,
)
from gpu_audit.validate.plan import ValidateOptions, build_plan
from gpu_audit.validate.report import compare_variants, fragmentation_cell, recommend
from gpu_audit.validate.state import DeviceChoice, LegState, RunState

MIB, GIB = 1024**2, 1024**3


def cuda_cycle(cycle: int, *, reserved: int = 2 * GIB, split: int = 100 * MIB,
               allocated: int = GIB, phi: float = 0.5, retries: int = 0, swap: int = 0,
               rss: int = 500 * MIB, oom_retries: list | None = None, scale: float = 1.0
               ) -> dict:
    return {"type": "cycle", "leg": "default/full", "cycle": cycle, "cycle_s": 0.05 + cycle % 3
            * 0.01, "allocated_bytes": allocated, "allocated_peak_bytes": allocated + 200 * MIB,
            "reserved_bytes": reserved, "reserved_peak_bytes": reserved,
            "inactive_split_bytes": split, "fragmentation_pct": 100 * split / reserved,
            "cache_slack_pct": 100 * (reserved - allocated) / reserved, "alloc_retries": retries,
            "ooms": len(oom_retries or []), "rss_bytes": rss, "swap_used_bytes": swap,
            "batch_scale": scale, "oom_retries": oom_retries or [], "metrics": {"phi": phi}}


def cpu_cycle(cycle: int, rss: int = 300 * MIB, phi: float = 0.5) -> dict:
    return {"type": "cycle", "leg": "default/full", "cycle": cycle, "cycle_s": 0.01,
            "reserved_bytes": None, "fragmentation_pct": None, "alloc_retries": None,
            "ooms": None, "rss_bytes": rss, "swap_used_bytes": 0, "batch_scale": 1.0,
            "oom_retries": [], "metrics": {"phi": phi}}


@pytest.mark.parametrize(("text", "metric", "op", "limit", "aggregate", "stage"), [
    ("phi>0.3", "phi", ">", 0.3, None, None),
    ("mean(phi) >= 0.5", "phi", ">=", 0.5, "mean", None),
    ("classical:min(phi)>0.3", "phi", ">", 0.3, "min", "classical"),
    ("reserved_peak_bytes<6GiB", "reserved_peak_bytes", "<", 6 * GIB, None, None),
    ("loss<=1e-2", "loss", "<=", 0.01, None, None),
])
def test_requirements_parse(text, metric, op, limit, aggregate, stage) -> None:
    req = parse_requirement(text, ["classical"])
    assert (req.metric, req.op, req.limit, req.aggregate, req.stage) == (
        metric, op, limit, aggregate, stage)


def test_requirement_naming_an_unknown_stage_is_refused() -> None:
    with pytest.raises(UsageError, match="unknown stage 'warmup'"):
        parse_requirement("warmup:phi>0.3", ["smoke", "full"])


def test_every_cycle_requirement_names_the_first_cycle_that_misses_it() -> None:
    records = [cuda_cycle(i, phi=0.5) for i in range(5)] + [cuda_cycle(5, phi=0.2)]
    result = check_requirement(parse_requirement("phi>0.3"), records)
    assert result.passed is False
    assert "1 of 6 cycles fail it; first: cycle 5 with phi=0.2" in result.detail
    assert check_requirement(parse_requirement("mean(phi)>0.3"), records).passed is True


def test_a_metric_never_reported_fails_its_requirement() -> None:
    result = check_requirement(parse_requirement("entropy>0.9"), [cuda_cycle(0)])
    assert result.passed is False and "no cycle reported" in result.detail


def test_summary_of_a_cuda_stage() -> None:
    retry = [{"attempt": 1, "kind": "torch", "batch_scale": 0.5}]
    records = [cuda_cycle(i, retries=1 if i == 3 else 0) for i in range(10)]
    records[4] = cuda_cycle(4, oom_retries=retry, scale=0.5, split=900 * MIB)
    summary = summarize(records)
    assert summary.cycles_done == 10
    assert summary.peak_reserved_bytes == 2 * GIB
    assert summary.worst_fragmentation_pct == pytest.approx(100 * 900 / 2048)
    assert summary.alloc_retries == 1
    assert summary.oom_retries == 1 and summary.min_batch_scale == 0.5
    assert summary.median_cycle_s == pytest.approx(0.06)


def test_drift_finds_a_steady_rise_and_ignores_noise() -> None:
    rising = [cuda_cycle(i, reserved=GIB + i * 8 * MIB) for i in range(60)]
    found = drift(rising, "reserved_bytes")
    assert found is not None and found.slope_per_cycle == pytest.approx(8 * MIB)
    assert found.r2 == pytest.approx(1.0)
    assert is_leak_suspect(found, horizon_cycles=500, budget_bytes=80 * GIB)
    flat = [cuda_cycle(i, reserved=GIB + (i % 2) * 64 * MIB) for i in range(60)]
    assert not is_leak_suspect(drift(flat, "reserved_bytes"), 500, 80 * GIB)
    assert drift(rising[:5], "reserved_bytes") is None  # too few cycles to say


def test_default_gates_fragmentation_and_swap() -> None:
    plan = build_plan(ValidateOptions(cycles=10, stages=["full"]), Policy(), environ={})
    fragmented = [cuda_cycle(i, split=(1200 if i == 7 else 100) * MIB) for i in range(10)]
    gates = {g.name: g for g in leg_gates(plan, "default/full", fragmented, completed=True)}
    assert gates["fragmentation"].passed is False
    assert gates["fragmentation"].value == pytest.approx(100 * 1200 / 2048)
    assert gates["swap"].passed is True and gates["cycles-complete"].passed is True
    swapping = [cuda_cycle(i, swap=3 * GIB) for i in range(10)]
    gates = {g.name: g for g in leg_gates(plan, "default/full", swapping, completed=True)}
    assert gates["swap"].passed is False and gates["fragmentation"].passed is True


def test_a_small_pools_split_slack_is_no_fragmentation() -> None:
    """2 MiB reserved with 8 KiB in use is 99.6% split, and costs nothing (seen on an H200)."""
    plan = build_plan(ValidateOptions(cycles=10, stages=["full"]), Policy(), environ={})
    tiny = [cuda_cycle(i, reserved=2 * MIB, split=2 * MIB - 8192, allocated=8192)
            for i in range(3)]
    steady = [cuda_cycle(i, split=300 * MIB) for i in range(3, 10)]  # 2 GiB reserved: 14.6%
    gates = {g.name: g for g in leg_gates(plan, "default/full", tiny + steady, completed=True)}
    assert gates["fragmentation"].passed is True
    assert gates["fragmentation"].value == pytest.approx(100 * 300 / 2048)
    assert "judged where 256.0 MiB or more is split" in gates["fragmentation"].detail
    gates = {g.name: g for g in leg_gates(plan, "default/full", tiny, completed=False)}
    assert gates["fragmentation"].passed is True
    assert "99.6%, but never 256.0 MiB or more in split blocks" in gates["fragmentation"].detail
    # 300 MiB split of 400 MiB reserved is judged, and fails.
    trapped = [cuda_cycle(i, reserved=400 * MIB, split=300 * MIB, allocated=90 * MIB)
               for i in range(10)]
    gates = {g.name: g for g in leg_gates(plan, "default/full", trapped, completed=True)}
    assert gates["fragmentation"].passed is False


def test_on_the_cpu_the_fragmentation_gate_does_not_apply() -> None:
    plan = build_plan(ValidateOptions(cycles=4, stages=["full"]), Policy(), environ={})
    gates = {g.name: g for g in leg_gates(plan, "default/full", [cpu_cycle(i) for i in range(4)],
                                          completed=True)}
    assert gates["fragmentation"].passed is None
    assert gates["cycles-complete"].passed is True
    short = leg_gates(plan, "default/full", [cpu_cycle(0)], completed=False)
    assert next(g for g in short if g.name == "cycles-complete").passed is False


def run_state(plan, **legs: LegState) -> RunState:
    return RunState(run_id="r", status="failed", started_at="2026-01-01T00:00:00Z",
                    device=DeviceChoice(requested="auto", resolved="cuda:1"),
                    legs={f"default/{k.replace('_', '-')}": v for k, v in legs.items()})


def test_findings_for_an_unrecovered_oom_say_what_memory_was_in_use() -> None:
    plan = build_plan(ValidateOptions(cycles=10, stages=["full"]), Policy(), environ={})
    leg = LegState(status="failed", failure="oom", attempts=1, cycles_done=4,
                   reason="cycle 4 ran out of memory after 3 retries (batch scale 0.125)",
                   failure_detail={"memory": {"allocated_bytes": 3 * GIB,
                                              "reserved_bytes": 3 * GIB + 512 * MIB},
                                   "retries": [{}, {}, {}, {}]})
    findings = validate_findings(plan, run_state(plan, full=leg),
                                 {"default/full": [cuda_cycle(i) for i in range(4)]})
    oom = next(f for f in findings if f.id == "oom-unrecovered")
    assert oom.severity is Severity.CRITICAL and oom.subject == "stage:full"
    assert "3.0 GiB allocated by PyTorch, 3.5 GiB reserved" in oom.detail
    assert oom.evidence["retries"] == 3
    assert "--resume" in oom.detail


def test_findings_for_a_passing_stage_that_leaked_and_needed_retries() -> None:
    plan = build_plan(ValidateOptions(cycles=60, stages=["full"]), Policy(), environ={})
    retry = [{"attempt": 1, "kind": "torch", "batch_scale": 0.5}]
    records = [cuda_cycle(i, reserved=GIB + i * 16 * MIB, retries=1 if i == 30 else 0)
               for i in range(60)]
    records[10] = cuda_cycle(10, reserved=GIB + 160 * MIB, oom_retries=retry, scale=0.5)
    leg = LegState(status="passed", attempts=1, cycles_done=60,
                   ready={"device": "cuda:1", "total_memory_bytes": 80 * GIB})
    ids = {f.id for f in validate_findings(plan, run_state(plan, full=leg),
                                           {"default/full": records})}
    assert {"reserved-drift", "oom-recovered", "alloc-retries"} <= ids


def test_settings_that_did_not_take_effect_are_an_error() -> None:
    options = ValidateOptions(cycles=4, stages=["full"], alloc_conf="max_split_size_mb:128")
    plan = build_plan(options, Policy(), environ={})
    leg = LegState(status="passed", attempts=1, cycles_done=4,
                   ready={"device": "cuda:0", "allocator_settings": {"max_split_size": -1}})
    findings = validate_findings(plan, run_state(plan, full=leg),
                                 {"default/full": [cuda_cycle(i) for i in range(4)]})
    finding = next(f for f in findings if f.id == "alloc-conf-not-applied")
    assert finding.severity is Severity.ERROR
    assert "allocator reports -1" in finding.detail


def test_recommendation_prefers_fewer_retries_then_less_fragmentation_then_speed() -> None:
    def row(label, conf, **kw):
        base = {"label": label, "alloc_conf": conf, "passed": True, "oom_retries": 0,
                "alloc_retries": 0, "worst_fragmentation_pct": 10.0,
                "judged_fragmentation_pct": 10.0, "median_cycle_s": 0.05}
        return base | kw

    rows = [row("max-split-none", None, oom_retries=2),
            row("max-split-128", "max_split_size_mb:128", worst_fragmentation_pct=3.0,
                judged_fragmentation_pct=3.0, median_cycle_s=0.06),
            row("max-split-512", "max_split_size_mb:512", worst_fragmentation_pct=12.0,
                judged_fragmentation_pct=12.0),
            row("max-split-64", "max_split_size_mb:64", passed=False)]
    best = recommend(rows, torch_version="2.13.0")
    assert best["label"] == "max-split-128"
    assert "PYTORCH_ALLOC_CONF='max_split_size_mb:128'" in best["text"]
    assert "PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128'" in best["text"]
    none_passed = recommend([row("max-split-64", "x", passed=False)])
    assert none_passed["label"] is None and "No value passed" in none_passed["text"]


def test_a_small_pool_s_split_share_does_not_rank_a_sweep() -> None:
    """99.6% of a 2 MiB small-pool segment split (as a real H200 showed) is not fragmentation
    worth choosing a setting for: only shares judged over the floor rank the variants."""
    def row(label, conf, worst, judged):
        return {"label": label, "alloc_conf": conf, "passed": True, "oom_retries": 0,
                "alloc_retries": 0, "worst_fragmentation_pct": worst,
                "judged_fragmentation_pct": judged, "median_cycle_s": 0.05, "iqr_cycle_s": 0.001}

    rows = [row("max-split-none", None, 99.6, None),
            row("max-split-128", "max_split_size_mb:128", 6.0, 6.0)]
    best = recommend(rows, torch_version="2.13.0")
    assert best["label"] == "max-split-none"
    assert "worst fragmentation 99.6% (never 256.0 MiB or more in split blocks, so not " \
           "judged)" in best["text"]
    assert fragmentation_cell(rows[0]) == "99.6% (under 256.0 MiB split, not judged)"
    assert fragmentation_cell(rows[1]) == "6.0%"


def test_a_sweep_compares_each_variant_over_its_stages() -> None:
    options = ValidateOptions(cycles=4, stages=["smoke", "full"], max_split_size_mb="none,128")
    plan = build_plan(options, Policy(), environ={})

    def stage(name, status, summary, failure=None):
        return {"name": name, "status": status, "failure": failure, "summary": summary}

    def summary(peak, frag, retries, ooms, oom_retries, median):
        return {"peak_reserved_bytes": peak, "worst_fragmentation_pct": frag,
                "worst_judged_fragmentation_pct": frag if frag >= 10 else None,
                "alloc_retries": retries, "ooms": ooms, "oom_retries": oom_retries,
                "median_cycle_s": median}

    variants = [
        {"label": "max-split-none", "max_split_size_mb": None, "alloc_conf": None,
         "passed": False, "allocator": {"applies": True},
         "stages": [stage("smoke", "passed", summary(2 * GIB, 30.0, 1, 0, 0, 0.02)),
                    stage("full", "failed", summary(3 * GIB, 12.5, 2, 1, 3, None), "oom")]},
        {"label": "max-split-128", "max_split_size_mb": 128,
         "alloc_conf": "max_split_size_mb:128", "passed": True, "allocator": {"applies": True},
         "stages": [stage("smoke", "passed", summary(GIB, 8.0, None, None, 0, 0.03)),
                    stage("full", "passed", summary(GIB + MIB, 9.5, None, None, 1, 0.04))]},
        {"label": "max-split-512", "max_split_size_mb": 512,
         "alloc_conf": "max_split_size_mb:512", "passed": False, "allocator": {"applies": True},
         "stages": [stage("smoke", "skipped", None)]},
    ]
    rows, best = compare_variants(plan, variants, run_state(plan))
    assert [r["label"] for r in rows] == [
        "max-split-none", "max-split-128", "max-split-512"]
    assert {k: rows[0][k] for k in ("peak_reserved_bytes", "worst_fragmentation_pct",
                                    "alloc_retries", "ooms", "oom_retries", "unrecovered_oom",
                                    "median_cycle_s", "status")} == {
        "peak_reserved_bytes": 3 * GIB, "worst_fragmentation_pct": 30.0, "alloc_retries": 3,
        "ooms": 1, "oom_retries": 3, "unrecovered_oom": True, "median_cycle_s": None,
        "status": "failed at full"}
    assert type(rows[0]["peak_reserved_bytes"]) is int and type(rows[0]["ooms"]) is int
    assert (rows[1]["alloc_retries"], rows[1]["ooms"], rows[1]["oom_retries"],
            rows[1]["median_cycle_s"]) == (None, None, 1, 0.04)
    assert (rows[0]["judged_fragmentation_pct"], rows[1]["judged_fragmentation_pct"]) == (30.0,
                                                                                          None)
    assert rows[2]["peak_reserved_bytes"] is None and rows[2]["oom_retries"] == 0
    assert rows[2]["status"] == "skipped at smoke"
    assert best["label"] == "max-split-128"
