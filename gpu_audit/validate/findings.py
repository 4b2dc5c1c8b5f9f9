"""Findings and gate verdicts of a validation run, from its plan, state and cycle records.

Pure functions: the runner and the report call them on data loaded from the run folder.

Finding ids (stable); each one's severity and documentation live in
:mod:`gpu_audit.knowledge.findings` (severities) and :mod:`gpu_audit.validate.catalogue`:

- ``workload-import-failed``: torch or the workload does not import (critical)
- ``cuda-unavailable``: CUDA does not initialise on the chosen device (critical)
- ``oom-unrecovered``: a cycle ran out of memory, and every retry too, if any (critical)
- ``stage-hung``: a cycle ran past the hang limit; the worker was stopped (critical)
- ``worker-died``: the stage's process died (signal, abort, exit) (critical)
- ``workload-error``: the workload raised, or broke the protocol (critical)
- ``disk-full``: the run folder's disk filled up; the run stops with exit 3 (critical)
- ``alloc-fragmentation``: inactive-split share of reserved memory above the limit (error)
- ``stage-swap-pressure``: swap use above the limit while a stage ran; fails the stage (error)
- ``requirement-failed``: a ``--require`` gate failed (error)
- ``alloc-conf-not-applied``: the allocator reports other settings than asked (error)
- ``oom-recovered``: out-of-memory errors recovered by retrying smaller (warning)
- ``alloc-retries``: the allocator had to flush its cache to satisfy allocations (warning)
- ``reserved-drift`` / ``rss-drift``: reserved GPU memory / host RSS rising cycle after cycle,
  a leak suspect, with its slope (warning)
- ``cpu-fallback``: ``--device auto`` found no usable GPU and ran on the CPU (warning)
- ``alloc-conf-cpu``: allocator settings were given but the run was on the CPU (info)
- ``cycles-overshoot``: a command given ``{cycles}`` ran well past it (warning)
- ``stage-warning``: anything else the worker noticed, once per text with its stages (info)
"""

from __future__ import annotations

from typing import Any

from gpu_audit.knowledge.findings import severity_of
from gpu_audit.model import Finding, Severity
from gpu_audit.units import fmt_bytes, fmt_pct, noun, plural
from gpu_audit.validate.allocconf import compare_settings
from gpu_audit.validate.command_error import frame_lines, reading
from gpu_audit.validate.gates import (
    GateResult,
    check_requirement,
    default_gates,
    is_leak_suspect,
    parse_requirement,
    requirement_applies,
    summarize,
)
from gpu_audit.validate.plan import DEFAULT_CYCLES, Plan, split_leg
from gpu_audit.validate.state import LegState, RunState, completed_cycles, cycles_reached

_FAILURE_IDS = {
    "import": ("workload-import-failed", "torch or the workload does not import"),
    "cuda": ("cuda-unavailable", "CUDA does not work on the chosen device"),
    "oom": ("oom-unrecovered", "out of memory, not recovered by retrying"),
    "hang": ("stage-hung", "a cycle hung"),
    "crash": ("worker-died", "the stage's process died"),
    "error": ("workload-error", "the workload raised an error"),
    "workload": ("workload-error", "the workload does not follow the protocol"),
    "internal": ("workload-error", "the stage worker failed"),
    "disk-full": ("disk-full", "the disk of the run folder is full"),
}
_FAILURE_REMEDY = {
    "import": "Run `python -c \"import torch\"` and import your workload module in the same "
              "environment; install what is missing (torch from https://pytorch.org/get-started/"
              "locally/ so your CUDA build is kept).",
    "cuda": "Run `gpu-audit scan` to see the driver, the GPUs and what holds them; check that "
            "torch is a CUDA build (`python -c \"import torch; print(torch.version.cuda)\"`).",
    "oom": "Lower the batch size, free the GPU (see `gpu-audit scan`), or try "
           "`--max-split-size-mb 128,512` / `--alloc-conf expandable_segments:True` to see "
           "whether fragmentation is the cause.",
    "hang": "Look at the stack in the stage log (the finding names the line); a data loader, a "
            "collective or a device sync that never returns is the usual cause. Raise "
            "--hang-min / --hang-factor if the cycle is legitimately that slow.",
    "crash": "Read the stage log (path in the report) and run `gpu-audit explain` on it.",
    "error": "Fix the error shown in the stage log, then resume with --resume RUN.",
    "workload": "See the workload protocol: `python -c \"import gpu_audit.validate.protocol as "
                "p; help(p)\"`.",
    "internal": "Run again with -v and report the traceback from the stage log.",
    "disk-full": "Free space on the run folder's disk (`df -h <run folder>`), then continue "
                 "with `gpu-audit validate --resume RUN`.",
}


