"""Xid events from the kernel log: the NVIDIA driver's own record of GPU errors since boot.

The driver prints ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.`` to the
kernel ring buffer. Sources, tried in order: ``/dev/kmsg`` (structured, this boot), ``dmesg``
and ``journalctl -k -b``. Reading the kernel log is often restricted
(``kernel.dmesg_restrict=1``, containers without ``/dev/kmsg``); then the scan records why, and
the Xid check is reported as not done rather than as passed.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import re
import sys
import time
from collections.abc import Callable, Sequence

import msgspec

from gpu_audit.lazy import regex as lazy
from gpu_audit.model import KernelLog, ProbeError, Scan, XidEvent
from gpu_audit.redact import redact_text
from gpu_audit.units import utc_iso

MAX_EVENTS = 200  # the newest are kept; a flapping GPU can log thousands
MAX_KMSG_RECORDS = 500_000  # a bound on the ring buffer walk, far above its usual size
COMMAND_TIMEOUT_S = 10.0

XID_MARKER = "NVRM: Xid"  # in every Xid line, and printable, so /dev/kmsg never escapes it
_NO_PERMISSION = (
    "not permitted",
    "permission denied",
    "insufficient permissions",
    "not seeing messages",
)


# The patterns are compiled on first use: most kernel logs hold no Xid line at all, and dmesg and
# journalctl are fallbacks.
_xid_pattern = lazy(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)"
    r"\):\s*(?P<xid>\d+)(?:,\s*(?P<rest>.*))?$"
)

_pid_pattern = lazy(r"(?:^|,\s*)pid=(?:'?<unknown>'?|(?P<pid>\d+))")

_name_pattern = lazy(r"(?:^|,\s*)name=(?P<name>[^,]*)")

_dmesg_line_pattern = lazy(r"^\[\s*(?P<ts>\d+\.\d+)\]\s?(?P<msg>.*)$")

_journal_line_pattern = lazy(r"^\[\s*(?P<ts>\d+\.\d+)\]\s+\S+\s+kernel:\s?(?P<msg>.*)$")


def parse_xid(
    message: str, uptime_s: float | None = None, boot_epoch: float | None = None
) -> XidEvent | None:
    """An :class:`XidEvent` from one kernel message, or ``None`` if it is not an Xid line."""
    if XID_MARKER not in message:
        return None
    match = _xid_pattern().search(message)
    if not match:
        return None
    rest = (match["rest"] or "").strip()
    pid_pattern, name_pattern = _pid_pattern(), _name_pattern()
    pid_match = pid_pattern.search(rest)
    name_match = name_pattern.search(rest)
    pid = int(pid_match["pid"]) if pid_match and pid_match["pid"] else None
    name = name_match["name"].strip() if name_match else None
    if name in ("", "<unknown>"):
        name = None
    text = name_pattern.sub("", pid_pattern.sub("", rest, count=1), count=1)
    text = text.strip().lstrip(",").strip()
    when = None
    if uptime_s is not None and boot_epoch is not None:
        when = utc_iso(dt.datetime.fromtimestamp(boot_epoch + uptime_s, dt.UTC))
    return XidEvent(
        xid=int(match["xid"]),
        pci_bus_id=match["bus"].lower(),
        message=redact_text(text),
        pid=pid,
        process_name=name,
        uptime_s=uptime_s,
        time=when,
    )


def parse_kmsg(data: str, boot_epoch: float | None = None) -> list[XidEvent]:
    """Xid events from ``/dev/kmsg`` records (``prio,seq,usec,flags;message`` per line)."""
    events = []
    for line in data.splitlines():
        if not line or line.startswith(" "):
            continue  # continuation lines carry key=value metadata
        if XID_MARKER not in line:
            continue  # cheap test first: a ring buffer holds thousands of records
        header, sep, message = line.partition(";")
        if not sep:
            continue
        fields = header.split(",")
        uptime = int(fields[2]) / 1e6 if len(fields) > 2 and fields[2].isdigit() else None
        message = _unescape_kmsg(message)
        if event := parse_xid(message, uptime, boot_epoch):
            events.append(event)
    return events


def _unescape_kmsg(text: str) -> str:
    # /dev/kmsg escapes unprintable bytes as \xNN
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m[1], 16)), text)


def parse_timestamped_lines(
    text: str, pattern: re.Pattern[str], boot_epoch: float | None = None
) -> list[XidEvent]:
    """Xid events from ``dmesg`` or ``journalctl -o short-monotonic`` output."""
    events = []
    for line in text.splitlines():
        if XID_MARKER not in line:
            continue
        match = pattern.match(line)
        uptime = float(match["ts"]) if match else None
        message = match["msg"] if match else line
        if event := parse_xid(message, uptime, boot_epoch):
            events.append(event)
    return events


def read_kmsg(path: str = "/dev/kmsg") -> str:
    """All records currently in the ring buffer (non-blocking); raises OSError when denied."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks: list[bytes] = []
    try:
        for _ in range(MAX_KMSG_RECORDS):
            try:
                chunk = os.read(fd, 16384)  # /dev/kmsg hands out one record per read
            except BlockingIOError:
                break  # the end of the buffer
            except OSError as exc:
                if exc.errno == errno.EPIPE:
                    continue  # the record was overwritten while we read; take the next
                raise
            if not chunk:
                break  # a regular file (tests, saved logs) ends here
            chunks.append(chunk if chunk.endswith(b"\n") else chunk + b"\n")
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _run(argv: Sequence[str]) -> tuple[str | None, str]:
    """(stdout, problem): stdout is None when the command could not give the log."""
    # Loaded only when /dev/kmsg cannot be read: a scan as root reads it and never needs them.
    import shutil
    import subprocess

    if shutil.which(argv[0]) is None:
        return None, "not installed"
    try:
        result = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=COMMAND_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {COMMAND_TIMEOUT_S:g} s"
    except OSError as exc:
        return None, exc.strerror or str(exc)
    stderr = result.stderr.strip()
    if result.returncode != 0 or any(p in stderr.lower() for p in _NO_PERMISSION):
        reason = stderr.splitlines()[-1] if stderr else f"exit status {result.returncode}"
        return None, reason
    return result.stdout, ""


