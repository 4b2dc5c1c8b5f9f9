"""``gpu-audit fleet scan|check``: the same scan or check on every node of a Ray cluster, judged
as one fleet. Ray (``pip install 'gpu-audit[ray]'``) is imported by this command only."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import typer

from gpu_audit.cli.app import app
from gpu_audit.cli.merge import EXIT_CODES_HELP, emit

fleet_app = typer.Typer(
    help="Scan or check every node of a Ray cluster and judge the fleet (needs Ray: the "
         "gpu-audit extra named ray).",
    no_args_is_help=True,
)
app.add_typer(fleet_app, name="fleet")

ADDRESS_HELP = ("Ray cluster address, HOST:PORT of the head's GCS (default: RAY_ADDRESS, else "
                "the cluster this machine belongs to).")


def node_document(command: str, policy: Any, nvml_timeout_s: float) -> dict[str, Any]:
    """Runs on each node, in the Ray worker: the document ``gpu-audit scan|check --json``
    would print there, under the policy the fleet command loaded."""
    from gpu_audit.collect import collect_scan

    scan = collect_scan(timeout_s=nvml_timeout_s)
    if command == "scan":
        from gpu_audit.report.jsonout import scan_document
        from gpu_audit.rules import evaluate, exit_code

        findings = evaluate(scan, policy)
        return scan_document(scan, findings, exit_code(findings, policy.fail_on_severity))
    from gpu_audit.check.document import check_document
    from gpu_audit.check.engine import judge
    from gpu_audit.cli.check import current_user

    return check_document(judge(scan, policy, user=current_user()))


def _run(command: str, *, address: str | None, policy_file: Path | None, timeout: float,
         json_out: bool, out: Path | None, no_report: bool) -> None:
    from gpu_audit.collect import ray_fanout

    ray_fanout.import_ray()  # a plain "install it" before any other work
    if command == "scan":
        from gpu_audit.config import load_policy

        policy = load_policy(policy_file)
    else:
        from gpu_audit.config import load_check_policy
        from gpu_audit.knowledge.findings import ignorable

        policy = load_check_policy(policy_file, known_ids=ignorable())
    from gpu_audit.fleet.judge import judge_fleet
    from gpu_audit.fleet.nodes import node_from_document, unanswered

    started = time.perf_counter()
    target = ray_fanout.resolve_address(address)
    ray = ray_fanout.connect(target, timeout_s=timeout)
    try:
        left = max(1.0, timeout - (time.perf_counter() - started))
        answers = ray_fanout.fan_out(ray, node_document,
                                     (command, policy, min(5.0, left / 2)), left,
                                     name=f"gpu-audit-fleet-{command}")
    finally:
        ray_fanout.disconnect(ray)
    nodes = []
    for a in answers:
        source = f"ray:{a.node_id[:12]}@{a.address}"
        if a.document is None:
            nodes.append(unanswered(a.hostname or a.address, source, a.reason or "no answer"))
        else:
            nodes.append(node_from_document(a.document, source))
    if not nodes:
        from gpu_audit.errors import UsageError

        raise UsageError(f"the Ray cluster at {target} has no alive node")
    report = judge_fleet(nodes, source="ray",
                         duration_s=round(time.perf_counter() - started, 3))
    emit(report, json_out=json_out, out=out, no_report=no_report, command=f"fleet-{command}",
         keep=policy.keep_reports)
    raise typer.Exit(report.exit_code)


# The options both subcommands take (typer reads each declaration afresh).
ADDRESS = typer.Option(None, "--address", metavar="ADDR", help=ADDRESS_HELP)
TIMEOUT = typer.Option(60.0, "--timeout", min=1.0, metavar="SECONDS",
                       help="Wall-clock limit for connecting and the whole fan-out.")
JSON_OUT = typer.Option(False, "--json", help="Print the fleet report as JSON (gpu-audit.fleet/1).")
OUT = typer.Option(None, "--out", metavar="DIR",
                   help="Folder for the report files (default: reports).")
NO_REPORT = typer.Option(False, "--no-report", help="Do not write the report files.")


@fleet_app.command("scan", epilog=EXIT_CODES_HELP)
def fleet_scan(
    address: str | None = ADDRESS,
    policy_file: Path | None = typer.Option(
        None, "--policy", metavar="FILE",
        help="Thresholds TOML for every node (default: the nearest gpu-audit.toml or "
             "pyproject.toml here)."),
    timeout: float = TIMEOUT,
    json_out: bool = JSON_OUT,
    out: Path | None = OUT,
    no_report: bool = NO_REPORT,
) -> None:
    """`gpu-audit scan` on every alive node of the Ray cluster, judged as one fleet."""
    _run("scan", address=address, policy_file=policy_file, timeout=timeout, json_out=json_out,
         out=out, no_report=no_report)


@fleet_app.command("check", epilog=EXIT_CODES_HELP)
def fleet_check(
    address: str | None = ADDRESS,
    policy_file: Path | None = typer.Option(
        None, "--policy", metavar="FILE",
        help="Check policy TOML for every node (default: the check table of the nearest "
             "gpu-audit.toml or pyproject.toml here)."),
    timeout: float = TIMEOUT,
    json_out: bool = JSON_OUT,
    out: Path | None = OUT,
    no_report: bool = NO_REPORT,
) -> None:
    """`gpu-audit check` on every alive node of the Ray cluster, judged as one fleet."""
    _run("check", address=address, policy_file=policy_file, timeout=timeout, json_out=json_out,
         out=out, no_report=no_report)