SCRIPT_ERROR_REMEDY = ("Fix what the command's error says (the stage log named above has its "
                       "whole output), then continue with `gpu-audit validate --resume RUN`.")
EXCERPT_LINES = 8
_SCRIPT_TITLES = {"error": "the command failed", "crash": "the command died",
                  "import": "the command's program or its torch is missing"}
SCRIPT_OOM_REMEDY = (
    "Lower the batch size your command runs with (or give it a smaller one in the command), "
    "free the GPU (see `gpu-audit scan`), or compare allocator settings: "
    "`gpu-audit validate --max-split-size-mb 128,512 -- COMMAND` or "
    "`--alloc-conf expandable_segments:True`. With a {batch} placeholder and --batch N, "
    "gpu-audit re-runs the stage at half the batch. For retries inside the step, wrap it "
    "with `gpu_audit.retry_on_oom` or use a workload class (--workload).")


def subject(plan: Plan, key: str) -> str:
    return f"stage:{key}" if len(plan.variants) > 1 else f"stage:{split_leg(key)[1]}"


def leg_gates(plan: Plan, key: str, records: list[dict[str, Any]], *, completed: bool,
              unrecovered_oom: str | None = None) -> list[GateResult]:
    stage = plan.stage(split_leg(key)[1])
    if stage.cycles == 0:
        return []
    summary = summarize(records)
    # A script stage with no cycles seen is judged as a whole: its one record is the stage.
    planned = 1 if records and records[0].get("whole_stage") else stage.cycles
    results = default_gates(records, summary, planned=planned, completed=completed,
                            unrecovered_oom=unrecovered_oom,
                            max_fragmentation_pct=plan.max_fragmentation_pct,
                            max_swap_used_bytes=plan.max_swap_used_bytes)
    for text in plan.requires:
        req = parse_requirement(text)
        if requirement_applies(req, stage.name):
            results.append(check_requirement(req, records))
    return results


def leg_gates_for_state(plan: Plan, key: str, leg: LegState,
                        records: list[dict[str, Any]]) -> list[GateResult]:
    stage = plan.stage(split_leg(key)[1])
    done = completed_cycles(records)
    whole = bool(done) and bool(done[0].get("whole_stage"))
    return leg_gates(plan, key, done, completed=whole or len(done) >= stage.cycles,
                     unrecovered_oom=leg.reason if leg.failure == "oom" else None)


