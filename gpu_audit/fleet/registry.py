"""The fleet rule registry: same contract as the scan rules (stable kebab-case id, default
severity, the docstring is the documentation), over a whole fleet instead of one scan."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpu_audit.fleet.nodes import Node
from gpu_audit.model import Finding, Severity
from gpu_audit.rules.registry import _ID, Rule

FLEET_RULE_MODULES = ("gpu_audit.fleet.rules", "gpu_audit.fleet.outliers")
SECTION = "Fleet (fleet and merge)"


@dataclass(frozen=True)
class FleetView:
    """What fleet rules read: every node (``nodes``, duplicates included) and the nodes that
    count (``live``: answered, not a duplicate of another)."""

    nodes: list[Node]

    @property
    def live(self) -> list[Node]:
        return [n for n in self.nodes if n.answered and n.duplicate_of is None]


FleetRuleFunc = Callable[[FleetView], Iterator[Finding]]
_REGISTRY: dict[str, Rule] = {}


def fleet_rule(rule_id: str, *, severity: Severity) -> Callable[[FleetRuleFunc], FleetRuleFunc]:
    """Register ``func`` as the fleet rule for ``rule_id``."""
    if not _ID.match(rule_id) or not rule_id.startswith("fleet-"):
        raise ValueError(f"fleet rule id {rule_id!r} must be kebab-case and start with fleet-")

    def register(func: FleetRuleFunc) -> FleetRuleFunc:
        if rule_id in _REGISTRY and _REGISTRY[rule_id].func is not func:
            raise ValueError(f"fleet rule id {rule_id!r} registered twice")
        if not func.__doc__:
            raise ValueError(f"fleet rule {rule_id!r} has no docstring (it is its documentation)")
        _REGISTRY[rule_id] = Rule(rule_id, severity, func)  # type: ignore[arg-type]
        return func

    return register


def all_fleet_rules() -> dict[str, Rule]:
    for module in FLEET_RULE_MODULES:
        importlib.import_module(module)
    return dict(sorted(_REGISTRY.items()))


def evaluate_fleet(view: FleetView, ignore: frozenset[str] = frozenset()) -> list[Finding]:
    """Every fleet finding, worst first."""
    findings: list[Finding] = []
    for rule_obj in all_fleet_rules().values():
        if rule_obj.id in ignore:
            continue
        for finding in rule_obj.func(view):  # type: ignore[arg-type]
            findings.append(dataclasses.replace(
                finding, id=rule_obj.id, severity=finding.severity or rule_obj.severity))
    findings.sort(key=lambda f: (-(f.severity or Severity.INFO).rank, f.id, f.subject))
    return findings
