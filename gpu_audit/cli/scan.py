"""``gpu-audit scan``: inventory the machine and judge whether it is fit for a run."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer

from gpu_audit.cli.app import app, err, verbose
from gpu_audit.errors import UsageError
from gpu_audit.model import Severity

SEVERITIES = ", ".join(s.value for s in Severity)


def report_stem(command: str, generated_at: str, hostname: str) -> str:
    """``scan-20261122T101500Z-myhost``: sortable, one per run, safe as a file name."""
    stamp = re.sub(r"[-:]", "", generated_at)
    host = re.sub(r"[^A-Za-z0-9._-]+", "_", hostname) or "host"
    return f"{command}-{stamp}-{host}"


@app.command()
def scan(
    json_out: bool = typer.Option(
        False, "--json", help="Print the scan as JSON (schema gpu-audit.scan/1)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="DIR",
        help="Folder for the markdown report and its JSON twin [default: reports].",
    ),
    no_report: bool = typer.Option(False, "--no-report", help="Do not write the report files."),
    from_file: Path | None = typer.Option(
        None,
        "--from",
        metavar="FILE",
        help="Judge a saved `scan --json` document instead of this machine.",
    ),
    fail_on: str | None = typer.Option(
        None,
        "--fail-on",
        metavar="SEVERITY",
        help=f"Exit 2 at or above this severity ({SEVERITIES}) [default: error].",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="FILE",
        help="Read thresholds from this TOML file instead of searching.",
    ),
    pid: int | None = typer.Option(
        None, "--pid", help="Read allocator settings from this process's environment."
    ),
    timeout: float = typer.Option(
        5.0,
        "--timeout",
        min=0.1,
        metavar="SECONDS",
        help="Longest wait for the NVIDIA driver before reporting it hung.",
    ),
) -> None:
    """Inventory GPUs, their processes, host memory and allocator settings; judge fitness."""
    from gpu_audit.collect import collect_snapshot
    from gpu_audit.config import load_policy
    from gpu_audit.report.jsonout import load_scan_document, scan_document
    from gpu_audit.rules import evaluate, exit_code
    from gpu_audit.serial import dumps, write_atomic

    policy = load_policy(config)
    try:
        threshold = Severity.parse(fail_on) if fail_on else policy.fail_on_severity
    except ValueError as exc:
        raise UsageError(f"--fail-on: {exc}") from None
    if from_file is not None and pid is not None:
        raise UsageError("--from and --pid cannot be combined: --pid reads a live process")

    snapshot = (
        load_scan_document(from_file) if from_file else collect_snapshot(timeout_s=timeout, pid=pid)
    )
    findings = evaluate(snapshot, policy)
    code = exit_code(findings, threshold)
    document = scan_document(snapshot, findings, code)

    if json_out:
        sys.stdout.write(dumps(document) + "\n")
    else:
        from gpu_audit.report.terminal import render_scan

        render_scan(snapshot, findings, code, verbose=bool(verbose()))

    if not no_report:
        from gpu_audit.report.markdown import render_scan_markdown

        folder = out or Path("reports")
        stem = report_stem("scan", snapshot.generated_at, snapshot.host.hostname)
        try:
            write_atomic(folder / f"{stem}.json", dumps(document) + "\n")
            md = write_atomic(folder / f"{stem}.md", render_scan_markdown(snapshot, findings, code))
        except OSError as exc:
            message = f"cannot write the report to {folder}: {exc.strerror or exc}"
            if out is not None:
                raise UsageError(message + " (pass a writable --out DIR)") from None
            err(message + "; pass --out DIR or --no-report")
        else:
            print(f"report: {md}", file=sys.stderr)
    raise typer.Exit(code)
