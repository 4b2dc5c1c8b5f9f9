"""The documents gpu-audit writes, as types, and their published JSON Schemas.

Each ``gpu-audit.KIND/MAJOR`` id names one type here; ``docs/schemas/KIND-MAJOR.schema.json`` is
generated from it. Parts with a model of their own (a scan, a finding, a stage outcome, a diag
figure, validate's run state) are typed field by field; the rest name their keys and leave
nested free-form objects (evidence, a validate variant's stages) as objects. A schema id only
ever gains keys: consumers of ``/1`` keep working.

``python -m gpu_audit.schemas`` rewrites ``docs/schemas``; ``--check`` exits 1 when a committed
file is out of date (the test suite runs it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

import msgspec

from gpu_audit.check.results import StageOutcome
from gpu_audit.diag.results import Figure, WorkerOutcome
from gpu_audit.knowledge.findings import LIFECYCLES
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.validate.plan import Plan
from gpu_audit.validate.state import RunState

Object = dict[str, Any]


def _extended(name: str, base: type[msgspec.Struct], before: list[tuple[str, Any]],
              after: list[tuple[str, Any]], moved: tuple[str, ...] = ()) -> type[msgspec.Struct]:
    """``base``'s fields between ``before`` and ``after`` (``moved`` taken out of ``base``:
    they are named in ``before``), in the order a document prints them."""
    own: list[Any] = []
    for f in msgspec.structs.fields(base):
        if f.name in moved:
            continue
        if f.required:
            own.append((f.name, f.type))
        elif f.default_factory is not msgspec.NODEFAULT:
            own.append((f.name, f.type, msgspec.field(default_factory=f.default_factory)))
        else:
            own.append((f.name, f.type, f.default))
    return msgspec.defstruct(name, [*before, *own, *after], kw_only=True,
                             module=__name__)


class Summary(msgspec.Struct):
    """A scan's verdict: the worst severity, findings by severity, the exit status."""

    worst_severity: Severity | None
    counts: dict[str, int]
    exit_code: int


ScanDocument = _extended(
    "ScanDocument", Scan,
    [("schema", str), ("tool_version", str), ("generated_at", str)],
    [("findings", list[Finding]), ("summary", Summary)],
    moved=("tool_version", "generated_at"))

CheckedFinding = _extended("CheckedFinding", Finding, [], [("check_status", str)])


class CheckLine(msgspec.Struct):
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
    findings: list[CheckedFinding]
    snapshot: Scan
    gpu_selection: Object | None = None  # the GPUs judged (``--gpus``, a job's); None: all


class FleetNode(msgspec.Struct):
    name: str
    source: str | None
    status: str
    exit_code: int
    reason: str | None
    schema: str | None
    hostname: str | None
    generated_at: str | None
    tool_version: str | None
    driver_version: str | None
    cuda_driver_version: str | None
    torch_version: str | None
    gpu_count: int | None
    gpu_uuids: list[str]
    worst_findings: list[Object]
    duplicate_of: str | None


class FleetDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    source: str | None
    command: str | None
    status: str
    exit_code: int
    summary: dict[str, int]
    duration_s: float | None
    nodes: list[FleetNode]
    findings: list[Finding]


class DiffSide(msgspec.Struct):
    generated_at: str
    tool_version: str
    gpu_count: int
    process_count: int
    gpu_selection: Object | None


class DiffProcess(msgspec.Struct):
    pid: int
    gpu_index: int
    gpu_uuid: str | None
    user: str | None
    name: str | None
    used_memory_bytes: int | None
    status: str | None
    start_time: str | None
    cmdline: list[str] | None


class CounterChange(msgspec.Struct):
    gpu_index: int
    counter: str
    before: int
    after: int
    increase: int


class DiffDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    hostname: str
    job_user: str | None
    before: DiffSide | None
    after: DiffSide
    processes_appeared: list[DiffProcess]
    processes_left: list[DiffProcess]
    counter_changes: list[CounterChange]
    findings: list[Finding]
    new_findings: list[Finding]
    resolved_findings: list[Finding]
    notes: list[str]
    summary: Summary


class DiagSustained(msgspec.Struct):
    summary: Object | None
    tflops: list[float]
    t_s: list[float]
    worker: WorkerOutcome | None
    nvml_samples: list[Object]
    new_xids: Any


class DiagGpu(msgspec.Struct):
    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    pcie: dict[str, int | None]
    power_limit_w: float | None
    memory_free_bytes: int | None
    plan: Any
    subject: str
    mig: Object | None
    worker: WorkerOutcome
    tests: dict[str, Object]
    figures: list[Figure]
    sustained: DiagSustained | None


class DiagPeers(msgspec.Struct):
    indices: list[int]
    peer_access: Any
    nvlink: dict[str, Object | None]
    tests: dict[str, Object]
    worker: WorkerOutcome
    figures: list[Figure]


class DiagSummary(msgspec.Struct):
    exit_code: int
    verdict: str
    counts: dict[str, int]


class DiagDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    hostname: str
    level: int
    device: str
    test_mode: bool
    driver_version: str | None
    torch_version: str | None
    selection: Object | None
    estimate: Any
    duration_s: float | None
    gpus: list[DiagGpu]
    peers: DiagPeers | None
    checklist: list[Object]
    findings: list[Finding]
    unknown: list[str]
    torch_unusable: Any
    summary: DiagSummary


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


class SnapshotDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    source: Object
    format: str | None
    allocator_settings: Any
    devices: list[Object]
    notes: list[str]
    plot: str | None


class RuleSections(msgspec.Struct):
    summary: str
    meaning: str
    why: str
    example: str
    fix: str


class RuleEntry(msgspec.Struct):
    id: str
    severity: Severity | None  # checks and explain classes have none
    section: str
    summary: str
    doc: str
    producers: list[str]
    lifecycle: Literal[LIFECYCLES]  # type: ignore[valid-type]
    redirect: str | None
    settings: list[str]
    sections: RuleSections


class RulesDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    rules: list[RuleEntry]
    explain: list[Object]


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


INDEX_PAGE = SCHEMA_DIR.parent / "schemas.md"


def render_index() -> str:
    """``docs/schemas.md``: every published schema, by the id a document carries."""
    lines = ["# JSON Schemas", "",
             "<!-- Generated by `python -m gpu_audit.schemas`; edit gpu_audit/schemas.py. -->", "",
             "Every JSON document gpu-audit writes names its schema in its `schema` key; the "
             "schemas below (JSON Schema draft 2020-12) are generated from the types the "
             "documents are built from. A schema id only ever gains keys: consumers of `/1` keep "
             "working. The configuration file has one too: "
             "[gpu-audit.toml](schemas/gpu-audit.toml.schema.json) ([settings](settings.md)).",
             "", "| document | schema |", "|---|---|"]
    lines += [f"| `{schema_id}` | [{file_name(schema_id)}](schemas/{file_name(schema_id)}) |"
              for schema_id in DOCUMENTS]
    return "\n".join(lines) + "\n"


def _outputs() -> dict[Path, str]:
    outputs = {SCHEMA_DIR / file_name(schema_id): rendered(schema_id) for schema_id in DOCUMENTS}
    outputs[INDEX_PAGE] = render_index()
    return outputs


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in _outputs().items():
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
