"""Sizes as logs print them ("20.00 MiB", "0 bytes", "3.2 GB") and back."""

from __future__ import annotations

import re

# A size the way PyTorch's format_size, numpy and the kernel print it.
SIZE = r"\d+(?:\.\d+)?\s?(?:bytes|[KMGTP]iB|[KMGTP]B|kB|B)\b"

_UNIT = {
    "bytes": 1, "b": 1,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "pib": 1024**5,
    # The kernel's "kB" is KiB; the decimal units appear only outside PyTorch.
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4, "pb": 1000**5,
}
_SIZE_PARTS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s?([A-Za-z]+)\s*$")


def parse_size(text: str | None) -> int | None:
    """Bytes from ``"20.00 MiB"``; None when the text is not a size.

    Sizes printed with two decimals are approximations; the result is rounded to whole bytes.
    """
    if text is None:
        return None
    match = _SIZE_PARTS.match(text)
    if not match:
        return None
    unit = match[2]
    factor = 1024 if unit == "kB" else _UNIT.get(unit.lower())
    if factor is None:
        return None
    return round(float(match[1]) * factor)


def format_size(n: int | None) -> str:
    """PyTorch-style binary size with two decimals; "unknown" for None."""
    if n is None:
        return "unknown"
    value = float(abs(n))
    sign = "-" if n < 0 else ""
    if value <= 1024:
        return f"{sign}{int(value)} bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            return f"{sign}{value:.2f} {unit}"
    raise AssertionError("unreachable")
