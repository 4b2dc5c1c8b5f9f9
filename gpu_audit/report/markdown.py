"""The scan as a markdown report (``reports/scan-<UTC timestamp>-<host>.md``)."""

from __future__ import annotations

from gpu_audit.model import Finding, Scan
from gpu_audit.report import allocator_table, tables
from gpu_audit.report.escape import (
    md_cell,
    md_code,
    md_document,
    md_prose,
    md_table,
    md_text,
)
from gpu_audit.report.remedy import remedy_markdown

md_escape = md_cell  # a table cell (kept for callers of the old name)
__all__ = ["findings_markdown", "md_escape", "md_table", "render_scan_markdown"]


def findings_markdown(findings: list[Finding]) -> str:
    if not findings:
        return "No findings: nothing stands in the way of a run.\n"
    parts = []
    for f in findings:
        severity = f.severity.value if f.severity else "info"
        parts.append(
            f"### {severity.upper()} {md_code(f.id)} ({md_text(f.subject)}): "
            f"{md_prose(f.title)}\n\n"
            f"{md_prose(f.detail, newlines=True)}\n\n**Fix:**\n\n{remedy_markdown(f.remedy)}\n"
        )
    return "\n".join(parts)


def render_scan_markdown(scan: Scan, findings: list[Finding], exit_code: int) -> str:
    out = [
        f"# gpu-audit scan: {md_text(scan.host.hostname)}",
        "",
        f"Generated {md_text(scan.generated_at)} by gpu-audit {md_text(scan.tool_version)}; "
        f"{tables.finding_counts(findings)}; exit code {exit_code}.",
        "",
    ]
    out += [md_table(["", ""], [[k, v] for k, v in tables.host_lines(scan)]), ""]
    out += ["## GPUs", ""]
    if scan.gpus:
        out += [md_table(tables.GPU_HEADERS, tables.gpu_rows(scan.gpus)), ""]
    else:
        reason = scan.nvml.message or scan.nvml.cause or "none found"
        out += [f"No GPU could be read: {md_text(reason)}", ""]
    out += ["## GPU processes", ""]
    if scan.processes:
        rows = [row for _, row in tables.process_rows(scan, width=200)]
        out += [md_table(tables.PROCESS_HEADERS, rows), ""]
        if allocator_table.publishing(scan):
            alloc_rows = [allocator_table.allocator_row(p)
                          for p in allocator_table.publishing(scan)]
            out += [f"### {allocator_table.ALLOCATOR_TITLE}", "",
                    md_table(allocator_table.ALLOCATOR_HEADERS, alloc_rows), "",
                    allocator_table.ALLOCATOR_NOTE, ""]
    else:
        out += ["None.", ""]
    out += ["## Findings", "", findings_markdown(findings)]
    if scan.probe_errors:
        out += ["## Measurements that could not be taken", ""]
        out += [
            f"- {md_code(e.subject)} {md_text(e.source)}: {md_text(e.message)}"
            + (f" ({md_code(e.call)})" if e.call else "")
            for e in scan.probe_errors
        ]
        out.append("")
    return md_document("\n".join(out))
