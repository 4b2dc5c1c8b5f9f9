"""A scan limited with --gpus records its selection once, in the document's top-level
``gpu_selection``, and ``scan --from`` reads it back from there."""

from __future__ import annotations

import json

from gpu_audit.report.jsonout import load_scan_document
from tests.cli.test_gpus_option import env, fake_nvml, fake_nvml_lib, scan_json  # noqa: F401


def test_the_selection_is_recorded_once_and_read_back_by_from(env, tmp_path):  # noqa: F811
    doc = scan_json(["--gpus", "2"], env, tmp_path)
    assert doc["gpu_selection"]["indices"] == [2]
    assert "gpu_selection" not in doc.get("extra", {})
    saved = tmp_path / "scan.json"
    saved.write_text(json.dumps(doc))
    assert load_scan_document(saved).gpu_selection == doc["gpu_selection"]
    again = scan_json(["--from", str(saved)], env, tmp_path)
    assert again["gpu_selection"] == doc["gpu_selection"]
    assert [g["index"] for g in again["gpus"]] == [2]


def test_a_document_of_the_whole_machine_reads_back_as_no_selection(env, tmp_path):  # noqa: F811
    doc = scan_json([], env, tmp_path)
    saved = tmp_path / "scan.json"
    saved.write_text(json.dumps(doc))
    assert doc["gpu_selection"] is None
    assert scan_json(["--from", str(saved)], env, tmp_path)["gpu_selection"] is None
