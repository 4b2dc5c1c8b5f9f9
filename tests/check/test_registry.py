"""The check registry: ids, documentation, the findings each check views, the verdict."""

from __future__ import annotations

import re

import pytest

from gpu_audit.check.engine import known_ids
from gpu_audit.check.registry import all_checks, viewed_findings
from gpu_audit.check.results import CheckResult, Verdict, verdict, verdict_line
from gpu_audit.config import check_keys, policy_keys
from gpu_audit.knowledge.findings import doc_of
from gpu_audit.rules import all_rules
from tests.check.support import FAIL, PASS, SKIP, UNKNOWN, WARN, idle_h100_node, run

# --- the registry and the verdict --------------------------------------------------------


def test_every_check_has_a_kebab_id_a_title_and_documentation():
    checks = all_checks()
    assert len(checks) >= 14
    for check_id, spec in checks.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", check_id)
        doc = doc_of(check_id)
        assert spec.title and doc and doc.summary and len(doc.meaning.splitlines()) > 1, check_id


def test_a_check_id_equal_to_a_finding_id_is_the_check_that_views_that_finding():
    for shared in set(all_checks()) & set(all_rules()):
        assert all_checks()[shared].views == (shared,)
    assert set(all_checks()) | set(all_rules()) <= known_ids()


def test_checks_view_existing_rules_and_read_existing_keys():
    keys = set(policy_keys()) | set(check_keys())
    for check_id, spec in all_checks().items():
        assert set(spec.views) <= set(all_rules()), check_id
        assert set(spec.policy_keys) <= keys, check_id
    viewed = viewed_findings()
    assert viewed["low-free-vram"] == "free-vram" and viewed["swap-pressure"] == "swap"
    assert viewed["torch-cpu-only"] == viewed["driver-too-old"] == "torch-cuda"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([PASS, SKIP], Verdict.OK),
        ([PASS, WARN], Verdict.WARNING),
        ([PASS, WARN, UNKNOWN], Verdict.UNKNOWN),
        ([WARN, UNKNOWN, FAIL], Verdict.CRITICAL),
        ([], Verdict.OK),
    ],
)
def test_verdict_follows_the_monitoring_plugin_order(statuses, expected):
    rs = [CheckResult("x", "host", s, "X", "x") for s in statuses]
    assert verdict(rs) is expected
    assert expected.exit_code == {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}[
        expected.name]


def test_a_fit_runner_passes_with_exit_0_and_a_nagios_status_line():
    report = run(idle_h100_node(), min_gpus=8, gpu_name="H100", min_gpu_memory_gib=79,
                 require_persistence_mode=True, max_gpu_temperature_c=80)
    bad = [r for r in report.results if r.status not in (PASS, SKIP)]
    assert bad == []
    assert report.exit_code == 0
    line = verdict_line(report)
    assert line.startswith("CHECK OK: ")
    assert re.search(r"\| fail=0;;;0 unknown=0;;;0 warn=0;;;0 pass=\d+;;;0 skip=\d+;;;0$", line)


def test_status_line_names_the_failed_checks():
    report = run(idle_h100_node(1), min_gpus=2)
    assert verdict_line(report).startswith("CHECK CRITICAL: gpu-count on node1")