def boot_epoch_now() -> float:
    """Wall-clock time of boot, as the kernel log's monotonic timestamps count from it."""
    return time.time() - time.monotonic()


def read_kernel_log(
    *,
    kmsg_path: str = "/dev/kmsg",
    dmesg: Sequence[str] = ("dmesg",),
    journal: Sequence[str] = ("journalctl", "-k", "-b", "0", "-o", "short-monotonic", "--no-pager"),
    max_events: int = MAX_EVENTS,
) -> tuple[KernelLog | None, list[ProbeError]]:
    """Xid events of this boot from the first readable source; ``None`` off Linux."""
    if not sys.platform.startswith("linux"):
        return None, []
    boot = boot_epoch_now()
    problems: list[str] = []
    sources: list[tuple[str, Callable[[], list[XidEvent] | None]]] = []

    def from_kmsg() -> list[XidEvent] | None:
        try:
            return parse_kmsg(read_kmsg(kmsg_path), boot)
        except OSError as exc:
            problems.append(f"{kmsg_path}: {exc.strerror or exc}")
            return None

    def from_command(argv: Sequence[str], pattern: re.Pattern[str]) -> list[XidEvent] | None:
        out, problem = _run(argv)
        if out is None:
            problems.append(f"{argv[0]}: {problem}")
            return None
        return parse_timestamped_lines(out, pattern, boot)

    sources.append(("kmsg", from_kmsg))
    if dmesg:
        sources.append(("dmesg", lambda: from_command(dmesg, _dmesg_line_pattern())))
    if journal:
        sources.append(("journal", lambda: from_command(journal, _journal_line_pattern())))
    for name, read in sources:
        events = read()
        if events is not None:
            truncated = len(events) > max_events
            return KernelLog(name, True, events[-max_events:], truncated), []
    message = (
        "kernel log not readable, so Xid events were not checked ("
        + "; ".join(problems)
        + "). Run as root, add the user to the adm or systemd-journal group, or set "
        "kernel.dmesg_restrict=0"
    )
    return KernelLog(None, False), [ProbeError("kernel-log", "host", message)]


def attach_kernel_log(scan: Scan) -> Scan:
    """``scan`` with this boot's Xid events (and why not, when the log is unreadable)."""
    log, errors = read_kernel_log()
    return msgspec.structs.replace(
        scan, kernel_log=log, probe_errors=[*scan.probe_errors, *errors]
    )
