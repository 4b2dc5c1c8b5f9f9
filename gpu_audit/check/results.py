"""What ``gpu-audit check`` produces: one result per check (and per GPU), and the verdict.

The verdict follows the monitoring-plugin convention (see DESIGN): any failed check is CRITICAL
(exit 2); otherwise a check that could not be judged makes the run UNKNOWN (exit 3), because a
runner whose state is unknown must not pass as fit; otherwise a warning is WARNING (exit 1);
otherwise OK (exit 0). This is the order Nagios and Icinga use when they combine states.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpu_audit.config import CheckPolicy
from gpu_audit.model import Finding, Scan
from gpu_audit.units import plural


class CheckStatus(enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"  # not configured, not applicable, or ignored by the policy
    UNKNOWN = "unknown"  # the reading the check needs is missing; it could not be judged


class Verdict(enum.Enum):
    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3

    @property
    def exit_code(self) -> int:
        return self.value


@dataclass(frozen=True)
class CheckResult:
    """One line of the checklist: what was checked, on what, the outcome and why."""

    id: str  # stable kebab-case check id, or the finding id for scan findings
    subject: str  # "host", "gpu:N", "pid:N", "env", "stage:NAME"
    status: CheckStatus
    title: str  # what the check is about: "GPU memory free"
    summary: str  # the outcome in one line, with the numbers: "3.1 GiB of 4.0 GiB free (77%)"
    evidence: dict[str, Any] = field(default_factory=dict)
    remedy: str | None = None  # for warn/fail: what to paste or do
    finding_id: str | None = None  # the scan finding this result judges, if any
    duration_s: float | None = None


class StageOutcome(msgspec.Struct, frozen=True):
    """How one validation stage (``imports``, ``smoke``) went, as the check judges it."""

    name: str
    status: str  # "passed", "failed" (the runner is unfit), "skipped" (an earlier stage failed),
    # or "error" (gpu-audit could not run the stage: the result is unknown, not a failure)
    summary: str
    duration_s: float | None = None
    device: str | None = None
    evidence: dict[str, Any] = msgspec.field(default_factory=dict)
    remedy: str | None = None


@dataclass(frozen=True)
class CheckReport:
    """Everything one ``check`` run decided, for the renderers."""

    scan: Scan
    policy: CheckPolicy
    results: list[CheckResult]
    findings: list[Finding]  # every scan finding, before the policy mapped them
    user: str | None  # whose processes count as "own"
    generated_at: str
    tool_version: str
    stages: list[StageOutcome] = field(default_factory=list)  # validation stages run
    duration_s: float | None = None

    @property
    def hostname(self) -> str:
        return self.scan.host.hostname

    @property
    def verdict(self) -> Verdict:
        return verdict(self.results)

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def counts(self) -> dict[str, int]:
        return {status.value: sum(r.status is status for r in self.results)
                for status in CheckStatus}

    def by_status(self, *statuses: CheckStatus) -> list[CheckResult]:
        return [r for r in self.results if r.status in statuses]


def verdict(results: list[CheckResult]) -> Verdict:
    statuses = {r.status for r in results}
    if CheckStatus.FAIL in statuses:
        return Verdict.CRITICAL
    if CheckStatus.UNKNOWN in statuses:
        return Verdict.UNKNOWN
    if CheckStatus.WARN in statuses:
        return Verdict.WARNING
    return Verdict.OK


def verdict_line(report: CheckReport) -> str:
    """The monitoring-plugin status line: ``CHECK CRITICAL: ... | perfdata``.

    Nagios, Icinga and Slurm health-check wrappers read the first line of output; the perfdata
    after ``|`` lets them graph the counts.
    """
    return f"CHECK {report.verdict.name}: {verdict_summary(report)} | {verdict_perfdata(report)}"


def verdict_summary(report: CheckReport) -> str:
    """The status line's text: the checks that did not pass (four at most), or how many did."""
    problems = report.by_status(CheckStatus.FAIL, CheckStatus.UNKNOWN, CheckStatus.WARN)
    if problems:
        named = ", ".join(f"{r.id} ({r.subject})" if r.subject != "host" else r.id
                          for r in problems[:4])
        more = f" and {len(problems) - 4} more" if len(problems) > 4 else ""
        return f"{named}{more} on {report.hostname}"
    ran = report.counts()["pass"]
    return f"{plural(ran, 'check')} passed on {report.hostname}"


def verdict_perfdata(report: CheckReport) -> str:
    """The status line's performance data: how many checks ended in each status."""
    counts = report.counts()
    return " ".join(f"{name}={counts[name]};;;0" for name in PERFDATA_ORDER)


PERFDATA_ORDER = ("fail", "unknown", "warn", "pass", "skip")  # statuses, worst first
