"""The fleet rule registry: same contract as the scan rules (an id, severity and lifecycle of the
finding catalogue; the docstring is the documentation), over a whole fleet instead of one scan."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpu_audit.fleet.expect import Expectation
from gpu_audit.fleet.nodes import Node
from gpu_audit.knowledge.findings import FLEET
from gpu_audit.model import Finding
from gpu_audit.rules.registry import Registry, Rule

FLEET_RULE_MODULES = ("gpu_audit.fleet.rules", "gpu_audit.fleet.outliers")
SECTION = "Fleet (fleet and merge)"


@dataclass(frozen=True)
class FleetView:
    """What fleet rules read: every node (``nodes``, duplicates included), the nodes that
    count (``live``: answered, not a duplicate of another), and whom the merge was told to
    expect (``expectation``, None when it was not)."""

    nodes: list[Node]
    expectation: Expectation | None = None

    @property
    def live(self) -> list[Node]:
        return [n for n in self.nodes if n.answered and n.duplicate_of is None]


FleetRuleFunc = Callable[[FleetView], Iterator[Finding]]
FLEET_RULES = Registry("fleet rule", FLEET, FLEET_RULE_MODULES, prefix="fleet-")


def fleet_rule(rule_id: str) -> Callable[[FleetRuleFunc], FleetRuleFunc]:
    """Register ``func`` as the fleet rule for ``rule_id`` (which starts with ``fleet-``)."""
    return FLEET_RULES.rule(rule_id)


def all_fleet_rules() -> dict[str, Rule]:
    return FLEET_RULES.all()


def evaluate_fleet(view: FleetView, ignore: frozenset[str] = frozenset()) -> list[Finding]:
    """Every fleet finding, worst first."""
    return FLEET_RULES.evaluate(view, ignore=ignore)
