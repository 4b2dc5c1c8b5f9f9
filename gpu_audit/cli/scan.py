"""``gpu-audit scan``: inventory the machine and judge whether it is fit for a run."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from gpu_audit.cli.app import verbose
from gpu_audit.cli.declared import (
    NO_REPORT,
    NVML_TIMEOUT,
    OUT,
    PATH,
    SPEC_FORMS,
    Option,
    command,
)
from gpu_audit.cli.monitoring import FORMAT_HELP, monitored
from gpu_audit.config.schema import ROOT
from gpu_audit.errors import UsageError
from gpu_audit.severity import Severity

if TYPE_CHECKING:
    from pathlib import Path

SEVERITIES = ", ".join(s.value for s in Severity)

# Declared as data: typer builds the command from these, and a plain `scan --json --no-report`
# line is parsed from them without loading typer (gpu_audit.cli.declared). A new option is one
# entry here and one keyword of scan() below.
OPTIONS = (
    Option("json_out", "--json", bool, False,
           help="Print the scan as JSON (schema gpu-audit.scan/1)."),
    OUT,
    NO_REPORT,
    Option("output_format", "--format", str, metavar="FORMAT", help=FORMAT_HELP),
    Option("prometheus", "--prometheus", PATH, metavar="FILE",
           help="Also write the scan as a node_exporter textfile (gpu_audit_* gauges, atomic); "
           "a scan that cannot judge writes gpu_audit_scan_success 0 there."),
    Option("from_file", "--from", PATH, metavar="FILE",
           help="Judge a saved `scan --json` document instead of this machine."),
    Option.setting(ROOT, "fail_on", "fail_on", metavar="SEVERITY",
                   help=f"Exit 2 at or above this severity ({SEVERITIES})."),
    Option("config", "--config", PATH, metavar="FILE",
           help="Read thresholds from this TOML file instead of searching "
           "(GPU_AUDIT_<KEY> variables still override it)."),
    Option("pid", "--pid", int, help="Read allocator settings from this process's environment."),
    Option("torch_check", "--torch", bool, False,
           help="Also import torch in a child process: CUDA build, kernels for each GPU, "
           "allocator."),
    NVML_TIMEOUT,
    Option("gpus", "--gpus", str, metavar="SPEC",
           help=f"Judge only these GPUs: {SPEC_FORMS}; host findings still apply (default: all)."),
)


@command("scan", OPTIONS, lean=True)
@monitored
def scan(
    *,
    json_out: bool,
    out: Path | None,
    no_report: bool,
    output_format: str | None,
    prometheus: Path | None,
    from_file: Path | None,
    fail_on: str | None,
    config: Path | None,
    pid: int | None,
    torch_check: bool,
    timeout: float,
    gpus: str | None,
) -> int:
    """Inventory GPUs, their processes, host memory and allocator settings; judge fitness.

    Exit codes (the monitoring-plugin convention): 0 nothing at or above a warning; 1 the worst
    finding is a warning; 2 a finding at or above --fail-on (default: error); 3 could not judge
    (usage or configuration error, unreadable input); 130 interrupted.
    """
    from gpu_audit.cli.monitoring import output_format as format_in_force

    fmt = format_in_force(output_format, json_out)
    json_out = fmt == "json"
    if prometheus is not None:
        from gpu_audit.report.prometheus import check_textfile_target

        check_textfile_target(prometheus)
    # The NVML read goes first, in a child process where it can (else on its own threads): the
    # driver answers and pynvml loads while the rest of the scan is imported and collected.
    nvml = None
    if from_file is None:
        from gpu_audit.collect.nvml.isolated import start_read

        nvml = start_read(timeout)

    from gpu_audit.collect import collect_scan
    from gpu_audit.config import load_policy
    from gpu_audit.knowledge.findings import ignorable
    from gpu_audit.report.jsonout import load_scan_document, scan_document
    from gpu_audit.rules import all_rules, evaluate, exit_code
    from gpu_audit.serial import dumps

    if nvml is not None:
        all_rules()  # the rules load now, while the driver answers, not after its answer
    policy = load_policy(config, known_ids=ignorable)
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
    if gpus is not None and scanned.nvml.available:
        # Judged on the whole machine, then limited: host findings stay, other GPUs' go. With
        # NVML down there is nothing to select; its finding says why.
        from gpu_audit.gpu_selection import apply_selection, resolve_gpus, select_findings

        selection = resolve_gpus(gpus, scanned.gpus, os.environ,
                                 unlisted=scanned.unlisted_gpus)
        findings = select_findings(findings, scanned, selection)
        scanned = apply_selection(scanned, selection)
    code = exit_code(findings, threshold)
    document = scan_document(scanned, findings, code)

    # The report is written first: an --out that cannot be written exits 3 before any verdict
    # (with its own exit code) is printed.
    if not no_report:
        from gpu_audit.report.files import write_report
        from gpu_audit.report.markdown import render_scan_markdown

        markdown = render_scan_markdown(scanned, findings, code)
        write_report("scan", scanned.generated_at, scanned.host.hostname, document, markdown, out,
                     keep=policy.keep_reports)
    if prometheus is not None:
        from gpu_audit.cli.monitoring import elapsed_s
        from gpu_audit.report.prometheus import render_textfile, write_textfile

        write_textfile(prometheus, render_textfile(scanned, findings, code, duration_s=elapsed_s()))

    if fmt == "nagios":
        from gpu_audit.report.nagios import render_scan_nagios

        sys.stdout.write(render_scan_nagios(scanned, findings, code))
    elif json_out:
        sys.stdout.write(dumps(document) + "\n")
    else:
        from gpu_audit.report.terminal import render_scan

        render_scan(scanned, findings, code, verbose=bool(verbose()))
    return code
