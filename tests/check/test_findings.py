"""The other scan findings by severity, and the validation stages."""

from __future__ import annotations

from gpu_audit.check.results import StageOutcome
from tests import builders as b
from tests.check.support import FAIL, GIB, MIB, PASS, UNKNOWN, WARN, only, run

# --- stages ----------------------------------------------------------------------------------


def test_stage_results_map_onto_checks_with_their_durations():
    stages = [
        StageOutcome("imports", "passed", "torch 2.5.1 imported; CUDA initialised", 5.5,
                     device="cuda:0", evidence={"torch_version": "2.5.1"}),
        StageOutcome("smoke", "failed", "cycle 2 of 3 ran out of memory", 12.0,
                     remedy="Free GPU memory first."),
    ]
    report = run(b.scan(), stages=stages)
    imports, smoke = only(report, "stage-imports"), only(report, "stage-smoke")
    assert (imports.status, imports.subject, imports.duration_s) == (PASS, "stage:imports", 5.5)
    assert imports.evidence["torch_version"] == "2.5.1"
    assert (smoke.status, smoke.remedy) == (FAIL, "Free GPU memory first.")
    assert report.exit_code == 2


def test_stage_that_could_not_run_is_unknown_and_unrequested_stages_are_absent():
    broken = StageOutcome("imports", "error", "the stage runner crashed", None)
    report = run(b.scan(), stages=[broken])
    assert only(report, "stage-imports").status is UNKNOWN
    assert not [r for r in report.results if r.id == "stage-smoke"]
    assert not [r for r in run(b.scan()).results if r.id.startswith("stage-")]


# --- other scan findings, ignore ------------------------------------------------------------


def test_other_findings_map_by_severity():
    starved = b.with_host(b.scan(), memory_total_bytes=64 * GIB,
                          memory_available_bytes=256 * MIB)  # low-host-memory at ERROR
    result = only(run(starved), "low-host-memory")
    assert result.status is FAIL and result.finding_id == "low-host-memory"
    assert result.summary.startswith("error: ")
    assert not [r for r in run(starved).results if r.id == "scan-findings"]
    relaxed = run(starved, fail_on="critical")
    assert only(relaxed, "low-host-memory").status is WARN
    quiet = run(starved, fail_on="critical", warn_on="critical")
    assert only(quiet, "scan-findings").status is PASS
    assert "low-host-memory" in only(quiet, "scan-findings").evidence["below_threshold"]


def test_clean_runner_reports_no_other_findings():
    result = only(run(b.scan()), "scan-findings")
    assert result.status is PASS
    assert result.summary.startswith("no other finding at or above warning")
