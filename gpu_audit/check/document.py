"""The check JSON document, schema ``gpu-audit.check/1``.

``status``/``exit_code`` carry the verdict; ``checks`` is the checklist in order; ``findings`` are
all scan findings with the status the policy gave each; ``snapshot`` is the machine as scanned
(the same fields as a ``gpu-audit.scan/1`` document), so ``check --from`` can re-judge a saved
check document under another policy.
"""

from __future__ import annotations

from typing import Any

from gpu_audit import __version__
from gpu_audit.check.checks import COVERED_FINDINGS
from gpu_audit.check.results import CheckReport, CheckStatus
from gpu_audit.model import Finding, Severity
from gpu_audit.serial import to_jsonable

CHECK_SCHEMA = "gpu-audit.check/1"


def _finding_status(report: CheckReport, finding: Finding) -> str:
    """What the policy made of one finding: the status of the check that judged it."""
    if finding.id in COVERED_FINDINGS:
        check_id = COVERED_FINDINGS[finding.id]
        judged = [r for r in report.results if r.id == check_id]
        if judged and all(r.status is CheckStatus.SKIP for r in judged):
            return "skip"
        matching = [r for r in judged if r.finding_id == finding.id]
        return matching[0].status.value if matching else "pass"
    severity = finding.severity or Severity.INFO
    if severity >= report.policy.fail_on_severity:
        return "fail"
    if severity >= report.policy.warn_on_severity:
        return "warn"
    return "pass"


def check_document(report: CheckReport) -> dict[str, Any]:
    snapshot = to_jsonable(report.snapshot)
    return {
        "schema": CHECK_SCHEMA,
        "tool_version": __version__,
        "generated_at": report.generated_at,
        "hostname": report.hostname,
        "status": report.verdict.name,
        "exit_code": report.exit_code,
        "user": report.user,
        "summary": report.counts(),
        "duration_s": report.duration_s,
        "policy": report.policy.to_dict(),
        "checks": [
            {
                "id": r.id,
                "subject": r.subject,
                "status": r.status.value,
                "title": r.title,
                "summary": r.summary,
                "evidence": to_jsonable(r.evidence),
                "remedy": r.remedy,
                "finding_id": r.finding_id,
                "duration_s": r.duration_s,
            }
            for r in report.results
        ],
        "stages": to_jsonable(report.stages),
        "findings": [
            {**to_jsonable(f), "check_status": _finding_status(report, f)}
            for f in report.findings
        ],
        "snapshot": snapshot,
    }
