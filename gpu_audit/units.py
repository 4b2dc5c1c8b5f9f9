"""Sizes for people: ``1.5 GiB`` out, ``4GiB`` / ``512MiB`` / ``4G`` in."""

from __future__ import annotations

import re

KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4
_UNITS = {
    "": 1,
    "b": 1,
    "k": KIB,
    "kb": 1000,
    "kib": KIB,
    "m": MIB,
    "mb": 1000**2,
    "mib": MIB,
    "g": GIB,
    "gb": 1000**3,
    "gib": GIB,
    "t": TIB,
    "tb": 1000**4,
    "tib": TIB,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def fmt_bytes(n: int | float | None) -> str:
    """``None`` -> ``n/a``; otherwise the largest binary unit that keeps a number >= 1."""
    if n is None:
        return "n/a"
    value = float(n)
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{int(value)} B"


def fmt_mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MIB:.0f} MiB"


def parse_size(text: str) -> int:
    """``4GiB`` -> 4294967296. Raises ``ValueError`` with a message a user can act on."""
    match = _SIZE.match(text)
    unit = match[2].lower() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size (examples: 4GiB, 512MiB, 6G)")
    return int(float(match[1]) * _UNITS[unit])


def pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 1)
