"""Dataclasses to JSON and back, and atomic file writes.

Loading is strict about types and names the offending field, so a hand-edited or truncated
``--from`` file gives a message a user can act on instead of a traceback deep in a rule.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import json
import os
import tempfile
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from gpu_audit.errors import InputError

T = TypeVar("T")


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types for dataclasses, enums, lists and dicts (recursively)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON
        return None
    return obj


def from_jsonable(cls: type[T], data: Any, where: str = "$") -> T:
    """Build ``cls`` from JSON data, checking types; raises :class:`InputError` naming the path."""
    return _convert(cls, data, where)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _convert(tp: Any, data: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, data, where)
            except InputError as exc:
                errors.append(str(exc))
        raise InputError(errors[0] if errors else f"{where}: unexpected value {data!r}")
    if origin is list:
        if not isinstance(data, list):
            raise InputError(f"{where}: expected a list, got {type(data).__name__}")
        (item,) = typing.get_args(tp) or (Any,)
        return [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected an object, got {type(data).__name__}")
        _, value_tp = typing.get_args(tp) or (str, Any)
        return {str(k): _convert(value_tp, v, f"{where}.{k}") for k, v in data.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError:
            raise InputError(f"{where}: {data!r} is not a valid {tp.__name__}") from None
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, data, where)
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        raise InputError(f"{where}: expected a number, got {data!r}")
    if tp in (int, str, bool):
        if isinstance(data, tp) and not (tp is int and isinstance(data, bool)):
            return data
        raise InputError(f"{where}: expected {tp.__name__}, got {data!r}")
    if tp is type(None):
        if data is None:
            return None
        raise InputError(f"{where}: expected null, got {data!r}")
    raise InputError(f"{where}: cannot read a value of type {tp!r}")


def _convert_dataclass(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise InputError(f"{where}: missing field {f.name!r}")
    # Unknown keys are tolerated: newer minor versions of a schema may add fields.
    return cls(**kwargs)


def dumps(doc: Any, *, indent: int | None = 2) -> str:
    return json.dumps(to_jsonable(doc), indent=indent, ensure_ascii=False, sort_keys=False)


def write_atomic(path: Path, text: str | bytes) -> Path:
    """Write a temporary file in the same folder, then rename: no reader sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
