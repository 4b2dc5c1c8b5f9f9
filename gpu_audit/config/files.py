"""Configuration files: finding them, reading a table, and errors that name file, line and key.

The file is found by walking up from the current directory, like ruff and pytest do: the nearest
``gpu-audit.toml``, or ``pyproject.toml`` with a ``[tool.gpu-audit]`` table. The same tables live
in both (``[tool.gpu-audit.check]`` in ``pyproject.toml`` is ``[check]`` in ``gpu-audit.toml``).
tomllib reports no positions, so the line of a key is found in the text for messages.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Any

from gpu_audit.errors import ConfigError, InputError
from gpu_audit.inputs import CONFIG_LIMIT, read_input
from gpu_audit.lazy import regex

if TYPE_CHECKING:
    from pathlib import Path

OWN_FILE = "gpu-audit.toml"
PYPROJECT = "pyproject.toml"
PYPROJECT_TABLE = ("tool", "gpu-audit")

_WANTED = {float: "a number", int: "an integer", str: "a string", bool: "true or false",
           list: "a list of strings"}
_HEADER = regex(r"^\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")
# A [tool.gpu-audit...] header (or a dotted ``tool.gpu-audit.key =`` line) in any file.
_TOOL_FORM = regex(r"^\s*(?:\[\s*tool\s*\.\s*[\"']?gpu-audit|tool\s*\.\s*[\"']?gpu-audit)",
                   re.M)


def find_config_file(start: Path | None = None) -> Path | None:
    """The nearest ``gpu-audit.toml``, or ``pyproject.toml`` with a ``[tool.gpu-audit]`` table."""
    # Walked as strings: pathlib is imported only when a file is found (a plain scan has none).
    folder = os.path.realpath(os.getcwd() if start is None else start)
    while True:
        own = os.path.join(folder, OWN_FILE)
        if os.path.isfile(own):
            return _path(own)
        pyproject = os.path.join(folder, PYPROJECT)
        if os.path.isfile(pyproject) and _has_our_table(pyproject):
            return _path(pyproject)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _path(text: str) -> Path:
    from pathlib import Path

    return Path(text)


def _has_our_table(pyproject: str) -> bool:
    """Whether ``pyproject`` holds ``[tool.gpu-audit]``. One that cannot be read is skipped
    with a warning: a file in a folder above the work, perhaps another user's, must not stop
    every run beneath it."""

    try:
        if os.stat(pyproject).st_size > CONFIG_LIMIT:
            _warn(f"skipping {pyproject}: larger than a configuration file can be")
            return False
        with open(pyproject, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        _warn(f"skipping {pyproject}: cannot read it ({exc.strerror or exc})")
        return False
    if "gpu-audit" not in text:
        return False  # not ours, whatever else it holds
    try:
        data = _parse_toml(pyproject, text.encode("utf-8"))
    except ConfigError:
        return True  # a broken pyproject.toml that mentions us is ours: read_table says why
    tool = data.get("tool")
    return isinstance(tool, dict) and isinstance(tool.get("gpu-audit"), dict)


def _warn(message: str) -> None:
    print(f"gpu-audit: warning: {message}", file=sys.stderr)


def read_table(path: Path, table: tuple[str, ...] = ()) -> dict[str, Any]:
    """The TOML table at ``table`` inside ``path`` (below ``[tool.gpu-audit]`` for a
    ``pyproject.toml``); an absent table is empty."""

    try:
        raw = read_input(path, limit=CONFIG_LIMIT, what="configuration file")
    except InputError as exc:
        raise ConfigError(f"cannot read {exc}") from None
    data = _parse_toml(path, raw)
    if path.name == PYPROJECT or _uses_tool_table(path, data):
        tool = data.get("tool", {})
        if not isinstance(tool, dict):
            raise ConfigError(f"{path}: 'tool' must be a table, got {tool!r}")
        data = tool.get("gpu-audit", {})
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: [tool.gpu-audit] must be a table")
    for name in table:
        data = data.get(name, {})
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: [{table_path(path, table)}] must be a table")
    return data


def _uses_tool_table(path: Path, data: dict[str, Any]) -> bool:
    """Whether ``gpu-audit.toml`` (or a file named by ``--config``) holds its settings in a
    ``[tool.gpu-audit]`` table, as pasted from a ``pyproject.toml``, instead of at the top level.

    Either form is accepted; a file mixing them, or holding another ``[tool.*]`` table, is an
    error naming the table, so no setting is silently ignored.
    """
    tool = data.get("tool")
    if tool is None:
        return False
    if not isinstance(tool, dict) or set(tool) != {"gpu-audit"}:
        others = sorted(set(tool) - {"gpu-audit"}) if isinstance(tool, dict) else []
        name = f"[tool.{others[0]}]" if others else "'tool'"
        raise ConfigError(f"{path}: {name} is not a gpu-audit table; put the settings at the top "
                          "level or in [tool.gpu-audit]")
    if set(data) != {"tool"}:
        stray = sorted(set(data) - {"tool"})[0]
        raise ConfigError(f"{path}: {stray!r} is outside [tool.gpu-audit], which this file also "
                          "has; use one form or the other")
    return True


def file_base(path: Path) -> tuple[str, ...]:
    """Where our settings sit in ``path``: ``("tool", "gpu-audit")`` or the top level."""
    if path.name == PYPROJECT:
        return PYPROJECT_TABLE
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ()
    return PYPROJECT_TABLE if _TOOL_FORM().search(text) else ()


def _parse_toml(path: Path | str, raw: bytes) -> dict[str, Any]:
    """``raw`` as TOML; a :class:`ConfigError` for anything tomllib cannot read, including
    integers of thousands of digits and tables nested thousands deep."""
    import tomllib

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ValueError as exc:  # int() past its digit limit
        raise ConfigError(f"{path}: not valid TOML: {str(exc).split(';')[0]}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deeply") from None


def table_path(path: Path, table: tuple[str, ...] = ()) -> str:
    """The dotted name of our table in ``path`` (``tool.gpu-audit.check`` in a pyproject.toml,
    ``check`` in gpu-audit.toml, ``""`` for the top level of any other file)."""
    return ".".join((*file_base(path), *table))


def _header_parts(header: str) -> list[str]:
    """``tool . "gpu-audit" . check`` -> ``["tool", "gpu-audit", "check"]``."""
    return [part.strip().strip("\"'") for part in header.split(".")]


def key_line(path: Path, key: str, table: tuple[str, ...] = ()) -> int | None:
    """The line where ``key`` is set inside our table (``key =``, or a ``[table.key]`` header)."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    wanted = table_path(path, table)
    own = wanted.split(".") if wanted else []
    key_pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
    inside = not own
    for number, line in enumerate(lines, 1):
        if match := _HEADER().match(line):
            parts = _header_parts(match[1])
            if parts[: len(own) + 1] == [*own, key]:
                return number  # the key is itself a table
            inside = parts == own
        elif inside and key_pattern.match(line):
            return number
    return None


