"""The scan findings no other check views, judged by severity; and the validation stages.

``scan-findings`` turns every remaining finding at or above ``warn_on`` into a line of its own;
``stage-imports`` and ``stage-smoke`` report the live stages when they ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from gpu_audit.check.registry import (
    FAIL,
    PASS,
    SKIP,
    UNKNOWN,
    WARN,
    CheckContext,
    check,
    result,
    viewed_findings,
)
from gpu_audit.check.results import CheckResult, CheckStatus
from gpu_audit.config import CheckPolicy
from gpu_audit.model import Severity


def severity_status(policy: CheckPolicy, severity: Severity | None) -> CheckStatus:
    """A finding no check views: FAIL at or above ``fail_on``, WARN at or above ``warn_on``,
    otherwise PASS (listed in the JSON document only)."""
    severity = severity or Severity.INFO
    if severity >= policy.fail_on_severity:
        return FAIL
    if severity >= policy.warn_on_severity:
        return WARN
    return PASS


@check("scan-findings", "Other scan findings")
def scan_findings(ctx: CheckContext) -> Iterator[CheckResult]:
    """Every other scan finding, judged by severity: `fail_on` ("error") and `warn_on` ("warning").

    A finding at or above `fail_on` fails the check, one at or above `warn_on` warns, and one
    below is only listed in the JSON document. Findings that a check above views (the driver,
    free memory, persistence mode, swap, duplicate servers, unattributed memory, the torch build)
    are not repeated.

    Why it matters: a runner with a failing GPU, a hot card or a broken allocator setting passes
    the named checks yet still ruins the job; this check keeps every scan finding in the verdict.

    Example: `PASS scan-findings host no other finding at or above warning`; a finding above it
    becomes its own line, e.g. `FAIL xid-events gpu:1 GPU 1 (...): 3 Xid events since boot: 13, 79`.

    Fix: each line carries its finding's remedy (`gpu-audit rules ID` explains it). List finding
    ids in `ignore` to drop the ones that do not matter on this runner (`gpu-audit rules` lists
    every id).
    """
    fail_on, warn_on = ctx.policy.fail_on_severity, ctx.policy.warn_on_severity
    viewed = viewed_findings()
    below: list[str] = []
    emitted = False
    for finding in ctx.findings:
        if finding.id in viewed or finding.id in ctx.policy.ignore:
            continue
        status = severity_status(ctx.policy, finding.severity)
        if status is PASS:
            below.append(finding.id)
            continue
        emitted = True
        severity = finding.severity or Severity.INFO
        yield CheckResult(finding.id, finding.subject, status, finding.title,
                          f"{severity.value}: {finding.detail}", evidence=finding.evidence,
                          remedy=finding.remedy, finding_id=finding.id)
    if not emitted:
        yield result("scan-findings", "host", PASS,
                     f"no other finding at or above {warn_on.value}"
                     + (f" ({len(below)} below: {', '.join(sorted(set(below)))})" if below
                        else ""),
                     evidence={"below_threshold": sorted(set(below)),
                               "warn_on": warn_on.value, "fail_on": fail_on.value})


def _stage_check(ctx: CheckContext, name: str) -> Iterator[CheckResult]:
    stage = ctx.stage(name)
    if stage is None:
        return  # the stage was not asked for
    status = {"passed": PASS, "failed": FAIL, "skipped": SKIP}.get(stage.status, UNKNOWN)
    evidence = {"status": stage.status, "device": stage.device, **stage.evidence}
    outcome = result(f"stage-{name}", f"stage:{name}", status, stage.summary, evidence=evidence,
                     remedy=stage.remedy)
    yield dataclasses.replace(outcome, duration_s=stage.duration_s)


@check("stage-imports", "Validation stage: imports")
def stage_imports(ctx: CheckContext) -> Iterator[CheckResult]:
    """The `imports` validation stage passed (only with `--stages imports` or `stages = [...]`).

    In a child process: torch imports, CUDA initialises, and a small tensor makes a round trip
    through the GPU.

    Why it matters: a failure here means GPU work cannot run on this runner, whatever NVML says;
    the job would die at its first CUDA call.

    Example: `FAIL stage-imports host` with the stage's summary (the import or CUDA error) and its
    evidence.

    Fix: the stage's remedy: reinstall a torch build for this driver, or fix the driver or the
    container's GPU access (`gpu-audit validate --stages imports` shows the detail).
    """
    yield from _stage_check(ctx, "imports")


@check("stage-smoke", "Validation stage: smoke")
def stage_smoke(ctx: CheckContext) -> Iterator[CheckResult]:
    """The `smoke` validation stage passed (only with `--stages smoke` or `stages = [...]`).

    Three short cycles of the workload on the GPU. It runs only when `imports` passed; otherwise
    it is reported as skipped.

    Why it matters: a workload that fails in three cycles (out of memory, a device assert, a
    missing kernel) fails the real job minutes or hours in, after the queue wait.

    Example: `FAIL stage-smoke host` with the stage's summary, such as an out-of-memory error at a
    given step.

    Fix: the stage's remedy: fix the workload or its memory settings, or route the job to a runner
    that fits it; `gpu-audit validate --stages smoke` reproduces it with details.
    """
    yield from _stage_check(ctx, "smoke")
