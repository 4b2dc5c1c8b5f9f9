"""The validate table: ``[tool.gpu-audit.validate]`` (``[validate]`` in ``gpu-audit.toml``).

:func:`read_validate_config` reads it from the configuration file and checks every value, with
errors that name the file, line and key as the other tables' do. The result holds only the keys
the file sets, under the names of :class:`gpu_audit.validate.plan.ValidateOptions`, whose fields
take their defaults from :mod:`gpu_audit.config.schema`. :func:`read_validate_environment` reads
the ``GPU_AUDIT_VALIDATE_<KEY>`` variables the schema names, which ``gpu-audit validate`` lays
over the file, and its flags over both.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpu_audit.bounds import MAX_INT_DIGITS
from gpu_audit.config.files import TableRef, convert, suggestion
from gpu_audit.config.load import EnvRef, parse_env_value
from gpu_audit.config.schema import VALIDATE, Setting, table

VALIDATE_TABLE = ("validate",)  # [tool.gpu-audit.validate], or [validate] in gpu-audit.toml

# key -> (option name in ValidateOptions, the value's type), from the schema
VALIDATE_KEYS: dict[str, tuple[str, type]] = {
    key: (declared.option, declared.type) for key, declared in table(VALIDATE).items()}


def read_validate_config(path: Path) -> dict[str, Any]:
    """The validate table of ``path`` as option values, plus ``config_dir`` (the file's folder,
    where module workloads are looked up); a bad key is a
    :class:`~gpu_audit.errors.ConfigError` at its line."""
    path = Path(path)
    ref = TableRef(path, VALIDATE_TABLE)
    values: dict[str, Any] = {}
    for key, value in ref.read().items():
        if key not in VALIDATE_KEYS:
            raise ref.error(key, f"unknown key {key!r}{suggestion(key, list(VALIDATE_KEYS))}")
        option, expected = VALIDATE_KEYS[key]
        values[option] = _value(ref, key, value, expected)
    if "checkpoint_every" in values:
        values["checkpoint_every"] = str(values["checkpoint_every"])
    values["config_dir"] = str(path.parent.resolve())
    return values


def read_validate_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``GPU_AUDIT_VALIDATE_<KEY>`` variables set in ``environ``, as option values in the
    flags' own forms (``GPU_AUDIT_VALIDATE_MAX_SPLIT_SIZE_MB=none,128``); a value of the wrong
    type is a :class:`~gpu_audit.errors.ConfigError` naming the variable."""
    values: dict[str, Any] = {}
    for key, declared in table(VALIDATE).items():
        name = declared.env_name
        if name is None or name not in environ:
            continue
        value = parse_env_value(name, key, environ[name], declared.type, declared.optional)
        problem = None if value is None else _out_of_range(declared, value)
        if problem:
            raise EnvRef(name).error(key, f"key {key!r} {problem}, got {value!r}")
        # The flag takes the percentage as text (it may end in '%').
        values[declared.option] = str(value) if key == "checkpoint_every_pct" else value
    return values


def _value(ref: TableRef, key: str, value: Any, expected: type) -> Any:
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, int) and abs(item) >= 10**MAX_INT_DIGITS:
            raise ref.error(key, f"key {key!r} holds an integer of more than {MAX_INT_DIGITS} "
                                 "digits")
    if key == "max_split_size_mb":
        items = value if isinstance(value, list) else [value]
        if not items or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            raise ref.error(key, f"key {key!r} must be an integer or a list of integers, "
                                 f"got {value!r}")
        return ",".join(str(v) for v in items)
    if expected is dict:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ref.error(key, f"key {key!r} must be a table of strings, got {value!r}")
        return {str(k): v for k, v in value.items()}
    if key == "emulate_memory" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    try:
        converted = convert(value, expected)
    except ValueError as exc:
        raise ref.error(key, f"key {key!r} {exc}") from None
    problem = _out_of_range(table(VALIDATE)[key], converted)
    if problem:
        raise ref.error(key, f"key {key!r} {problem}, got {converted!r}")
    if key == "command" and not converted:
        raise ref.error(key, "key 'command' is empty: name the program and its arguments, e.g. "
                             "['python', 'train.py', '--steps', '{cycles}']")
    return converted


def _out_of_range(declared: Setting, value: Any) -> str | None:
    """The first of ``value``'s numbers outside the key's declared range, as its problem."""
    for number in value if isinstance(value, list) else [value]:
        if isinstance(number, int | float) and not isinstance(number, bool):
            problem = declared.out_of_range(number)
            if problem:
                return problem
    return None
