"""The policy in force: defaults, then the file, then ``GPU_AUDIT_*`` variables (flags come last,
in the command). :func:`load_policy` is the scan's; ``check`` adds its table in
:mod:`gpu_audit.config.check_policy`.

- ``[tool.gpu-audit]`` of the nearest ``pyproject.toml`` (or the top level of ``gpu-audit.toml``)
  sets any :class:`~gpu_audit.config.policy.Policy` key.
- ``[tool.gpu-audit.check]`` (``[check]`` in ``gpu-audit.toml``, or the top level of a file named
  by ``check --policy``) sets the check's own keys, and may set any ``[tool.gpu-audit]`` key
  again for check alone; its ``ignore`` ids are added to those of ``[tool.gpu-audit]``.
- ``GPU_AUDIT_<KEY>`` (``GPU_AUDIT_MIN_FREE_VRAM_PCT=20``, ``GPU_AUDIT_IGNORE=a,b``) overrides
  both tables. Variables of keys a command does not read are left alone, and so are other
  ``GPU_AUDIT_*`` variables (``GPU_AUDIT_RUNTIME_DIR``).

A bad value is a :class:`~gpu_audit.errors.ConfigError` naming the file, line and key, or the
variable, so a typo in a policy exits UNKNOWN (3) and is never mistaken for an unfit machine.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gpu_audit.bounds import MAX_INT_DIGITS, bounded_int
from gpu_audit.config.files import (
    OWN_FILE,
    PYPROJECT,
    PYPROJECT_TABLE,
    TableRef,
    convert,
    find_config_file,
    suggestion,
    table_path,
)
from gpu_audit.config.policy import Policy, keys_of, validate_values
from gpu_audit.config.schema import TABLES
from gpu_audit.errors import ConfigError, InputError

if TYPE_CHECKING:
    from pathlib import Path

ENV_PREFIX = "GPU_AUDIT_"
CHECK_TABLE = ("check",)
# The sub-tables of [tool.gpu-audit] that belong to a command: [tool.gpu-audit.check] and
# [tool.gpu-audit.validate] ([check] and [validate] at the top of gpu-audit.toml).
COMMAND_TABLES = tuple(t for t in TABLES if t)
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def env_name(key: str) -> str:
    """``min_free_vram_pct`` -> ``GPU_AUDIT_MIN_FREE_VRAM_PCT``."""
    return ENV_PREFIX + key.upper()


class EnvRef:
    """An environment variable, for messages."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"environment variable {self.name}: {message}")

    def __str__(self) -> str:
        return self.name


Origin = TableRef | EnvRef


def parse_env_value(name: str, key: str, text: str, expected: type, optional: bool) -> Any:
    """The text of ``GPU_AUDIT_<KEY>`` as the key's type: numbers, ``true``/``false`` (also
    ``1``/``0``, ``yes``/``no``, ``on``/``off``), strings, comma-separated lists. An empty value
    is the empty list, or unsets a key that may be unset."""
    value = text.strip()
    origin = EnvRef(name)
    if expected is list:
        return [item.strip() for item in value.split(",") if item.strip()]
    if not value and optional:
        return None
    wanted = {float: "a number", int: "an integer", bool: "true or false"}.get(expected)
    try:
        if expected is float:
            if not value.isascii():  # float() also reads Arabic-Indic and other digits
                raise ValueError
            number = float(value)
            if not math.isfinite(number):
                raise ValueError
            return number
        if expected is int:
            return _whole_number(name, value)
        if expected is bool:
            if value.lower() in _TRUE + _FALSE:
                return value.lower() in _TRUE
            raise ValueError
    except ValueError:
        shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}… ({len(text)} characters)"
        raise origin.error(key, f"key {key!r} must be {wanted}, got {shown}") from None
    if not value:
        raise origin.error(key, f"key {key!r} must not be empty")
    return value


def _whole_number(name: str, text: str) -> int:
    """ASCII digits with an optional sign, at most MAX_INT_DIGITS (``int()`` alone also takes
    Arabic-Indic digits and ``1_000``); the sign is judged later with the key's range."""
    try:
        return bounded_int(text, name, low=-(10**MAX_INT_DIGITS))
    except InputError:
        raise ValueError from None


