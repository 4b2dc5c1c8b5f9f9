"""The JUnit report, read back by an independent JUnit library (junitparser) as CI would."""

from __future__ import annotations

import dataclasses

from junitparser import Error, Failure, JUnitXml, Skipped

from gpu_audit.check.engine import judge
from gpu_audit.check.results import CheckResult, CheckStatus
from gpu_audit.config import CheckPolicy
from gpu_audit.report.junit import classname, render_junit
from tests import builders as b


def parse(text: str, tmp_path) -> JUnitXml:
    path = tmp_path / "gpu-audit.xml"
    path.write_text(text, encoding="utf-8")
    return JUnitXml.fromfile(str(path))


def cases_by_name(xml: JUnitXml) -> dict[tuple[str, str], object]:
    (suite,) = list(xml)
    return {(case.classname, case.name): case for case in suite}


def test_one_case_per_check_with_consistent_counters(tmp_path):
    report = judge(b.gtx1650_three_uvicorn(), CheckPolicy(), user="alice")
    xml = parse(render_junit(report), tmp_path)
    (suite,) = list(xml)
    counts = report.counts()
    assert suite.name == "gpu-audit check@node1"
    assert suite.hostname == "node1" and suite.timestamp == "2026-11-22T10:00:00Z"
    assert suite.tests == len(report.results) == len(list(suite))
    assert (suite.failures, suite.errors, suite.skipped) == (
        counts["fail"], counts["unknown"], counts["skip"])
    assert (xml.tests, xml.failures, xml.errors, xml.skipped) == (
        suite.tests, suite.failures, suite.errors, suite.skipped)
    properties = {p.name: p.value for p in suite.properties()}
    assert properties["verdict"] == "CRITICAL" and properties["exit_code"] == "2"


def test_statuses_map_to_failure_error_skipped_and_warning_text(tmp_path):
    report = judge(b.gtx1650_three_uvicorn(), CheckPolicy(), user="alice")
    cases = cases_by_name(parse(render_junit(report), tmp_path))

    dup = cases[("node1.process", "duplicate-backends")]
    (failure,) = dup.result
    assert isinstance(failure, Failure) and failure.type == "CRITICAL"
    assert "3 copies of the same server" in failure.message
    assert "fix: ps -o pid,lstart,args -p 2101 2202 2303" in failure.text

    own = cases[("node1.host", "own-processes")]
    assert own.is_passed and own.system_out.startswith("WARNING: 1 process of alice holds")

    name = cases[("node1.host", "gpu-name")]
    (skipped,) = name.result
    assert isinstance(skipped, Skipped) and "not configured" in skipped.message

    ok = cases[("node1.gpu0", "free-vram")]
    assert ok.is_passed and '"memory_total_bytes": 4294967296' in ok.system_out


def test_unknown_checks_are_errors(tmp_path):
    scan = b.scan(gpus=[b.gpu(0, memory_free_bytes=None)])
    report = judge(scan, CheckPolicy(), user="ci")
    cases = cases_by_name(parse(render_junit(report), tmp_path))
    (error,) = cases[("node1.gpu0", "free-vram")].result
    assert isinstance(error, Error) and error.type == "UNKNOWN"
    assert error.message == "free memory not reported"


def test_repeated_names_under_one_classname_are_made_unique(tmp_path):
    report = judge(b.scan(), CheckPolicy(), user="ci")
    twice = CheckResult("low-host-memory", "host", CheckStatus.WARN, "Low host memory", "a")
    report = dataclasses.replace(report, results=[*report.results, twice, twice])
    cases = cases_by_name(parse(render_junit(report), tmp_path))
    assert ("node1.host", "low-host-memory") in cases
    assert ("node1.host", "low-host-memory #2") in cases


def test_control_characters_do_not_break_the_xml(tmp_path):
    report = judge(b.scan(), CheckPolicy(), user="ci")
    odd = CheckResult("gpu-name", "gpu:0", CheckStatus.FAIL, "GPU model",
                      "name \x00\x1b[31mweird\x07 <&> \"quoted\"", remedy="fix & retry")
    report = dataclasses.replace(report, results=[odd])
    cases = cases_by_name(parse(render_junit(report), tmp_path))
    (failure,) = cases[("node1.gpu0", "gpu-name")].result
    assert "weird" in failure.message and "<&>" in failure.message
    assert "\x00" not in failure.message


def test_classname_carries_host_and_subject():
    assert classname("node-07", "gpu:3") == "node-07.gpu3"
    assert classname("node-07", "pid:4242", 1) == "node-07.gpu1.process"
    assert classname("node-07", "pid:4242") == "node-07.process"
    assert classname("node-07", "stage:imports") == "node-07.stage-imports"
    assert classname("node-07", "host") == "node-07.host"


def test_test_identities_do_not_change_with_process_ids(tmp_path):
    """The same finding about a process in two runs (new pids) is the same test case."""
    report = judge(b.scan(), CheckPolicy(), user="ci")

    def identities(pid: int) -> set:
        held = CheckResult("zombie-vram", f"pid:{pid}", CheckStatus.FAIL, "Memory held", "held",
                           evidence={"pid": pid, "gpu_index": 0})
        run = dataclasses.replace(report, results=[*report.results, held])
        return set(cases_by_name(parse(render_junit(run), tmp_path)))

    assert identities(30634) == identities(41877)
    assert ("node1.gpu0.process", "zombie-vram") in identities(30634)
