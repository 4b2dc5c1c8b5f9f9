"""The documents gpu-audit writes, as types, and their published JSON Schemas.

Each ``gpu-audit.KIND/MAJOR`` id names one type (:data:`DOCUMENTS`), declared beside the code
that builds the document (the scan's in ``report/jsonout.py``, the check's in
``report/check_document.py``; diff's, diag's and snapshot's in their ``render.py``; the rules
list's in ``cli/rules.py``) or here;
``docs/schemas/KIND-MAJOR.schema.json`` is generated from it. Parts with a model of their own
(a scan, a finding, a stage outcome, a diag figure, validate's run state) are typed field by
field; the rest name their keys and leave nested free-form objects (evidence, a validate
variant's stages) as objects. A schema id only
ever gains keys: consumers of ``/1`` keep working.

``python -m gpu_audit.schemas`` rewrites ``docs/schemas``; ``--check`` exits 1 when a committed
file is out of date (the test suite runs it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec

from gpu_audit.cli.rules import RulesDocument
from gpu_audit.diag.render import DiagDocument
from gpu_audit.diff.render import DiffDocument
from gpu_audit.fleet.document import FleetDocument
from gpu_audit.model import Finding, Severity
from gpu_audit.report.check_document import CheckDocument
from gpu_audit.report.jsonout import ScanDocument
from gpu_audit.snapshot.render import SnapshotDocument
from gpu_audit.validate.plan import Plan
from gpu_audit.validate.state import RunState

Object = dict[str, Any]




class ExplainInput(msgspec.Struct):
    source: str
    bytes: int
    lines: int
    compression: str | None


class ExplainLocation(msgspec.Struct):
    source: str | None
    line: int
    end_line: int | None


Incident = msgspec.defstruct("Incident", [
    ("class", str), ("signature", str), ("title", str), ("severity", Severity),
    ("role", str | None), ("diagnosis", str | None), ("count", int),
    ("line_numbers", list[int]), ("locations", list[ExplainLocation]),
    ("sources", list[str]), ("ranks", list[int]), ("excerpt", Any), ("numbers", Object),
    ("explanation", str | None), ("remedy", str | None)], module=__name__)


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
    incidents: list[Incident]  # type: ignore[valid-type]


class ValidateDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    run: Object
    device: Object
    torch: Object
    workload: Any
    plan: Object
    variants: list[Object]
    comparison: list[Object] | None
    recommendation: Object | None
    findings: list[Finding]
    files: Object


class PlanDocument(msgspec.Struct):
    schema: str
    plan: Plan


DOCUMENTS: dict[str, Any] = {
    "gpu-audit.scan/1": ScanDocument,
    "gpu-audit.check/1": CheckDocument,
    "gpu-audit.validate/1": ValidateDocument,
    "gpu-audit.validate-state/1": RunState,
    "gpu-audit.validate-plan/1": PlanDocument,
    "gpu-audit.explain/1": ExplainDocument,
    "gpu-audit.fleet/1": FleetDocument,
    "gpu-audit.diff/1": DiffDocument,
    "gpu-audit.diag/1": DiagDocument,
    "gpu-audit.snapshot/1": SnapshotDocument,
    "gpu-audit.rules/1": RulesDocument,
}

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "docs" / "schemas"


def file_name(schema_id: str) -> str:
    """``gpu-audit.validate-state/1`` -> ``validate-state-1.schema.json``."""
    kind, major = schema_id.removeprefix("gpu-audit.").split("/")
    return f"{kind}-{major}.schema.json"


def json_schema(schema_id: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one document; its ``schema`` key is pinned."""
    schema = msgspec.json.schema(DOCUMENTS[schema_id])
    top = schema["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    top["properties"]["schema"] = {"const": schema_id}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://gpu-audit.dev/schemas/{file_name(schema_id)}",
            "title": schema_id, **schema}


def rendered(schema_id: str) -> str:
    return json.dumps(json_schema(schema_id), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    for schema_id in DOCUMENTS:
        path = SCHEMA_DIR / file_name(schema_id)
        text = rendered(schema_id)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path.name)
        if not check:
            path.write_text(text, encoding="utf-8")
    if check and stale:
        print(f"out of date: {', '.join(stale)}; run `python -m gpu_audit.schemas`",
              file=sys.stderr)
        return 1
    print(("wrote " if stale else "up to date: ") + (", ".join(stale) or str(SCHEMA_DIR)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
