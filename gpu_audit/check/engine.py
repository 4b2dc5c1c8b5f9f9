"""From a snapshot and a check policy to a :class:`CheckReport` (pure: no I/O)."""

from __future__ import annotations

import dataclasses

from gpu_audit.check.checks import CheckContext, all_checks, run_checks
from gpu_audit.check.policy import CheckPolicy
from gpu_audit.check.results import CheckReport, StageOutcome
from gpu_audit.config import Policy
from gpu_audit.model import Snapshot
from gpu_audit.rules import all_rules, evaluate


def known_ids() -> set[str]:
    """Every id ``ignore`` may name: scan finding ids and check ids."""
    return set(all_rules()) | set(all_checks())


def scan_policy_for(policy: CheckPolicy, base: Policy | None = None) -> Policy:
    """The scan thresholds the rules see: ``[tool.gpu-audit]`` with the check policy's overrides.

    Where both set the same threshold the check policy wins, so the findings in the check's JSON
    agree with the checks that judged them.
    """
    base = base or Policy()
    overrides: dict = {"fail_on": policy.fail_on,
                       "ignore": sorted(set(base.ignore) | set(policy.ignore))}
    if policy.max_swap_used_gib is not None:
        overrides["max_swap_used_gib"] = policy.max_swap_used_gib
    if policy.min_free_vram_pct is not None:
        overrides["min_free_vram_pct"] = policy.min_free_vram_pct
    return dataclasses.replace(base, **overrides)


def judge(
    snapshot: Snapshot,
    policy: CheckPolicy,
    *,
    base_policy: Policy | None = None,
    user: str | None = None,
    stages: list[StageOutcome] | None = None,
    generated_at: str | None = None,
    duration_s: float | None = None,
) -> CheckReport:
    """Evaluate the scan rules and every check; the report carries the verdict and exit code."""
    findings = evaluate(snapshot, scan_policy_for(policy, base_policy))
    ctx = CheckContext(
        snapshot=snapshot,
        policy=policy,
        findings=findings,
        user=user,
        rule_ids=frozenset(all_rules()),
        stages=list(stages or []),
    )
    return CheckReport(
        snapshot=snapshot,
        policy=policy,
        results=run_checks(ctx),
        findings=findings,
        user=user,
        generated_at=generated_at or snapshot.generated_at,
        tool_version=snapshot.tool_version,
        stages=list(stages or []),
        duration_s=duration_s,
    )
