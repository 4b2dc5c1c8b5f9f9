"""The fleet judgement: de-duplicate the nodes, run the fleet rules, give the fleet's verdict.

Exit code (monitoring-plugin convention, like one node's): the worst node's verdict, 2 (CRITICAL)
when any node is unfit; else 3 (UNKNOWN) when any node gave no verdict or an expected node sent no
document (``--expect``, :mod:`.expect`); else 1 (WARNING) when a node warns; else 0. So a fleet
with silent or missing nodes never passes as OK. The fleet rules' findings (skew, outliers,
duplicates) are reported beside the verdict and do not move it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.fleet.expect import Expectation, Expected, expectation
from gpu_audit.fleet.nodes import STATUSES, Node
from gpu_audit.fleet.registry import FleetView, evaluate_fleet
from gpu_audit.model import Finding
from gpu_audit.units import utc_now


@dataclass
class FleetReport:
    nodes: list[Node]
    findings: list[Finding]
    status: str
    source: str  # "ray" or "merge"
    command: str | None  # "scan", "check", or None when mixed
    generated_at: str = field(default_factory=utc_now)
    duration_s: float | None = None
    expectation: Expectation | None = None  # whom the merge was told to expect, who is missing

    @property
    def missing(self) -> int:
        """Expected nodes that sent no document (0 when nobody was expected)."""
        return self.expectation.missing_count if self.expectation else 0

    @property
    def exit_code(self) -> int:
        return STATUSES.index(self.status)

    @property
    def counted(self) -> list[Node]:
        return [n for n in self.nodes if n.duplicate_of is None]

    def counts(self) -> dict[str, int]:
        by_status = Counter(n.status for n in self.counted)
        return {"nodes": len(self.counted), "ok": by_status["OK"],
                "warning": by_status["WARNING"], "critical": by_status["CRITICAL"],
                "unknown": by_status["UNKNOWN"],
                "duplicates": sum(1 for n in self.nodes if n.duplicate_of is not None)}


def find_duplicates(nodes: list[Node]) -> list[tuple[Node, Node]]:
    """(duplicate, kept) for every document that describes a machine another one describes.

    Same machine: a GPU UUID in common, or, for nodes without GPUs, the same hostname and
    boot time. The kept document is the one with the most GPUs, then the newest.
    """
    answered = [n for n in nodes if n.answered]
    parent = list(range(len(answered)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_seen: dict[Any, int] = {}
    for i, node in enumerate(answered):
        keys: list[Any] = list(node.uuids)
        if not keys and node.hostname and node.boot_time:
            keys = [("host", node.hostname, node.boot_time)]
        for key in keys:
            j = first_seen.setdefault(key, i)
            parent[find(i)] = find(j)
    groups: dict[int, list[Node]] = {}
    for i, node in enumerate(answered):
        groups.setdefault(find(i), []).append(node)
    pairs = []
    for members in groups.values():
        if len(members) < 2:
            continue
        kept = max(members, key=lambda n: (len(n.gpus), n.generated_at or ""))
        pairs += [(node, kept) for node in members if node is not kept]
    return pairs


def unique_names(nodes: list[Node]) -> None:
    """Give nodes that share a name (several pods of one host name, one host scanned by two
    commands) their source as a suffix, so every node of the report is addressable."""
    counts = Counter(n.name for n in nodes)
    for node in nodes:
        if counts[node.name] > 1:
            short = node.source.rsplit("/", 1)[-1]
            node.name = f"{node.name} [{short}]"


def fleet_status(nodes: list[Node], missing: int = 0) -> str:
    counted = [n for n in nodes if n.duplicate_of is None]
    statuses = {n.status for n in counted}
    if "CRITICAL" in statuses:
        return "CRITICAL"
    if "UNKNOWN" in statuses or not counted or missing:
        return "UNKNOWN"
    return "WARNING" if "WARNING" in statuses else "OK"


def present_hosts(nodes: list[Node]) -> list[str]:
    """The host names the counted nodes answer to (a node's document, or a silent Ray node)."""
    return [n.hostname or n.name for n in nodes if n.duplicate_of is None]


def judge_fleet(nodes: list[Node], *, source: str, ignore: frozenset[str] = frozenset(),
                duration_s: float | None = None, expected: Expected | None = None) -> FleetReport:
    """The fleet's report over ``nodes`` (modified in place: names, duplicates); ``expected``:
    whom the merge was told to expect."""
    pairs = find_duplicates(nodes)
    duplicates = {id(dup) for dup, _ in pairs}
    unique_names([n for n in nodes if id(n) not in duplicates])
    for dup, kept in pairs:
        dup.name = f"{dup.name} [{dup.source.rsplit('/', 1)[-1]}]"
        dup.duplicate_of = kept.name
    counted = [n for n in nodes if n.duplicate_of is None]
    told = None if expected is None else expectation(expected, present_hosts(nodes),
                                                     len(counted))
    findings = evaluate_fleet(FleetView(nodes, told), ignore)
    kinds = {n.kind for n in nodes if n.kind}
    return FleetReport(nodes=nodes, findings=findings,
                       status=fleet_status(nodes, told.missing_count if told else 0),
                       source=source, command=kinds.pop() if len(kinds) == 1 else None,
                       duration_s=duration_s, expectation=told)
