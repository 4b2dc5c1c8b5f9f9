"""The scan reads /dev/kmsg while the driver answers and runs dmesg or journalctl only after NVML
has answered, and only when /dev/kmsg could not be read."""

from __future__ import annotations

import pytest

from gpu_audit.collect import kernel_log, scan
from gpu_audit.model import KernelLog, ProbeError, XidEvent

XID = XidEvent(79, "0000:3b:00", "GPU has fallen off the bus.")
FROM_KMSG = (KernelLog("kmsg", True, [XID]), [])
UNREADABLE = (KernelLog(None, False), [ProbeError("kernel-log", "host", "/dev/kmsg: denied")])
FROM_DMESG = (KernelLog("dmesg", True, []), [])


@pytest.fixture
def commands(monkeypatch):
    """The full read (kmsg, dmesg, journalctl), recorded instead of run."""
    calls: list[dict] = []

    def full_read(**kwargs):
        calls.append(kwargs)
        return FROM_DMESG

    monkeypatch.setattr(kernel_log, "read_kernel_log", full_read)
    return calls


def test_without_nvml_no_log_is_kept_and_no_command_runs(commands):
    assert scan._kernel_log(FROM_KMSG, nvml_available=False) == (None, [])
    assert scan._kernel_log(UNREADABLE, nvml_available=False) == (None, [])
    assert commands == []


def test_a_log_read_from_kmsg_is_used_as_read(commands):
    assert scan._kernel_log(FROM_KMSG, nvml_available=True) == FROM_KMSG
    assert commands == []


def test_off_linux_there_is_no_log_and_no_command(commands):
    assert scan._kernel_log((None, []), nvml_available=True) == (None, [])
    assert commands == []


def test_an_unreadable_kmsg_falls_back_to_the_commands(commands):
    assert scan._kernel_log(UNREADABLE, nvml_available=True) == FROM_DMESG
    assert commands == [{}]
