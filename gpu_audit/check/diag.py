"""The ``diag`` check: ``gpu-audit diag``'s level run inside the checklist (``check --diag 1``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from gpu_audit.check.registry import FAIL, PASS, SKIP, UNKNOWN, WARN, CheckContext, check, result
from gpu_audit.check.results import CheckResult


@check("diag", "Active GPU tests (diag)")
def diag(ctx: CheckContext) -> Iterator[CheckResult]:
    """`gpu-audit diag` passed on every judged GPU (only with `check --diag LEVEL`).

    Level 1 takes seconds: in a child process per GPU, CUDA initialises, a kernel runs, a few
    hundred MiB of a pattern round-trip through the GPU, a matmul agrees with the CPU, and the
    GPUs' peer access is compared with the NVLink NVML reports. Each diag finding becomes a line
    of its own: critical and error findings fail, warnings warn; ids listed in `ignore` are
    dropped. GPUs other processes use are not tested: the check is then unknown (see
    `gpu-audit diag --force`). So it is when the installed torch cannot use a GPU (not installed,
    or a CPU-only build): nothing is known about the GPUs.

    Why it matters: NVML's readings say a GPU is present, not that it computes correctly; a GPU
    that returns wrong results or corrupts memory ruins a long run without an error.

    Example: `FAIL diag-matmul-wrong gpu:1 ...` beside `PASS diag host ...` for the GPUs that
    passed.

    Fix: each failing line carries its diag finding's remedy; where torch cannot use the GPUs,
    the remedy is the install of a CUDA build for this driver.
    """
    stage = ctx.stage("diag")
    if stage is None:
        return
    if stage.status not in ("passed", "failed"):
        status = SKIP if stage.status == "skipped" else UNKNOWN
        yield result("diag", "host", status, stage.summary, evidence=stage.evidence,
                     remedy=stage.remedy)
        return
    emitted = False
    for finding in stage.evidence.get("findings") or []:
        severity = finding.get("severity")
        if finding.get("id") in ctx.policy.ignore:
            continue
        if severity in ("critical", "error"):
            status = FAIL
        elif severity == "warning":
            status = WARN
        else:
            continue
        emitted = True
        yield CheckResult(finding["id"], finding["subject"], status, finding["title"],
                          f"{severity}: {finding['detail']}", evidence=finding.get("evidence")
                          or {}, remedy=finding.get("remedy"), finding_id=finding["id"],
                          duration_s=stage.duration_s)
    if not emitted:
        outcome = result("diag", "host", PASS, stage.summary,
                         evidence={k: v for k, v in stage.evidence.items() if k != "findings"})
        yield dataclasses.replace(outcome, duration_s=stage.duration_s)