def validate_findings(plan: Plan, state: RunState, records: dict[str, list[dict[str, Any]]],
                      *, host_memory_bytes: int | None = None) -> list[Finding]:
    findings: list[Finding] = []
    if state.device.fallback_reason and state.device.resolved == "cpu":
        findings.append(_finding(
            "cpu-fallback", "host",
            "no usable GPU: the validation ran on the CPU",
            f"--device {state.device.requested} found no CUDA device "
            f"({state.device.fallback_reason}), so every stage ran on the CPU; allocator "
            "figures and GPU memory limits were not tested.",
            "Check the GPU with `gpu-audit scan`; pass --device cuda to require one.",
            {"requested": state.device.requested}))
    cpu_conf_noted = False
    warned: dict[str, list[str]] = {}  # a warning's text -> the stages that gave it
    for key in plan.leg_keys():
        leg = state.legs.get(key)
        if leg is None or leg.status in ("pending", "skipped"):
            continue
        variant = plan.variant(split_leg(key)[0])
        stage = plan.stage(split_leg(key)[1])
        where = subject(plan, key)
        done = completed_cycles(records.get(key, []))
        findings.extend(_failure_findings(plan, key, leg, where, done))
        ready = leg.ready or {}
        device = str(ready.get("device") or state.device.resolved or "")
        if variant.alloc_conf and device == "cpu" and not cpu_conf_noted:
            cpu_conf_noted = True
            findings.append(_finding(
                "alloc-conf-cpu", where,
                "allocator settings do not apply on the CPU",
                f"The run set PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF to "
                f"{variant.alloc_conf!r}, but it ran on the CPU, where PyTorch's CUDA caching "
                "allocator is not used.", "Run on a GPU (--device cuda) to test the settings.",
                {"alloc_conf": variant.alloc_conf}))
        findings.extend(_settings_findings(variant.expected_settings, ready, where, variant))
        for warning in ready.get("warnings") or []:
            warned.setdefault(warning, []).append(where)
        if stage.cycles and done:
            findings.extend(_cycle_findings(plan, key, where, done, ready, host_memory_bytes))
            findings.extend(_overshoot_findings(plan, key, where, done))
    findings.extend(_warning_findings(warned))
    return _dedupe(findings)


def _warning_findings(warned: dict[str, list[str]]) -> list[Finding]:
    """One ``stage-warning`` per text, on the first stage that gave it; its detail says which
    stages did (the title is the warning itself)."""
    findings = []
    for text, subjects in warned.items():
        stages = [s.split(":", 1)[-1] for s in subjects]
        detail = (f"Noted by stage {stages[0]}." if len(stages) == 1 else
                  f"Noted by {len(stages)} stages: {', '.join(stages)}.")
        findings.append(_finding("stage-warning", subjects[0], text, detail, "",
                                 {"stages": stages}))
    return findings


def _overshoot_findings(plan: Plan, key: str, where: str,
                        done: list[dict[str, Any]]) -> list[Finding]:
    """A command told the stage's length through ``{cycles}`` that ran well past it (one
    cycle more is the common ``while step <= max_steps`` loop, not an overshoot)."""
    planned = plan.stage(split_leg(key)[1]).cycles
    reached = cycles_reached(done)
    if plan.script is None or not plan.script.counts_its_cycles or reached <= planned + 1:
        return []
    stage = split_leg(key)[1]
    flag = next((w for w in plan.script.command if "{cycles}" in w), "{cycles}")
    return [_finding(
        "cycles-overshoot", where, f"stage {stage}: the command ran {reached} cycles for "
        f"the {planned} it was given",
        f"The command was given {planned} for {{cycles}} ({flag!r} in the command) and ran "
        f"{reached} cycles ({SOURCE_WORDS.get(str(done[0].get('source')), 'counted')}), "
        f"{reached / planned:.3g} x the stage's length: the flag it fills counts something "
        "else than one cycle (epochs, or batches of several optimizer steps), so each stage "
        "ran longer than planned and its limits (hang, leak) were judged on other cycles.",
        "Put {cycles} where the script takes a number of steps (e.g. --max-steps {cycles}), "
        "or leave it out and let gpu-audit stop the script after the stage's cycles; with "
        "several optimizer steps per cycle, call gpu_audit.monitor.step() once per cycle.",
        {"cycles_run": reached, "cycles_planned": planned})]


SOURCE_WORDS = {"optimizer": "counted from optimizer steps",
                "monitor": "counted from gpu_audit.monitor.step() calls",
                "pattern": "counted from output lines matching --cycle-pattern"}


