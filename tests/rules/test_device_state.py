"""Memory temperature and pending ECC/MIG mode findings, from hand-built snapshots (no I/O)."""

from __future__ import annotations

from gpu_audit.config import Policy
from gpu_audit.model import Severity
from gpu_audit.rules import all_rules, evaluate
from gpu_audit.rules.device_state import gpu_mode_change_pending, memory_temperature_near_limit
from tests import builders as b
from tests.rules.test_health import h100, node, run


def test_cool_memory_and_unknown_memory_temperature_say_nothing():
    scan = node(h100(0, memory_temperature_c=38, memory_temperature_max_c=95),
                h100(1, memory_temperature_c=None, memory_temperature_max_c=95),
                h100(2, memory_temperature_c=99, memory_temperature_max_c=None))
    assert run(memory_temperature_near_limit, scan) == []


def test_memory_close_to_its_limit_is_a_warning_with_the_numbers():
    scan = node(h100(0, temperature_c=61, memory_temperature_c=91, memory_temperature_max_c=95))
    (finding,) = run(memory_temperature_near_limit, scan)
    assert finding.subject == "gpu:0"
    assert finding.severity is None  # the rule's default: warning
    assert "91 C" in finding.title and "95 C" in finding.title
    assert "4 C of margin" in finding.detail and "61 C" in finding.detail
    assert finding.evidence == {"memory_temperature_c": 91, "memory_temperature_max_c": 95,
                                "margin_c": 4, "temperature_c": 61, "temperature_margin_c": 5.0}
    assert "nvidia-smi -q -d TEMPERATURE -i 0" in finding.remedy


def test_memory_at_its_limit_is_an_error_and_the_margin_is_policy():
    at_limit = node(h100(0, memory_temperature_c=95, memory_temperature_max_c=95))
    (finding,) = run(memory_temperature_near_limit, at_limit)
    assert finding.severity is Severity.ERROR
    assert "at or above" in finding.title
    wide = node(h100(0, memory_temperature_c=80, memory_temperature_max_c=95))
    assert run(memory_temperature_near_limit, wide) == []
    assert len(run(memory_temperature_near_limit, wide, Policy(temperature_margin_c=15))) == 1


def test_no_pending_change_when_modes_agree_or_are_unknown():
    scan = node(h100(0, ecc_mode=True, ecc_mode_pending=True, mig_mode=False,
                     mig_mode_pending=False),
                h100(1, ecc_mode=True, ecc_mode_pending=None),
                b.gpu(2, ecc_mode=None, ecc_mode_pending=None, mig_mode=None))
    assert run(gpu_mode_change_pending, scan) == []


def test_pending_ecc_change_names_the_change_and_how_to_apply_or_cancel():
    scan = node(h100(3, ecc_mode=True, ecc_mode_pending=False, mig_mode=False,
                     mig_mode_pending=False))
    (finding,) = run(gpu_mode_change_pending, scan)
    assert finding.subject == "gpu:3"
    assert "ECC on -> off" in finding.title and "MIG" not in finding.title
    assert "sudo nvidia-smi -r -i 3" in finding.remedy
    assert "sudo nvidia-smi -i 3 -e 1" in finding.remedy  # cancel: keep ECC on
    assert finding.evidence["ecc_mode_pending"] is False


def test_pending_ecc_and_mig_changes_in_one_finding():
    scan = node(h100(0, ecc_mode=False, ecc_mode_pending=True, mig_mode=False,
                     mig_mode_pending=True))
    (finding,) = run(gpu_mode_change_pending, scan)
    assert "ECC off -> on, MIG off -> on" in finding.title
    assert "sudo nvidia-smi -i 0 -e 0 && sudo nvidia-smi -i 0 -mig 0" in finding.remedy


def test_lost_gpus_are_left_to_the_nvml_rules():
    scan = node(h100(0, lost=True, ecc_mode=True, ecc_mode_pending=False,
                     memory_temperature_c=99, memory_temperature_max_c=95))
    assert run(gpu_mode_change_pending, scan) == []
    assert run(memory_temperature_near_limit, scan) == []


def test_both_rules_are_registered_with_their_severities():
    rules = all_rules()
    assert rules["memory-temperature-near-limit"].severity is Severity.WARNING
    assert rules["gpu-mode-change-pending"].severity is Severity.WARNING
    scan = node(h100(0, ecc_mode=True, ecc_mode_pending=False, memory_temperature_c=96,
                     memory_temperature_max_c=95))
    found = {(f.id, f.severity) for f in evaluate(scan, Policy())}
    assert ("gpu-mode-change-pending", Severity.WARNING) in found
    assert ("memory-temperature-near-limit", Severity.ERROR) in found
