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

from gpu_audit import __version__
from gpu_audit.fleet.judge import FleetReport
from gpu_audit.fleet.nodes import Node
from gpu_audit.redact import redact_text
from gpu_audit.serial import to_jsonable

FLEET_SCHEMA = "gpu-audit.fleet/1"


def node_entry(node: Node) -> dict[str, Any]:
    return {
        "name": node.name,
        "source": node.source,
        "status": node.status,
        "exit_code": node.exit_code,
        "reason": redact_text(node.reason) if node.reason else None,
        "schema": node.schema,
        "hostname": node.hostname,
        "generated_at": node.generated_at,
        "tool_version": node.tool_version,
        "driver_version": node.driver_version,
        "cuda_driver_version": node.cuda_driver_version,
        "torch_version": node.torch_version,
        "gpu_count": len(node.gpus) if node.answered else None,
        "gpu_uuids": sorted(node.uuids),
        "worst_findings": node.worst,
        "duplicate_of": node.duplicate_of,
    }


def expected_entry(report: FleetReport) -> dict[str, Any] | None:
    told = report.expectation
    if told is None:
        return None
    return {"count": told.expected, "found": told.found, "missing_count": told.missing_count,
            "missing": told.missing, "sources": list(told.sources)}


def fleet_document(report: FleetReport) -> dict[str, Any]:
    return {
        "schema": FLEET_SCHEMA,
        "tool_version": __version__,
        "generated_at": report.generated_at,
        "source": report.source,
        "command": report.command,
        "status": report.status,
        "exit_code": report.exit_code,
        "summary": report.counts(),
        "duration_s": report.duration_s,
        "nodes": [node_entry(n) for n in report.nodes],
        "findings": to_jsonable(report.findings),
        "expected": expected_entry(report),
    }
