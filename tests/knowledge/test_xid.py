"""The one Xid catalogue: scan's health rule and explain give every Xid the same verdict."""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from gpu_audit.config import Policy
from gpu_audit.explain import classify_text
from gpu_audit.knowledge.xid import (
    XID_TABLE,
    recovery_action,
    xid_info,
    xid_severity,
)
from gpu_audit.model import KernelLog, Severity, XidEvent
from gpu_audit.rules.health import xid_events
from tests import builders as b

BUS = "0000:18:00"


def scan_verdict(code: int, message: str) -> tuple[Severity, str, str]:
    """(severity, detail, remedy) of scan's xid-events finding for one event a minute old."""
    scanned = dt.datetime.fromisoformat(b.scan().generated_at.replace("Z", "+00:00"))
    when = (scanned - dt.timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    event = XidEvent(xid=code, pci_bus_id=BUS, message=message, time=when)
    scan = msgspec.structs.replace(b.scan(), kernel_log=KernelLog("kmsg", True, [event]))
    (finding,) = list(xid_events(scan, Policy()))
    return finding.severity, finding.detail, finding.remedy


def explain_verdict(code: int, message: str) -> tuple[Severity, str, str]:
    """(severity, explanation, remedy) of explain's incident for the same kernel-log line."""
    line = f"NVRM: Xid (PCI:{BUS}): {code}, pid=4242, name=python, {message}"
    (incident,) = classify_text(line, torch_version=None)
    return incident.severity, incident.explanation, incident.remedy


@pytest.mark.parametrize("code", sorted(XID_TABLE))
def test_scan_and_explain_give_every_xid_the_same_verdict(code: int) -> None:
    info = xid_info(code)
    message = "Ch 00000008, intr 10000000. MMU Fault"
    scan_severity, detail, scan_remedy = scan_verdict(code, message)
    explain_severity, explanation, explain_remedy = explain_verdict(code, message)
    assert scan_severity == explain_severity == info.severity
    assert info.meaning in detail and info.meaning in explanation
    assert scan_remedy == explain_remedy == info.action


@pytest.mark.parametrize(("action", "severity"), [
    ("None", Severity.INFO), ("Drain and Reset", Severity.ERROR),
    ("GPU Reset Required", Severity.CRITICAL), ("Node Reboot Required", Severity.CRITICAL),
])
def test_xid_154_is_judged_by_its_recovery_action_on_both_paths(action: str,
                                                               severity: Severity) -> None:
    message = f"GPU recovery action changed from 0x1 (Old) to 0x2 ({action})"
    assert recovery_action(message) == action
    assert xid_severity(154, action) == severity
    assert scan_verdict(154, message)[0] == explain_verdict(154, message)[0] == severity


def test_every_entry_is_complete() -> None:
    origins = {"hardware", "driver", "application", "consequence", "informational"}
    for code, info in XID_TABLE.items():
        assert info.xid == code
        assert info.mnemonic and info.meaning and info.action, code
        assert info.origin in origins, code
    assert xid_info(79).origin == "hardware" and xid_info(79).severity is Severity.CRITICAL
    assert xid_info(13).origin == "application" and xid_info(13).severity is Severity.WARNING


def test_unknown_xids_are_named_and_neither_blamed_on_hardware_nor_ignored() -> None:
    info = xid_info(999)
    assert info.origin == "unknown" and info.severity is Severity.WARNING
    assert "999" in info.meaning and "not in gpu-audit's catalog" in info.meaning
