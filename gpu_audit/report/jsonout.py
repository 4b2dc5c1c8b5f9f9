"""The scan JSON document (schema ``gpu-audit.scan/1``) and reading one back for ``--from``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from gpu_audit.errors import InputError
from gpu_audit.inputs import DOCUMENT_LIMIT, read_input_text
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.redact import redact_data, redact_settings
from gpu_audit.rules import worst
from gpu_audit.rules.duplicates import with_duplicate_groups
from gpu_audit.serial import from_jsonable, to_jsonable

SCAN_SCHEMA = "gpu-audit.scan/1"


class Summary(msgspec.Struct):
    """A scan's verdict: the worst severity, findings by severity, the exit status."""

    worst_severity: Severity | None
    counts: dict[str, int]
    exit_code: int


def scan_document(scan: Scan, findings: list[Finding], exit_code: int) -> dict[str, Any]:
    """The document ``scan --json`` prints; each process's ``duplicate_group`` is judged here,
    from the processes, never taken from what a saved document said."""
    data = scan_data(scan)
    counts = {s.value: sum(1 for f in findings if f.severity == s) for s in Severity}
    top = worst(findings)
    return {
        "schema": SCAN_SCHEMA,
        "tool_version": data.pop("tool_version"),
        "generated_at": data.pop("generated_at"),
        **data,
        "findings": [_evidence_masked(f) for f in to_jsonable(findings)],
        "summary": {
            "worst_severity": top.value if top else None,
            "counts": counts,
            "exit_code": exit_code,
        },
    }


def scan_data(scan: Scan) -> dict[str, Any]:
    """The scan as every document carries it (``scan --json``, the check's ``snapshot``), as
    JSON data: :func:`masked_scan`."""
    return to_jsonable(masked_scan(scan))


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


def _evidence_masked(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding whose evidence (figures and strings read from the machine) is redacted once
    more as it leaves: whatever a rule copied from a process or a publication, no secret."""
    if finding.get("evidence"):
        finding["evidence"] = redact_data(finding["evidence"])
    return finding


def load_scan_document(path: Path) -> Scan:
    """The scan inside a saved ``scan --json`` document (its findings are recomputed)."""

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
