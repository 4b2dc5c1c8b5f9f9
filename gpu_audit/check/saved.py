"""Reading a saved document back for ``check --from FILE``: a scan or an earlier check."""

from __future__ import annotations

import json
from pathlib import Path

from gpu_audit.errors import InputError
from gpu_audit.model import Snapshot
from gpu_audit.serial import from_jsonable

CHECK_SCHEMA_PREFIX = "gpu-audit.check/"


def load_snapshot(path: Path) -> tuple[Snapshot, str | None]:
    """The snapshot in a ``scan --json`` or ``check --json`` document, and the user a check
    document recorded (``None`` for a scan document)."""
    from gpu_audit.report.jsonout import load_scan_document

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None  # let the scan reader produce its precise message
    if isinstance(data, dict) and str(data.get("schema", "")).startswith(CHECK_SCHEMA_PREFIX):
        if data["schema"] != "gpu-audit.check/1":
            raise InputError(f"{path}: schema {data['schema']!r} is not supported by this "
                             "gpu-audit (reads 'gpu-audit.check/1' and 'gpu-audit.scan/1')")
        if not isinstance(data.get("snapshot"), dict):
            raise InputError(f"{path}: check document without its 'snapshot' object")
        user = data.get("user")
        try:
            snapshot = from_jsonable(Snapshot, data["snapshot"], "$.snapshot")
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
        return snapshot, user if isinstance(user, str) else None
    return load_scan_document(path), None
