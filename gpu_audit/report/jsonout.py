"""The scan JSON document (schema ``gpu-audit.scan/1``) and reading one back for ``--from``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpu_audit.errors import InputError
from gpu_audit.inputs import DOCUMENT_LIMIT, read_input_text
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.rules import worst
from gpu_audit.rules.duplicates import with_duplicate_groups
from gpu_audit.serial import from_jsonable, to_jsonable

SCAN_SCHEMA = "gpu-audit.scan/1"


def scan_document(scan: Scan, findings: list[Finding], exit_code: int) -> dict[str, Any]:
    """The document ``scan --json`` prints; each process's ``duplicate_group`` is judged here,
    from the processes, never taken from what a saved document said."""
    data = to_jsonable(with_duplicate_groups(scan))
    counts = {s.value: sum(1 for f in findings if f.severity == s) for s in Severity}
    top = worst(findings)
    return {
        "schema": SCAN_SCHEMA,
        "tool_version": data.pop("tool_version"),
        "generated_at": data.pop("generated_at"),
        **data,
        "findings": to_jsonable(findings),
        "summary": {
            "worst_severity": top.value if top else None,
            "counts": counts,
            "exit_code": exit_code,
        },
    }


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
