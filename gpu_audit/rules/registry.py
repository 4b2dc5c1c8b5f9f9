"""The rule registry: the :func:`rule` decorator, the list of rule modules, and evaluation.

A rule takes a :class:`~gpu_audit.model.Scan` and a :class:`~gpu_audit.config.Policy` and
yields :class:`~gpu_audit.model.Finding` objects; the registry stamps each with the rule's id and
default severity (a rule may set a different severity for a finding on purpose).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import msgspec

from gpu_audit.config import Policy
from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Finding, Scan, Severity

RuleFunc = Callable[[Scan, Policy], Iterator[Finding]]
F = TypeVar("F", bound=Callable[..., Any])

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
    "gpu_audit.rules.device_state",
    "gpu_audit.rules.unsupported",
)

class Rule(msgspec.Struct, frozen=True):
    id: str
    severity: Severity
    func: Callable[..., Iterable[Finding]]

    @property
    def summary(self) -> str:
        return self.doc.split("\n", 1)[0].strip()

    @property
    def doc(self) -> str:
        import inspect  # here: a scan never reads a rule's documentation

        return inspect.cleandoc(self.func.__doc__ or "")


class Registry:
    """Rules of one producer (the scan's, the fleet's, diff's), registered by importing
    ``modules``: each id, its default severity and its lifecycle are the finding catalogue's
    (:mod:`gpu_audit.knowledge.findings`); the rule's docstring is the id's documentation."""

    def __init__(self, kind: str, producer: str, modules: tuple[str, ...],
                 prefix: str = "") -> None:
        self.kind, self.producer, self.modules, self.prefix = kind, producer, modules, prefix
        self._rules: dict[str, Rule] = {}

    def rule(self, rule_id: str) -> Callable[[F], F]:
        """Register the decorated function as the rule for ``rule_id``, a catalogue id."""
        spec = catalogue.spec_of(rule_id, self.producer)
        if not rule_id.startswith(self.prefix):
            raise ValueError(f"{self.kind} id {rule_id!r} does not start with {self.prefix}")

        def register(func: F) -> F:
            if rule_id in self._rules and self._rules[rule_id].func is not func:
                raise ValueError(f"{self.kind} id {rule_id!r} registered twice")
            if func.__doc__:
                catalogue.document(rule_id, self.producer, func.__doc__)
            elif spec.producer == self.producer:
                raise ValueError(f"{self.kind} {rule_id!r} has no docstring (it is the "
                                 "id's documentation)")
            assert spec.severity is not None  # every rule's id has one in the catalogue
            self._rules[rule_id] = Rule(rule_id, spec.severity, func)
            return func

        return register

    def all(self) -> dict[str, Rule]:
        for module in self.modules:
            importlib.import_module(module)
        return dict(sorted(self._rules.items()))

    def evaluate(self, *args: Any, ignore: Iterable[str] = ()) -> list[Finding]:
        """Every finding of every rule called with ``args``, stamped with the rule's id and
        default severity (a rule may set another on purpose), worst first."""
        skipped = set(ignore)
        findings = [
            msgspec.structs.replace(finding, id=r.id, severity=finding.severity or r.severity)
            for r in self.all().values() if r.id not in skipped
            for finding in r.func(*args)
        ]
        return worst_first(findings)


def worst_first(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (-(f.severity or Severity.INFO).rank, f.id, f.subject))


SCAN_RULES = Registry("rule", catalogue.SCAN, RULE_MODULES)


def rule(rule_id: str) -> Callable[[RuleFunc], RuleFunc]:
    """Register ``func`` as the scan rule for ``rule_id`` (severity: the catalogue's)."""
    return SCAN_RULES.rule(rule_id)


def all_rules() -> dict[str, Rule]:
    return SCAN_RULES.all()


def evaluate(scan: Scan, policy: Policy | None = None) -> list[Finding]:
    """Every finding for ``scan``, worst first, minus the ids the policy ignores."""
    policy = policy or Policy()
    return SCAN_RULES.evaluate(scan, policy, ignore=policy.ignore)


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
