"""``gpu-audit check --diag LEVEL``: diag run inside the CI checklist, as one stage outcome.

The outcome carries diag's findings; the ``diag`` check (:mod:`gpu_audit.check.diag`) turns
each into a checklist line. The checklist itself is check's, so diag does not judge it again.
Busy GPUs or a bad selection make the outcome an error (the runner's fitness is unknown), not a
crash of the whole checklist.
"""

from __future__ import annotations

from collections.abc import Callable

from gpu_audit.check.results import StageOutcome
from gpu_audit.diag.results import DiagOptions
from gpu_audit.diag.runner import run_diag
from gpu_audit.errors import UsageError
from gpu_audit.model import Scan
from gpu_audit.serial import to_jsonable
from gpu_audit.units import noun, plural


def run_diag_stage(scan: Scan, level: int, gpus: str | None, *,
                   note: Callable[[str], None] = lambda _: None,
                   device: str = "cuda") -> StageOutcome:

    options = DiagOptions(level=level, gpus=gpus, checklist=False, device=device)
    try:
        result = run_diag(options, scan=scan, note=note)
    except UsageError as exc:
        return StageOutcome("diag", "error", f"diag could not run: {exc}",
                            remedy="Free the GPUs (or choose others with --gpus) and run "
                                   "`gpu-audit diag --level 1` to see the tests' figures.")
    judgement = result.judgement
    findings = to_jsonable(judgement.findings)
    code = result.exit_code
    status = {0: "passed", 1: "passed", 2: "failed"}.get(code, "error")
    tested = ", ".join(g.subject.removeprefix("gpu:") for g in result.gpus)
    raised = sum(1 for f in judgement.findings if f.severity and f.severity.rank > 0)
    summary = (f"level {level} on {noun(len({g.index for g in result.gpus}), 'GPU')} {tested}: " +
               ("; ".join(judgement.unknown) if code == 3 and judgement.unknown else
                f"{plural(raised, 'finding')} at warning or above"))
    unusable = judgement.torch_unusable  # no verdict: the remedy is the torch install
    mig = [f.remedy for f in judgement.findings if f.id == "diag-mig-not-tested"]
    remedy = unusable["remedy"] if unusable else (mig[0] if mig and code == 3 else None)
    return StageOutcome("diag", status, summary, duration_s=result.duration_s, device=device,
                        remedy=remedy,
                        evidence={"findings": findings, "unknown": judgement.unknown,
                                  "torch_unusable": unusable,
                                  "level": level, "gpus": sorted({g.index for g in result.gpus}),
                                  "tested": [g.subject for g in result.gpus]})
