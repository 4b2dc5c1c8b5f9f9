"""``gpu-audit diff`` as JSON (``gpu-audit.diff/1``), in a terminal and as markdown."""

from __future__ import annotations

from typing import Any

import msgspec
from rich.console import Console

from gpu_audit import __version__
from gpu_audit.diff.compare import DiffReport
from gpu_audit.model import Finding, GpuProcess, Scan, Severity
from gpu_audit.redact import redact_cmdline, redact_text
from gpu_audit.report import tables
from gpu_audit.report.escape import md_code, md_document, md_table, md_text, terminal_markup
from gpu_audit.report.jsonout import Summary
from gpu_audit.report.markdown import findings_markdown
from gpu_audit.report.terminal import render_findings
from gpu_audit.units import fmt_mib, utc_now

DIFF_SCHEMA = "gpu-audit.diff/1"

Object = dict[str, Any]

# The counters whose rise the diff reports, per GPU.
COUNTERS = ("ecc_errors_corrected_volatile", "ecc_errors_uncorrected_volatile",
            "ecc_errors_corrected_aggregate", "ecc_errors_uncorrected_aggregate",
            "retired_pages_sbe", "retired_pages_dbe",
            "remapped_rows_correctable", "remapped_rows_uncorrectable")


class DiffSide(msgspec.Struct):
    generated_at: str
    tool_version: str
    gpu_count: int
    process_count: int
    gpu_selection: Object | None


class DiffProcess(msgspec.Struct):
    pid: int
    gpu_index: int
    gpu_uuid: str | None
    user: str | None
    name: str | None
    used_memory_bytes: int | None
    status: str | None
    start_time: str | None
    cmdline: list[str] | None


class CounterChange(msgspec.Struct):
    gpu_index: int
    counter: str
    before: int
    after: int
    increase: int


class DiffDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    hostname: str
    job_user: str | None
    before: DiffSide | None
    after: DiffSide
    processes_appeared: list[DiffProcess]
    processes_left: list[DiffProcess]
    counter_changes: list[CounterChange]
    findings: list[Finding]
    new_findings: list[Finding]
    resolved_findings: list[Finding]
    notes: list[str]
    summary: Summary


def _side(scan: Scan | None) -> DiffSide | None:
    if scan is None:
        return None
    return DiffSide(generated_at=scan.generated_at, tool_version=scan.tool_version,
                    gpu_count=len(scan.gpus), process_count=len(scan.processes),
                    gpu_selection=scan.gpu_selection)


def _process(p: GpuProcess) -> DiffProcess:
    """A process as the diff shows it; what a document carries is redacted again (it may come
    from anywhere)."""
    return DiffProcess(pid=p.pid, gpu_index=p.gpu_index, gpu_uuid=p.gpu_uuid, user=p.user,
                       name=redact_text(p.name) if p.name else None,
                       used_memory_bytes=p.used_memory_bytes, status=p.status,
                       start_time=p.start_time,
                       cmdline=redact_cmdline(p.cmdline) if p.cmdline is not None else None)


def counter_changes(report: DiffReport) -> list[CounterChange]:
    """Every counter that went up, per GPU present in both scans."""
    if report.before is None:
        return []
    by_key = {g.uuid or g.index: g for g in report.after.gpus}
    out = []
    for old in report.before.gpus:
        new = by_key.get(old.uuid or old.index)
        if new is None:
            continue
        for name in COUNTERS:
            a, b = getattr(old, name), getattr(new, name)
            if a is not None and b is not None and b > a:
                out.append(CounterChange(gpu_index=new.index, counter=name, before=a, after=b,
                                         increase=b - a))
    return out


def _counts(findings: list[Finding]) -> dict[str, int]:
    return {s.value: sum(1 for f in findings if f.severity == s) for s in Severity}


def diff_document(report: DiffReport) -> DiffDocument:
    after = _side(report.after)
    assert after is not None
    return DiffDocument(
        schema=DIFF_SCHEMA,
        tool_version=__version__,
        generated_at=utc_now(),
        hostname=report.after.host.hostname,
        job_user=report.job_user,
        before=_side(report.before),
        after=after,
        processes_appeared=[_process(p) for p in report.appeared],
        processes_left=[_process(p) for p in report.left],
        counter_changes=counter_changes(report),
        findings=list(report.findings),
        new_findings=list(report.new_findings),
        resolved_findings=list(report.resolved_findings),
        notes=list(report.notes),
        summary=Summary(worst_severity=report.worst, counts=_counts(report.judged),
                        exit_code=report.exit_code),
    )


