"""Checked access to an unpickled memory snapshot: a wrong shape is an :class:`InputError`
naming where in the snapshot it was found."""

from __future__ import annotations

from typing import Any

from gpu_audit.errors import InputError


def fail(where: str, message: str) -> InputError:
    return InputError(f"not a PyTorch memory snapshot: {where}: {message}")


def as_dict(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise fail(where, f"expected a dictionary, found {type(value).__name__}")
    return value


def as_list(value: Any, where: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise fail(where, f"expected a list, found {type(value).__name__}")
    return list(value)


def int_at(obj: dict, key: str, where: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    if value is None and key not in obj:
        raise fail(where, f"missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{where}.{key}", f"expected an integer, found {value!r:.60}")
    return value


def opt_int(obj: dict, key: str) -> int | None:
    value = obj.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
