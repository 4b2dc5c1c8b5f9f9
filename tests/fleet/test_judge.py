"""The fleet judgement over node documents, in-process: verdicts, skew, outliers, duplicates."""

from __future__ import annotations

import pytest

from gpu_audit.fleet.judge import judge_fleet
from gpu_audit.fleet.nodes import node_from_document, unanswered
from tests.fleet.synth import node_document


def judge(documents, extra=()):
    nodes = [node_from_document(d, f"docs/n{i}.json") for i, d in enumerate(documents)]
    return judge_fleet([*nodes, *extra], source="merge")


def ids(report) -> list[str]:
    return [f.id for f in report.findings]


def test_clean_fleet_is_ok_with_no_finding():
    report = judge([node_document(i) for i in range(12)])
    assert report.status == "OK" and report.exit_code == 0
    assert report.findings == []
    assert report.counts()["nodes"] == 12


@pytest.mark.parametrize(("statuses", "expected"), [
    (["OK", "WARNING", "OK"], "WARNING"),
    (["OK", "CRITICAL", "WARNING"], "CRITICAL"),
    (["OK", "UNKNOWN", "WARNING"], "UNKNOWN"),
    (["CRITICAL", "UNKNOWN"], "CRITICAL"),  # srun would say UNKNOWN (3 > 2): we rank CRITICAL
])
def test_fleet_verdict_is_the_worst_node(statuses, expected):
    report = judge([node_document(i, status=s) for i, s in enumerate(statuses)])
    assert report.status == expected


def test_unanswered_node_makes_an_otherwise_fit_fleet_unknown():
    silent = unanswered("gpu-node-9", "ray:abc", "no answer within the 60 s limit (--timeout)")
    report = judge([node_document(i) for i in range(3)], extra=[silent])
    assert report.exit_code == 3
    (finding,) = [f for f in report.findings if f.id == "fleet-node-unknown"]
    assert "60 s limit" in finding.detail and finding.subject == "node:gpu-node-9"


def test_unfit_node_names_its_worst_check():
    report = judge([node_document(0), node_document(1, status="CRITICAL")])
    (finding,) = [f for f in report.findings if f.id == "fleet-node-unfit"]
    assert finding.subject == "node:gpu-node-00001"
    assert "uncorrectable ECC" in finding.title
    assert report.exit_code == 2


def test_version_skew_names_the_nodes_off_the_majority():
    docs = [node_document(i) for i in range(5)]
    docs[3] = node_document(3, driver="535.54.03", cuda="12.2")
    docs[4] = node_document(4, torch="2.12.0+cu121", tool="0.0.9")
    report = judge(docs)
    by_id = {f.id: f for f in report.findings}
    assert by_id["fleet-driver-skew"].evidence["values"] == {"550.90.07": 4, "535.54.03": 1}
    assert by_id["fleet-driver-skew"].evidence["nodes"] == ["gpu-node-00003"]
    assert by_id["fleet-cuda-skew"].evidence["majority"] == "12.4"
    assert by_id["fleet-torch-skew"].evidence["nodes"] == ["gpu-node-00004"]
    assert by_id["fleet-tool-version-skew"].evidence["nodes"] == ["gpu-node-00004"]
    assert report.status == "OK"  # every node is fit: the skew is reported, the verdict stays


def test_missing_gpu_and_mode_differences():
    docs = [node_document(i) for i in range(4)]
    docs[1] = node_document(1, gpus=7)
    docs[2] = node_document(2, gpu_changes={0: {"persistence_mode": False}})
    report = judge(docs)
    by_id = {f.id: f for f in report.findings}
    assert by_id["fleet-gpu-mismatch"].evidence["nodes"] == ["gpu-node-00001"]
    assert by_id["fleet-gpu-mode-skew"].evidence["nodes"] == ["gpu-node-00002"]


@pytest.mark.parametrize(("change", "metric"), [
    ({"temperature_c": 71}, "temperature_c"),
    ({"power_draw_w": 260.0}, "power_draw_w"),
    ({"pcie_width_current": 8}, "pcie_width_current"),
    ({"remapped_rows_correctable": 40}, "remapped_rows_correctable"),
    ({"ecc_errors_corrected_volatile": 5000}, "ecc_errors_corrected_volatile"),
])
def test_planted_outlier_is_found_with_its_numbers(change, metric):
    docs = [node_document(i) for i in range(6)]
    docs[4] = node_document(4, gpu_changes={2: change})
    report = judge(docs)
    outliers = [f for f in report.findings if f.id == "fleet-gpu-outlier"]
    assert [(f.subject, f.evidence["metric"]) for f in outliers] == [
        ("node:gpu-node-00004/gpu:2", metric)]
    evidence = outliers[0].evidence
    assert evidence["value"] == next(iter(change.values()))
    assert evidence["peers"] >= 40 and evidence["median"] is not None