def _process_line(p: GpuProcess) -> str:
    return (f"pid {p.pid} {p.user or '?'} {redact_text(p.name or '?')} on GPU {p.gpu_index}: "
            f"{fmt_mib(p.used_memory_bytes)}" + (f" ({p.status})" if p.status else ""))


def _headline(report: DiffReport) -> str:
    before = f"from {report.before.generated_at}" if report.before else "with no BEFORE"
    return (f"gpu-audit diff: {report.after.host.hostname}, {before} to "
            f"{report.after.generated_at}")


def render_diff(report: DiffReport, console: Console) -> None:
    """The diff on a console: what changed, then the verdict's findings."""

    console.print(f"[bold]{terminal_markup(_headline(report))}[/]")
    selected = report.after.gpu_selection
    if selected is not None:
        console.print(f"GPUs judged: {terminal_markup(str(selected.get('reason')))}")
    if report.job_user:
        console.print(f"job user: {terminal_markup(report.job_user)}")
    for note in report.notes:
        console.print(f"[dim]note: {terminal_markup(note)}[/]")
    console.print()
    for title, processes in (("Processes that appeared", report.appeared),
                             ("Processes that left", report.left)):
        console.print(f"[bold]{title}[/] ({len(processes)})")
        for p in processes:
            console.print(f"  {terminal_markup(_process_line(p))}")
    changes = counter_changes(report)
    if changes:
        console.print("[bold]Counters that went up[/]")
        for c in changes:
            console.print(f"  GPU {c.gpu_index} {c.counter}: {c.before} -> {c.after}")
    console.print()
    if report.findings:
        render_findings(console, report.findings)
    else:
        console.print("No change that needs attention (leaks, counters, Xids, throttling).\n")
    for title, found in (("New scan findings", report.new_findings),
                         ("Resolved scan findings", report.resolved_findings)):
        if found:
            console.print(f"[bold]{title}[/] ({len(found)})")
        for f in found:
            severity = (f.severity or Severity.INFO).value.upper()
            console.print(f"  {severity:<8} {terminal_markup(f'{f.id} ({f.subject}): {f.title}')}")
    console.print(f"\n{tables.finding_counts(report.judged)}; exit code {report.exit_code}")


def render_diff_markdown(report: DiffReport) -> str:
    out = [f"# {md_text(_headline(report))}", ""]
    selected = report.after.gpu_selection
    if selected is not None:
        out += [f"GPUs judged: {md_text(str(selected.get('reason')))}", ""]
    if report.job_user:
        out += [f"Job user: {md_text(report.job_user)}", ""]
    out += [f"- note: {md_text(n)}" for n in report.notes] + ([""] if report.notes else [])
    out += [f"{tables.finding_counts(report.judged)}; exit code {report.exit_code}.", ""]
    headers = ["GPU", "PID", "User", "Name", "VRAM", "Status"]
    for title, processes in (("Processes that appeared", report.appeared),
                             ("Processes that left", report.left)):
        out += [f"## {title}", ""]
        rows = [[str(p.gpu_index), str(p.pid), p.user or "?", redact_text(p.name or "?"),
                 fmt_mib(p.used_memory_bytes), p.status or "?"] for p in processes]
        out += [md_table(headers, rows) if rows else "None.", ""]
    changes = counter_changes(report)
    out += ["## Counters that went up", ""]
    out += [md_table(["GPU", "Counter", "Before", "After"],
                     [[str(c.gpu_index), c.counter, str(c.before), str(c.after)]
                      for c in changes]) if changes else "None.", ""]
    out += ["## Changes found", "", findings_markdown(report.findings) if report.findings
            else "No change that needs attention (leaks, counters, Xids, throttling).\n"]
    if report.new_findings:
        out += ["## New scan findings", "", findings_markdown(report.new_findings)]
    if report.resolved_findings:
        out += ["## Resolved scan findings", ""]
        out += [f"- {md_code(f.id)} ({md_text(f.subject)}): {md_text(f.title)}"
                for f in report.resolved_findings] + [""]
    return md_document("\n".join(out))
