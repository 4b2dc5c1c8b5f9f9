"""The fleet judgement: many nodes' scan or check documents judged as one fleet.

Pure: documents in (:mod:`.nodes`, read from files by :mod:`.inputs`), the fleet rules
(:mod:`.rules`, :mod:`.outliers`, registered in :mod:`.registry`), the verdict (:mod:`.judge`),
then the JSON document (:mod:`.document`) and the reports for people (:mod:`.render`). Gathering
the documents from a Ray cluster is I/O and lives in :mod:`gpu_audit.collect.ray_fanout`.
"""

from gpu_audit.lazy import exports

_EXPORTS = {
    "FLEET_SCHEMA": "gpu_audit.fleet.document",
    "FleetReport": "gpu_audit.fleet.judge",
    "Node": "gpu_audit.fleet.nodes",
    "all_fleet_rules": "gpu_audit.fleet.registry",
    "fleet_document": "gpu_audit.fleet.document",
    "judge_fleet": "gpu_audit.fleet.judge",
    "node_from_document": "gpu_audit.fleet.nodes",
    "read_nodes": "gpu_audit.fleet.inputs",
    "unanswered": "gpu_audit.fleet.nodes",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = exports(__name__, _EXPORTS, globals())
