"""The typed decoding of node documents gives the same node as the general one, or declines."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest

from gpu_audit.fleet.facts import node_from_bytes
from gpu_audit.fleet.nodes import node_from_document
from tests.fleet.synth import node_document


def _both(document: Any) -> tuple[Any, Any]:
    data = json.dumps(document).encode()
    fast = node_from_bytes(data, "n.json")
    return (asdict(fast) if fast else None), asdict(node_from_document(json.loads(data), "n.json"))


@pytest.mark.parametrize("document", [
    node_document(1),
    node_document(2, schema="gpu-audit.scan/1", status="CRITICAL"),
    node_document(3, status="WARNING", gpus=0),
    node_document(4, gpu_changes={0: {"temperature_c": "hot", "uuid": ""}}),
    {"schema": "gpu-audit.fleet/1", "nodes": []},
])
def test_typed_decoding_gives_the_same_node(document: dict[str, Any]) -> None:
    fast, slow = _both(document)
    assert fast == slow


@pytest.mark.parametrize("change", [
    {0: {"temperature_c": {"deep": 1}}},  # an object where a reading belongs
    {0: {"power_draw_w": 10**19}},  # past int64
    {0: {"uuid": None, "name": None}},  # no identity once the index is taken away (below)
    {0: {"mig_devices": [{}] * 65}},  # more MIG devices than a GPU has
])
def test_odd_documents_are_left_to_the_general_judgement(change: dict[int, Any]) -> None:
    document = node_document(5, gpu_changes=change)
    if change[0].get("uuid", "") is None:
        document["snapshot"]["gpus"][0]["index"] = "0"
    fast, slow = _both(document)
    assert fast is None and slow["name"]
