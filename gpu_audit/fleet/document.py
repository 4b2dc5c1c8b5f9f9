"""The fleet JSON document, schema ``gpu-audit.fleet/1``.

``status``/``exit_code`` carry the fleet's verdict; ``summary`` counts the nodes by verdict;
``nodes`` has one entry per document or silent node (duplicates included, marked
``duplicate_of``), each with its own verdict, the reason and its worst findings; ``findings``
are the fleet rules' findings (skew, outliers, unfit, unknown and missing nodes, duplicates);
``expected`` says whom the merge was told to expect and names those that sent no document (null
when it was told nothing).
"""

from __future__ import annotations

from typing import Any

import msgspec

from gpu_audit import __version__
from gpu_audit.fleet.judge import FleetReport
from gpu_audit.fleet.nodes import Node
from gpu_audit.model import Finding
from gpu_audit.redact import redact_text

FLEET_SCHEMA = "gpu-audit.fleet/1"


# The document's keys, declared once: built here, published by gpu_audit.schemas (whose JSON
# Schema docs/schemas/fleet-1.schema.json is generated from these types). Keys print in this
# order.
class FleetNode(msgspec.Struct):
    name: str
    source: str | None
    status: str
    exit_code: int
    reason: str | None
    schema: str | None
    hostname: str | None
    generated_at: str | None
    tool_version: str | None
    driver_version: str | None
    cuda_driver_version: str | None
    torch_version: str | None
    gpu_count: int | None
    gpu_uuids: list[str]
    worst_findings: list[dict[str, Any]]
    duplicate_of: str | None


class FleetExpected(msgspec.Struct):
    """Whom a merge was told to expect (``--expect``, ``--expect-nodes``, ``--expect-ray``)."""

    count: int
    found: int
    missing_count: int
    missing: list[str]  # the expected host names that sent no document
    sources: list[str]


class FleetDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    source: str | None
    command: str | None
    status: str
    exit_code: int
    summary: dict[str, int]
    duration_s: float | None
    nodes: list[FleetNode]
    findings: list[Finding]
    expected: FleetExpected | None = None  # null when the merge was told nobody to expect


def node_entry(node: Node) -> FleetNode:
    return FleetNode(
        name=node.name,
        source=node.source,
        status=node.status,
        exit_code=node.exit_code,
        reason=redact_text(node.reason) if node.reason else None,
        schema=node.schema,
        hostname=node.hostname,
        generated_at=node.generated_at,
        tool_version=node.tool_version,
        driver_version=node.driver_version,
        cuda_driver_version=node.cuda_driver_version,
        torch_version=node.torch_version,
        gpu_count=len(node.gpus) if node.answered else None,
        gpu_uuids=sorted(node.uuids),
        worst_findings=node.worst,
        duplicate_of=node.duplicate_of,
    )


def expected_entry(report: FleetReport) -> FleetExpected | None:
    told = report.expectation
    if told is None:
        return None
    return FleetExpected(count=told.expected, found=told.found,
                         missing_count=told.missing_count, missing=told.missing,
                         sources=list(told.sources))


def fleet_document(report: FleetReport) -> FleetDocument:
    return FleetDocument(
        schema=FLEET_SCHEMA,
        tool_version=__version__,
        generated_at=report.generated_at,
        source=report.source,
        command=report.command,
        status=report.status,
        exit_code=report.exit_code,
        summary=report.counts(),
        duration_s=report.duration_s,
        nodes=[node_entry(n) for n in report.nodes],
        findings=list(report.findings),
        expected=expected_entry(report),
    )
