"""The validation report: a JSON document (``gpu-audit.validate/1``, built from
:class:`ValidateDocument`), its markdown twin, plots.

Renderers only: everything comes from the run folder's plan, state and cycle log. The plots are
drawn by :mod:`gpu_audit.validate.plots`. An allocator sweep's comparison
(:func:`compare_variants`) aggregates each variant's stage summaries with pandas, imported there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from gpu_audit import __version__
from gpu_audit.knowledge.allocator import CUDA_VAR, alloc_conf_export
from gpu_audit.knowledge.allocator.limits import FRAGMENTATION_MIN_BYTES
from gpu_audit.model import Finding
from gpu_audit.redact import redact_settings
from gpu_audit.report.escape import Markdown, md_code, md_document, md_prose, md_row, md_text
from gpu_audit.serial import dumps, extended, to_jsonable, write_atomic
from gpu_audit.units import fmt_bytes, fmt_pct, fmt_seconds, plural, utc_now
from gpu_audit.validate.findings import leg_gates_for_state, validate_findings
from gpu_audit.validate.gates import plain_float, plain_int, summarize
from gpu_audit.validate.plan import Plan, leg_key
from gpu_audit.validate.plots import write_plots
from gpu_audit.validate.state import (
    DeviceChoice,
    RunDir,
    RunState,
    completed_cycles,
    cycles_reached,
)

SCHEMA = "gpu-audit.validate/1"
EXIT_MEANING = {0: "OK: every stage passed", 2: "CRITICAL: a stage failed",
                3: "UNKNOWN: could not judge", 130: "interrupted: resume with --resume"}


Object = dict[str, Any]


class ValidateRun(msgspec.Struct):
    id: str
    dir: str
    status: str
    exit_code: int | None
    started_at: str
    finished_at: str | None
    resumes: int
    hostname: str | None


# The device the run chose (as the state records it; name and memory as the worker found them).
ValidateDevice = extended("ValidateDevice", DeviceChoice, [],
                          [("emulated_memory_bytes", int | None)], module=__name__)


class ValidateTorch(msgspec.Struct):
    version: str | None
    cuda: str | None


class ValidateStagePlan(msgspec.Struct):
    name: str
    cycles: int
    quantum: str


class ValidateGateLimits(msgspec.Struct):
    max_fragmentation_pct: float
    max_swap_used_bytes: int


class ValidateHang(msgspec.Struct):
    factor: float
    min_s: float
    max_s: float
    startup_s: float


class ValidatePlanSummary(msgspec.Struct):
    stages: list[ValidateStagePlan]
    final_cycles: int
    max_retries: int
    checkpoint_every_pct: float
    requires: list[str]
    gates: ValidateGateLimits
    hang: ValidateHang
    notes: list[str]
    warnings: list[str]


class ValidateFiles(msgspec.Struct, omit_defaults=True):
    cycles: str | None  # None when no cycle ran (the imports stage failed, say)
    state: str
    report_md: str
    report_json: str
    plots: list[str]
    plots_note: str | None = None  # why there are no plots; absent when there are


class ValidateDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    run: ValidateRun
    device: ValidateDevice  # type: ignore[valid-type]
    torch: ValidateTorch
    workload: Any
    plan: ValidatePlanSummary
    variants: list[Object]  # free-form: each variant's allocator and stages
    comparison: list[Object] | None
    recommendation: Object | None
    findings: list[Finding]
    files: ValidateFiles


def build_document(run: RunDir, plan: Plan, state: RunState,
                   records: dict[str, list[dict[str, Any]]], *,
                   host_memory_bytes: int | None = None) -> ValidateDocument:
    findings = validate_findings(plan, state, records, host_memory_bytes=host_memory_bytes)
    variants = [_variant_doc(run, plan, state, records, variant) for variant in plan.variants]
    comparison, recommendation = (compare_variants(plan, variants, state)
                                  if len(plan.variants) > 1 else (None, None))
    first_ready = next((leg.ready for leg in state.legs.values() if leg.ready), {})
    return ValidateDocument(
        schema=SCHEMA,
        tool_version=__version__,
        generated_at=utc_now(),
        run=ValidateRun(id=state.run_id, dir=str(run.path), status=state.status,
                        exit_code=state.exit_code, started_at=state.started_at,
                        finished_at=state.finished_at, resumes=state.resumes,
                        hostname=state.hostname),
        device=ValidateDevice(**(msgspec.structs.asdict(state.device) | {
            "name": first_ready.get("device_name") or state.device.name,
            "total_memory_bytes": first_ready.get("total_memory_bytes")
            or state.device.total_memory_bytes,
            "emulated_memory_bytes": plan.emulate_memory_bytes,
        })),
        torch=ValidateTorch(version=first_ready.get("torch_version") or plan.torch_version,
                            cuda=first_ready.get("torch_cuda")),
        workload=plan.workload,
        plan=ValidatePlanSummary(
            stages=[ValidateStagePlan(name=s.name, cycles=s.cycles, quantum=s.quantum)
                    for s in plan.stages],
            final_cycles=plan.final_cycles,
            max_retries=plan.max_retries,
            checkpoint_every_pct=plan.checkpoint_every_pct,
            requires=plan.requires,
            gates=ValidateGateLimits(max_fragmentation_pct=plan.max_fragmentation_pct,
                                     max_swap_used_bytes=plan.max_swap_used_bytes),
            hang=ValidateHang(factor=plan.hang_factor, min_s=plan.hang_min_s,
                              max_s=plan.hang_max_s, startup_s=plan.startup_timeout_s),
            notes=plan.notes,
            warnings=plan.warnings,
        ),
        variants=variants,
        comparison=comparison,
        recommendation=recommendation,
        findings=findings,
        files=ValidateFiles(
            cycles=str(run.cycles_path) if run.cycles_path.exists() else None,
            state=str(run.state_path), report_md=str(run.path / "report.md"),
            report_json=str(run.path / "report.json"), plots=[]),
    )


def _variant_doc(run: RunDir, plan: Plan, state: RunState,
                 records: dict[str, list[dict[str, Any]]], variant: Any) -> dict[str, Any]:
    stages = []
    in_effect: dict[str, Any] | None = None
    backend = None
    env: dict[str, Any] = {}
    on_cpu = False
    for stage in plan.stages:
        key = leg_key(variant.label, stage.name)
        leg = state.legs.get(key)
        if leg is None:
            continue
        done = completed_cycles(records.get(key, []))
        summary = summarize(done) if done else None
        ready = leg.ready or {}
        if ready.get("allocator_settings") and in_effect is None:
            in_effect = ready["allocator_settings"]
            backend = ready.get("allocator_backend")
        if ready.get("alloc_env") and not env:
            env = ready["alloc_env"]
        on_cpu = on_cpu or ready.get("device") == "cpu"
        judged = stage.cycles and leg.status not in ("pending", "skipped")
        gates = leg_gates_for_state(plan, key, leg, records.get(key, [])) if judged else []
        stages.append({
            "name": stage.name,
            "quantum": stage.quantum,
            "cycles_planned": stage.cycles,
            "cycles_done": cycles_reached(done),
            "status": leg.status,
            "failure": leg.failure,
            "reason": leg.reason,
            "attempts": leg.attempts,
            "duration_s": leg.duration_s,
            "device": ready.get("device"),
            "torch_threads": ready.get("torch_threads"),
            "host_load": leg.load_avg or None,
            "summary": to_jsonable(summary) if summary else None,
            "gates": [to_jsonable(g) for g in gates],
            "worker": {"pid": leg.worker_pid, "exit_code": leg.exit_code, "signal": leg.signal,
                       "log": str(run.log_path(key)),
                       "stderr_tail": leg.stderr_tail if leg.status == "failed" else None,
                       "explanation": leg.explanation, "failure_detail": leg.failure_detail,
                       "ended_processes": ready.get("ended_processes") or []},
        })
    note = None
    if on_cpu:
        note = "the run used the CPU: PyTorch's CUDA allocator settings do not apply"
    elif variant.alloc_conf and in_effect is None:
        note = "the allocator did not report its settings (torch too old, or no stage reached CUDA)"
    return {
        "label": variant.label,
        "alloc_conf": variant.alloc_conf,
        "max_split_size_mb": variant.max_split_size_mb,
        "allocator": {"requested": variant.alloc_conf, "env": env, "in_effect": in_effect,
                      "backend": backend, "applies": not on_cpu, "note": note},
        "passed": all(s["status"] == "passed" for s in stages),
        "stages": stages,
    }


def compare_variants(plan: Plan, variants: list[dict[str, Any]], state: RunState
                     ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One row per variant of an allocator sweep: its outcome, and its stages' summaries
    aggregated (highest peak and fragmentation, total retries and OOMs, the deepest stage's
    median cycle), then the recommendation. Fragmentation is shown as measured and ranked as
    judged: only where a cycle had FRAGMENTATION_MIN_BYTES or more in split blocks (below that
    the share is a small pool's noise, as the stage gate has it)."""
    import pandas as pd

    summaries = pd.DataFrame(
        [{"label": variant["label"], **stage["summary"]}
         for variant in variants for stage in variant["stages"] if stage["summary"]],
        columns=["label", "peak_reserved_bytes", "worst_fragmentation_pct",
                 "worst_judged_fragmentation_pct", "alloc_retries", "ooms", "oom_retries",
                 "median_cycle_s", "iqr_cycle_s"])
    numbers = summaries.set_index("label").apply(pd.to_numeric, errors="coerce")
    per_variant = numbers.astype("float64").groupby(level="label", sort=False).agg({
        "peak_reserved_bytes": "max",
        "worst_fragmentation_pct": "max",
        "worst_judged_fragmentation_pct": "max",
        "alloc_retries": lambda column: column.sum(min_count=1),
        "ooms": lambda column: column.sum(min_count=1),
        "oom_retries": "sum",
        "median_cycle_s": lambda column: column.iloc[-1],  # the deepest stage that ran
        "iqr_cycle_s": lambda column: column.iloc[-1],
    }).reindex([variant["label"] for variant in variants])
    rows = []
    for variant, (_, figures) in zip(variants, per_variant.iterrows(), strict=True):
        stages = variant["stages"]
        failed = next((s for s in stages if s["status"] != "passed"), None)
        rows.append({
            "label": variant["label"],
            "max_split_size_mb": variant["max_split_size_mb"],
            "alloc_conf": variant["alloc_conf"],
            "passed": variant["passed"],
            "status": "passed" if variant["passed"] else
            f"{failed['status']} at {failed['name']}" if failed else "not run",
            "peak_reserved_bytes": plain_int(figures["peak_reserved_bytes"]),
            "worst_fragmentation_pct": plain_float(figures["worst_fragmentation_pct"]),
            "judged_fragmentation_pct": plain_float(figures["worst_judged_fragmentation_pct"]),
            "alloc_retries": plain_int(figures["alloc_retries"]),
            "ooms": plain_int(figures["ooms"]),
            "oom_retries": plain_int(figures["oom_retries"]) or 0,
            "unrecovered_oom": any(s["failure"] == "oom" for s in stages),
            "median_cycle_s": plain_float(figures["median_cycle_s"]),
            "iqr_cycle_s": plain_float(figures["iqr_cycle_s"]),
        })
    on_cpu = state.device.resolved == "cpu" or not any(v["allocator"]["applies"]
                                                        for v in variants)
    return rows, recommend(rows, on_cpu=on_cpu, torch_version=plan.torch_version)


