"""The settings schema is the one declaration of every key: the typed classes, the tables the
loader reads and the variables are checked against it, so a key in one place only fails here."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import msgspec
import pytest

from gpu_audit.config import schema
from gpu_audit.config.check_policy import CheckPolicy
from gpu_audit.config.load import COMMAND_TABLES, load_policy
from gpu_audit.config.policy import NOT_KEYS, Policy, keys_of
from gpu_audit.config.validate_config import VALIDATE_KEYS
from gpu_audit.model import Severity
from gpu_audit.validate.plan import ValidateOptions

_BASE = {float: float, int: int, str: str, bool: bool, list: list, dict: dict}


def _fields(cls: type) -> dict[str, tuple[str, object]]:
    """Each setting field of ``cls`` (a policy struct or a dataclass): its annotation as written,
    and its default."""
    if issubclass(cls, msgspec.Struct):
        written = {name: note for c in reversed(cls.__mro__)
                   for name, note in vars(c).get("__annotations__", {}).items()}
        return {f.name: (written[f.name], _default(f, msgspec.NODEFAULT))
                for f in msgspec.structs.fields(cls) if f.name not in NOT_KEYS}
    return {f.name: (f.type, _default(f, dataclasses.MISSING)) for f in dataclasses.fields(cls)
            if not f.metadata.get("internal")}


def _annotation(item: schema.Setting) -> set[str]:
    base = {list: "list[str]", dict: "dict[str, str]"}.get(item.type, item.type.__name__)
    return {f"{base} | None", f"list[str] | {base} | None"} if item.optional else {base}


def _default(field: Any, missing: object) -> object:
    if field.default_factory is not missing:
        return field.default_factory()
    return field.default


@pytest.mark.parametrize(("cls", "tables"), [(Policy, (schema.ROOT,)),
                                             (CheckPolicy, (schema.ROOT, schema.CHECK))])
def test_policy_classes_hold_exactly_the_schema_keys(cls: type, tables: tuple[str, ...]) -> None:
    declared = {s.key: s for s in schema.SETTINGS if s.table in tables}
    fields = _fields(cls)
    assert set(fields) == set(declared)
    for key, item in declared.items():
        assert str(fields[key][0]) in _annotation(item), key
        assert fields[key][1] == item.default, key


def test_validate_options_hold_exactly_the_validate_keys() -> None:
    declared = {s.option: s for s in schema.table(schema.VALIDATE).values()}
    fields = _fields(ValidateOptions)
    assert set(fields) - {"config_dir"} == set(declared)
    for option, item in declared.items():
        value = fields[option][1]
        expected = f"{item.default:g}" if option == "checkpoint_every" else item.default
        assert value == expected, option
    assert {s.key: (s.option, s.type)
                             for s in schema.table(schema.VALIDATE).values()} == VALIDATE_KEYS


def test_the_loader_reads_every_table_of_the_schema() -> None:
    assert (schema.ROOT, *COMMAND_TABLES) == schema.TABLES
    assert keys_of(Policy) == schema.key_types(schema.ROOT)


def test_keys_are_unique_within_root_and_check() -> None:
    # Both tables share one namespace (check may set any root key again) and one variable each.
    keys = [s.key for s in schema.SETTINGS if s.table in (schema.ROOT, schema.CHECK)]
    assert len(keys) == len(set(keys))


def test_severity_choices_are_the_models() -> None:
    assert tuple(s.value for s in Severity) == schema.SEVERITIES


def test_every_variable_named_by_the_schema_is_read(tmp_path) -> None:
    for item in schema.table(schema.ROOT).values():
        assert item.env_name == f"GPU_AUDIT_{item.key.upper()}"
    policy = load_policy(search=False, environ={"GPU_AUDIT_XID_RECENT_HOURS": "3"})
    assert policy.xid_recent_hours == 3.0
    # validate's carry the table's name (GPU_AUDIT_STAGES is check's); its tables and its
    # command have no one-line form, so no variable.
    for item in schema.table(schema.VALIDATE).values():
        one_line = item.type is not dict and item.key != "command"
        assert item.env_name == (f"GPU_AUDIT_VALIDATE_{item.key.upper()}" if one_line else None)
    names = [s.env_name for s in schema.SETTINGS if s.env_name]
    assert len(names) == len(set(names))


def test_a_range_declared_in_the_schema_is_enforced() -> None:
    from gpu_audit.errors import ConfigError

    with pytest.raises(ConfigError, match=r"must be above 0 and at most 1e\+12 \(GiB\)"):
        load_policy(search=False, environ={"GPU_AUDIT_UNRELEASED_VRAM_MIN_GIB": "0"})
    with pytest.raises(ConfigError, match=r"is a percentage \(0-100\)"):
        load_policy(search=False, environ={"GPU_AUDIT_BUSY_UTILIZATION_PCT": "101"})


def test_flag_help_renders_the_default_from_the_schema() -> None:
    assert schema.setting(schema.VALIDATE, "cycles").flag_help() == \
        "Length of the final stage (default: 500)."
    assert schema.setting(schema.VALIDATE, "retry_backoff_s").flag_help().endswith(
        "(default: 0.5).")


def test_hints_of_typed_classes_resolve() -> None:
    # The annotations compared above are strings; they must also be real types.
    assert typing.get_type_hints(CheckPolicy)["min_gpus"] is int
