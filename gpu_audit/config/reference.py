"""The settings reference page and the JSON Schema of ``gpu-audit.toml``, generated from
:mod:`gpu_audit.config.schema`.

Regenerate both after changing a key::

    python -m gpu_audit.config.reference

(``tests/config/test_reference.py`` fails while either file is stale.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpu_audit.config.schema import (
    CHECK,
    MAX_NUMBER,
    ROOT,
    SETTINGS,
    TABLE_TITLES,
    TABLES,
    VALIDATE,
    Setting,
    shown_number,
    table,
)

MARKDOWN_PATH = Path("docs/settings.md")
JSON_SCHEMA_PATH = Path("docs/schemas/gpu-audit.toml.schema.json")
SCHEMA_ID = "https://gpu-audit.invalid/schemas/gpu-audit.toml.schema.json"

_TYPE_WORDS = {float: "number", int: "integer", str: "string", bool: "boolean",
               list: "list of strings", dict: "table of strings"}
_INTRO = {
    ROOT: "The thresholds the scan rules read, the severity that fails and the ids left out. "
          "Also the top level of `gpu-audit.toml`.",
    CHECK: "What only `gpu-audit check` reads; it may also set any `[tool.gpu-audit]` key again "
           "for check alone (its `ignore` ids add to the top level's). `[check]` in "
           "`gpu-audit.toml`, or the top level of a file named by `check --policy`.",
    VALIDATE: "The plan of `gpu-audit validate`; its flags override these. `[validate]` in "
              "`gpu-audit.toml`. The variables carry the table's name, `GPU_AUDIT_VALIDATE_<KEY>` "
              "(`GPU_AUDIT_STAGES` already names check's stages), and lie between the file and "
              "the flags; lists are comma-separated. The tables and the command have none: they "
              "have no one-line form.",
}


def _type_word(item: Setting) -> str:
    if item.format == "int-list":
        return "integer or list of integers"
    if item.format == "size":
        return "string or integer (bytes)"
    word = _TYPE_WORDS[item.type]
    return f"{word}, optional" if item.optional else word


def _bounded(item: Setting) -> bool:
    """Whether the key's range is its declaration's: the policy tables' numbers always are
    (at least 0, at most MAX_NUMBER unless declared); validate's where it declares one."""
    return item.table != VALIDATE or item.low is not None or item.high is not None


def _range(item: Setting) -> str:
    parts = []
    if item.choices:
        parts.append(" \\| ".join(f"`{c}`" for c in item.choices))
    if item.type in (int, float) and _bounded(item):
        low = "0" if item.low is None else shown_number(item.low)
        high = shown_number(item.high if item.high is not None else MAX_NUMBER)
        parts.append(f"{'>' if item.low_open else '≥'} {low}, ≤ {high}")
    elif item.type in (int, float):
        parts.append("checked when the plan is built")
    if item.format in ("regex", "version"):
        parts.append({"regex": "regular expression", "version": "dotted version"}[item.format])
    return "; ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown() -> str:
    """``docs/settings.md``."""
    lines = [
        "# Settings",
        "",
        "<!-- Generated from gpu_audit/config/schema.py by "
        "`python -m gpu_audit.config.reference`; do not edit. -->",
        "",
        "Every key gpu-audit reads from a configuration file. The file is the nearest "
        "`gpu-audit.toml`, or `pyproject.toml` with a `[tool.gpu-audit]` table, found by walking "
        "up from the current folder (`--config FILE` names one). Precedence: flag > "
        "`GPU_AUDIT_<KEY>` environment variable > file > default. A bad value is an error "
        "naming the file, line and key (exit 3).",
        "",
        "JSON Schema of `gpu-audit.toml` (for editors): "
        "[schemas/gpu-audit.toml.schema.json](schemas/gpu-audit.toml.schema.json).",
        "",
    ]
    for name in TABLES:
        lines += [f"## {TABLE_TITLES[name]}", "", _INTRO[name], "",
                  "| key | type | default | unit | allowed | variable / flag | read by | "
                  "meaning |",
                  "|---|---|---|---|---|---|---|---|"]
        for item in table(name).values():
            setters = [f"`{item.env_name}`"] if item.env_name else []
            if item.flag:
                setters.append(f"`{item.flag}`")
            lines.append(
                f"| `{item.key}` | {_type_word(item)} | `{_cell(item.shown_default)}` | "
                f"{item.unit} | {_range(item)} | {', '.join(setters)} | "
                f"{', '.join(item.commands)} | {_cell(item.help)} |")
        lines.append("")
    return "\n".join(lines)


def _property(item: Setting) -> dict[str, Any]:
    kinds = {float: "number", int: "integer", str: "string", bool: "boolean"}
    prop: dict[str, Any]
    if item.format == "int-list":
        prop = {"oneOf": [{"type": "integer"},
                          {"type": "array", "items": {"type": "integer"}, "minItems": 1}]}
    elif item.format == "size":
        prop = {"type": ["string", "integer"]}
    elif item.type is list:
        items: dict[str, Any] = {"type": "string"}
        if item.choices:
            items["enum"] = list(item.choices)
        prop = {"type": "array", "items": items}
    elif item.type is dict:
        prop = {"type": "object", "additionalProperties": {"type": "string"}}
    else:
        prop = {"type": kinds[item.type]}
        if item.choices and "cuda:N" in item.choices:  # a device: cuda:N is any index
            prop["pattern"] = "^(auto|cpu|cuda(:[0-9]+)?)$"
        elif item.choices:
            prop["enum"] = list(item.choices)
    if item.type in (int, float) and _bounded(item):
        low = 0.0 if item.low is None else item.low
        prop["exclusiveMinimum" if item.low_open else "minimum"] = low
        prop["maximum"] = item.high if item.high is not None else MAX_NUMBER
    prop["description"] = item.help + (f" ({item.unit})" if item.unit else "")
    if item.default is not None and not (isinstance(item.default, list) and not item.default):
        prop["default"] = item.default
    return prop


def _table_schema(name: str, sub_tables: dict[str, Any] | None = None) -> dict[str, Any]:
    props = {item.key: _property(item) for item in table(name).values()}
    props.update(sub_tables or {})
    return {"type": "object", "description": TABLE_TITLES[name], "properties": props,
            "additionalProperties": False}


def render_json_schema() -> str:
    """``docs/schemas/gpu-audit.toml.schema.json``."""
    settings = _table_schema(ROOT, {"check": {"$ref": "#/$defs/check"},
                                    "validate": {"$ref": "#/$defs/validate"}})
    document = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "gpu-audit.toml",
        "description": "Generated from gpu_audit/config/schema.py by "
                       "`python -m gpu_audit.config.reference`; see docs/settings.md. The "
                       "settings sit at the top level, or all inside [tool.gpu-audit].",
        "$defs": {"settings": settings, "check": _table_schema(CHECK),
                  "validate": _table_schema(VALIDATE)},
        "oneOf": [
            {"$ref": "#/$defs/settings"},
            {"type": "object", "required": ["tool"], "additionalProperties": False,
             "properties": {"tool": {
                 "type": "object", "additionalProperties": False, "required": ["gpu-audit"],
                 "properties": {"gpu-audit": {"$ref": "#/$defs/settings"}}}}},
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def outputs() -> dict[Path, str]:
    """Each generated file (relative to the repository root) and its current text."""
    return {MARKDOWN_PATH: render_markdown(), JSON_SCHEMA_PATH: render_json_schema()}


def main(root: Path | None = None) -> int:
    root = root or Path.cwd()
    for path, text in outputs().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["SETTINGS", "outputs", "render_json_schema", "render_markdown"]