def test_slow_clock_counts_only_among_busy_gpus():
    busy = {g: {"utilization_pct": 95, "sm_clock_mhz": 1980} for g in range(8)}
    docs = [node_document(i, gpu_changes=busy) for i in range(4)]
    slow = {**busy, 5: {"utilization_pct": 95, "sm_clock_mhz": 1100}}
    docs.append(node_document(4, gpu_changes=slow))
    docs.append(node_document(5, gpu_changes={0: {"sm_clock_mhz": 210}}))  # idle: not judged
    report = judge(docs)
    outliers = [(f.subject, f.evidence["metric"]) for f in report.findings
                if f.id == "fleet-gpu-outlier"]
    assert outliers == [("node:gpu-node-00004/gpu:5", "sm_clock_mhz")]


def test_too_few_peers_is_never_an_outlier():
    docs = [node_document(0, gpus=1), node_document(1, gpus=1, gpu_changes={0: {
        "temperature_c": 85}})]
    assert "fleet-gpu-outlier" not in ids(judge(docs))


def test_duplicates_by_gpu_uuid_are_counted_once():
    docs = [node_document(0), node_document(1), node_document(2)]
    older = node_document(1, status="CRITICAL", generated_at="2026-11-22T00:00:00Z")
    report = judge([*docs, older])
    assert report.counts()["nodes"] == 3 and report.counts()["duplicates"] == 1
    assert report.status == "OK"  # the newest document of node 1 counts
    (dup,) = [n for n in report.nodes if n.duplicate_of]
    assert dup.duplicate_of == "gpu-node-00001" and dup.source == "docs/n3.json"
    assert "fleet-duplicate-node" in ids(report)


def test_same_hostname_different_gpus_are_two_nodes():
    docs = [node_document(0, hostname="pod"), node_document(1, hostname="pod")]
    report = judge(docs)
    assert report.counts()["nodes"] == 2
    assert sorted(n.name for n in report.nodes) == ["pod [n0.json]", "pod [n1.json]"]


def test_mixed_and_unsupported_schemas():
    docs = [node_document(0), node_document(1, schema="gpu-audit.scan/1"),
            node_document(2, schema="gpu-audit.check/2"), {"schema": "gpu-audit.fleet/1"},
            ["not", "a", "document"]]
    report = judge(docs)
    by_name = {n.source: n for n in report.nodes}
    assert by_name["docs/n1.json"].status == "OK" and by_name["docs/n1.json"].kind == "scan"
    assert "not supported by this gpu-audit" in by_name["docs/n2.json"].reason
    assert "fleet document" in by_name["docs/n3.json"].reason
    assert "expected a JSON object" in by_name["docs/n4.json"].reason
    mixed = next(f for f in report.findings if f.id == "fleet-mixed-schemas")
    # Only judged documents count; the others are UNKNOWN nodes with their reason.
    assert mixed.evidence["schemas"] == {"gpu-audit.check/1": 1, "gpu-audit.scan/1": 1}
    assert report.status == "UNKNOWN"


def test_an_unreadable_document_is_only_an_unknown_node():
    broken = {"schema": "gpu-audit.scan/1", "host": {"hostname": "n9"}, "gpus": "lost"}
    for odd in (broken, {"schema": "gpu-audit.check/2"}, {"schema": "gpu-audit.fleet/1"}):
        report = judge([node_document(0), node_document(1), odd])
        assert ids(report) == ["fleet-node-unknown"], (odd, ids(report))


