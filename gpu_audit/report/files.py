"""Where reports land: ``reports/<command>-<UTC timestamp>-p<pid>-<host>.md`` with a ``.json``
twin."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from gpu_audit.errors import UsageError
from gpu_audit.serial import dumps, write_atomic

DEFAULT_FOLDER = Path("reports")


def report_stem(command: str, generated_at: str, hostname: str, run: str | None = None) -> str:
    """``scan-20261122T101500Z-p4242-myhost``: sortable by time, safe as a file name, and
    unique between runs in the same second (``run``: this process's id by default)."""
    stamp = re.sub(r"[-:]", "", generated_at)
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", hostname) or "host"
    run = f"p{os.getpid()}" if run is None else run
    return f"{command}-{stamp}-{run}-{host}"


def unique_stem(folder: Path, command: str, generated_at: str, hostname: str,
                suffixes: tuple[str, ...] = (".md", ".json")) -> str:
    """A stem no file in ``folder`` has yet, for any of ``suffixes``.

    Runs at the same time have different process ids; one process writing several reports in a
    second (or a recycled id) gets ``p4242.2``, ``p4242.3``... Files of one run share the stem.
    """
    pid = os.getpid()
    for n in range(1, 10_000):
        stem = report_stem(command, generated_at, hostname, f"p{pid}" + (f".{n}" if n > 1 else ""))
        if not any(os.path.lexists(folder / f"{stem}{suffix}") for suffix in suffixes):
            return stem
    raise UsageError(f"{folder}: too many reports named {stem}*; clean the folder up")


def write_report(
    command: str,
    generated_at: str,
    hostname: str,
    document: dict[str, Any],
    markdown: str,
    out: Path | None,
) -> Path | None:
    """Write the markdown report and its JSON twin atomically; returns the markdown's path.

    With an explicit ``out`` a write failure is the user's error (exit 3); with the default
    folder it is a warning, so a read-only working directory does not stop a scan.
    """
    folder = out or DEFAULT_FOLDER
    try:
        stem = unique_stem(folder, command, generated_at, hostname)
        write_atomic(folder / f"{stem}.json", dumps(document) + "\n")
        md = write_atomic(folder / f"{stem}.md", markdown)
    except OSError as exc:
        message = f"cannot write the report to {folder}: {exc.strerror or exc}"
        if out is not None:
            raise UsageError(message + " (pass a writable --out DIR)") from None
        print(f"gpu-audit: {message}; pass --out DIR or --no-report", file=sys.stderr)
        return None
    print(f"report: {md}", file=sys.stderr)
    return md
