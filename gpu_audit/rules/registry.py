"""The rule registry: the :func:`rule` decorator, the list of rule modules, and evaluation.

A rule takes a :class:`~gpu_audit.model.Scan` and a :class:`~gpu_audit.config.Policy` and
yields :class:`~gpu_audit.model.Finding` objects; the registry stamps each with the rule's id and
default severity (a rule may set a different severity for a finding on purpose).
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpu_audit.config import Policy
from gpu_audit.model import Finding, Scan, Severity

RuleFunc = Callable[[Scan, Policy], Iterator[Finding]]

RULE_MODULES = (
    "gpu_audit.rules.nvml",
    "gpu_audit.rules.host",
    "gpu_audit.rules.gpu",
    "gpu_audit.rules.processes",
    "gpu_audit.rules.allocator_live",
    "gpu_audit.rules.allocator",
    "gpu_audit.rules.environment",
    "gpu_audit.rules.software",
    "gpu_audit.rules.health",
    "gpu_audit.rules.unsupported",
)

_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Rule:
    id: str
    severity: Severity
    func: RuleFunc

    @property
    def summary(self) -> str:
        return self.doc.split("\n", 1)[0].strip()

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "")


_REGISTRY: dict[str, Rule] = {}


def rule(rule_id: str, *, severity: Severity) -> Callable[[RuleFunc], RuleFunc]:
    """Register ``func`` as the rule for ``rule_id``."""
    if not _ID.match(rule_id):
        raise ValueError(f"rule id {rule_id!r} is not kebab-case")

    def register(func: RuleFunc) -> RuleFunc:
        if rule_id in _REGISTRY and _REGISTRY[rule_id].func is not func:
            raise ValueError(f"rule id {rule_id!r} registered twice")
        if not func.__doc__:
            raise ValueError(f"rule {rule_id!r} has no docstring (it is the rule's documentation)")
        _REGISTRY[rule_id] = Rule(rule_id, severity, func)
        return func

    return register


def all_rules() -> dict[str, Rule]:
    for module in RULE_MODULES:
        importlib.import_module(module)
    return dict(sorted(_REGISTRY.items()))


def evaluate(scan: Scan, policy: Policy | None = None) -> list[Finding]:
    """Every finding for ``scan``, worst first, minus the ids the policy ignores."""
    policy = policy or Policy()
    findings: list[Finding] = []
    for rule_obj in all_rules().values():
        if rule_obj.id in policy.ignore:
            continue
        for finding in rule_obj.func(scan, policy):
            findings.append(
                dataclasses.replace(
                    finding, id=rule_obj.id, severity=finding.severity or rule_obj.severity
                )
            )
    findings.sort(key=lambda f: (-(f.severity or Severity.INFO).rank, f.id, f.subject))
    return findings


def worst(findings: list[Finding]) -> Severity | None:
    return max((f.severity for f in findings if f.severity), default=None)


def exit_code(findings: list[Finding], fail_on: Severity) -> int:
    """Monitoring-plugin convention: 0 OK, 1 WARNING, 2 CRITICAL (policy failed)."""
    top = worst(findings)
    if top is None:
        return 0
    if top >= fail_on:
        return 2
    return 1 if top >= Severity.WARNING else 0
