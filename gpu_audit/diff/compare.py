"""Compare two scans of one machine (``gpu-audit diff``): pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from gpu_audit.config import Policy
from gpu_audit.diff.rules import evaluate_diff
from gpu_audit.diff.view import DiffView
from gpu_audit.errors import InputError
from gpu_audit.model import Finding, GpuProcess, Scan, Severity
from gpu_audit.rules import evaluate, exit_code, worst
from gpu_audit.units import parse_utc


@dataclass(frozen=True)
class DiffReport:
    """What changed between BEFORE and AFTER, and the verdict on it."""

    before: Scan | None
    after: Scan
    job_user: str | None
    appeared: list[GpuProcess]
    left: list[GpuProcess]
    findings: list[Finding]  # the diff's own (job-vram-leak, ecc-errors-increased, ...)
    new_findings: list[Finding]  # scan findings AFTER has and BEFORE had not
    resolved_findings: list[Finding]  # scan findings BEFORE had and AFTER has not
    fail_on: Severity
    notes: list[str] = field(default_factory=list)

    @property
    def judged(self) -> list[Finding]:
        """What the exit code is judged on: the diff's findings and the new scan findings."""
        return [*self.findings, *self.new_findings]

    @property
    def worst(self) -> Severity | None:
        return worst(self.judged)

    @property
    def exit_code(self) -> int:
        return exit_code(self.judged, self.fail_on)


def _key(finding: Finding) -> tuple[str, str]:
    return finding.id, finding.subject


def check_pair(before: Scan, after: Scan, names: tuple[str, str] = ("BEFORE", "AFTER")) -> None:
    """Refuse two documents that are not one machine, before then after (one-line errors)."""
    first, second = names
    if before.host.hostname != after.host.hostname:
        raise InputError(f"{first} is from host {before.host.hostname!r} and {second} from "
                         f"{after.host.hostname!r}: diff compares one machine")
    old, new = parse_utc(before.generated_at), parse_utc(after.generated_at)
    if old is not None and new is not None and new < old:
        raise InputError(f"{second} ({after.generated_at}) is older than {first} "
                         f"({before.generated_at}): give the earlier document first")
    uuids = ({g.uuid for g in before.gpus if g.uuid}, {g.uuid for g in after.gpus if g.uuid})
    if all(uuids) and not (uuids[0] & uuids[1]):
        raise InputError(f"{first} and {second} share no GPU (no common GPU UUID): they describe "
                         "different GPUs, or different --gpus selections")


def _limit_to_after(before: Scan, after: Scan) -> Scan:
    """BEFORE without the GPUs AFTER was not limited to (AFTER taken with ``--gpus``)."""
    selected = after.gpu_selection
    if selected is None or before.gpu_selection == selected:
        return before
    wanted = {g.uuid for g in after.gpus if g.uuid}
    indices = {g.index for g in after.gpus}
    keep = [g for g in before.gpus if (g.uuid in wanted if g.uuid else g.index in indices)]
    kept = {g.index for g in keep}
    return msgspec.structs.replace(before, gpus=keep,
                               processes=[p for p in before.processes if p.gpu_index in kept])


def compare(before: Scan | None, after: Scan, *, policy: Policy | None = None,
            job_user: str | None = None, fail_on: Severity | None = None) -> DiffReport:
    """The diff of two scans of one machine (``before`` may be missing: an epilog whose prolog
    left no record compares nothing and judges the job's leftovers by its user alone)."""
    policy = policy or Policy()
    notes: list[str] = []
    if before is not None:
        check_pair(before, after)
        before = _limit_to_after(before, after)
        if before.host.boot_time and after.host.boot_time and \
                before.host.boot_time != after.host.boot_time:
            notes.append("the machine rebooted between the two scans: counters and the kernel "
                         "log started again")
    else:
        notes.append("no BEFORE document: only the job's user tells its leftovers")
    view = DiffView.of(before, after, job_user,
                       unreleased_min_bytes=policy.unreleased_vram_min_bytes)
    findings = evaluate_diff(view, ignore=frozenset(policy.ignore))
    after_findings = evaluate(after, policy)
    if before is not None:
        before_findings = evaluate(before, policy)
        old = {_key(f) for f in before_findings}
        new = {_key(f) for f in after_findings}
        new_findings = [f for f in after_findings if _key(f) not in old]
        resolved = [f for f in before_findings if _key(f) not in new]
    else:
        new_findings, resolved = [], []
    return DiffReport(before=before, after=after, job_user=job_user,
                      appeared=view.appeared() if before is not None else [],
                      left=view.left(), findings=findings, new_findings=new_findings,
                      resolved_findings=resolved,
                      fail_on=fail_on or policy.fail_on_severity, notes=notes)
