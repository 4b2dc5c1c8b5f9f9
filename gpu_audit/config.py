"""Thresholds for the rules: defaults, overridden by ``[tool.gpu-audit]`` or ``gpu-audit.toml``.

The file is found by walking up from the current directory, like ruff and pytest do. A bad key,
a wrong type or a TOML syntax error is a :class:`ConfigError` naming the file, the line and the
key, so a typo in a policy is never mistaken for an unfit machine.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_audit.errors import ConfigError
from gpu_audit.model import Severity
from gpu_audit.units import GIB, MIB


@dataclass(frozen=True)
class Policy:
    """Every threshold a rule reads. Field names are the configuration keys."""

    max_swap_used_gib: float = 2.0
    min_host_available_pct: float = 10.0
    min_free_vram_pct: float = 10.0
    unattributed_vram_allowance_mib: float = 512.0
    alloc_fragmentation_pct: float = 50.0
    temperature_margin_c: float = 5.0
    busy_utilization_pct: float = 20.0  # a GPU this busy should run its PCIe link at full speed
    small_gpu_gib: float = 8.0  # at or below this, allocator advice is given unasked
    xid_recent_hours: float = 24.0  # application-caused Xids older than this are only noted
    fail_on: str = "error"
    ignore: list[str] = field(default_factory=list)
    source: str | None = field(default=None, metadata={"internal": True})

    @property
    def max_swap_used_bytes(self) -> int:
        return int(self.max_swap_used_gib * GIB)

    @property
    def unattributed_vram_allowance_bytes(self) -> int:
        return int(self.unattributed_vram_allowance_mib * MIB)

    @property
    def fail_on_severity(self) -> Severity:
        return Severity.parse(self.fail_on)


def policy_keys() -> dict[str, type]:
    hints = {"float": float, "int": int, "str": str, "bool": bool, "list[str]": list}
    return {
        f.name: hints[str(f.type)]
        for f in dataclasses.fields(Policy)
        if not f.metadata.get("internal")
    }


def find_config_file(start: Path | None = None) -> Path | None:
    """The nearest ``gpu-audit.toml``, or ``pyproject.toml`` with a ``[tool.gpu-audit]`` table."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        own = folder / "gpu-audit.toml"
        if own.is_file():
            return own
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and _has_our_table(pyproject):
            return pyproject
    return None


def _has_our_table(pyproject: Path) -> bool:
    import tomllib  # here, not at the top: most folders a scan starts in have no TOML file

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        # A broken pyproject.toml that mentions us is still ours: read_table reports the error.
        text = pyproject.read_text(errors="replace") if pyproject.is_file() else ""
        return "gpu-audit" in text
    return isinstance(data.get("tool", {}).get("gpu-audit"), dict)


def read_table(path: Path, table: tuple[str, ...] = ()) -> dict[str, Any]:
    """The TOML table at ``table`` inside ``path`` (the tool's own table for ``pyproject.toml``)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        data = data.get("tool", {}).get("gpu-audit", {})
    for name in table:
        data = data.get(name, {})
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: [{'.'.join(table)}] must be a table")
    return data


def _header(line: str) -> str | None:
    """``[ tool . "gpu-audit" . check ]`` -> ``tool.gpu-audit.check``; ``None`` if no header."""
    match = re.match(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$", line)
    if not match:
        return None
    return ".".join(part.strip().strip("\"'") for part in match[1].split("."))


def table_path(path: Path, table: tuple[str, ...] = ()) -> str:
    """The dotted name of our table in ``path`` (``tool.gpu-audit`` in a pyproject.toml)."""
    base = ("tool", "gpu-audit") if path.name == "pyproject.toml" else ()
    return ".".join((*base, *table))


def key_line(path: Path, key: str, table: tuple[str, ...] = ()) -> int | None:
    """The line where ``key =`` is set inside our table, for messages (tomllib gives none)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    wanted = table_path(path, table)
    pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    current = ""
    for number, line in enumerate(lines, 1):
        header = _header(line)
        if header is not None:
            current = header
        elif current == wanted and pattern.match(line):
            return number
    return None


def check_value(
    path: Path, key: str, value: Any, expected: type, known: list[str], table: tuple[str, ...] = ()
) -> Any:
    """Validate one key's type; returns the value converted (ints accepted for floats)."""
    where = f"{path}:{key_line(path, key, table) or '?'}"
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    ok = isinstance(value, expected) and not (expected in (int, float) and isinstance(value, bool))
    if expected is list and ok:
        ok = all(isinstance(v, str) for v in value)
    if not ok:
        wanted = {
            float: "a number",
            int: "an integer",
            str: "a string",
            bool: "true or false",
            list: "a list of strings",
        }[expected]
        raise ConfigError(f"{where}: key {key!r} must be {wanted}, got {value!r}")
    return value


def unknown_key_error(
    path: Path, key: str, known: list[str], table: tuple[str, ...] = ()
) -> ConfigError:
    where = f"{path}:{key_line(path, key, table) or '?'}"
    close = difflib.get_close_matches(key, known, n=1)
    hint = (
        f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(sorted(known))})"
    )
    return ConfigError(f"{where}: unknown key {key!r}{hint}")


def load_policy(path: Path | None = None, *, search: bool = True) -> Policy:
    """Defaults, updated from ``path`` or from the nearest configuration file."""
    path = path or (find_config_file() if search else None)
    if path is None:
        return Policy()
    data = read_table(path)
    keys = policy_keys()
    values: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            continue  # sub-tables ([tool.gpu-audit.check], ...) belong to their commands
        if key not in keys:
            raise unknown_key_error(path, key, list(keys))
        values[key] = check_value(path, key, value, keys[key], list(keys))
    if "fail_on" in values:
        try:
            Severity.parse(values["fail_on"])
        except ValueError as exc:
            raise ConfigError(
                f"{path}:{key_line(path, 'fail_on') or '?'}: fail_on: {exc}"
            ) from None
    return Policy(**values, source=str(path))
