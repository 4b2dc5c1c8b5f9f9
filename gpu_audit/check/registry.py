"""The check registry, what every check reads, and the small helpers they share.

A check is a function registered with :func:`check`: an id of the finding catalogue
(:mod:`gpu_audit.knowledge.findings`, which also lists the policy keys it reads), a title, and
the scan findings it *views*. A check that views a finding does not judge the
problem again: the scan rule decides (with the one policy's threshold), and the check maps the
finding, or its absence, to pass/warn/fail by the policy's mode for that check, adding what CI
needs (evidence per GPU, a remedy to paste). Viewed findings are not repeated by
``scan-findings``, and ignoring the one finding a check views skips that check.

The docstring is the check's documentation (first line: the summary), declared into the
catalogue; a check whose id a scan rule documents (``unattributed-vram``) has none. A check
yields one
:class:`~gpu_audit.check.results.CheckResult` for the host, or one per GPU. A check whose
threshold is not configured yields a ``skip``; one whose reading is missing yields ``unknown``
(the runner cannot be shown fit).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gpu_audit.check.results import CheckResult, CheckStatus, StageOutcome
from gpu_audit.config import CheckPolicy
from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Finding, Gpu, GpuProcess, Scan
from gpu_audit.units import fmt_bytes

PASS, WARN, FAIL, SKIP, UNKNOWN = (CheckStatus.PASS, CheckStatus.WARN, CheckStatus.FAIL,
                                   CheckStatus.SKIP, CheckStatus.UNKNOWN)

# Registration order is checklist order: the modules in this order, each in its own order.
CHECK_MODULES = (
    "gpu_audit.check.gpus",
    "gpu_audit.check.usage",
    "gpu_audit.check.software",
    "gpu_audit.check.findings",
    "gpu_audit.check.diag",
)


@dataclass(frozen=True)
class CheckContext:
    """What every check may read. Built once per run; nothing here does I/O."""

    scan: Scan
    policy: CheckPolicy
    findings: list[Finding] = field(default_factory=list)  # the scan rules under ``policy``
    user: str | None = None  # the user running check: their GPU processes are "own"
    rule_ids: frozenset[str] = frozenset()  # scan rules that exist (so "no finding" means "fine")
    stages: list[StageOutcome] = field(default_factory=list)

    def findings_for(self, finding_id: str) -> list[Finding]:
        return [f for f in self.findings if f.id == finding_id]

    def finding_on(self, finding_id: str, subject: str) -> Finding | None:
        """The finding ``finding_id`` about ``subject`` (``gpu:0``), if the rule made one."""
        return next((f for f in self.findings if f.id == finding_id and f.subject == subject),
                    None)

    def stage(self, name: str) -> StageOutcome | None:
        return next((s for s in self.stages if s.name == name), None)


CheckFunc = Callable[[CheckContext], Iterator[CheckResult]]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    func: CheckFunc
    views: tuple[str, ...] = ()  # the scan findings this check maps to its statuses
    # True when the check judges more than its one viewed finding (gpu-count counts the GPUs):
    # ignoring that finding then leaves it out of the check instead of skipping the check.
    judges_more: bool = False

    @property
    def policy_keys(self) -> tuple[str, ...]:
        """The policy keys it reads (the catalogue's settings of its id)."""
        return catalogue.CATALOGUE[self.id].settings


_CHECKS: dict[str, CheckSpec] = {}


def check(check_id: str, title: str, *, views: tuple[str, ...] = (),
          judges_more: bool = False) -> Callable[[CheckFunc], CheckFunc]:
    """Register ``func`` as the check ``check_id`` (a catalogue id); ``views`` names the scan
    findings it maps, ``judges_more`` says it judges other facts too (see
    :attr:`CheckSpec.judges_more`)."""
    spec = catalogue.spec_of(check_id, catalogue.CHECK)

    def register(func: CheckFunc) -> CheckFunc:
        if check_id in _CHECKS and _CHECKS[check_id].func is not func:
            raise ValueError(f"check id {check_id!r} registered twice")
        if func.__doc__:
            catalogue.document(check_id, catalogue.CHECK, func.__doc__)
        elif spec.producer == catalogue.CHECK:
            raise ValueError(f"check {check_id!r} has no docstring (it is its documentation)")
        _CHECKS[check_id] = CheckSpec(check_id, title, func, views, judges_more)
        return func

    return register


def all_checks() -> dict[str, CheckSpec]:
    """Every check, in checklist order."""
    for module in CHECK_MODULES:
        importlib.import_module(module)
    # by module, whichever was imported first (the check document imports check.findings early)
    rank = {module: i for i, module in enumerate(CHECK_MODULES)}
    ordered = sorted(_CHECKS.values(), key=lambda spec: rank[spec.func.__module__])
    return {spec.id: spec for spec in ordered}


def viewed_findings() -> dict[str, str]:
    """Finding id -> the id of the check that views it (read from the registrations)."""
    return {finding_id: spec.id for spec in all_checks().values() for finding_id in spec.views}


# --- helpers for the checks -------------------------------------------------------------------


def result(spec_id: str, subject: str, status: CheckStatus, summary: str, *,
           evidence: dict | None = None, remedy: str | None = None,
           finding_id: str | None = None) -> CheckResult:
    """One result of a registered check; a remedy is kept only where something is wrong."""
    return CheckResult(spec_id, subject, status, _CHECKS[spec_id].title, summary,
                       evidence=evidence or {}, remedy=remedy if status in (WARN, FAIL, UNKNOWN)
                       else None, finding_id=finding_id)


def ignored_by_policy(spec_id: str, policy: CheckPolicy) -> CheckResult:
    """The ``skip`` of a check its policy's ``ignore`` leaves out (by its id, or by the finding
    it views)."""
    return result(spec_id, "host", SKIP, "ignored by the policy",
                  evidence={"ignored_by": policy.source or "policy"})


def not_configured(spec_id: str, key: str) -> CheckResult:
    return result(spec_id, "host", SKIP, f"not configured (set `{key}` in the policy)")


def mode_status(mode: str) -> CheckStatus:
    """What a problem is under a mode key's value: "fail" or "warn" ("ignore" skips earlier)."""
    return FAIL if mode == "fail" else WARN


def ignored_by_mode(spec_id: str, key: str, evidence: dict | None = None) -> CheckResult:
    return result(spec_id, "host", SKIP, f"ignored by the policy ({key} = \"ignore\")",
                  evidence=evidence)


def each_gpu(ctx: CheckContext, spec_id: str,
             judge: Callable[[Gpu], CheckResult]) -> Iterator[CheckResult]:
    """``judge`` for every readable GPU; a lost GPU or no GPU at all is a ``skip`` here (the
    ``gpu-count`` and ``nvidia-driver`` checks already fail for those)."""
    if not ctx.scan.gpus:
        reason = ("no GPU readings (see nvidia-driver)" if not ctx.scan.nvml.available
                  else "no GPU on this host")
        yield result(spec_id, "host", SKIP, reason)
        return
    for gpu in ctx.scan.gpus:
        if gpu.lost:
            yield result(spec_id, f"gpu:{gpu.index}", SKIP, "GPU is lost (see gpu-count)")
        else:
            yield judge(gpu)


def gib_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g} GiB"


def process_brief(p: GpuProcess) -> dict:
    return {"pid": p.pid, "gpu_index": p.gpu_index, "user": p.user, "name": p.name,
            "used_memory_bytes": p.used_memory_bytes, "visible": p.visible,
            "container": p.container, "start_time": p.start_time}


def process_label(p: GpuProcess) -> str:
    who = p.user or ("not visible" if not p.visible else "unknown user")
    return f"{p.pid} ({p.name or '?'}, {who}, GPU {p.gpu_index}, {fmt_bytes(p.used_memory_bytes)})"
