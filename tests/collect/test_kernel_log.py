"""Xid events from the kernel log: line formats, sources in order, unreadable logs."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from gpu_audit.collect.kernel_log import parse_kmsg, parse_xid, read_kernel_log

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux kernel log")

# Lines as drivers of different ages print them.
MODERN = ("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
          "GPU has fallen off the bus.")
WITH_PID = ("NVRM: Xid (PCI:0000:65:00): 31, pid=12345, name=python, Ch 00000008, intr 00000000. "
            "MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_34560000")
OLD = "NVRM: Xid (0000:01:00): 13, Graphics Exception: ESR 0x404490=0x80000001"
ROW_REMAP = ("NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for "
             "remapping, reset gpu to activate.")


def test_modern_line_with_unknown_pid():
    event = parse_xid(MODERN)
    assert (event.xid, event.pci_bus_id, event.pid, event.process_name) == (
        79, "0000:3b:00", None, None)
    assert event.message == "GPU has fallen off the bus."


def test_line_with_pid_and_process_name():
    event = parse_xid(WITH_PID)
    assert (event.xid, event.pid, event.process_name) == (31, 12345, "python")
    assert event.message.startswith("Ch 00000008")


def test_old_driver_format_without_pci_prefix():
    event = parse_xid(OLD)
    assert (event.xid, event.pci_bus_id) == (13, "0000:01:00")


def test_other_kernel_messages_are_not_xids():
    assert parse_xid("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07") is None
    assert parse_xid("usb 1-1: new high-speed USB device") is None


def test_uptime_becomes_an_approximate_utc_time():
    event = parse_xid(ROW_REMAP, uptime_s=3600.5, boot_epoch=1_700_000_000.0)
    assert event.uptime_s == 3600.5
    assert event.time == "2023-11-14T23:13:20Z"


def kmsg_dump(*messages: str) -> str:
    records = []
    for seq, message in enumerate(messages):
        records.append(f"4,{seq},{(seq + 1) * 1_000_000},-;{message}")
        records.append(" SUBSYSTEM=pci")
        records.append(" DEVICE=+pci:0000:3b:00.0")
    return "\n".join(records) + "\n"


def test_kmsg_records_skip_metadata_and_keep_timestamps():
    events = parse_kmsg(kmsg_dump("Linux version 6.8.0", MODERN, WITH_PID))
    assert [e.xid for e in events] == [79, 31]
    assert [e.uptime_s for e in events] == [2.0, 3.0]


def test_kmsg_unescapes_bytes():
    (event,) = parse_kmsg("4,1,5,-;" + MODERN.replace(" GPU", "\\x20GPU") + "\n")
    assert event.message == "GPU has fallen off the bus."


def fake_command(path: Path, stdout: str = "", stderr: str = "", code: int = 0) -> list[str]:
    """An executable that prints what a real dmesg/journalctl would, for the source fallback."""
    (path.parent / f"{path.name}.out").write_text(stdout)
    (path.parent / f"{path.name}.err").write_text(stderr)
    path.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"sys.stdout.write(open({str(path)!r} + '.out').read())\n"
        f"sys.stderr.write(open({str(path)!r} + '.err').read())\n"
        f"sys.exit({code})\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return [str(path)]


def test_kmsg_file_is_the_first_source(tmp_path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(kmsg_dump(MODERN))
    log, errors = read_kernel_log(kmsg_path=str(kmsg), dmesg=(), journal=())
    assert errors == []
    assert (log.source, log.readable, [e.xid for e in log.xid_events]) == ("kmsg", True, [79])


def test_dmesg_is_used_when_kmsg_is_denied(tmp_path):
    dmesg = fake_command(tmp_path / "dmesg", stdout=f"[ 966.503025] {WITH_PID}\n[ 967.0] other\n")
    log, errors = read_kernel_log(kmsg_path=str(tmp_path / "missing"), dmesg=dmesg, journal=())
    assert errors == []
    assert log.source == "dmesg"
    (event,) = log.xid_events
    assert event.uptime_s == pytest.approx(966.503025)


def test_journal_is_used_when_dmesg_is_restricted_too(tmp_path):
    dmesg = fake_command(tmp_path / "dmesg", stderr="dmesg: read kernel buffer failed: "
                         "Operation not permitted\n", code=1)
    journal = fake_command(tmp_path / "journalctl",
                           stdout=f"[ 12.000001] gpu-node-7 kernel: {OLD}\n")
    log, errors = read_kernel_log(kmsg_path=str(tmp_path / "missing"), dmesg=dmesg,
                                  journal=journal)
    assert errors == []
    assert log.source == "journal" and [e.xid for e in log.xid_events] == [13]


def test_unreadable_everywhere_is_a_probe_error_saying_what_to_do(tmp_path):
    dmesg = fake_command(tmp_path / "dmesg", stderr="dmesg: read kernel buffer failed: "
                         "Operation not permitted\n", code=1)
    journal = fake_command(tmp_path / "journalctl", stdout="-- No entries --\n",
                           stderr="Hint: You are currently not seeing messages from other users "
                                  "and the system.\n")
    log, errors = read_kernel_log(kmsg_path=str(tmp_path / "missing"), dmesg=dmesg,
                                  journal=journal)
    assert (log.source, log.readable, log.xid_events) == (None, False, [])
    (error,) = errors
    assert error.source == "kernel-log"
    assert "Operation not permitted" in error.message
    assert "not seeing messages" in error.message
    assert "dmesg_restrict" in error.message


def test_a_missing_command_is_skipped(tmp_path):
    log, errors = read_kernel_log(kmsg_path=str(tmp_path / "missing"),
                                  dmesg=["/nonexistent/dmesg"], journal=())
    assert not log.readable
    assert "not installed" in errors[0].message


def test_a_flood_keeps_the_newest_events(tmp_path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(kmsg_dump(*([WITH_PID] * 5 + [MODERN])))
    log, _ = read_kernel_log(kmsg_path=str(kmsg), dmesg=(), journal=(), max_events=2)
    assert log.truncated and [e.xid for e in log.xid_events] == [31, 79]
