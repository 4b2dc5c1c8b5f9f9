"""The check document: each finding's status comes from the check that views it, and a saved
document reads back."""

from __future__ import annotations

import json

import pytest

from gpu_audit.errors import InputError
from gpu_audit.report.check_document import CHECK_SCHEMA, check_document, load_check_document
from gpu_audit.serial import dumps, to_jsonable
from tests import builders as b
from tests.check.support import GIB, run


def test_viewed_findings_take_the_status_of_their_checks_result_for_that_subject():
    gpus = [b.gpu(0, total=16 * GIB, used=1 * GIB), b.gpu(1, total=16 * GIB, used=15 * GIB)]
    scan = b.with_host(b.scan(gpus=gpus), memory_available_bytes=4 * GIB)
    doc = check_document(run(scan, free_vram="warn", ignore=["unattributed-vram"]))
    status = {(f.id, f.subject): f.check_status for f in doc.findings}
    assert status[("low-free-vram", "gpu:1")] == "warn"  # the free-vram result for gpu:1
    assert status[("low-host-memory", "host")] == "warn"  # no check views it: its severity
    assert doc.policy["free_vram"] == "warn" and doc.policy["min_free_vram_pct"] == 10.0
    skipped = check_document(run(scan, free_vram="ignore"))
    assert {f.check_status for f in skipped.findings if f.id == "low-free-vram"} == \
        {"skip"}


def test_a_saved_check_document_reads_back_and_a_scan_document_is_not_one(tmp_path):
    doc = check_document(run(b.scan(), user="alice"))
    saved = tmp_path / "check.json"
    saved.write_text(dumps(doc))
    snapshot, user = load_check_document(saved)
    assert user == "alice" and snapshot.host.hostname == "node1"
    scan = tmp_path / "scan.json"
    scan.write_text(json.dumps({"schema": "gpu-audit.scan/1"}))
    assert load_check_document(scan) is None
    assert load_check_document(tmp_path / "missing.json") is None  # the scan reader says why
    saved.write_text(json.dumps({**to_jsonable(doc), "schema": "gpu-audit.check/2"}))
    with pytest.raises(InputError, match=f"reads {CHECK_SCHEMA!r}"):
        load_check_document(saved)


def test_the_snapshot_in_the_document_is_grouped_as_a_scan_document_is():
    scan = b.gtx1650_three_uvicorn()
    report = run(scan, user="alice")
    doc = check_document(report)
    groups = {p.pid: p.duplicate_group for p in doc.snapshot.processes}
    assert groups[2101] is not None and groups[2101] == groups[2202] == groups[2303]
    (dup,) = [r for r in report.results if r.id == "duplicate-backends"]
    assert dup.finding_id == "duplicate-backend"