def _failure_findings(plan: Plan, key: str, leg: LegState, where: str,
                      done: list[dict[str, Any]]) -> list[Finding]:
    if leg.status != "failed" or not leg.failure:
        return []
    if leg.failure == "gate":
        return _gate_findings(plan, key, leg, where, done)
    finding_id, title = _FAILURE_IDS.get(leg.failure, ("workload-error", "the stage failed"))
    extra = leg.failure_detail or {}
    if plan.script is not None:
        title = _SCRIPT_TITLES.get(leg.failure, title)
    if leg.failure == "oom":
        title = _oom_title(plan, extra)
    detail = leg.reason or title
    evidence: dict[str, Any] = {"cycles_done": leg.cycles_done, "attempts": leg.attempts}
    remedy = _FAILURE_REMEDY.get(leg.failure, "")
    error = extra.get("command_error")
    if error:
        detail = _error_head(error) + detail
        evidence["error_line"] = error["error_line"]
        if error.get("frames"):
            evidence["traceback_frames"] = frame_lines(error)
        remedy = SCRIPT_ERROR_REMEDY
    if leg.failure == "oom":
        memory = extra.get("memory") or {}
        evidence.update({k: v for k, v in memory.items() if v is not None})
        evidence["retries"] = max(0, len(extra.get("retries") or []) - 1)
        in_use = _memory_sentence(memory)
        detail = detail.rstrip(". ")
        if in_use:
            detail += f". In use when it failed: {in_use}"
        if extra.get("script"):
            detail += (". gpu-audit cannot retry half a step of your script's own loop, so the "
                       "in-step OOM retry of workload classes does not apply; it re-runs the "
                       "stage under each allocator variant you list (--max-split-size-mb "
                       "128,512, --alloc-conf) and you can lower the batch the command gets.")
            remedy = SCRIPT_OOM_REMEDY
        else:
            detail += (". The workload's state and the partial results were saved; --resume "
                       "RUN continues from this cycle.")
    if extra.get("returncode") is not None:
        evidence["command_exit_code"] = extra["returncode"]
    if leg.signal:
        evidence["signal"] = leg.signal
    if leg.exit_code is not None:
        evidence["exit_code"] = leg.exit_code
    if error and not leg.explanation and (plain := reading(error)):
        detail = detail.rstrip(". ") + f". Reading: {plain}."
    if leg.explanation:
        top = leg.explanation[0]
        if top.get("title"):
            detail = detail.rstrip(". ") + f". The log says: {top['title']}"
            if top.get("explanation"):
                detail += f": {top['explanation']}"
        if top.get("remedy") and top["remedy"] not in remedy:
            remedy = f"{top['remedy']}\n{remedy}".strip()
        if top.get("excerpt"):
            excerpt = "\n".join(str(top["excerpt"]).splitlines()[:EXCERPT_LINES])
            detail += f"\nExcerpt of the log:\n{excerpt}"
            evidence["log_excerpt"] = excerpt
    if extra.get("stage_log"):
        detail = detail.rstrip("\n") + f"\nStage log: {extra['stage_log']}"
        evidence["stage_log"] = extra["stage_log"]
    return [_finding(finding_id, where, f"stage {split_leg(key)[1]}: {title}",
                     detail, remedy, evidence)]


def _error_head(error: dict[str, Any]) -> str:
    """The command's own last error line and its traceback's last frames, first in a failure
    finding's detail."""
    frames = frame_lines(error)
    head = f"The command's error: {error['error_line']}\n"
    if frames:
        head += "Last frames of its traceback (innermost last):\n" + "\n".join(frames) + "\n"
    return head


