"""The check for GitHub Actions: the step summary (markdown) and workflow annotations.

Annotations are workflow commands on stdout (``::error title=...::message``). GitHub shows at
most 10 error and 10 warning annotations per step, so the worst 10 of each are emitted and a
``::notice::`` counts the rest. The step summary is GitHub-flavoured markdown appended to the
file ``$GITHUB_STEP_SUMMARY`` names (capped at 1 MiB per step); the same markdown is the check's
report file.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from gpu_audit.check.results import CheckReport, CheckResult, CheckStatus
from gpu_audit.serial import write_atomic

ANNOTATION_LIMIT = 10  # per level and step (GitHub's cap)
SUMMARY_LIMIT_BYTES = 1024 * 1024

ICON = {
    CheckStatus.PASS: "✅",
    CheckStatus.WARN: "⚠️",
    CheckStatus.FAIL: "❌",
    CheckStatus.SKIP: "⏭️",
    CheckStatus.UNKNOWN: "❓",
}
VERDICT_ICON = {"OK": "✅", "WARNING": "⚠️", "CRITICAL": "❌", "UNKNOWN": "❓"}


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("GITHUB_ACTIONS") == "true"


# --- annotations -----------------------------------------------------------------------------


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF are encoded (as actions/toolkit does)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: the message escapes plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(level: str, message: str, title: str | None = None) -> str:
    props = f" title={escape_property(title)}" if title else ""
    return f"::{level}{props}::{escape_data(message)}"


def _annotation(level: str, result: CheckResult, hostname: str) -> str:
    subject = "" if result.subject == "host" else f" ({result.subject})"
    title = f"gpu-audit check on {hostname}: {result.id}{subject}"
    message = result.summary + (f"\nFix: {result.remedy}" if result.remedy else "")
    return workflow_command(level, message, title)


def annotations(report: CheckReport, limit: int = ANNOTATION_LIMIT) -> list[str]:
    """Error annotations for failed and unjudged checks, warnings for warnings, worst first."""
    errors = (report.by_status(CheckStatus.FAIL) + report.by_status(CheckStatus.UNKNOWN))
    warnings = report.by_status(CheckStatus.WARN)
    lines = [_annotation("error", r, report.hostname) for r in errors[:limit]]
    lines += [_annotation("warning", r, report.hostname) for r in warnings[:limit]]
    left = [(len(errors) - limit, "failure"), (len(warnings) - limit, "warning")]
    rest = [f"{n} more {word}{'s' if n != 1 else ''}" for n, word in left if n > 0]
    if rest:
        lines.append(workflow_command(
            "notice", f"{' and '.join(rest)} not annotated (GitHub shows {limit} of each per "
                      "step): see the job summary or the JUnit report.", "gpu-audit check"))
    return lines


# --- step summary / markdown report --------------------------------------------------------


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell (no pipes, no HTML, one line)."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\r", " ").replace("\n", " "))


def _fence(text: str, language: str = "") -> str:
    """A code block that the text itself cannot close."""
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{language}\n{text}\n{ticks}"


def render_check_markdown(report: CheckReport, *, evidence: bool = True) -> str:
    """Verdict first, then the checklist table, the fixes, and the evidence folded away."""
    verdict = report.verdict.name
    counts = report.counts()
    tally = ", ".join(f"{counts[s.value]} {s.value}" for s in CheckStatus if counts[s.value])
    out = [
        f"## {VERDICT_ICON[verdict]} gpu-audit check: {verdict} on `{_cell(report.hostname)}`",
        "",
        f"{tally}; exit code {report.exit_code}. Policy: "
        f"{_cell(report.policy.source or 'built-in defaults')}. Generated {report.generated_at}.",
        "",
        "| | Check | Subject | Result |",
        "|---|---|---|---|",
    ]
    for r in report.results:
        out.append(f"| {ICON[r.status]} {r.status.value} | `{_cell(r.id)}` | {_cell(r.subject)} "
                   f"| {_cell(r.summary)} |")
    fixes = [r for r in report.results if r.remedy and r.status is not CheckStatus.PASS]
    if fixes:
        out += ["", "### How to fix", ""]
        for r in fixes:
            subject = "" if r.subject == "host" else f" ({_cell(r.subject)})"
            out += [f"**`{_cell(r.id)}`**{subject}: {_cell(r.summary)}", "", _fence(r.remedy), ""]
    if evidence:
        data = {f"{r.id} {r.subject}": r.evidence for r in report.results if r.evidence}
        if data:
            out += ["", "<details><summary>Evidence</summary>", "",
                    _fence(json.dumps(data, indent=2, sort_keys=True, default=str), "json"), "",
                    "</details>"]
    return "\n".join(out).rstrip() + "\n"


def step_summary(report: CheckReport) -> str:
    """The markdown for ``$GITHUB_STEP_SUMMARY``, within GitHub's 1 MiB per step."""
    text = render_check_markdown(report)
    if len(text.encode("utf-8")) > SUMMARY_LIMIT_BYTES // 2:
        text = render_check_markdown(report, evidence=False) + (
            "\n_Evidence left out to stay within GitHub's summary size limit; it is in the "
            "JSON and JUnit reports._\n")
    return text


def append_step_summary(path: Path, text: str) -> None:
    """Append ``text`` to the summary file, keeping what earlier steps or commands wrote.

    A regular file is rewritten whole through a temporary file and a rename, so a reader never
    sees half a summary; anything else (a pipe, ``/dev/stdout``) is appended to directly.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        write_atomic(path, text)
        return
    if not stat.S_ISREG(mode):
        with path.open("a", encoding="utf-8") as handle:
            handle.write(text)
        return
    existing = path.read_bytes()
    separator = b"\n" if existing and not existing.endswith(b"\n") else b""
    write_atomic(path, existing + separator + text.encode("utf-8"))
    os.chmod(path, stat.S_IMODE(mode))
