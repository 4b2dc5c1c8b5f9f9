"""validate's findings take their severity from the catalogue, the one place that documents it;
swap over the limit while a stage runs is validate's own finding, apart from the scan's."""

from __future__ import annotations

import msgspec
import pytest

import gpu_audit.validate.catalogue as catalogue
from gpu_audit.config import Policy
from gpu_audit.knowledge import findings as findings_catalogue
from gpu_audit.model import Severity
from gpu_audit.rules import all_rules
from gpu_audit.validate.findings import leg_gates, validate_findings
from gpu_audit.validate.plan import ValidateOptions, build_plan
from gpu_audit.validate.state import DeviceChoice, LegState, RunState
from tests.validate.test_validate_gates import GIB, cuda_cycle


def _state(plan, leg: LegState) -> RunState:
    return RunState(run_id="r", status="failed", started_at="2026-01-01T00:00:00Z",
                    device=DeviceChoice(requested="auto", resolved="cuda:0"),
                    legs={"default/full": leg})


def _swapping_findings(swap: int = 3 * GIB):
    plan = build_plan(ValidateOptions(cycles=4, stages=["full"]), Policy(), environ={})
    leg = LegState(status="failed", failure="gate", attempts=1, cycles_done=4,
                   ready={"device": "cuda:0"})
    records = {"default/full": [cuda_cycle(i, swap=swap) for i in range(4)]}
    return validate_findings(plan, _state(plan, leg), records)


def test_every_severity_comes_from_the_catalogue(monkeypatch) -> None:
    """Changing the catalogue's severity changes the emitted finding's: no second copy."""
    table = {finding_id: msgspec.structs.replace(spec, severity=Severity.INFO)
             if finding_id in catalogue.VALIDATION_DOCS else spec
             for finding_id, spec in findings_catalogue.CATALOGUE.items()}
    monkeypatch.setattr(findings_catalogue, "CATALOGUE", table)
    findings = _swapping_findings()
    assert findings and all(f.severity is Severity.INFO for f in findings)


def test_emitted_severities_match_the_documented_ones() -> None:
    for finding in _swapping_findings():
        assert finding.severity is findings_catalogue.severity_of(finding.id), finding.id


def test_swap_over_the_limit_in_a_stage_is_its_own_error_finding() -> None:
    findings = _swapping_findings()
    swap = next(f for f in findings if f.id == "stage-swap-pressure")
    assert swap.severity is Severity.ERROR
    assert swap.evidence == {"swap_used_bytes": 3 * GIB, "limit_bytes": 2 * GIB}
    # The scan's rule of the same limit is a warning about swap at scan time: another id,
    # and each one's documentation says how it differs from the other.
    scan_rule = all_rules()["swap-pressure"]
    assert scan_rule.severity is Severity.WARNING
    assert "stage-swap-pressure" in scan_rule.doc
    assert "swap-pressure" in catalogue.VALIDATION_DOCS["stage-swap-pressure"]
    assert "swap-pressure" not in catalogue.VALIDATION_DOCS


@pytest.mark.parametrize(("swap", "passed"), [(2 * GIB - 1, True), (2 * GIB, True),
                                              (2 * GIB + 1, False)])
def test_the_swap_gate_fails_above_the_limit_as_the_scan_rule_does(swap, passed) -> None:
    plan = build_plan(ValidateOptions(cycles=4, stages=["full"]), Policy(), environ={})
    gates = {g.name: g for g in leg_gates(plan, "default/full",
                                          [cuda_cycle(i, swap=swap) for i in range(4)],
                                          completed=True)}
    assert gates["swap"].passed is passed
