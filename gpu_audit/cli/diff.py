"""``gpu-audit diff BEFORE AFTER``: what changed on a machine between two scans."""

from __future__ import annotations

import sys
from pathlib import Path

from gpu_audit.cli.declared import NO_REPORT, OUT, Option, command, json_option
from gpu_audit.config.schema import ROOT
from gpu_audit.errors import UsageError
from gpu_audit.model import Scan, Severity

SEVERITIES = ", ".join(s.value for s in Severity)


def load_document(path: Path, name: str) -> Scan:
    """The scan inside a saved ``scan --json`` or ``check --json`` document."""
    from gpu_audit.errors import InputError
    from gpu_audit.report.check_document import load_check_document
    from gpu_audit.report.jsonout import load_scan_document

    try:
        found = load_check_document(path)
        return found[0] if found is not None else load_scan_document(path)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None


OPTIONS = (
    Option("before", "BEFORE", Path, argument=True, required=True, metavar="BEFORE",
           help="`scan --json` or `check --json` document from before."),
    Option("after", "AFTER", Path, argument=True, required=True, metavar="AFTER",
           help="The same machine, after."),
    json_option("the diff", "gpu-audit.diff/1"),
    Option("markdown", "--markdown", bool, False, help="Print the diff as markdown."),
    Option("user", "--user", str, metavar="NAME",
           help="The job's user: only their processes (or ones of unknown owner) that appeared "
                "count as the job's leftovers."),
    Option.setting(ROOT, "fail_on", "fail_on", metavar="SEVERITY",
                   help=f"Exit 2 at or above this severity ({SEVERITIES})."),
    Option("config", "--config", Path, metavar="FILE",
           help="Read thresholds and `ignore` from this TOML file instead of searching."),
    Option.setting(ROOT, "unreleased_vram_min_gib", "unreleased_min_gib", metavar="GIB"),
    OUT,
    NO_REPORT,
)


@command("diff", OPTIONS, epilog="Exit codes: 0 OK, 1 the worst new finding is a warning, 2 at "
                                 "or above --fail-on, 3 unreadable or mismatched documents.")
def diff(
    *,
    before: Path,
    after: Path,
    json_out: bool,
    markdown: bool,
    user: str | None,
    fail_on: str | None,
    config: Path | None,
    unreleased_min_gib: float | None,
    out: Path | None,
    no_report: bool,
) -> int:
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
        import msgspec

        from gpu_audit.config.policy import validate_values

        validate_values({"unreleased_vram_min_gib": unreleased_min_gib},
                        lambda key, message: UsageError(f"--unreleased-min-gib: {message}"))
        policy = msgspec.structs.replace(policy, unreleased_vram_min_gib=unreleased_min_gib)
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

        write_report("diff", document.generated_at, document.hostname, document, text,
                     out)
    if json_out:
        sys.stdout.write(dumps(document) + "\n")
    elif markdown:
        sys.stdout.write(text)
    else:
        from gpu_audit.report.terminal import make_console

        render_diff(report, make_console())
    return report.exit_code
