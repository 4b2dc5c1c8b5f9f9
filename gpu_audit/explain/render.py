"""Explain results as a JSON document (``gpu-audit.explain/1``, built from
:class:`ExplainDocument`) and as terminal text.

Renderers only format: they never read logs. Log text is printed as plain ``Text`` (never as
rich markup), so brackets in a log line such as ``[rank0]:`` cannot be taken for styles.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from gpu_audit.explain.api import SCHEMA, ExplainResult
from gpu_audit.explain.classify import Incident, Location
from gpu_audit.explain.signatures.texts import size_text
from gpu_audit.model import Severity
from gpu_audit.report.escape import no_workflow_commands, terminal
from gpu_audit.report.remedy import is_command, wrapped
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
_LIST_ITEM = re.compile(r"^(?:[-*]|\d{1,2}[.)]) ")  # continued under the item's text


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


def _fitted(text: Any, width: int, indent: str) -> list[Any]:
    """``text`` (a rich ``Text``) in lines of ``width`` columns, broken where
    :func:`~gpu_audit.report.remedy.wrapped` breaks prose (between words, never inside a word,
    a path or a quoted command), later lines after ``indent``, each line keeping its styles."""
    from rich.text import Text

    plain = text.plain
    lines = wrapped(plain, width, indent)
    out, pos = [], 0
    for n, line in enumerate(lines):
        body = line[len(indent):] if n else line
        while n and pos < len(plain) and plain[pos] == " ":
            pos += 1
        piece = text[pos:pos + len(body)]
        if piece.plain != body:  # a tab the wrapping expanded: the same lines, one style
            return [Text(no_workflow_commands(line), style=text.style) for line in lines]
        out.append(Text(indent) + piece if n else piece)
        pos += len(body)
    # A ``::`` that wrapping moved to the start of a line must not read as a workflow command.
    return [Text(no_workflow_commands(line.plain), style=text.style)
            if no_workflow_commands(line.plain) != line.plain else line for line in out]


def _say(console: Any, text: Any, indent: str) -> None:
    """``text`` wrapped to the console's width; a word wider than the console goes past it
    whole (the terminal folds it, the text pastes unbroken)."""
    _print_lines(console, _fitted(text, console.width, indent))


def _print_lines(console: Any, lines: list[Any]) -> None:
    """Lines already fitted to the console, printed as they are (one call: printing is what
    the report spends its time on)."""
    from rich.text import Text

    console.print(Text("\n").join(lines), soft_wrap=True)


def _labelled(console: Any, label: str, body: str, style: str = "") -> None:
    """``   Why: …`` / ``   Fix: …``: every line of ``body`` after the label's column, each
    wrapped under its own text (a list item's under the text after its ``-`` or ``1.``).
    A command stays whole on its line, so that it pastes as it was written."""
    from rich.text import Text

    lead = Text().append(f"   {label}: ", style="bold")  # the label alone is bold
    pad = " " * len(lead)
    out: list[Any] = []
    for n, line in enumerate(body.splitlines() or [""]):
        text = (lead.copy() if n == 0 else Text(pad)) + Text(line.strip(), style=style)
        marker = _LIST_ITEM.match(line.strip())
        out += [text] if is_command(line) else _fitted(
            text, console.width, pad + " " * (len(marker[0]) if marker else 0))
    _print_lines(console, out)


def render_terminal(result: ExplainResult, console: Any, *, fail_on: Severity) -> None:
    """The explanation for a person: root cause first, each with numbers and a remedy, every
    line wrapped to the console's width."""
    from rich.text import Text

    names = terminal(", ".join(s.source for s in result.inputs) or "<text>", newlines=False)
    lines = sum(s.lines for s in result.inputs)
    size = size_text(sum(s.bytes for s in result.inputs))
    failures = [i for i in result.incidents if i.severity >= fail_on]
    _say(console, Text(f"gpu-audit explain: {names} ({lines:,} {noun(lines, 'line')}, "
                       f"{size})", style="bold"), " " * 4)
    if not result.incidents:
        console.print("No known GPU failure signature found.")
        _say(console, Text(
            "If the job still died, the cause is outside GPU, driver, NCCL and host-memory "
            "failures: read the last Python traceback in the log.", style="dim"), "")
        return
    single = len(result.inputs) <= 1
    for number, incident in enumerate(result.incidents, 1):
        console.print()
        _render_incident(console, incident, number, single)
    console.print()
    if failures:
        root = failures[0]
        _say(console, Text(f"Root cause: {terminal(root.title, newlines=False)} ({root.cls}). "
                           "Fix it first; the incidents "
                           "after it are usually its echoes.", style="bold"), " " * 12)
    else:
        _say(console, Text(f"Nothing at or above '{fail_on.value}': no GPU failure by this "
                           "threshold.", style="bold"), "")


def _render_incident(console: Any, incident: Incident, number: int, single: bool) -> None:
    """One incident: what, where, the log line, its numbers, why and the fix."""
    from rich.text import Text

    header = Text(f"{number}. ")
    header.append(_ROLE_LABEL.get(incident.role, incident.role.upper()),
                  style=_ROLE_STYLE.get(incident.role, ""))
    header.append(f"  {terminal(incident.title, newlines=False)}", style="bold")
    header.append(f"  [{incident.severity.value}, {incident.cls}]", style="dim")
    _say(console, header, " " * 3)
    _say(console, Text("   " + terminal(_where(incident, single), newlines=False),
                       style="cyan"), " " * 5)
    _say(console, Text("   > " + terminal(incident.excerpt, newlines=False), style="dim"),
         " " * 5)
    shown = [(k, format_number(k, v)) for k, v in incident.numbers.items()
             if k not in _TEXT_ONLY]
    shown = [(k, v) for k, v in shown if v is not None]
    if shown:
        _say(console, Text("   " + terminal(" · ".join(f"{_label(k)} {v}" for k, v in shown),
                                            newlines=False)), " " * 5)
    _labelled(console, "Why", terminal(incident.explanation))
    _labelled(console, "Fix", terminal(incident.remedy), style="green")
