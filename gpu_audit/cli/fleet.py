"""``gpu-audit fleet scan|check``: the same scan or check on every node of a Ray cluster, judged
as one fleet. Ray (``pip install 'gpu-audit[ray]'``) is imported by this command only."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpu_audit.cli.declared import NO_REPORT, Option, command, group, out_option
from gpu_audit.cli.merge import EXIT_CODES_HELP, FLEET_JSON, emit

group("fleet", "Scan or check every node of a Ray cluster and judge the fleet (needs Ray: the "
               "gpu-audit extra named ray).")

ADDRESS_HELP = ("Ray cluster address, HOST:PORT of the head's GCS (default: RAY_ADDRESS, else "
                "the cluster this machine belongs to).")


def node_document(command: str, policy_data: dict[str, Any], nvml_timeout_s: float,
                  fleet_version: str) -> dict[str, Any]:
    """Runs on each node, in the Ray worker: the document ``gpu-audit scan|check --json``
    would print there, under the policy the fleet command loaded. The policy travels as plain
    data, and the sender's version with it, so that a node with another gpu-audit says so
    rather than failing to rebuild a class its version declares differently."""
    import msgspec

    from gpu_audit.collect import collect_scan
    from gpu_audit.collect.ray_fanout import same_version
    from gpu_audit.config import CheckPolicy, Policy

    same_version(fleet_version)
    policy = msgspec.convert(policy_data, Policy if command == "scan" else CheckPolicy)
    scan = collect_scan(timeout_s=nvml_timeout_s)
    if command == "scan":
        from gpu_audit.report.jsonout import scan_document
        from gpu_audit.rules import evaluate, exit_code

        findings = evaluate(scan, policy)
        return scan_document(scan, findings, exit_code(findings, policy.fail_on_severity))
    from gpu_audit.check.engine import judge
    from gpu_audit.cli.check import current_user
    from gpu_audit.report.check_document import check_document
    from gpu_audit.serial import to_jsonable

    return to_jsonable(check_document(judge(scan, policy, user=current_user())))


def _run(command: str, *, address: str | None, policy_file: Path | None, timeout: float,
         json_out: bool, out: Path | None, no_report: bool) -> int:
    import msgspec

    from gpu_audit import __version__
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
                                     (command, msgspec.to_builtins(policy),
                                      min(5.0, left / 2), __version__), left,
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
    return report.exit_code


def _options(policy_help: str) -> tuple[Option, ...]:
    """The options of both subcommands; only ``--policy`` is worded for each."""
    return (
        Option("address", "--address", str, metavar="ADDR", help=ADDRESS_HELP),
        Option("policy_file", "--policy", Path, metavar="FILE", help=policy_help),
        Option("timeout", "--timeout", float, 60.0, min=1.0, metavar="SECONDS",
               help="Wall-clock limit for connecting and the whole fan-out."),
        FLEET_JSON,
        out_option("the report files"),
        NO_REPORT,
    )


@command("fleet scan", _options("Thresholds TOML for every node (default: the nearest "
                                "gpu-audit.toml or pyproject.toml here)."), epilog=EXIT_CODES_HELP)
def fleet_scan(**options: Any) -> int:
    """`gpu-audit scan` on every alive node of the Ray cluster, judged as one fleet."""
    return _run("scan", **options)


@command("fleet check", _options("Check policy TOML for every node (default: the check table of "
                                 "the nearest gpu-audit.toml or pyproject.toml here)."),
         epilog=EXIT_CODES_HELP)
def fleet_check(**options: Any) -> int:
    """`gpu-audit check` on every alive node of the Ray cluster, judged as one fleet."""
    return _run("check", **options)
