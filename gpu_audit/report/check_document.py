"""The check JSON document, schema ``gpu-audit.check/1``, and reading one back.

``status``/``exit_code`` carry the verdict; ``checks`` is the checklist in order; ``findings`` are
all scan findings with the status the policy gave each; ``snapshot`` is the machine as scanned
(the same fields as a ``gpu-audit.scan/1`` document; the key keeps its name, as the schema
does), so ``check --from`` can re-judge a saved check document under another policy.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec

from gpu_audit import __version__
from gpu_audit.check.findings import severity_status
from gpu_audit.check.registry import viewed_findings
from gpu_audit.check.results import CheckReport, CheckStatus, StageOutcome
from gpu_audit.errors import InputError
from gpu_audit.inputs import DOCUMENT_LIMIT, read_input_text
from gpu_audit.model import Finding, Scan
from gpu_audit.redact import redact_data
from gpu_audit.report.jsonout import masked_scan
from gpu_audit.serial import extended, from_jsonable, to_jsonable

CHECK_SCHEMA = "gpu-audit.check/1"
CHECK_SCHEMA_PREFIX = "gpu-audit.check/"

Object = dict[str, Any]

CheckedFinding = extended("CheckedFinding", Finding, [], [("check_status", str)],
                          module=__name__)

if TYPE_CHECKING:
    from pathlib import Path


class CheckLine(msgspec.Struct):
    """One line of the checklist."""

    id: str
    subject: str
    status: str  # pass, warn, fail, skip, unknown
    title: str
    summary: str
    evidence: Object
    remedy: str | None
    finding_id: str | None
    duration_s: float | None


class CheckDocument(msgspec.Struct):
    """The ``gpu-audit.check/1`` document (``check --json``)."""

    schema: str
    tool_version: str
    generated_at: str
    hostname: str
    status: str  # OK, WARNING, CRITICAL, UNKNOWN
    exit_code: int
    user: str | None
    summary: dict[str, int]
    duration_s: float | None
    policy: Object
    checks: list[CheckLine]
    stages: list[StageOutcome]
    findings: list[CheckedFinding]  # type: ignore[valid-type]
    snapshot: Scan
    gpu_selection: Object | None = None  # the GPUs judged (``--gpus``, a job's); None: all


def _finding_status(report: CheckReport, finding: Finding, viewed: dict[str, str]) -> str:
    """What the policy made of one finding: the status of the check that views it, or of its
    severity for the others."""
    check_id = viewed.get(finding.id)
    if check_id is None:
        return severity_status(report.policy, finding.severity).value
    judged = [r for r in report.results if r.id == check_id]
    if judged and all(r.status is CheckStatus.SKIP for r in judged):
        return "skip"
    matching = [r for r in judged if r.finding_id == finding.id]
    same_subject = [r for r in matching if r.subject == finding.subject]
    chosen = same_subject or matching
    return chosen[0].status.value if chosen else "pass"


def check_document(report: CheckReport) -> CheckDocument:
    """The document of one check run; what was read from the machine (evidence) is redacted
    once more as it leaves, the scan's settings' secrets masked as in a scan document."""
    viewed = viewed_findings()
    return CheckDocument(
        schema=CHECK_SCHEMA,
        tool_version=__version__,
        generated_at=report.generated_at,
        hostname=report.hostname,
        status=report.verdict.name,
        exit_code=report.exit_code,
        user=report.user,
        summary=report.counts(),
        duration_s=report.duration_s,
        policy=report.policy.to_dict(),
        checks=[CheckLine(id=r.id, subject=r.subject, status=r.status.value, title=r.title,
                          summary=r.summary, evidence=redact_data(to_jsonable(r.evidence)),
                          remedy=r.remedy, finding_id=r.finding_id, duration_s=r.duration_s)
                for r in report.results],
        stages=list(report.stages),
        findings=[_checked(f, _finding_status(report, f, viewed)) for f in report.findings],
        snapshot=masked_scan(report.scan),
        gpu_selection=report.scan.gpu_selection,
    )


def _checked(finding: Finding, status: str) -> Any:
    fields = msgspec.structs.asdict(finding)
    fields["evidence"] = redact_data(to_jsonable(finding.evidence))
    return CheckedFinding(**fields, check_status=status)


def load_check_document(path: Path) -> tuple[Scan, str | None] | None:
    """The snapshot in a saved ``check --json`` document and the user it recorded; ``None``
    when ``path`` holds no check document (a scan document, or something the scan reader
    should name)."""

    try:  # what cannot be read here, the scan document reader names
        data = json.loads(read_input_text(path, limit=DOCUMENT_LIMIT, what="saved document"))
    except (InputError, json.JSONDecodeError, RecursionError):
        return None
    if not (isinstance(data, dict) and str(data.get("schema", "")).startswith(CHECK_SCHEMA_PREFIX)):
        return None
    if data["schema"] != CHECK_SCHEMA:
        raise InputError(f"{path}: schema {data['schema']!r} is not supported by this "
                         f"gpu-audit (reads {CHECK_SCHEMA!r} and 'gpu-audit.scan/1')")
    if not isinstance(data.get("snapshot"), dict):
        raise InputError(f"{path}: check document without its 'snapshot' object")
    user = data.get("user")
    try:
        scan = from_jsonable(Scan, data["snapshot"], "$.scan")
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
    return scan, user if isinstance(user, str) else None