def _oom_title(plan: Plan, extra: dict[str, Any]) -> str:
    """Says "not recovered by retrying" only of an out-of-memory that was retried."""
    if plan.script is not None:
        retries = max(0, len(extra.get("retries") or []) - 1)
        return ("the command ran out of memory" + (
            f", also after {plural(retries, 'retry', 'retries')} at half the {{batch}}"
            if retries else ""))
    if plan.max_retries == 0:
        return "out of memory (--max-retries 0: not retried)"
    return "out of memory, not recovered by retrying"


def _gate_findings(plan: Plan, key: str, leg: LegState, where: str,
                   done: list[dict[str, Any]]) -> list[Finding]:
    findings = []
    stage = split_leg(key)[1]
    for gate in leg_gates_for_state(plan, key, leg, done):
        if gate.passed is not False:
            continue
        if gate.name == "fragmentation":
            findings.append(_finding(
                "alloc-fragmentation", where,
                f"stage {stage}: allocator fragmentation above the limit", gate.detail,
                "Try `gpu-audit validate --max-split-size-mb 128,256,512` to compare values, or "
                "--alloc-conf expandable_segments:True.",
                {"worst_fragmentation_pct": gate.value, "limit_pct": gate.limit}))
        elif gate.name == "swap":
            findings.append(_finding(
                "stage-swap-pressure", where,
                f"stage {stage}: swap in use above the limit", gate.detail,
                "Free host memory (fewer data-loader workers, smaller pinned buffers) or add "
                "RAM; `gpu-audit scan` shows what uses it.",
                {"swap_used_bytes": gate.value, "limit_bytes": gate.limit}))
        elif gate.name.startswith("require"):
            findings.append(_finding(
                "requirement-failed", where,
                f"stage {stage}: {gate.name} failed", gate.detail,
                "Check the workload's metric, or the requirement's threshold.",
                {"value": gate.value, "limit": gate.limit}))
        else:
            findings.append(_finding("workload-error", where,
                                     f"stage {stage}: {gate.name} failed", gate.detail, "", {}))
    return findings


def _settings_findings(expected: dict[str, Any], ready: dict[str, Any], where: str,
                       variant: Any) -> list[Finding]:

    problems = compare_settings(expected, ready.get("allocator_settings"))
    if not problems:
        return []
    return [_finding(
        "alloc-conf-not-applied", where,
        "the allocator did not take the requested settings",
        f"Asked for {variant.alloc_conf!r} (in PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF, "
        f"set before torch was imported), but the allocator reports: {'; '.join(problems)}. "
        "Something else sets the allocator (the workload calling "
        "torch.cuda.memory._set_allocator_settings, a sitecustomize, or a launcher).",
        "Remove other allocator configuration from the workload and its launcher.",
        {"asked": expected, "in_effect": ready.get("allocator_settings")})]


