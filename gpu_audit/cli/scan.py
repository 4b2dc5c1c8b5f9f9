"""``gpu-audit scan``: inventory the machine and judge whether it is fit for a run."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpu_audit.cli.app import app, verbose
from gpu_audit.errors import UsageError
from gpu_audit.model import Severity

SEVERITIES = ", ".join(s.value for s in Severity)


@app.command()
def scan(
    json_out: bool = typer.Option(
        False, "--json", help="Print the scan as JSON (schema gpu-audit.scan/1)."
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        metavar="DIR",
        help="Folder for the markdown report and its JSON twin (default: reports).",
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
        help=f"Exit 2 at or above this severity ({SEVERITIES}) (default: error).",
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="FILE",
        help="Read thresholds from this TOML file instead of searching "
        "(GPU_AUDIT_<KEY> variables still override it).",
    ),
    pid: int | None = typer.Option(
        None, "--pid", help="Read allocator settings from this process's environment."
    ),
    torch_check: bool = typer.Option(
        False,
        "--torch",
        help="Also import torch in a child process: CUDA build, kernels for each GPU, allocator.",
    ),
    timeout: float = typer.Option(
        5.0,
        "--timeout",
        min=0.1,
        max=86400,
        metavar="SECONDS",
        help="Longest wait for the NVIDIA driver before reporting it hung.",
    ),
) -> None:
    """Inventory GPUs, their processes, host memory and allocator settings; judge fitness.

    Exit codes (the monitoring-plugin convention): 0 nothing at or above a warning; 1 the worst
    finding is a warning; 2 a finding at or above --fail-on (default: error); 3 could not judge
    (usage or configuration error, unreadable input); 130 interrupted.
    """
    # The NVML read goes first, on its own threads: a slow driver answers while the rest of the
    # scan is imported and collected.
    nvml = None
    if from_file is None:
        from gpu_audit.collect.nvml import start_read

        nvml = start_read(timeout)

    from gpu_audit.collect import collect_scan
    from gpu_audit.config import load_policy
    from gpu_audit.report.jsonout import load_scan_document, scan_document
    from gpu_audit.rules import evaluate, exit_code
    from gpu_audit.serial import dumps

    def every_id() -> set[str]:
        from gpu_audit.check.engine import every_id

        return every_id()

    policy = load_policy(config, known_ids=every_id)
    try:
        threshold = Severity.parse(fail_on) if fail_on else policy.fail_on_severity
    except ValueError as exc:
        raise UsageError(f"--fail-on: {exc}") from None
    if from_file is not None and pid is not None:
        raise UsageError("--from and --pid cannot be combined: --pid reads a live process")

    scanned = (
        load_scan_document(from_file)
        if from_file
        else collect_scan(timeout_s=timeout, pid=pid, nvml=nvml)
    )
    if torch_check and from_file is None:
        from gpu_audit.collect.torch_probe import attach_torch_probe

        scanned = attach_torch_probe(scanned)
    findings = evaluate(scanned, policy)
    code = exit_code(findings, threshold)
    document = scan_document(scanned, findings, code)

    # The report is written first: an --out that cannot be written exits 3 before any verdict
    # (with its own exit code) is printed.
    if not no_report:
        from gpu_audit.report.files import write_report
        from gpu_audit.report.markdown import render_scan_markdown

        markdown = render_scan_markdown(scanned, findings, code)
        write_report("scan", scanned.generated_at, scanned.host.hostname, document, markdown, out)

    if json_out:
        sys.stdout.write(dumps(document) + "\n")
    else:
        from gpu_audit.report.terminal import render_scan

        render_scan(scanned, findings, code, verbose=bool(verbose()))
    raise typer.Exit(code)
