"""Explain results as a JSON document (``gpu-audit.explain/1``, built from
:class:`ExplainDocument`) and as terminal text.

Renderers only format: they never read logs. Log text is printed as plain ``Text`` (never as
rich markup), so brackets in a log line such as ``[rank0]:`` cannot be taken for styles.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gpu_audit.explain.api import SCHEMA, ExplainResult
from gpu_audit.explain.classify import Incident, Location
from gpu_audit.explain.signatures.texts import size_text
from gpu_audit.model import Severity
from gpu_audit.report.escape import terminal
from gpu_audit.units import fmt_pct, noun

_ROLE_LABEL = {
    "root-cause": "ROOT CAUSE",
    "consequence": "CONSEQUENCE",
    "related": "ALSO FAILED",
    "context": "CONTEXT",
}
_ROLE_STYLE = {"root-cause": "bold red", "consequence": "yellow", "related": "red",
               "context": "dim"}
_MAX_SHOWN_LOCATIONS = 6
_TEXT_ONLY = {"hint", "detail"}  # already part of the explanation


class ExplainInput(msgspec.Struct):
    source: str
    bytes: int
    lines: int
    compression: str | None


class ExplainLocation(msgspec.Struct):
    source: str | None
    line: int
    end_line: int | None


class ExplainIncident(msgspec.Struct):
    cls: str = msgspec.field(name="class")
    signature: str
    title: str
    severity: Severity
    role: str | None
    diagnosis: str | None
    count: int
    line_numbers: list[int]
    locations: list[ExplainLocation]
    sources: list[str]
    ranks: list[int]
    excerpt: Any
    numbers: dict[str, Any]  # free-form: what each signature measured
    explanation: str | None
    remedy: str | None


class ExplainDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    inputs: list[ExplainInput]
    torch_version: str | None
    fail_on: Severity
    gpu_failure: bool
    root_cause_class: str | None
    scan_duration_s: float | None
    incidents: list[ExplainIncident]


def incident_document(incident: Incident) -> ExplainIncident:
    return ExplainIncident(
        cls=incident.cls,
        signature=incident.signature,
        title=incident.title,
        severity=incident.severity,
        role=incident.role,
        diagnosis=incident.diagnosis,
        count=incident.count,
        line_numbers=list(incident.line_numbers),
        locations=[ExplainLocation(source=loc.source, line=loc.line, end_line=loc.end_line)
                   for loc in incident.locations],
        sources=list(incident.sources),
        ranks=list(incident.ranks),
        excerpt=incident.excerpt,
        numbers=incident.numbers,
        explanation=incident.explanation,
        remedy=incident.remedy,
    )


def to_document(result: ExplainResult, *, tool_version: str, generated_at: str,
                fail_on: Severity = Severity.ERROR) -> ExplainDocument:
    root = next((i for i in result.incidents if i.role == "root-cause"), None)
    return ExplainDocument(
        schema=SCHEMA,
        tool_version=tool_version,
        generated_at=generated_at,
        inputs=[ExplainInput(source=s.source, bytes=s.bytes, lines=s.lines,
                             compression=s.compression) for s in result.inputs],
        torch_version=result.torch_version,
        fail_on=fail_on,
        gpu_failure=any(i.severity >= fail_on for i in result.incidents),
        root_cause_class=root.cls if root else None,
        scan_duration_s=result.elapsed_s,
        incidents=[incident_document(i) for i in result.incidents],
    )


def format_number(key: str, value: Any) -> str | None:
    """A number from an incident as a reader wants it; None to leave it out."""
    if value is None or isinstance(value, (dict, bool)):
        return None
    if isinstance(value, list):
        if value and isinstance(value[0], dict):
            return None
        return ", ".join(str(v) for v in value) or None
    if key.endswith("_bytes") and isinstance(value, int):
        return size_text(value)
    if key.endswith("_pct"):
        return fmt_pct(value, missing=str(value))
    if key.endswith("_ms"):
        return f"{value} ms"
    if key.endswith("_s"):
        return f"{value} s"
    return str(value)


def _label(key: str) -> str:
    for suffix in ("_bytes", "_pct", "_ms", "_s"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
            break
    return key.replace("_", " ")


def _lines(loc: Location) -> str:
    return f"{loc.line}-{loc.end_line}" if loc.end_line else str(loc.line)


def _where(incident: Incident, single_source: bool) -> str:
    shown = incident.locations[:_MAX_SHOWN_LOCATIONS]
    if single_source:
        places = ", ".join(_lines(loc) for loc in shown)
        several = len(incident.locations) > 1 or shown[0].end_line is not None
        text = f"{noun(2 if several else 1, 'line')} {places}"
    else:
        text = ", ".join(f"{loc.source}:{_lines(loc)}" for loc in shown)
    hidden = len(incident.locations) - len(shown)
    if hidden > 0:
        text += f" (+{hidden} more)"
    if incident.count > 1:
        text += f"; seen {incident.count} times"
    if incident.ranks:
        ranks = ", ".join(str(r) for r in incident.ranks[:16])
        more = "…" if len(incident.ranks) > 16 else ""
        text += f"; {noun(len(incident.ranks), 'rank')} {ranks}{more}"
    return text


def render_terminal(result: ExplainResult, console: Any, *, fail_on: Severity) -> None:
    """The explanation for a person: root cause first, each with numbers and a remedy."""
    from rich.text import Text

    names = terminal(", ".join(s.source for s in result.inputs) or "<text>", newlines=False)
    lines = sum(s.lines for s in result.inputs)
    size = size_text(sum(s.bytes for s in result.inputs))
    failures = [i for i in result.incidents if i.severity >= fail_on]
    console.print(Text(f"gpu-audit explain: {names} ({lines:,} {noun(lines, 'line')}, "
                       f"{size})", style="bold"),
                  soft_wrap=True)
    if not result.incidents:
        console.print("No known GPU failure signature found.")
        console.print(Text(
            "If the job still died, the cause is outside GPU, driver, NCCL and host-memory "
            "failures: read the last Python traceback in the log.", style="dim"))
        return
    single = len(result.inputs) <= 1
    for number, incident in enumerate(result.incidents, 1):
        console.print()
        header = Text(f"{number}. ")
        header.append(_ROLE_LABEL.get(incident.role, incident.role.upper()),
                      style=_ROLE_STYLE.get(incident.role, ""))
        header.append(f"  {terminal(incident.title, newlines=False)}", style="bold")
        header.append(f"  [{incident.severity.value}, {incident.cls}]", style="dim")
        console.print(header, soft_wrap=True)
        console.print(Text("   " + terminal(_where(incident, single), newlines=False),
                           style="cyan"), soft_wrap=True)
        console.print(Text("   > " + terminal(incident.excerpt, newlines=False), style="dim"),
                      soft_wrap=True)
        shown = [(k, format_number(k, v)) for k, v in incident.numbers.items()
                 if k not in _TEXT_ONLY]
        shown = [(k, v) for k, v in shown if v is not None]
        if shown:
            console.print(Text("   " + terminal(" · ".join(f"{_label(k)} {v}" for k, v in shown),
                                                newlines=False)), soft_wrap=True)
        console.print(Text("   Why: ", style="bold").append(Text(terminal(incident.explanation),
                                                                  style="")), soft_wrap=True)
        console.print(Text("   Fix:", style="bold"))
        for line in terminal(incident.remedy).splitlines():
            console.print(Text("     " + line, style="green"), soft_wrap=True)
    console.print()
    if failures:
        root = failures[0]
        console.print(Text(f"Root cause: {terminal(root.title, newlines=False)} ({root.cls}). "
                           "Fix it first; the incidents "
                           "after it are usually its echoes.", style="bold"), soft_wrap=True)
    else:
        console.print(Text(f"Nothing at or above '{fail_on.value}': no GPU failure by this "
                           "threshold.", style="bold"), soft_wrap=True)
