"""``gpu-audit diff BEFORE AFTER``: what changed on a machine between two scans."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpu_audit.cli.app import app
from gpu_audit.errors import UsageError
from gpu_audit.model import Scan, Severity

SEVERITIES = ", ".join(s.value for s in Severity)


def load_document(path: Path, name: str) -> Scan:
    """The scan inside a saved ``scan --json`` or ``check --json`` document."""
    from gpu_audit.check.document import load_check_document
    from gpu_audit.errors import InputError
    from gpu_audit.report.jsonout import load_scan_document

    try:
        found = load_check_document(path)
        return found[0] if found is not None else load_scan_document(path)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


@app.command(epilog="Exit codes: 0 OK, 1 the worst new finding is a warning, 2 at or above "
                    "--fail-on, 3 unreadable or mismatched documents.")
def diff(
    before: Path = typer.Argument(..., metavar="BEFORE",
                                  help="`scan --json` or `check --json` document from before."),
    after: Path = typer.Argument(..., metavar="AFTER", help="The same machine, after."),
    json_out: bool = typer.Option(False, "--json",
                                  help="Print the diff as JSON (schema gpu-audit.diff/1)."),
    markdown: bool = typer.Option(False, "--markdown", help="Print the diff as markdown."),
    user: str | None = typer.Option(
        None, "--user", metavar="NAME",
        help="The job's user: only their processes (or ones of unknown owner) that appeared "
             "count as the job's leftovers."),
    fail_on: str | None = typer.Option(
        None, "--fail-on", metavar="SEVERITY",
        help=f"Exit 2 at or above this severity ({SEVERITIES}) (default: error)."),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE",
        help="Read thresholds and `ignore` from this TOML file instead of searching."),
    unreleased_min_gib: float | None = typer.Option(
        None, "--unreleased-min-gib", metavar="GIB",
        help="vram-unreleased: report memory no process accounts for from this much growth on "
             "(the policy's unreleased_vram_min_gib, default 1)."),
    out: Path | None = typer.Option(None, "--out", metavar="DIR",
                                    help="Folder for the markdown report and its JSON twin "
                                         "(default: reports)."),
    no_report: bool = typer.Option(False, "--no-report", help="Do not write the report files."),
) -> None:
    """What changed between two scans of one machine, e.g. before and after a job.

    Processes that appeared or left; GPU memory a finished job's processes still hold (a
    process counts as the job's when it is absent from BEFORE, runs on a GPU both documents
    list, and belongs to --user when given, or to an unknown owner); ECC, retired-page and
    remapped-row counters that went up; new Xid events; clock-limiting reasons that started;
    scan findings new and resolved. The exit code follows the worst new finding.
    """
    from gpu_audit.config import load_policy
    from gpu_audit.diff import compare
    from gpu_audit.diff.render import diff_document, render_diff, render_diff_markdown
    from gpu_audit.knowledge.findings import ignorable
    from gpu_audit.serial import dumps

    if json_out and markdown:
        raise UsageError("--json and --markdown cannot be combined")
    policy = load_policy(config, known_ids=ignorable)
    if unreleased_min_gib is not None:
        import dataclasses

        from gpu_audit.config.policy import validate_values

        validate_values({"unreleased_vram_min_gib": unreleased_min_gib},
                        lambda key, message: UsageError(f"--unreleased-min-gib: {message}"))
        policy = dataclasses.replace(policy, unreleased_vram_min_gib=unreleased_min_gib)
    try:
        threshold = Severity.parse(fail_on) if fail_on else None
    except ValueError as exc:
        raise UsageError(f"--fail-on: {exc}") from None
    report = compare(load_document(before, "BEFORE"), load_document(after, "AFTER"),
                     policy=policy, job_user=user, fail_on=threshold)
    document = diff_document(report)
    text = render_diff_markdown(report)
    if not no_report:
        from gpu_audit.report.files import write_report

        write_report("diff", document["generated_at"], document["hostname"], document, text,
                     out)
    if json_out:
        sys.stdout.write(dumps(document) + "\n")
    elif markdown:
        sys.stdout.write(text)
    else:
        from gpu_audit.report.terminal import make_console

        render_diff(report, make_console())
    raise typer.Exit(report.exit_code)
