"""Checked access to an unpickled memory snapshot: a wrong shape is an :class:`InputError`
naming where in the snapshot it was found.

Every integer a snapshot holds comes from one of torch's 64-bit fields (sizes, addresses,
streams, devices, times in microseconds), so each integer the summary reads is refused beyond
that range (and below zero) as it is read: a hostile one would otherwise overflow the summary's
float arithmetic or make printing it fail (``repr`` of an int fails past 4300 digits). What the
summary passes on whole (the allocator settings) is checked whole by
:func:`refuse_huge_numbers`.
"""

from __future__ import annotations

import math
from typing import Any

from gpu_audit.bounds import LARGEST_INT, LOWEST_INT
from gpu_audit.errors import InputError


def fail(where: str, message: str) -> InputError:
    return InputError(f"not a PyTorch memory snapshot: {where}: {message}")


def shown(value: Any, width: int = 60) -> str:
    """``value`` as a message quotes it, at most ``width`` characters; an integer too large to
    print is named by its size instead (``repr`` of one fails past 4300 digits)."""
    if isinstance(value, int) and not LOWEST_INT <= value <= LARGEST_INT:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # a container holding such an integer, or too deep
        text = f"a {type(value).__name__}"
    return text[:width]


def refuse_huge_numbers(root: Any, where: str) -> None:
    """:class:`InputError` when ``root`` holds an integer beyond 64 bits or a float that is not
    finite, anywhere. Each container is visited once (a memoised one may be referenced many
    times), without recursion (the data may be nested deeply)."""
    stack, seen = [root], set()
    while stack:
        value = stack.pop()
        if isinstance(value, (dict, list, tuple, set, frozenset)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            stack.extend(value.keys() if isinstance(value, dict) else ())
            stack.extend(value.values() if isinstance(value, dict) else value)
        elif isinstance(value, int) and not LOWEST_INT <= value <= LARGEST_INT:
            raise fail(where, f"holds an integer of {value.bit_length()} bits (torch writes "
                              "sizes, addresses and times in 64)")
        elif isinstance(value, float) and not math.isfinite(value):
            raise fail(where, f"holds the number {value!r} (torch writes only finite numbers)")


def as_dict(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise fail(where, f"expected a dictionary, found {type(value).__name__}")
    return value


def as_list(value: Any, where: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise fail(where, f"expected a list, found {type(value).__name__}")
    return list(value)


def count(value: int, where: str) -> int:
    """``value`` when it is a size or count torch could have written: 0 to 2**64 - 1."""
    if not 0 <= value <= LARGEST_INT:
        raise fail(where, f"expected a whole number from 0 to 2**64 - 1, found {shown(value)}")
    return value


def int_at(obj: dict, key: str, where: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    if value is None and key not in obj:
        raise fail(where, f"missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{where}.{key}", f"expected an integer, found {shown(value)}")
    return count(value, f"{where}.{key}")


def opt_int(obj: dict, key: str, where: str = "") -> int | None:
    """An optional size or count: ``None`` when absent or not an integer (older releases left
    some out or wrote something else); a negative or larger than 64-bit one is refused."""
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return count(value, f"{where}.{key}" if where else key)
