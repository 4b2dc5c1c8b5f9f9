"""``gpu-audit check``: is this runner fit for the job? Scan, judge by policy, report for CI."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from gpu_audit.bounds import MAX_GPUS
from gpu_audit.cli.app import err, verbose
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
from gpu_audit.config.schema import CHECK, ROOT
from gpu_audit.errors import InputError, UsageError
from gpu_audit.severity import Severity

if TYPE_CHECKING:
    from pathlib import Path

    from gpu_audit.model import Scan

SEVERITIES = ", ".join(s.value for s in Severity)
EXIT_CODES_HELP = ("Exit codes: 0 OK, 1 WARNING, 2 CRITICAL (the runner is unfit), "
                   "3 UNKNOWN (bad policy or flags, or gpu-audit could not judge).")


def parse_stages(text: str | None) -> list[str] | None:
    """``"imports,smoke"`` -> ``["imports", "smoke"]``, in the order the stages run."""
    from gpu_audit.config import STAGES

    if text is None:
        return None
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in STAGES]
    if unknown:
        raise UsageError(f"--stages: unknown stage {unknown[0]!r} (check can run: "
                         f"{', '.join(STAGES)}; the longer ones belong to `gpu-audit validate`)")
    if not names:
        raise UsageError("--stages: name at least one stage, e.g. --stages imports,smoke")
    return [stage for stage in STAGES if stage in names]


def current_user() -> str | None:
    """The user running check, as process owners are reported (the real uid's name, else the
    uid as text, as psutil's username gives it)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


# Declared as data: typer builds the command from these, and a plain `check --json` line is
# parsed from them without loading typer (gpu_audit.cli.declared). A new option is one entry here
# and one keyword of check() below.
OPTIONS = (
    Option("policy_file", "--policy", PATH, metavar="FILE",
           help="Policy TOML with keys at top level (default: the check table of the nearest "
           "gpu-audit.toml or pyproject.toml). GPU_AUDIT_<KEY> variables override it."),
    Option("junit", "--junit", PATH, metavar="FILE",
           help="Write a JUnit XML report (one test case per check)."),
    Option("json_out", "--json", bool, False,
           help="Print the result as JSON (schema gpu-audit.check/1)."),
    Option.setting(CHECK, "stages", "stages", str, metavar="LIST",
                   help="Also run these validation stages after the static checks: "
                        "imports,smoke."),
    Option("from_file", "--from", PATH, metavar="FILE",
           help="Judge a saved `scan --json` or `check --json` document instead of this machine."),
    Option.setting(ROOT, "fail_on", "fail_on", metavar="SEVERITY",
                   help=f"Scan findings at or above this severity fail: {SEVERITIES}."),
    Option("user", "--user", str, metavar="NAME",
           help="Count GPU processes of NAME as own processes (default: the user running "
           "check; with --slurm, the job's user from SLURM_JOB_USER or SLURM_JOB_UID)."),
    OUT,
    NO_REPORT,
    Option("output_format", "--format", str, metavar="FORMAT", help=FORMAT_HELP),
    Option("prometheus", "--prometheus", PATH, metavar="FILE",
           help="Also write the result as a node_exporter textfile (the scan's gpu_audit_* "
           "gauges, gpu_audit_check_status and one gpu_audit_check_passed per check; atomic); "
           "a check that cannot judge writes gpu_audit_scan_success 0 there."),
    Option("no_annotations", "--no-annotations", bool, False,
           help="Under GitHub Actions, do not emit ::error/::warning annotations."),
    NVML_TIMEOUT,
    Option("gpus", "--gpus", str, metavar="SPEC",
           help=f"Judge only these GPUs: {SPEC_FORMS}; host checks still apply (default: all)."),
    Option("diag_level", "--diag", int, min=1, max=3, metavar="LEVEL",
           help="Also run `gpu-audit diag` at this level on the judged GPUs (1: seconds, for "
           "CI); each diag finding becomes a line of the checklist."),
    Option("slurm", "--slurm", str, metavar="HOOK",
           help="Run as a Slurm hook: prolog, epilog or healthcheck. One undecorated line; exit "
           "2 only for the node's problems (hardware or driver faults, memory a finished job "
           "left), 0 otherwise, 3 no verdict. See examples/slurm-*.sh."),
    Option("slurm_gpus", "--slurm-gpus", int, min=0, max=MAX_GPUS, metavar="N",
           help="With --slurm: the GPUs Slurm configures for this node (its gres count), which "
           "the health check expects NVML to list and a job's GPU indices must stay below "
           "(default: Gres=gpu:N of `scontrol show node`, when scontrol is on PATH)."),
    Option("spool", "--spool", PATH, metavar="DIR",
           help="With --slurm: folder for the prolog's scan, kept for the epilog (default: "
           "/var/spool/gpu-audit; created 0700, refused when another user could write it)."),
)


@command("check", OPTIONS, epilog=EXIT_CODES_HELP, lean=True)
@monitored
def check(
    *,
    policy_file: Path | None,
    junit: Path | None,
    json_out: bool,
    stages: str | None,
    from_file: Path | None,
    fail_on: str | None,
    user: str | None,
    out: Path | None,
    no_report: bool,
    output_format: str | None,
    prometheus: Path | None,
    no_annotations: bool,
    timeout: float,
    gpus: str | None,
    diag_level: int | None,
    slurm: str | None,
    slurm_gpus: int | None,
    spool: Path | None,
) -> int:
    """The CI pre-run checklist: scan this runner and judge it against a policy.

    Each check passes, warns or fails with its evidence.
    With GITHUB_STEP_SUMMARY set, the markdown summary is appended to that file.
    Under GitHub Actions, failures and warnings also become workflow annotations.
    """
    started = time.perf_counter()
    from gpu_audit.cli.monitoring import output_format as format_in_force

    fmt = format_in_force(output_format, json_out)
    stage_names = parse_stages(stages)
    nvml = None
    if from_file is None and slurm is None:
        # As in scan: the NVML read goes first, in a child process or on its own threads, so a
        # slow driver answers while the checks are imported and the policy is read.
        from gpu_audit.collect.nvml.isolated import start_read

        nvml = start_read(timeout)

    import msgspec

    from gpu_audit.check.engine import judge, known_ids
    from gpu_audit.config import load_check_policy

    policy = load_check_policy(policy_file, known_ids=known_ids())
    if fail_on is not None:
        try:
            threshold = Severity.parse(fail_on)
        except ValueError as exc:
            raise UsageError(f"--fail-on: {exc}") from None
        policy = msgspec.structs.replace(policy, fail_on=threshold.value,
                                     warn_on=min(threshold, policy.warn_on_severity).value)
    if slurm is not None:
        return _slurm_hook(slurm, policy, spool=spool, from_file=from_file, gpus=gpus,
                           timeout=timeout, user=user, slurm_gpus=slurm_gpus,
                           refused={"--json": json_out, "--junit": junit, "--stages": stages,
                                    "--out": out, "--format": output_format,
                                    "--diag": diag_level, "--prometheus": prometheus})
    if spool is not None:
        raise UsageError("--spool keeps a Slurm hook's state: use it with --slurm")
    if slurm_gpus is not None:
        raise UsageError("--slurm-gpus tells a Slurm hook the node's GPUs: use it with --slurm")
    if prometheus is not None:
        from gpu_audit.report.prometheus import check_textfile_target

        check_textfile_target(prometheus)
    stage_names = stage_names if stage_names is not None else list(policy.stages)
    if from_file is not None and stage_names:
        raise UsageError("--from judges a saved document; validation stages need this machine "
                         "(drop --stages, or `stages` from the policy)")

    recorded_user = None
    if from_file is not None:
        scan, recorded_user = _saved_scan(from_file)
    else:
        from gpu_audit.collect import collect_scan

        scan = collect_scan(timeout_s=timeout, nvml=nvml)
    outcomes = []
    if stage_names:
        from pathlib import Path

        from gpu_audit.validate.checklist import run_stages

        outcomes = run_stages(stage_names, min_gpus=policy.min_gpus,
                              require_torch_cuda=policy.require_torch_cuda,
                              out_dir=None if no_report else (out or Path("reports")),
                              note=err)
    if diag_level is not None:
        if from_file is not None:
            raise UsageError("--from judges a saved document; --diag needs this machine")
        from gpu_audit.diag.checklist import run_diag_stage

        outcomes.append(run_diag_stage(scan, diag_level, gpus, note=err))
    findings = None
    if gpus is not None and scan.nvml.available:
        scan, findings = _limited(scan, policy, gpus)
    report = judge(scan, policy,
                   user=user or recorded_user or current_user(), stages=outcomes,
                   duration_s=round(time.perf_counter() - started, 3), findings=findings)
    _emit(report, json_out=fmt == "json", junit=junit, out=out, no_report=no_report,
          annotate=not no_annotations, nagios=fmt == "nagios", prometheus=prometheus)
    return report.exit_code


def _limited(scan: Scan, policy, spec: str) -> tuple[Scan, list]:
    """The scan limited to the GPUs ``spec`` selects, and the findings about them: judged on the
    whole machine, so host findings stay and those of other GPUs and their processes go."""
    from gpu_audit.gpu_selection import apply_selection, resolve_gpus, select_findings
    from gpu_audit.rules import evaluate

    selection = resolve_gpus(spec, scan.gpus, os.environ, unlisted=scan.unlisted_gpus)
    findings = select_findings(evaluate(scan, policy), scan, selection)
    return apply_selection(scan, selection), findings


def _slurm_hook(kind: str, policy, *, spool: Path | None, from_file: Path | None,
                gpus: str | None, timeout: float, user: str | None, slurm_gpus: int | None,
                refused: dict[str, object]) -> int:
    """``check --slurm HOOK``: see :mod:`gpu_audit.hooks.slurm`."""
    from gpu_audit.hooks import DEFAULT_SPOOL, HOOKS, run_hook

    if kind not in HOOKS:
        raise UsageError(f"--slurm: unknown hook {kind!r} (expected one of {', '.join(HOOKS)})")
    given = [flag for flag, value in refused.items() if value]
    if given:
        raise UsageError(f"--slurm prints one line and writes no report: drop {given[0]}")

    def collect() -> Scan:
        if from_file is not None:
            return _saved_scan(from_file)[0]
        from gpu_audit.collect import collect_scan

        return collect_scan(timeout_s=timeout)

    return run_hook(kind, policy=policy, environ=os.environ, spool=spool or DEFAULT_SPOOL,
                    collect=collect, gpus=gpus, user=user, slurm_gpus=slurm_gpus,
                    deadline_s=policy.slurm_hook_deadline_s, settle_s=policy.slurm_settle_s)


def _saved_scan(path: Path) -> tuple[Scan, str | None]:
    """The scan in a saved check or scan document, and the user a check document recorded."""
    from gpu_audit.report.check_document import load_check_document
    from gpu_audit.report.jsonout import load_scan_document

    found = load_check_document(path)
    return found if found is not None else (load_scan_document(path), None)


def _emit(report, *, json_out: bool, junit: Path | None, out: Path | None, no_report: bool,
          annotate: bool, nagios: bool = False, prometheus: Path | None = None) -> None:
    """Every output of one run: stdout, the JUnit file, GitHub's summary and annotations,
    the report files, the node_exporter textfile."""
    from gpu_audit.report import github
    from gpu_audit.report.check_document import check_document
    from gpu_audit.serial import dumps, write_atomic

    if prometheus is not None:  # first: a file that cannot be written exits 3 before any verdict
        from gpu_audit.cli.monitoring import elapsed_s
        from gpu_audit.report.prometheus import render_check_textfile, write_textfile

        write_textfile(prometheus, render_check_textfile(report, duration_s=elapsed_s()))
    document = check_document(report)
    if json_out:
        sys.stdout.write(dumps(document) + "\n")
    elif nagios:
        from gpu_audit.report.nagios import render_check_nagios

        sys.stdout.write(render_check_nagios(report))
    else:
        from gpu_audit.report.check_terminal import render_check
        from gpu_audit.report.terminal import make_console

        render_check(report, make_console(), verbose=bool(verbose()))
    sys.stdout.flush()

    if github.in_github_actions() and annotate:
        # The runner reads workflow commands from stderr as well as stdout; stderr keeps stdout
        # pure data (JSON, or the checklist whose first line monitoring wrappers parse).
        for line in github.annotations(report):
            print(line, file=sys.stderr)
    summary_path = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_path:
        from pathlib import Path

        try:
            github.append_step_summary(Path(summary_path), github.step_summary(report))
        except (OSError, InputError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            err(f"cannot append to GITHUB_STEP_SUMMARY ({summary_path}): {reason}")

    if not no_report:
        from gpu_audit.report.files import write_report

        write_report("check", report.generated_at, report.hostname, document,
                     github.render_check_markdown(report), out, keep=report.policy.keep_reports)

    if junit is not None:
        from gpu_audit.report.junit import render_junit

        try:
            write_atomic(junit, render_junit(report))
        except OSError as exc:
            raise UsageError(f"--junit: cannot write {junit}: {exc.strerror or exc}") from None
        print(f"junit: {junit}", file=sys.stderr)
