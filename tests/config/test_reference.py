"""docs/settings.md and the JSON Schema of gpu-audit.toml are generated from the schema; they
must be current. Regenerate: ``python -m gpu_audit.config.reference``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_audit.config import reference, schema

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", sorted(reference.outputs()))
def test_generated_file_is_current(path: Path) -> None:
    current = (ROOT / path).read_text(encoding="utf-8")
    assert current == reference.outputs()[path], \
        f"{path} is stale: run `python -m gpu_audit.config.reference`"


def test_reference_page_lists_every_key_of_every_table() -> None:
    page = reference.render_markdown()
    for name in schema.TABLES:
        assert f"## {schema.TABLE_TITLES[name]}" in page
    for item in schema.SETTINGS:
        assert f"| `{item.key}` |" in page


def test_json_schema_declares_every_key_with_its_default() -> None:
    document = json.loads(reference.render_json_schema())
    tables = {schema.ROOT: document["$defs"]["settings"], schema.CHECK: document["$defs"]["check"],
              schema.VALIDATE: document["$defs"]["validate"]}
    for item in schema.SETTINGS:
        prop = tables[item.table]["properties"][item.key]
        if item.default not in (None, []):
            assert prop["default"] == item.default
    assert document["$defs"]["check"]["properties"]["swap"]["enum"] == list(schema.MODES)


def test_json_schema_accepts_a_valid_file_and_refuses_a_bad_key() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    document = json.loads(reference.render_json_schema())
    good = {"min_free_vram_pct": 20, "check": {"min_gpus": 2, "swap": "warn"},
            "validate": {"cycles": 40, "max_split_size_mb": [128, 512]}}
    jsonschema.validate(good, document)
    jsonschema.validate({"tool": {"gpu-audit": good}}, document)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"min_free_vram_pct": 120}, document)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"check": {"swap": "sometimes"}}, document)
