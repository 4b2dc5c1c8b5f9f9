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
from typing import TYPE_CHECKING

from gpu_audit.check.results import CheckReport, CheckResult, CheckStatus
from gpu_audit.inputs import SUMMARY_LIMIT, read_input
from gpu_audit.redact import redact_data
from gpu_audit.report.escape import (
    Markdown,
    md_cell,
    md_code,
    md_document,
    md_fence,
    md_prose,
    md_prose_cell,
    md_row,
    md_text,
    workflow_data,
    workflow_property,
)
from gpu_audit.serial import (
    open_special_for_writing,
    resolve_output,
    write_atomic,
    write_through,
)

if TYPE_CHECKING:
    from pathlib import Path

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


# A workflow command's message and property values (gpu_audit.report.escape).
escape_data = workflow_data
escape_property = workflow_property


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


_cell = md_cell
_fence = md_fence


def render_check_markdown(report: CheckReport, *, evidence: bool = True) -> str:
    """Verdict first, then the checklist table, the fixes, and the evidence folded away."""
    verdict = report.verdict.name
    counts = report.counts()
    tally = ", ".join(f"{counts[s.value]} {s.value}" for s in CheckStatus if counts[s.value])
    out = [
        f"## {VERDICT_ICON[verdict]} gpu-audit check: {verdict} on {md_code(report.hostname)}",
        "",
        f"{tally}; exit code {report.exit_code}. Policy: "
        f"{_cell(report.policy.source or 'built-in defaults')}. "
        f"Generated {md_text(report.generated_at)}.",
        "",
    ]
    selected = report.scan.gpu_selection
    if selected is not None:
        out += [f"GPUs judged: {_cell(str(selected.get('reason')))}", ""]
    out += [
        "| | Check | Subject | Result |",
        "|---|---|---|---|",
    ]
    for r in report.results:
        out.append(md_row([Markdown(f"{ICON[r.status]} {r.status.value}"),
                           Markdown(f"`{_cell(r.id)}`"), r.subject, md_prose_cell(r.summary)]))
    fixes = [r for r in report.results if r.remedy and r.status is not CheckStatus.PASS]
    if fixes:
        out += ["", "### How to fix", ""]
        for r in fixes:
            subject = "" if r.subject == "host" else f" ({_cell(r.subject)})"
            out += [f"**`{_cell(r.id)}`**{subject}: {md_prose(r.summary)}", "", _fence(r.remedy),
                    ""]
    if evidence:
        data = {f"{r.id} {r.subject}": redact_data(r.evidence)
                for r in report.results if r.evidence}
        if data:
            out += ["", "<details><summary>Evidence</summary>", "",
                    # "<" as \u003c: no HTML tag (</details>) even where code is not code.
                    _fence(json.dumps(data, indent=2, sort_keys=True, default=str)
                           .replace("<", "\\u003c"), "json"), "",
                    "</details>"]
    return md_document("\n".join(out).rstrip() + "\n")


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
    sees half a summary; a FIFO or a character device (``/dev/stdout``) is appended to directly,
    and a FIFO nobody reads is an error, not a hang. A link another user could have planted, a
    folder or a socket is refused (:func:`~gpu_audit.serial.resolve_output`).
    """
    from pathlib import Path  # a summary is written only in a CI job: not on every check's path

    path = Path(path)
    target, st = resolve_output(path)
    if st is None:
        write_atomic(path, text)
        return
    if not stat.S_ISREG(st.st_mode):
        write_through(open_special_for_writing(target, append=True), text.encode("utf-8"))
        return
    existing = read_input(path, limit=SUMMARY_LIMIT, what="step summary")
    separator = b"\n" if existing and not existing.endswith(b"\n") else b""
    write_atomic(path, existing + separator + text.encode("utf-8"), mode=stat.S_IMODE(st.st_mode))