def test_a_tie_has_no_majority():
    drivers = ["550.90.07", "535.54.03", "560.28.03"]
    report = judge([node_document(i, driver=drivers[i % 3]) for i in range(6)])
    (skew,) = [f for f in report.findings if f.id == "fleet-driver-skew"]
    assert "no majority (3 values tie at 2 nodes each" in skew.title
    assert "majority 5" not in skew.title and skew.evidence["majority"] is None
    assert skew.evidence["nodes"] == [] and skew.evidence["nodes_off_majority"] == 0
    two_tied = judge([node_document(i, driver=d) for i, d in enumerate(
        ["550.90.07", "550.90.07", "535.54.03", "535.54.03", "470.1.1"])])
    (skew,) = [f for f in two_tied.findings if f.id == "fleet-driver-skew"]
    assert skew.evidence["majority"] is None and skew.evidence["nodes"] == ["gpu-node-00004"]
    clear = judge([node_document(i, driver=d) for i, d in enumerate(
        ["550.90.07", "550.90.07", "535.54.03"])])
    (skew,) = [f for f in clear.findings if f.id == "fleet-driver-skew"]
    assert skew.evidence["majority"] == "550.90.07" and "off the majority 550.90.07" in skew.title


@pytest.mark.parametrize(("document", "named"), [
    # a scan failed at --fail-on info: its info finding is the reason
    ({"findings": [{"id": "nvlink-idle", "severity": "info", "title": "NVLink is idle"}],
      "summary": {"exit_code": 2}}, "NVLink is idle"),
    # a check whose failure is a finding the policy failed, not a check line
    ({"checks": [], "exit_code": 2,
      "findings": [{"id": "ecc-uncorrectable", "severity": "critical", "check_status": "fail",
                    "title": ""}]}, "ecc-uncorrectable"),
    # a check line without summary or title: its id
    ({"checks": [{"id": "gpu-count", "status": "fail", "summary": None}], "exit_code": 2},
     "gpu-count"),
    ({"checks": [], "findings": [], "exit_code": 2},
     "its check verdict is CRITICAL but its document names no failing check or finding"),
])
def test_an_unfit_node_is_never_titled_with_a_question_mark(document, named):
    doc = node_document(0, hostname="gpu00000")
    if "summary" in document:
        doc = node_document(0, hostname="gpu00000", schema="gpu-audit.scan/1")
    doc.update(document)
    for via_bytes in (False, True):
        if via_bytes:
            import json

            from gpu_audit.fleet.facts import node_from_bytes

            node = node_from_bytes(json.dumps(doc).encode(), "docs/n0.json")
        else:
            node = node_from_document(doc, "docs/n0.json")
        report = judge_fleet([node], source="merge")
        (unfit,) = [f for f in report.findings if f.id == "fleet-node-unfit"]
        assert unfit.title == f"gpu00000 is unfit: {named}", unfit.title


def test_planted_issues_in_a_thousand_node_fleet():
    docs = [node_document(i) for i in range(1000)]
    for i in (10, 20, 30):
        docs[i] = node_document(i, driver="535.54.03")
    docs[17] = node_document(17, gpu_changes={3: {"temperature_c": 74}})
    docs[400] = node_document(400, gpu_changes={0: {"pcie_width_current": 4}})
    docs[600] = node_document(600, gpu_changes={5: {"power_draw_w": 310.0}})
    docs[900] = node_document(900, status="CRITICAL")
    docs.append(node_document(123))  # node 123's document twice
    report = judge(docs)
    assert report.counts() == {"nodes": 1000, "ok": 999, "warning": 0, "critical": 1,
                               "unknown": 0, "duplicates": 1}
    outliers = sorted((f.subject, f.evidence["metric"]) for f in report.findings
                      if f.id == "fleet-gpu-outlier")
    assert outliers == [("node:gpu-node-00017/gpu:3", "temperature_c"),
                        ("node:gpu-node-00400/gpu:0", "pcie_width_current"),
                        ("node:gpu-node-00600/gpu:5", "power_draw_w")]
    skew = next(f for f in report.findings if f.id == "fleet-driver-skew")
    assert skew.evidence["nodes"] == ["gpu-node-00010", "gpu-node-00020", "gpu-node-00030"]
    assert report.exit_code == 2


def test_non_finite_and_mistyped_readings_are_unknown_not_outliers():
    import json

    docs = [node_document(i) for i in range(5)]
    docs[2] = node_document(2, gpu_changes={1: {"temperature_c": float("inf"),
                                                "power_draw_w": "hot", "pcie_width_current": []}})
    docs = [json.loads(json.dumps(d)) for d in docs]  # "Infinity" is what JSON readers accept
    docs[3]["snapshot"]["gpus"] = 8  # not a list
    report = judge(docs)
    assert "fleet-gpu-outlier" not in ids(report)
    assert report.counts()["nodes"] == 5
