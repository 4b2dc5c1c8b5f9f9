"""``gpu-audit merge`` given hostile or malformed node documents: each is refused or judged
UNKNOWN with its reason, quickly, and the other nodes are still judged."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import pytest

from gpu_audit import bounds
from gpu_audit.cli.app import main
from gpu_audit.fleet.inputs import read_node
from gpu_audit.fleet.judge import judge_fleet
from gpu_audit.fleet.nodes import node_from_document
from tests.fleet.synth import gpu, node_document, write_documents
from tests.fleet.test_merge_cli import gpu_audit


def merge_json(*paths: Path, timeout: float | None = None) -> tuple[int, dict]:
    """``gpu-audit merge PATHS --json --no-report`` in this process (no interpreter to start),
    or, given a ``timeout``, in a child process: where a hang is what the test guards against,
    the limit fails the test instead of stopping the suite."""
    args = ["merge", *map(str, paths), "--json", "--no-report"]
    if timeout is not None:
        result = gpu_audit(*args, timeout=timeout)
        code, stdout, stderr = result.returncode, result.stdout, result.stderr
    else:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
        stdout, stderr = out.getvalue(), err.getvalue()
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    return code, json.loads(stdout)


def node_of(doc: dict, path: Path) -> dict:
    (node,) = [n for n in doc["nodes"] if n["source"] == str(path)]
    return node


def good_nodes(folder: Path, count: int = 2) -> list[Path]:
    return write_documents(folder, [node_document(i, gpus=2) for i in range(count)])


def empty_gpu_entries(path: Path, entries: int) -> Path:
    path.write_text('{"schema": "gpu-audit.scan/1", "host": {"hostname": "hostile"}, "gpus": ['
                    + ",".join(["{}"] * entries) + "]}", encoding="utf-8")
    return path


# --- arrays longer than one node can have ---------------------------------------------------


@pytest.mark.parametrize("schema", ["gpu-audit.scan/1", "gpu-audit.check/1"])
def test_more_gpus_than_a_node_can_have_is_refused_and_the_others_judged(tmp_path, schema):
    good = good_nodes(tmp_path / "good")
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(node_document(9, gpus=2000, schema=schema)), encoding="utf-8")
    started = time.monotonic()
    code, doc = merge_json(*good, hostile)
    assert time.monotonic() - started < 60  # generous: 2 loaded CI cores
    assert code == 3 and doc["status"] == "UNKNOWN"
    node = node_of(doc, hostile)
    key = "snapshot.gpus" if schema.startswith("gpu-audit.check/") else "gpus"
    assert node["status"] == "UNKNOWN" and node["gpu_count"] is None
    assert f"refused: '{key}' lists 2000 entries" in node["reason"]
    assert f"at most {bounds.MAX_GPUS}" in node["reason"]
    assert [n["status"] for n in doc["nodes"] if n["source"] != str(hostile)] == ["OK", "OK"]


def test_hundreds_of_thousands_of_empty_entries_are_refused_before_parsing(tmp_path):
    """More objects than bounds.MAX_JSON_CONTAINERS: refused on the raw text (this one was
    judged a fit node, and 20 million of them took gigabytes)."""
    good = good_nodes(tmp_path / "good")
    hostile = empty_gpu_entries(tmp_path / "hostile.json", bounds.MAX_JSON_CONTAINERS + 1)
    code, doc = merge_json(*good, hostile)
    assert code == 3
    node = node_of(doc, hostile)
    assert node["status"] == "UNKNOWN"
    assert "objects and arrays, more than any gpu-audit document holds" in node["reason"]
    assert doc["summary"]["ok"] == 2


@pytest.mark.parametrize(("ceiling", "build"), [
    ("MAX_PROCESSES", lambda d, n: d["snapshot"].update(processes=[
        {"pid": 1000 + i, "gpu_index": 0, "type": "compute"} for i in range(n)])),
    ("MAX_FINDINGS", lambda d, n: d.update(findings=[
        {"id": "x", "severity": "info", "subject": "host", "title": "t"}] * n)),
    ("MAX_FINDINGS", lambda d, n: d.update(checks=[
        {"id": "x", "status": "pass", "subject": "host", "title": "t"}] * n)),
    ("MAX_MIG_PER_GPU", lambda d, n: d["snapshot"]["gpus"][1].update(mig_devices=[
        {"index": i} for i in range(n)])),
])
def test_lists_past_their_ceiling_are_refused(monkeypatch, ceiling, build):
    monkeypatch.setattr(bounds, ceiling, 5)  # the ceiling's meaning, at a test's size
    at_ceiling, past = node_document(0, gpus=2), node_document(1, gpus=2)
    build(at_ceiling, 5)
    build(past, 6)
    assert node_from_document(at_ceiling, "a.json").status == "OK"
    node = node_from_document(past, "b.json")
    assert node.status == "UNKNOWN" and not node.answered
    assert node.reason.startswith("refused: ") and "6 " in node.reason
    assert "at most 5" in node.reason


# --- documents without facts, or with malformed GPU entries -----------------------------------


def test_a_schema_alone_is_unknown_not_a_fit_node(tmp_path):
    good = good_nodes(tmp_path / "good")
    bare = tmp_path / "bare.json"
    bare.write_text('{"schema": "gpu-audit.scan/1"}', encoding="utf-8")
    code, doc = merge_json(*good, bare)
    assert code == 3 and doc["summary"]["unknown"] == 1 and doc["summary"]["ok"] == 2
    node = node_of(doc, bare)
    assert node["status"] == "UNKNOWN" and "no host facts" in node["reason"]
    assert any(f["id"] == "fleet-node-unknown" for f in doc["findings"])
    alone, doc = merge_json(bare)  # nothing usable: UNKNOWN, exit 3
    assert alone == 3 and doc["status"] == "UNKNOWN"


@pytest.mark.parametrize("document", [
    {"schema": "gpu-audit.scan/1"},
    {"schema": "gpu-audit.scan/1", "gpus": []},
    {"schema": "gpu-audit.scan/1", "host": {"os": "Linux"}, "gpus": [], "findings": []},
    {"schema": "gpu-audit.scan/1", "host": "gpu-node-1", "gpus": []},
    {"schema": "gpu-audit.scan/1", "host": {"hostname": "gpu-node-1"}},  # no gpus array
    {"schema": "gpu-audit.scan/1", "host": {"hostname": "gpu-node-1"}, "gpus": {}},
    {"schema": "gpu-audit.check/1", "exit_code": 0},
    {"schema": "gpu-audit.check/1", "hostname": "gpu-node-1", "exit_code": 0, "snapshot": {}},
])
def test_documents_without_host_or_gpu_facts_are_unknown(document):
    node = node_from_document(document, "n.json")
    assert node.status == "UNKNOWN" and not node.answered and node.reason


@pytest.mark.parametrize("entries", [
    [gpu(0, 0), {}],
    [gpu(0, 0), {"temperature_c": 30}],
    [gpu(0, 0), {"index": True, "uuid": ["GPU-x"], "name": {}}],
    [gpu(0, 0), 7],
    [gpu(0, 0), {**gpu(0, 1), "mig_devices": "7g.80gb"}],
])
def test_gpu_entries_without_identity_make_the_node_unknown(tmp_path, entries):
    document = node_document(0, schema="gpu-audit.scan/1")
    document["gpus"] = entries
    node = node_from_document(document, "n.json")
    assert node.status == "UNKNOWN" and node.reason and "'gpus' entry 1" in node.reason
    assert node.name == "gpu-node-00000"  # named by its host still


def test_empty_gpu_entries_are_unknown_through_the_command(tmp_path):
    good = good_nodes(tmp_path / "good")
    hostile = empty_gpu_entries(tmp_path / "hostile.json", 8)
    code, doc = merge_json(*good, hostile)
    assert code == 3
    node = node_of(doc, hostile)
    assert node["status"] == "UNKNOWN" and node["name"] == "hostile"
    assert "'gpus' entry 0 has no identity" in node["reason"]


def test_zero_gpus_stated_by_a_real_host_is_judged_as_before(tmp_path):
    documents = [node_document(i, gpus=0) for i in range(2)]
    documents.append({"schema": "gpu-audit.scan/1", "host": {"hostname": "cpu-node"},
                      "gpus": [], "findings": [], "summary": {"exit_code": 0}})
    code, doc = merge_json(*write_documents(tmp_path, documents))
    assert code == 0 and doc["summary"]["ok"] == 3
    assert [n["gpu_count"] for n in doc["nodes"]] == [0, 0, 0]


def test_mistyped_fields_are_no_internal_error(tmp_path):
    """An array where a pid, a severity or a reading belongs: judged, never a crash."""
    document = node_document(5, schema="gpu-audit.scan/1", gpus=2)
    document["processes"] = [{"pid": [1]}, {"pid": {"a": 1}}, {"pid": 7, "name": "ok"}]
    document["findings"] = [
        {"id": ["x"], "severity": ["critical"], "subject": {}, "title": "t"},
        {"id": "duplicate-backend", "severity": "warning", "subject": "pid:7", "title": "dup",
         "evidence": {"keep_pid": [7], "members": [
             {"pid": [7], "gpu_index": {}, "used_memory_bytes": 10**400},
             {"pid": 7, "gpu_index": 0, "used_memory_bytes": 10**30}]}}]
    document["gpus"][0]["temperature_c"] = {"nested": [1]}
    document["gpus"][1]["power_draw_w"] = 10**400
    document["summary"]["exit_code"] = True
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    code, doc = merge_json(path, *good_nodes(tmp_path / "good"))
    node = node_of(doc, path)
    assert node["status"] == "WARNING" and code == 1  # the duplicate-backend finding
    assert doc["summary"]["nodes"] == 3


# --- files that are not documents at all ------------------------------------------------------


def test_deep_nesting_is_refused(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "gpu-audit.scan/1", "extra": ' + "[" * 100_000
                    + "]" * 100_000 + "}", encoding="utf-8")
    deeper = tmp_path / "deeper.json"
    deeper.write_text("[" * 1_000_000 + "]" * 1_000_000, encoding="utf-8")
    assert read_node(deep).reason == "refused: nested too deeply to be a gpu-audit document"
    assert "objects and arrays, more than any" in read_node(deeper).reason
    code, doc = merge_json(deep, deeper, *good_nodes(tmp_path / "good"))
    assert code == 3 and doc["summary"]["ok"] == 2 and doc["summary"]["unknown"] == 2


def test_a_document_over_the_byte_limit_is_refused_unread(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(json.dumps(node_document(0)), encoding="utf-8")
    assert read_node(path).status == "OK"
    monkeypatch.setattr(bounds, "MAX_DOCUMENT_BYTES", path.stat().st_size - 1)
    node = read_node(path)
    assert node.status == "UNKNOWN" and "more than a node document may hold" in node.reason
    report = judge_fleet([node], source="merge")
    assert report.exit_code == 3


def test_a_fifo_among_the_inputs_does_not_hang(tmp_path):
    good = good_nodes(tmp_path / "run")
    fifo = tmp_path / "run" / "pipe.json"
    os.mkfifo(fifo)
    named = tmp_path / "named.json"
    os.mkfifo(named)
    started = time.monotonic()
    code, doc = merge_json(tmp_path / "run", named, timeout=60)  # a hang fails by timeout
    assert time.monotonic() - started < 60
    assert code == 3 and doc["summary"]["ok"] == len(good)
    node = node_of(doc, named)
    assert node["status"] == "UNKNOWN" and "FIFO" in node["reason"]
    assert str(fifo) not in {n["source"] for n in doc["nodes"]}  # not a document: skipped


def test_a_link_to_a_device_is_refused_unread(tmp_path):
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    code, doc = merge_json(zero, *good_nodes(tmp_path / "good"), timeout=60)
    assert code == 3 and "character device" in node_of(doc, zero)["reason"]


def test_an_unknown_nodes_line_wraps_on_a_terminal_and_stays_whole_in_a_log():
    from gpu_audit.fleet.judge import judge_fleet
    from gpu_audit.fleet.nodes import node_from_document
    from gpu_audit.fleet.render import render_terminal

    report = judge_fleet([node_from_document({"schema": "gpu-audit.scan/1"}, "only-schema.json")],
                         source="only-schema.json")
    wide = render_terminal(report)
    (line,) = [line for line in wide.splitlines() if "only-schema.json" in line]
    assert len(line) > 79 and "not a node's scan" in line
    narrow = render_terminal(report, width=79).splitlines()
    assert max(len(part) for part in narrow) <= 79
    assert " ".join(" ".join(narrow).split()) == " ".join(wide.split())
