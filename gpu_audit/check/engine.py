"""From a scan and a check policy to a :class:`CheckReport` (pure: no I/O)."""

from __future__ import annotations

from gpu_audit.check.registry import SKIP, CheckContext, all_checks, ignored_by_policy
from gpu_audit.check.results import CheckReport, CheckResult, StageOutcome
from gpu_audit.config import CheckPolicy
from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Finding, Scan
from gpu_audit.rules import all_rules, evaluate


def known_ids() -> set[str]:
    """Every id ``ignore`` may name: the finding catalogue's (scan, check, validate, diag,
    fleet, diff and explain ids, deprecated ones included: they are redirected)."""
    return set(catalogue.CATALOGUE)


def every_id() -> set[str]:
    """Every id ``[tool.gpu-audit]``'s ``ignore`` may name (the same catalogue)."""
    return known_ids()


def run_checks(ctx: CheckContext) -> list[CheckResult]:
    """Every check in checklist order; checks the policy ignores become one ``skip`` line.

    Ignoring the one finding a check views also skips that check (``swap-pressure`` skips
    ``swap``); a check viewing several findings (``torch-cuda``), or one that judges other facts
    too (``gpu-count``, which counts the GPUs beside viewing ``gpu-lost``; ``free-vram`` and
    ``nvidia-driver``), runs on without the ignored one and decides itself what is left to judge.
    """
    ignored = set(ctx.policy.ignore)
    results: list[CheckResult] = []
    for spec in all_checks().values():
        missing = [f for f in spec.views if ctx.rule_ids and f not in ctx.rule_ids]
        only_view = len(spec.views) == 1 and not spec.judges_more
        if spec.id in ignored or (only_view and spec.views[0] in ignored):
            results.append(ignored_by_policy(spec.id, ctx.policy))
        elif missing:
            results.append(CheckResult(spec.id, "host", SKIP, spec.title,
                                       f"the {missing[0]} rule is not available"))
        else:
            results.extend(spec.func(ctx))
    return results


def judge(
    scan: Scan,
    policy: CheckPolicy,
    *,
    user: str | None = None,
    stages: list[StageOutcome] | None = None,
    generated_at: str | None = None,
    duration_s: float | None = None,
    findings: list[Finding] | None = None,
) -> CheckReport:
    """Evaluate the scan rules under ``policy`` and every check; the report carries the verdict
    and exit code. The rules and the checks read the same policy, so a check that views a
    finding agrees with it by construction. ``findings`` given are used instead of evaluating
    the rules on ``scan`` (``check --gpus``: judged on the whole machine, then limited)."""
    if findings is None:
        findings = evaluate(scan, policy)
    ctx = CheckContext(
        scan=scan,
        policy=policy,
        findings=findings,
        user=user,
        rule_ids=frozenset(all_rules()),
        stages=list(stages or []),
    )
    return CheckReport(
        scan=scan,
        policy=policy,
        results=run_checks(ctx),
        findings=findings,
        user=user,
        generated_at=generated_at or scan.generated_at,
        tool_version=scan.tool_version,
        stages=list(stages or []),
        duration_s=duration_s,
    )
