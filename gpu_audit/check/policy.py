"""The check policy: what makes a GPU runner fit, with defaults that suit a typical CI runner.

Read from ``--policy FILE`` (TOML, keys at top level), else from the nearest configuration file:
``[check]`` in ``gpu-audit.toml`` or ``[tool.gpu-audit.check]`` in ``pyproject.toml``. A TOML
syntax error, an unknown key or a wrong value is a :class:`~gpu_audit.errors.ConfigError` naming
the file, the line and the key, so a typo in a policy exits UNKNOWN (3) and is never mistaken
for an unfit runner.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_audit.config import GIB, find_config_file, read_table
from gpu_audit.errors import ConfigError
from gpu_audit.model import Severity

MODES = ("fail", "warn", "ignore")
STAGES = ("imports", "smoke")  # the validation stages check may run; later ones take minutes
_VERSION = re.compile(r"^\d+(\.\d+)*$")


@dataclass(frozen=True)
class CheckPolicy:
    """Every knob of ``gpu-audit check``. Field names are the policy keys (a public contract)."""

    min_gpus: int = 1
    gpu_name: str | None = None  # regex, searched in each GPU's name
    min_gpu_memory_gib: float | None = None
    min_free_vram_gib: float | None = None
    min_free_vram_pct: float | None = 70.0
    max_swap_used_gib: float | None = 2.0
    max_gpu_temperature_c: float | None = None
    require_persistence_mode: bool = False
    min_driver_version: str | None = None  # "535.104.05"
    min_cuda_driver_version: str | None = None  # "12.4": newest CUDA the driver supports
    duplicate_backends: str = "fail"
    unattributed_vram: str = "warn"
    foreign_processes: str = "fail"
    own_processes: str = "warn"
    fail_on: str = "error"
    warn_on: str = "warning"
    ignore: list[str] = field(default_factory=list)
    require_torch_cuda: bool = False
    stages: list[str] = field(default_factory=list)
    source: str | None = field(default=None, metadata={"internal": True})

    @property
    def fail_on_severity(self) -> Severity:
        return Severity.parse(self.fail_on)

    @property
    def warn_on_severity(self) -> Severity:
        return Severity.parse(self.warn_on)

    def gib_bytes(self, name: str) -> int | None:
        """A ``*_gib`` threshold in bytes, or ``None`` when it is not set."""
        value = getattr(self, name)
        return None if value is None else int(value * GIB)

    def to_dict(self) -> dict[str, Any]:
        """The effective values, for the JSON document and ``--json`` readers."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def policy_keys() -> dict[str, Any]:
    """Key name -> the declared type (``int``, ``float | None``, ``list[str]`` ...)."""
    hints = typing.get_type_hints(CheckPolicy)
    return {
        f.name: hints[f.name]
        for f in dataclasses.fields(CheckPolicy)
        if not f.metadata.get("internal")
    }


def _base_type(tp: Any) -> Any:
    """``float | None`` -> ``float``; ``list[str]`` -> ``list``."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        (tp,) = [arg for arg in typing.get_args(tp) if arg is not type(None)]
    return typing.get_origin(tp) or tp


_WANTED = {float: "a number", int: "an integer", str: "a string", bool: "true or false",
           list: "a list of strings"}


@dataclass(frozen=True)
class _Source:
    """Where the policy table lives, for messages: the file and the table's header line."""

    path: Path
    header: str | None  # "tool.gpu-audit.check", "check", or None for top-level keys

    @property
    def label(self) -> str:
        return f"[{self.header}] " if self.header else ""

    def line_of(self, key: str) -> int | None:
        """The line where ``key =`` is set inside this table (tomllib reports no positions)."""
        try:
            lines = self.path.read_text(errors="replace").splitlines()
        except OSError:
            return None
        key_pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        header_pattern = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
        own = self.header.split(".") if self.header else []
        inside = self.header is None
        for number, line in enumerate(lines, 1):
            if match := header_pattern.match(line):
                parts = _table_parts(match[1])
                if parts[: len(own) + 1] == [*own, key]:
                    return number  # the key is itself a table: [check.key] or [key]
                inside = self.header is not None and parts == own
                continue
            if inside and key_pattern.match(line):
                return number
        return None

    def where(self, key: str) -> str:
        return f"{self.path}:{self.line_of(key) or '?'}"

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.where(key)}: {self.label}{message}")


def _table_parts(header: str) -> list[str]:
    """``tool . "gpu-audit" . check`` -> ``["tool", "gpu-audit", "check"]``."""
    return [part.strip().strip("\"'") for part in header.split(".")]


