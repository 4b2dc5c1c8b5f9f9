"""Checking a document against its published schema: the committed JSON Schema (with
``jsonschema``, where installed) and its type in :mod:`gpu_audit.schemas`, which must declare
every key the document has, in the order it prints them."""

from __future__ import annotations

import functools
import json
from typing import Any

import msgspec

from gpu_audit.schemas import DOCUMENTS, SCHEMA_DIR, file_name


@functools.cache
def _validator(schema_id: str) -> Any:
    try:
        import jsonschema
    except ImportError:  # not a dependency: the typed round trip below still runs
        return None
    schema = json.loads((SCHEMA_DIR / file_name(schema_id)).read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def assert_document(doc: dict[str, Any]) -> None:
    """``doc`` (parsed JSON) is valid under the schema its ``schema`` key names."""
    schema_id = doc["schema"]
    assert schema_id in DOCUMENTS, f"{schema_id} has no published schema"
    validator = _validator(schema_id)
    if validator is not None:
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    typed = msgspec.convert(doc, DOCUMENTS[schema_id])  # strict: no int for a str, ...
    again = msgspec.json.decode(msgspec.json.encode(typed))
    assert list(again) == list(doc), "the document's type drops or reorders keys"
    assert again == doc