def suggestion(key: str, known: list[str]) -> str:
    """`` (did you mean 'x'?)``, or the known keys when nothing is close."""
    import difflib

    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]!r}?)" if close else \
        f" (known keys: {', '.join(sorted(known))})"


def convert(value: Any, expected: type) -> Any:
    """``value`` as ``expected`` (an int is a fine float); ``ValueError`` naming what was wanted."""
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        try:
            value = float(value)
        except OverflowError:
            raise ValueError(f"is far too large ({len(str(value))} digits)") from None
    ok = isinstance(value, expected) and not (expected in (int, float) and isinstance(value, bool))
    if ok and expected is list:
        ok = all(isinstance(item, str) for item in value)
    if not ok:
        raise ValueError(f"must be {_WANTED[expected]}, got {value!r}")
    return value


class TableRef:
    """One table of one file, for messages: ``path:line: [table] message``.

    ``labelled`` puts the table's header in messages: worth it where a file holds several of our
    tables that share key names (``[tool.gpu-audit]`` and ``[tool.gpu-audit.check]``).
    """

    __slots__ = ("labelled", "path", "table")

    def __init__(self, path: Path, table: tuple[str, ...] = (), labelled: bool = False) -> None:
        self.path, self.table, self.labelled = _path(path), table, labelled

    @property
    def label(self) -> str:
        header = table_path(self.path, self.table)
        return f"[{header}] " if self.labelled and header else ""

    def read(self) -> dict[str, Any]:
        return read_table(self.path, self.table)

    def where(self, key: str) -> str:
        return f"{self.path}:{key_line(self.path, key, self.table) or '?'}"

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.where(key)}: {self.label}{message}")

    def __str__(self) -> str:
        return str(self.path)


def check_value(path: Path, key: str, value: Any, expected: type, known: list[str] | None = None,
                table: tuple[str, ...] = ()) -> Any:
    """One key's value converted to ``expected``, or a :class:`ConfigError` at its line."""
    try:
        return convert(value, expected)
    except ValueError as exc:
        raise TableRef(path, table).error(key, f"key {key!r} {exc}") from None


def unknown_key_error(path: Path, key: str, known: list[str],
                      table: tuple[str, ...] = ()) -> ConfigError:
    return TableRef(path, table).error(key, f"unknown key {key!r}{suggestion(key, known)}")