class Layers:
    """Values set so far and where each was set, lowest layer first."""

    def __init__(self, keys: dict[str, tuple[type, bool]]) -> None:
        self.keys = keys
        self.values: dict[str, Any] = {}
        self.origins: dict[str, Origin] = {}
        self.rank: dict[str, int] = {}
        self.files: list[str] = []
        self.variables: list[str] = []
        self.added_ids: dict[str, Origin] = {}  # ignored ids and where each was named

    def table(self, ref: TableRef, allowed: dict[str, tuple[type, bool]], *, rank: int,
              root: bool = False) -> None:
        """One table of a file. In the ``root`` table (``[tool.gpu-audit]``) sub-tables belong
        to the commands (``[tool.gpu-audit.check]``, ``.validate``); elsewhere ``ignore`` adds
        to the ids already ignored."""
        data = ref.read()
        values: dict[str, Any] = {}
        for key, value in data.items():
            if root and isinstance(value, dict):
                if key not in COMMAND_TABLES:
                    raise ref.error(key, f"unknown table [{table_path(ref.path, (key,))}] (the "
                                    f"tables a command reads: {', '.join(COMMAND_TABLES)})")
                continue
            if key not in allowed:
                raise ref.error(key, _unknown(ref, key, allowed))
            try:
                values[key] = convert(value, allowed[key][0])
            except ValueError as exc:
                raise ref.error(key, f"key {key!r} {exc}") from None
        validate_values(values, ref.error)
        if "ignore" in values:
            self.added_ids.update((i, ref) for i in values["ignore"])
        if not root and "ignore" in values:
            earlier = self.values.get("ignore", [])
            values["ignore"] = [*earlier, *(i for i in values["ignore"] if i not in earlier)]
        self._set(values, ref, rank)
        if str(ref.path) not in self.files:
            self.files.append(str(ref.path))

    def environment(self, environ: Mapping[str, str], *, rank: int) -> None:
        values: dict[str, Any] = {}
        origins: dict[str, EnvRef] = {}
        for key, (expected, optional) in self.keys.items():
            name = env_name(key)
            if name in environ:
                values[key] = parse_env_value(name, key, environ[name], expected, optional)
                origins[key] = EnvRef(name)
                self.variables.append(name)
        if "ignore" in values:
            self.added_ids = {i: origins["ignore"] for i in values["ignore"]}
        validate_values(values, lambda key, message: origins[key].error(key, message))
        for key, value in values.items():
            self._set({key: value}, origins[key], rank)

    def _set(self, values: dict[str, Any], origin: Origin, rank: int) -> None:
        for key, value in values.items():
            self.values[key] = value
            self.origins[key] = origin
            self.rank[key] = rank

    def source(self) -> str | None:
        """The files read and the variables used, for reports (``None``: built-in defaults)."""
        parts = list(self.files)
        if self.variables:
            parts.append(f"environment ({', '.join(self.variables)})")
        return " + ".join(parts) or None


def _unknown(ref: TableRef, key: str, allowed: dict[str, tuple[type, bool]]) -> str:
    # check_policy builds on this module: importing it at the top would be a cycle.
    from gpu_audit.config.check_policy import CheckPolicy

    if key in keys_of(CheckPolicy):
        check_table = table_path(ref.path, CHECK_TABLE) if ref.path.name in (PYPROJECT, OWN_FILE) \
            else f"{'.'.join(PYPROJECT_TABLE)}.check"
        return f"key {key!r} is read by `gpu-audit check` only: set it in [{check_table}]"
    return f"unknown key {key!r}{suggestion(key, list(allowed))}"


def process_environ(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def load_policy(path: Path | None = None, *, search: bool = True,
                environ: Mapping[str, str] | None = None,
                known_ids: Callable[[], set[str]] | None = None) -> Policy:
    """Defaults, then ``path`` or the nearest configuration file, then ``GPU_AUDIT_*``.

    ``known_ids`` (called only when ``ignore`` names ids) gives every finding and check id, so
    that a misspelt id is an error naming where it was set, with a suggestion.
    """
    path = path or (find_config_file() if search else None)
    layers = Layers(keys_of(Policy))
    if path is not None:
        layers.table(TableRef(path), layers.keys, rank=1, root=True)
    layers.environment(process_environ(environ), rank=2)
    if known_ids is not None and layers.added_ids:
        # check_policy builds on this module: importing it at the top would be a cycle.
        from gpu_audit.config.check_policy import check_ignored_ids, redirect_ignored

        redirects = check_ignored_ids(layers.added_ids, known_ids())
        if redirects:
            layers.values["ignore"] = redirect_ignored(layers.values["ignore"], redirects)
    return Policy(**layers.values, source=layers.source())