def _cycle_findings(plan: Plan, key: str, where: str, done: list[dict[str, Any]],
                    ready: dict[str, Any], host_memory_bytes: int | None) -> list[Finding]:
    findings: list[Finding] = []
    stage = split_leg(key)[1]
    summary = summarize(done)
    if summary.oom_retries:
        first = next(r["cycle"] for r in done if r.get("oom_retries"))
        findings.append(_finding(
            "oom-recovered", where,
            f"stage {stage}: out of memory, recovered by retrying",
            f"{plural(summary.oom_retries, 'out-of-memory error')} from cycle {first} on "
            f"{noun(summary.oom_retries, 'was', 'were')} recovered "
            f"by cleaning up and retrying; the stage ended at batch scale "
            f"{summary.min_batch_scale:g}. The real run needs the same recovery, or a smaller "
            "batch.",
            "Use `gpu_audit.retry_on_oom` around the training step, or start at batch scale "
            f"{summary.min_batch_scale:g}.",
            {"oom_retries": summary.oom_retries, "batch_scale": summary.min_batch_scale,
             "first_cycle": first}))
    if summary.alloc_retries:
        findings.append(_finding(
            "alloc-retries", where,
            f"stage {stage}: the allocator flushed its cache to find memory",
            f"{plural(summary.alloc_retries, 'allocation')} failed at first and succeeded only "
            "after PyTorch freed its whole cache (num_alloc_retries): the run is at the edge of "
            "the GPU's memory, and each flush costs a device synchronisation.",
            "Lower peak memory (batch, sequence length), or try expandable_segments:True.",
            {"alloc_retries": summary.alloc_retries,
             "peak_reserved_bytes": summary.peak_reserved_bytes}))
    # Projected over the long run being rehearsed: the final stage, and at least 500 cycles.
    horizon = max(plan.final_cycles, len(done), DEFAULT_CYCLES)
    budget = ready.get("total_memory_bytes")
    if is_leak_suspect(summary.reserved_drift, horizon, budget, cycles=len(done)):
        slope = summary.reserved_drift.slope_per_cycle  # type: ignore[union-attr]
        findings.append(_drift_finding("reserved-drift", where, stage, "reserved GPU memory",
                                       slope, summary.reserved_drift.r2,  # type: ignore[union-attr]
                                       horizon, budget))
    if is_leak_suspect(summary.rss_drift, horizon, host_memory_bytes, cycles=len(done)):
        slope = summary.rss_drift.slope_per_cycle  # type: ignore[union-attr]
        findings.append(_drift_finding("rss-drift", where, stage, "host memory (RSS)", slope,
                                       summary.rss_drift.r2,  # type: ignore[union-attr]
                                       horizon, host_memory_bytes))
    return findings


def _drift_finding(finding_id: str, where: str, stage: str, what: str, slope: float, r2: float,
                   horizon: int, budget: int | None) -> Finding:
    growth = slope * horizon
    share = (f" ({fmt_pct(100 * growth / budget, decimals=0)} of {fmt_bytes(budget)})"
             if budget else "")
    return _finding(
        finding_id, where, f"stage {stage}: {what} grows cycle after cycle",
        f"{what.capitalize()} rises by {fmt_bytes(slope)} per cycle (least-squares fit after the "
        f"warm-up, R² {r2:.2f}); over {horizon} cycles that is {fmt_bytes(growth)}{share}. A "
        "leak suspect: something keeps tensors (a list of losses kept as tensors, a growing "
        "cache, history with autograd graphs).",
        "Keep metrics as Python floats (`loss.item()`), detach what you store, and check with "
        "`torch.cuda.memory._record_memory_history` and `gpu-audit snapshot`.",
        {"slope_bytes_per_cycle": round(slope), "r2": round(r2, 3),
         "projected_growth_bytes": round(growth), "horizon_cycles": horizon})


def _memory_sentence(memory: dict[str, Any]) -> str:
    """The figures of an OOM's ``memory`` dict (key names of ``gpu_audit.knowledge.oom``)."""
    parts = []
    for name, label in (("allocated_bytes", "allocated by PyTorch"),
                        ("reserved_bytes", "reserved"),
                        ("inactive_split_bytes", "in split free blocks"),
                        ("free_bytes", "free on the device"),
                        ("requested_bytes", "requested"),
                        ("capacity_bytes", "device total")):
        if memory.get(name) is not None:
            parts.append(f"{fmt_bytes(memory[name])} {label}")
    return ", ".join(parts)


def _finding(finding_id: str, where: str, title: str, detail: str, remedy: str,
             evidence: dict[str, Any]) -> Finding:
    """A finding whose severity is the one the finding catalogue declares for its id."""
    severity = severity_of(finding_id)
    return Finding(subject=where, title=title, detail=detail, remedy=remedy, evidence=evidence,
                   id=finding_id, severity=severity)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for finding in findings:
        key = (finding.id, finding.subject, finding.title)
        if key not in seen:
            seen.add(key)
            unique.append(finding)
    unique.sort(key=lambda f: (-(f.severity or Severity.INFO).rank, f.subject, f.id))
    return unique