def _check_type(source: _Source, key: str, value: Any, declared: Any) -> Any:
    expected = _base_type(declared)
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    ok = isinstance(value, expected) and not (expected in (int, float) and isinstance(value, bool))
    if ok and expected is list:
        ok = all(isinstance(item, str) for item in value)
    if not ok:
        raise source.error(key, f"key {key!r} must be {_WANTED[expected]}, got {value!r}")
    return value


def _check_range(source: _Source, values: dict[str, Any]) -> None:
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise source.error(key, f"key {key!r} must not be negative, got {value!r}")
    if (pct := values.get("min_free_vram_pct")) is not None and pct > 100:
        raise source.error("min_free_vram_pct",
                           f"key 'min_free_vram_pct' is a percentage (0-100), got {pct!r}")
    for key in ("duplicate_backends", "unattributed_vram", "foreign_processes", "own_processes"):
        if key in values and values[key] not in MODES:
            raise source.error(key, f"key {key!r} must be one of {', '.join(map(repr, MODES))}, "
                                    f"got {values[key]!r}")
    for key in ("fail_on", "warn_on"):
        if key in values:
            try:
                Severity.parse(values[key])
            except ValueError as exc:
                raise source.error(key, f"key {key!r}: {exc}") from None
    if "gpu_name" in values:
        try:
            re.compile(values["gpu_name"])
        except re.error as exc:
            raise source.error("gpu_name",
                               f"key 'gpu_name' is not a valid regular expression: {exc}") from None
    for key in ("min_driver_version", "min_cuda_driver_version"):
        if key in values and not _VERSION.match(values[key]):
            raise source.error(key, f"key {key!r} must be a dotted version such as "
                                    f"{'535.104.05' if key == 'min_driver_version' else '12.4'!r}, "
                                    f"got {values[key]!r}")
    for stage in values.get("stages", []):
        if stage not in STAGES:
            raise source.error("stages", f"key 'stages': unknown stage {stage!r} "
                                         f"(check can run: {', '.join(STAGES)})")


def _check_ignore(source: _Source, ignored: list[str], known_ids: set[str]) -> None:
    for item in ignored:
        if item in known_ids:
            continue
        close = difflib.get_close_matches(item, sorted(known_ids), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else " (`gpu-audit rules` lists them)"
        raise source.error("ignore", f"key 'ignore': unknown finding or check id {item!r}{hint}")


def _locate(path: Path | None, search_from: Path | None) -> _Source | None:
    if path is not None:
        if path.name == "pyproject.toml":
            return _Source(path, "tool.gpu-audit.check")
        if path.name == "gpu-audit.toml":
            return _Source(path, "check")
        return _Source(path, None)
    found = find_config_file(search_from)
    if found is None:
        return None
    return _Source(found, "tool.gpu-audit.check" if found.name == "pyproject.toml" else "check")


def _read(source: _Source) -> dict[str, Any]:
    if source.header is None:
        return read_table(source.path)
    return read_table(source.path, ("check",))


def load_check_policy(
    path: Path | None = None,
    *,
    search_from: Path | None = None,
    known_ids: set[str] | None = None,
) -> CheckPolicy:
    """The defaults, updated from ``path`` (``--policy``) or from the nearest configuration file.

    ``known_ids`` (finding and check ids) lets ``ignore`` name a typo with a suggestion; without
    it any id is accepted.
    """
    if path is not None and not Path(path).is_file():
        raise ConfigError(f"{path}: policy file not found" if not Path(path).exists()
                          else f"{path}: not a file")
    source = _locate(Path(path) if path is not None else None, search_from)
    if source is None:
        return CheckPolicy()
    data = _read(source)
    keys = policy_keys()
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in keys:
            close = difflib.get_close_matches(key, list(keys), n=1)
            hint = (f" (did you mean {close[0]!r}?)" if close
                    else f" (known keys: {', '.join(sorted(keys))})")
            raise source.error(key, f"unknown key {key!r}{hint}")
        values[key] = _check_type(source, key, value, keys[key])
    _check_range(source, values)
    policy = CheckPolicy(**values, source=str(source.path))
    if policy.warn_on_severity > policy.fail_on_severity:
        raise source.error("warn_on", f"warn_on ({policy.warn_on!r}) must not be above fail_on "
                                      f"({policy.fail_on!r})")
    if known_ids is not None:
        _check_ignore(source, policy.ignore, known_ids)
    return policy
