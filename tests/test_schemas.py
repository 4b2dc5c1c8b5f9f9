"""The published JSON Schemas (docs/schemas) are current, and every command's ``--json``
document validates against its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_audit.diag.render import diag_document
from gpu_audit.model import Severity
from gpu_audit.report.jsonout import scan_document
from gpu_audit.rules import evaluate, exit_code
from gpu_audit.schemas import DOCUMENTS, file_name, main
from gpu_audit.serial import dumps
from tests import builders as b
from tests.diag import recorded
from tests.diag.test_render import result_of
from tests.documents import assert_document
from tests.fuzz.support import run_cli

EXPLAIN_LOG = Path(__file__).parent / "explain" / "fixtures" / "a100_fragmented_oom_torch23.log"


def test_committed_schemas_are_current(capsys):
    assert main(["--check"]) == 0, capsys.readouterr().err


def test_every_schema_id_has_a_file_and_pins_its_id():
    for schema_id in DOCUMENTS:
        schema = json.loads((Path(__file__).parent.parent / "docs" / "schemas"
                             / file_name(schema_id)).read_text())
        top = schema["$defs"][schema["$ref"].rsplit("/", 1)[1]]
        assert top["properties"]["schema"] == {"const": schema_id}


def test_a_document_with_a_wrong_type_or_a_key_its_type_lacks_is_refused():
    scan = b.gtx1650_three_uvicorn()
    doc = json.loads(dumps(scan_document(scan, evaluate(scan), 0)))
    assert_document(doc)
    with pytest.raises(Exception):  # noqa: B017 - jsonschema's or msgspec's error
        assert_document({**doc, "gpus": [{**doc["gpus"][0], "index": "0"}]})
    with pytest.raises(AssertionError):
        assert_document({**doc, "undeclared": 1})


def _saved(tmp_path: Path, scan, name: str) -> Path:
    findings = evaluate(scan)
    path = tmp_path / name
    path.write_text(dumps(scan_document(scan, findings, exit_code(findings, Severity.ERROR))))
    return path


def test_every_command_document_validates(tmp_path: Path):
    before = _saved(tmp_path, b.scan(generated_at="2026-11-22T10:00:00Z"), "before.json")
    after = _saved(tmp_path, b.gtx1650_three_uvicorn(), "after.json")
    lines = [["scan", "--from", str(after), "--json", "--no-report"],
             ["check", "--from", str(after), "--json", "--no-report"],
             ["diff", str(before), str(after), "--json", "--no-report"],
             ["merge", str(before), str(after), "--json", "--no-report"],
             ["explain", str(EXPLAIN_LOG), "--json"],
             ["rules", "--json"]]
    seen = set()
    for line in lines:
        outcome = run_cli(line)
        doc = json.loads(outcome.stdout)
        assert_document(doc)
        seen.add(doc["schema"])
    assert len(seen) == len(lines)


def test_diag_documents_validate():
    for level, runs in ((2, [recorded.half_width_h100()]),
                        (2, [recorded.h100_run(0), recorded.h100_run(1)])):
        assert_document(json.loads(dumps(diag_document(result_of(level, runs)))))


def test_each_producer_builds_its_document_from_the_type_its_schema_is_made_of():
    """One declaration of a document's keys: the type the schema is generated from is the type
    the command builds (a dict typed a second time would drift from it)."""
    from gpu_audit.check.engine import judge
    from gpu_audit.cli.rules import all_entries, rules_document
    from gpu_audit.config import CheckPolicy
    from gpu_audit.diff.compare import compare
    from gpu_audit.diff.render import diff_document
    from gpu_audit.report.check_document import check_document
    from gpu_audit.snapshot.render import snapshot_document
    from gpu_audit.snapshot.summary import SnapshotSummary

    scan = b.gtx1650_three_uvicorn()
    built = {
        "gpu-audit.check/1": check_document(judge(scan, CheckPolicy(), user="ci")),
        "gpu-audit.diff/1": diff_document(compare(scan, scan)),
        "gpu-audit.diag/1": diag_document(result_of(2, [recorded.half_width_h100()])),
        "gpu-audit.snapshot/1": snapshot_document(
            SnapshotSummary(format="snapshot", devices=[], allocator_settings=None, notes=[]),
            generated_at="now",
            source={}),
        "gpu-audit.rules/1": rules_document(all_entries()),
    }
    for schema_id, document in built.items():
        assert type(document) is DOCUMENTS[schema_id], schema_id
        assert document.schema == schema_id
    # The scan document is JSON data (the fleet ships it between nodes), built from its type.
    scan_doc = scan_document(scan, evaluate(scan), 0)
    assert list(scan_doc) == list(DOCUMENTS["gpu-audit.scan/1"].__struct_fields__)
