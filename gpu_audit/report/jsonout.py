"""The scan JSON document (schema ``gpu-audit.scan/1``) and reading one back for ``--from``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from gpu_audit.errors import InputError
from gpu_audit.inputs import DOCUMENT_LIMIT, read_input_text
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.redact import redact_data, redact_settings
from gpu_audit.rules import worst
from gpu_audit.rules.duplicates import with_duplicate_groups
from gpu_audit.serial import extended, from_jsonable, to_jsonable

if TYPE_CHECKING:
    from pathlib import Path

SCAN_SCHEMA = "gpu-audit.scan/1"


class Summary(msgspec.Struct):
    """A scan's verdict: the worst severity, findings by severity, the exit status."""

    worst_severity: Severity | None
    counts: dict[str, int]
    exit_code: int


ScanDocument = extended(
    "ScanDocument", Scan,
    [("schema", str), ("tool_version", str), ("generated_at", str)],
    [("findings", list[Finding]), ("summary", Summary)],
    moved=("tool_version", "generated_at"), module=__name__)


def scan_document(scan: Scan, findings: list[Finding], exit_code: int) -> dict[str, Any]:
    """The document ``scan --json`` prints, as JSON data (the fleet ships it between nodes);
    each process's ``duplicate_group`` is judged here, from the processes, never taken from
    what a saved document said."""
    masked = masked_scan(scan)
    counts = {s.value: sum(1 for f in findings if f.severity == s) for s in Severity}
    document = ScanDocument(
        schema=SCAN_SCHEMA, **msgspec.structs.asdict(masked),
        findings=[_evidence_masked(f) for f in findings],
        summary=Summary(worst_severity=worst(findings), counts=counts, exit_code=exit_code))
    return to_jsonable(document)


def masked_scan(scan: Scan) -> Scan:
    """The scan as every document carries it: each process's duplicate group judged, the
    allocator configuration strings with their secrets masked: the environment's (this
    process's or ``--pid``'s), torch's reading of it, and what each monitored process published
    (another user's process may publish anything)."""
    replace = msgspec.structs.replace
    scan = with_duplicate_groups(scan)
    changes: dict[str, Any] = {}
    if scan.allocator is not None:
        changes["allocator"] = replace(
            scan.allocator, pytorch_cuda_alloc_conf=_masked(scan.allocator.pytorch_cuda_alloc_conf),
            pytorch_alloc_conf=_masked(scan.allocator.pytorch_alloc_conf))
    if scan.torch_probe is not None:
        changes["torch_probe"] = replace(
            scan.torch_probe, allocator_settings=_masked(scan.torch_probe.allocator_settings))
    if any(p.allocator is not None for p in scan.processes):
        changes["processes"] = [
            p if p.allocator is None
            else replace(p, allocator=replace(p.allocator, settings=_masked(p.allocator.settings)))
            for p in scan.processes]
    return replace(scan, **changes) if changes else scan


def _masked(settings: str | None) -> str | None:
    return redact_settings(settings) if isinstance(settings, str) else settings


def _evidence_masked(finding: Finding) -> Finding:
    """A finding whose evidence (figures and strings read from the machine) is redacted once
    more as it leaves: whatever a rule copied from a process or a publication, no secret."""
    if not finding.evidence:
        return finding
    return msgspec.structs.replace(finding, evidence=redact_data(to_jsonable(finding.evidence)))


def load_scan_document(path: Path) -> Scan:
    """The scan inside a saved ``scan --json`` document (its findings are recomputed)."""

    import json  # here: a plain scan reads no document

    text = read_input_text(path, limit=DOCUMENT_LIMIT, what="saved document")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise InputError(f"{path}: not a gpu-audit scan document (JSON nested too deeply)") \
            from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a gpu-audit scan document (expected a JSON object)")
    schema = data.get("schema")
    if not isinstance(schema, str) or not schema.startswith("gpu-audit.scan/"):
        raise InputError(
            f"{path}: not a gpu-audit scan document (schema is {schema!r}, "
            f"expected {SCAN_SCHEMA!r}); save one with `gpu-audit scan --json > FILE`"
        )
    if schema != SCAN_SCHEMA:
        raise InputError(
            f"{path}: schema {schema!r} is not supported by this gpu-audit (reads {SCAN_SCHEMA!r})"
        )
    try:
        return from_jsonable(Scan, data)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from None