# When one variant's cycles count as faster than another's.
NOISE_RULE = ("a difference in cycle time counts only when the gap between two variants' median "
              "cycle times is larger than the larger of their interquartile ranges (the spread "
              "of the middle half of the per-cycle times of the deepest stage that ran)")


def faster_beyond_noise(fast: dict[str, Any], slow: dict[str, Any]) -> bool:
    """Whether ``fast``'s median cycle beats ``slow``'s by more than the run-to-run spread
    (:data:`NOISE_RULE`)."""
    if fast["median_cycle_s"] is None or slow["median_cycle_s"] is None:
        return False
    spread = max(fast.get("iqr_cycle_s") or 0.0, slow.get("iqr_cycle_s") or 0.0)
    return slow["median_cycle_s"] - fast["median_cycle_s"] > spread


def recommend(rows: list[dict[str, Any]], *, on_cpu: bool = False,
              torch_version: str | None = None) -> dict[str, Any]:
    """The value to use: among variants that passed, fewest OOMs and retries, then least judged
    fragmentation (``judged_fragmentation_pct``: none judged counts as 0; in 5-point steps,
    finer differences are noise), then a faster median cycle,
    but only beyond the run-to-run spread (:data:`NOISE_RULE`). None on the CPU, where allocator
    settings do nothing, and none when the variants differ only within the spread."""
    if on_cpu:
        return {"label": None, "alloc_conf": None, "rule": NOISE_RULE,
                "text": "No recommendation: the run used the CPU, where PyTorch's CUDA allocator "
                        "settings do nothing, so only the first variant ran (the others would "
                        "have repeated it). Run the sweep on a GPU (--device cuda)."}
    passed = [r for r in rows if r["passed"]]
    if not passed:
        return {"label": None, "alloc_conf": None, "rule": NOISE_RULE,
                "text": "No value passed every stage, so max_split_size_mb alone does not fix "
                        "this run: see the findings (a smaller batch, or expandable_segments)."}

    def memory_score(row: dict[str, Any]) -> tuple[Any, ...]:
        frag = row.get("judged_fragmentation_pct")
        return (row["oom_retries"], row["alloc_retries"] or 0, int((frag or 0) // 5))

    best_score = min(memory_score(r) for r in passed)
    tied = [r for r in passed if memory_score(r) == best_score]
    timing = ""
    if len(tied) == 1:
        best = tied[0]
    else:
        winners = [r for r in tied if all(faster_beyond_noise(r, o) for o in tied if o is not r)]
        if not winners:
            medians = ", ".join(f"{r['label']} {fmt_seconds(r['median_cycle_s'])} (IQR "
                                f"{fmt_seconds(r.get('iqr_cycle_s'))})" for r in tied)
            return {"label": None, "alloc_conf": None, "rule": NOISE_RULE,
                    "text": f"No recommendation: {', '.join(r['label'] for r in tied)} had the "
                            "same OOM retries, cache flushes and fragmentation, and their "
                            f"median cycles ({medians}) differ by less than the run-to-run "
                            f"spread; {NOISE_RULE}. Leave max_split_size_mb unset unless "
                            "memory says otherwise."}
        best = winners[0]
        timing = "; its median cycle is faster than the others' by more than their spread"
    facts = (f"passed every stage with {best['oom_retries']} OOM retries and "
             f"{best['alloc_retries'] or 0} allocator cache flushes, "
             f"{fragmentation_words(best)}, median cycle "
             f"{fmt_seconds(best['median_cycle_s'])}{timing}")
    if best["alloc_conf"]:
        text = (f"{best['label']} {facts}. For the real run: "
                f"`{alloc_conf_export(best['alloc_conf'], torch_version)}`")
    else:
        text = f"the default allocator settings {facts}: leave max_split_size_mb unset"
    return {"label": best["label"], "alloc_conf": best["alloc_conf"], "text": text,
            "rule": NOISE_RULE}


def fragmentation_words(row: dict[str, Any]) -> str:
    """A sweep row's fragmentation as the recommendation ranks it."""
    judged = row.get("judged_fragmentation_pct")
    if judged is not None:
        return f"worst fragmentation {fmt_pct(judged, decimals=1)}"
    worst = row["worst_fragmentation_pct"]
    if worst is None:
        return "no fragmentation figures"
    return (f"worst fragmentation {fmt_pct(worst, decimals=1)} (never "
            f"{fmt_bytes(FRAGMENTATION_MIN_BYTES)} or more in split blocks, so not judged)")


def fragmentation_cell(row: dict[str, Any]) -> str:
    """The sweep table's fragmentation: as measured, marked where it was too small to judge."""
    cell = fmt_pct(row["worst_fragmentation_pct"], decimals=1)
    if row["worst_fragmentation_pct"] is not None and row.get("judged_fragmentation_pct") is None:
        cell += f" (under {fmt_bytes(FRAGMENTATION_MIN_BYTES)} split, not judged)"
    return cell


def render_markdown(doc: dict[str, Any]) -> str:
    run = doc["run"]
    code = run["exit_code"]
    lines = [f"# gpu-audit validate: {md_text(run['status'].upper())}", ""]
    lines.append(f"Run {md_code(run['id'])} on {md_text(run['hostname'] or 'this host')}, "
                 f"{md_text(doc['device'].get('resolved') or 'device unknown')}"
                 + (f" ({md_text(doc['device']['name'])})" if doc["device"].get("name") else "")
                 + f", torch {md_text(doc['torch'].get('version') or 'not found')}. "
                 f"Exit code {code}: {EXIT_MEANING.get(code, 'running')}.")
    lines += ["", f"- Workload: {md_code(doc['workload'])}",
              f"- Started {run['started_at']}, finished {run['finished_at'] or '-'}"
              + (f", resumed {plural(run['resumes'], 'time')}" if run["resumes"] else ""),
              f"- Device asked: {md_code(doc['device']['requested'])}"
              + (f"; fell back to the CPU: {md_text(doc['device']['fallback_reason'])}"
                 if doc["device"].get("fallback_reason") else "")]
    if doc["device"].get("emulated_memory_bytes"):
        lines.append(f"- GPU memory capped at {fmt_bytes(doc['device']['emulated_memory_bytes'])}"
                     " (--emulate-memory; the CUDA context is not counted in the cap)")
    for note in doc["plan"]["notes"] + doc["plan"]["warnings"]:
        lines.append(f"- Note: {md_text(note)}")
    if doc["recommendation"]:
        lines += ["", "## Recommendation", "", md_prose(doc["recommendation"]["text"])]
        if doc["recommendation"].get("rule"):
            lines += ["", f"Rule: {md_text(doc['recommendation']['rule'])}."]
    if doc["comparison"]:
        lines += ["", "## Allocator settings compared", "",
                  "| variant | result | peak reserved | worst fragmentation | alloc retries | "
                  "OOMs (retries) | median cycle (IQR) |", "|---|---|---|---|---|---|---|"]
        for row in doc["comparison"]:
            ooms = row["ooms"] if row["ooms"] is not None else "n/a"
            retries = row["alloc_retries"] if row["alloc_retries"] is not None else "n/a"
            lines.append(md_row([
                Markdown(md_code(row["label"]).replace("|", "\\|")), row["status"],
                fmt_bytes(row["peak_reserved_bytes"]),
                fragmentation_cell(row), retries, f"{ooms} ({row['oom_retries']})",
                f"{fmt_seconds(row['median_cycle_s'])} ({fmt_seconds(row.get('iqr_cycle_s'))})"]))
    for variant in doc["variants"]:
        lines += _variant_markdown(variant, len(doc["variants"]) > 1)
    lines += ["", "## Findings", ""]
    if not doc["findings"]:
        lines.append("None.")
    for finding in doc["findings"]:
        lines += [f"### {md_text(finding['severity'].upper())} {md_code(finding['id'])} "
                  f"({md_text(finding['subject'])}): {md_prose(finding['title'])}", "",
                  md_prose(finding["detail"], newlines=True)]
        if finding["remedy"]:
            lines += ["", f"Fix: {md_prose(finding['remedy'], newlines=True)}"]
        lines.append("")
    plots = doc["files"].get("plots") or []
    if plots:
        lines += ["## Plots", ""]
        lines += [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    elif doc["files"].get("plots_note"):
        lines += ["## Plots", "", md_text(doc["files"]["plots_note"])]
    cycles = doc["files"]["cycles"]
    lines += ["", "## Files", ""]
    lines += [f"- per-cycle log: {md_code(cycles)}"] if cycles else []
    lines += [f"- run state: {md_code(doc['files']['state'])}",
              f"- JSON twin: {md_code(doc['files']['report_json'])}", ""]
    return md_document("\n".join(lines))


def _variant_markdown(variant: dict[str, Any], several: bool) -> list[str]:
    title = f"Stages: {md_code(variant['label'])}" if several else "Stages"
    allocator = variant["allocator"]
    lines = ["", f"## {title}", ""]
    env = allocator.get("env") or {}
    requested = allocator["requested"]
    lines.append(f"Allocator settings asked: {md_code(redact_settings(requested))} (as "
                 f"PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF)" if requested else
                 "Allocator settings asked: none (PyTorch defaults; both variables unset)")
    if env:
        lines.append("")
        lines.append("Worker environment: " + ", ".join(
            md_code(f"{k}={redact_settings(v)}") if v is not None else f"{md_code(k)} unset"
            for k, v in env.items()))
    if allocator.get("in_effect"):
        settings = allocator["in_effect"]
        shown = {k: settings[k] for k in ("max_split_size", "expandable_segments",
                                          "garbage_collection_threshold",
                                          CUDA_VAR) if k in settings}
        lines += ["", "In effect (torch.cuda.memory._snapshot()[\"allocator_settings\"]): "
                  + ", ".join(md_code(f"{k}={redact_settings(str(v))}") for k, v in shown.items())
                  + (f"; backend {md_code(allocator['backend'])}" if allocator.get("backend")
                     else "")]
    if allocator.get("note"):
        lines += ["", f"Note: {md_text(allocator['note'])}."]
    lines += ["", "| stage | cycles | result | median cycle | peak reserved | worst frag. | "
                  "OOM retries | peak RSS | reason |", "|---|---|---|---|---|---|---|---|---|"]
    for stage in variant["stages"]:
        summary = stage["summary"] or {}
        cycles = (f"{stage['cycles_done']}/{stage['cycles_planned']}" if stage["cycles_planned"]
                  else "-")
        lines.append(md_row([
            f"{stage['name']} ({stage['quantum']})", cycles,
            Markdown(f"**{md_text(stage['status'])}**"),
            fmt_seconds(summary.get("median_cycle_s")),
            fmt_bytes(summary.get("peak_reserved_bytes")),
            fmt_pct(summary.get("worst_fragmentation_pct"), decimals=1),
            summary.get("oom_retries", 0) if summary else "-",
            fmt_bytes(summary.get("max_rss_bytes")), stage["reason"] or ""]))
    lines += _host_lines(variant["stages"])
    gated = [s for s in variant["stages"] if s["gates"]]
    if gated:
        lines += ["", "Gates:", ""]
        for stage in gated:
            verdicts = "; ".join(
                f"{g['name']} {'pass' if g['passed'] else 'n/a' if g['passed'] is None else 'FAIL'}"
                f" ({g['detail']})" for g in stage["gates"])
            lines.append(f"- {md_text(stage['name'])}: {md_text(verdicts)}")
    return lines


def _host_lines(stages: list[dict[str, Any]]) -> list[str]:
    """CPU threads and the host's load per stage: what makes CPU cycle times move."""
    def fmt(values: list[float] | None) -> str:
        return "/".join(f"{v:.2f}" for v in values) if values else "n/a"

    threads = {(t["count"], t["why"]) for s in stages if (t := s.get("torch_threads"))}
    lines = [f"torch threads in CPU stages: {count} ({why})" for count, why in sorted(threads)]
    loads = [f"- {stage['name']}: {fmt(load.get('start'))} at start, {fmt(load.get('end'))} at "
             "end" for stage in stages if (load := stage.get("host_load") or {})
             and (load.get("start") or load.get("end"))]
    if loads:
        lines += ["", "Host load average (1/5/15 min) while each stage ran:", "", *loads]
    return ["", *lines] if lines else []


def write_report(run: RunDir, plan: Plan, state: RunState,
                 records: dict[str, list[dict[str, Any]]], *, plots: bool = True,
                 host_memory_bytes: int | None = None) -> dict[str, Any]:
    doc = build_document(run, plan, state, records, host_memory_bytes=host_memory_bytes)
    if plots:
        cycles = {key: completed_cycles(legs) for key, legs in records.items()}
        paths, note = write_plots(cycles, run.path, plan)
        doc.files.plots, doc.files.plots_note = paths, note or None
    write_atomic(run.path / "report.json", dumps(doc) + "\n")
    plain = to_jsonable(doc)  # the markdown twin and the summary read what report.json holds
    write_atomic(run.path / "report.md", render_markdown(plain))
    return plain
