"""Where reports land: ``reports/<command>-<UTC timestamp>-<host>.md`` with a ``.json`` twin."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from gpu_audit.errors import UsageError
from gpu_audit.serial import dumps, write_atomic

DEFAULT_FOLDER = Path("reports")


def report_stem(command: str, generated_at: str, hostname: str) -> str:
    """``scan-20261122T101500Z-myhost``: sortable, one per run, safe as a file name."""
    stamp = re.sub(r"[-:]", "", generated_at)
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", hostname) or "host"
    return f"{command}-{stamp}-{host}"


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
    stem = report_stem(command, generated_at, hostname)
    try:
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
