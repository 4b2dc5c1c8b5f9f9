"""Units, times and versions: the one place gpu-audit reads and writes them.

- Sizes: ``4GiB`` / ``512MiB`` / ``4G`` typed by a user and ``20.00 MiB`` / ``0 bytes`` /
  ``3.2 GB`` printed by logs are read by one parser with one unit table; sizes are shown by
  :func:`fmt_bytes` (``1.5 GiB``; ``precision=2`` gives PyTorch's own ``20.00 MiB`` style).
- Times: ISO 8601 in UTC with a ``Z`` (documents), and the compact ``20261122T101500Z`` stamp
  (file and folder names).
- Versions: torch's ``(major, minor)`` release from any version string, the torch installed in
  this environment (from package metadata; torch is never imported), dotted driver versions.
- Percentages are shown by :func:`fmt_pct` (``33.3%``); counts of things by :func:`plural`
  (``1 GPU``, ``2 GPUs``), never ``GPU(s)``.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from gpu_audit.bounds import MAX_INT_DIGITS
from gpu_audit.lazy import regex

KIB, MIB, GIB, TIB, PIB = 1024, 1024**2, 1024**3, 1024**4, 1024**5

# Unit spellings, lower-cased. "k"/"m"/"g"/"t" alone are binary (as `free -g` and PyTorch's
# flags mean them); "kb"/"mb"/... are decimal, as outside PyTorch. The kernel's "kB" (exact
# case) means KiB and is handled in :func:`_factor`.
_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "k": KIB, "kib": KIB, "kb": 1000,
    "m": MIB, "mib": MIB, "mb": 1000**2,
    "g": GIB, "gib": GIB, "gb": 1000**3,
    "t": TIB, "tib": TIB, "tb": 1000**4,
    "p": PIB, "pib": PIB, "pb": 1000**5,
}
# A size as PyTorch's format_size, numpy and the kernel print it inside a line of text.
SIZE = r"\d+(?:\.\d+)?\s?(?:bytes|[KMGTP]iB|[KMGTP]B|kB|B)\b"
_SIZE_PARTS = regex(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def _factor(unit: str) -> int | None:
    return KIB if unit == "kB" else _UNITS.get(unit.lower())


def size_or_none(text: str | None) -> int | None:
    """Bytes from ``"20.00 MiB"``, ``"4GiB"`` or ``"512"``; ``None`` when ``text`` is not a size.

    Sizes printed with two decimals are approximations; the result is rounded to whole bytes.
    """
    if text is None:
        return None
    match = _SIZE_PARTS().match(text)
    factor = _factor(match[2]) if match else None
    if match is None or factor is None:
        return None
    size = float(match[1]) * factor
    return round(size) if math.isfinite(size) else None  # hundreds of digits: not a size


def parse_size(text: str) -> int:
    """``4GiB`` -> 4294967296. Raises ``ValueError`` with a message a user can act on."""
    size = size_or_none(text)
    if size is None:
        raise ValueError(f"{text!r} is not a size (examples: 4GiB, 512MiB, 6G)")
    return size


def fmt_bytes(n: int | float | None, *, precision: int = 1, missing: str = "n/a") -> str:
    """The largest binary unit that keeps the number at 1 or more: ``1.5 GiB``, ``512 B``.

    ``precision=2, missing="unknown"`` writes sizes the way PyTorch's own messages do, so a
    number quoted back from a log reads the same.
    """
    if n is None:
        return missing
    value = float(n)
    for unit, size in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(value) >= size:
            return f"{value / size:.{precision}f} {unit}"
    return f"{int(value)} B"


def fmt_mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MIB:.0f} MiB"


def fmt_seconds(value: float | None) -> str:
    """A duration for people: ``850 µs``, ``12.3 ms``, ``2.50 s``; ``n/a`` when unknown."""
    if not isinstance(value, (int, float)):
        return "n/a"
    if value < 0.001:
        return f"{value * 1e6:.0f} µs"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def pct(part: float | None, whole: float | None) -> float | None:
    """``part`` as a percentage of ``whole``, one decimal; ``None`` when either is unknown."""
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 1)


def fmt_pct(value: object, *, decimals: int | None = None, missing: str = "n/a") -> str:
    """A percentage as printed everywhere: ``42.5%``; ``decimals`` fixes the places (``42%``,
    ``42.50%``), by default the shortest form of the number (``50%``, ``33.3%``). ``missing``
    stands for ``None`` or anything that is not a number (a JSON field gone wrong)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return missing
    return f"{value:.{decimals}f}%" if decimals is not None else f"{value:g}%"


def noun(count: int, word: str, many: str | None = None) -> str:
    """``word`` as it goes with ``count``: ``GPU`` for 1, ``GPUs`` otherwise (``many`` when the
    plural is not ``word`` + ``s``: ``noun(2, "process", "processes")``)."""
    return word if count == 1 else (many or f"{word}s")


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 GPU``, ``0 GPUs``, ``2 processes`` (with ``many="processes"``)."""
    return f"{count} {noun(count, word, many)}"


# --- time ------------------------------------------------------------------------------------


def utc_now(*, precise: bool = False) -> str:
    """Now as ISO 8601 in UTC (``2026-11-22T10:15:00Z``); ``precise`` adds milliseconds."""
    return utc_iso(dt.datetime.now(dt.UTC), precise=precise)


def utc_iso(moment: dt.datetime, *, precise: bool = False) -> str:
    """``moment`` (aware) as ISO 8601 in UTC with a ``Z``."""
    spec = "milliseconds" if precise else "seconds"
    return moment.astimezone(dt.UTC).isoformat(timespec=spec).replace("+00:00", "Z")


def parse_utc(text: str | None) -> dt.datetime | None:
    """An ISO 8601 time (``Z`` or an offset; naive means UTC) as an aware datetime, or None."""
    try:
        moment = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def utc_stamp(moment: dt.datetime | float | None = None) -> str:
    """``20261122T101500Z``: a sortable time for file and folder names (now by default)."""
    if moment is None:
        moment = dt.datetime.now(dt.UTC)
    elif isinstance(moment, (int, float)):
        moment = dt.datetime.fromtimestamp(moment, dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


# --- versions --------------------------------------------------------------------------------

Release = tuple[int, int]  # torch's (major, minor); patch releases never changed the allocator


def torch_release(version: str | None) -> Release | None:
    """``"2.9.1+cu128"`` -> (2, 9); ``"2.12.0.dev20260301"`` -> (2, 12); ``None`` when unknown."""
    if not version:
        return None
    # ASCII digits, at most MAX_INT_DIGITS a part: a version read from a document may be
    # hostile, and int() of thousands of digits raises (or costs quadratic time).
    match = re.match(rf"\s*v?([0-9]{{1,{MAX_INT_DIGITS}}})\.([0-9]{{1,{MAX_INT_DIGITS}}})(?![0-9])",
                     version)
    return (int(match[1]), int(match[2])) if match else None


def release_text(release: Release) -> str:
    return f"{release[0]}.{release[1]}"


def version_tuple(text: str) -> tuple[int, ...] | None:
    """``"535.104.05"`` -> (535, 104, 5), for comparing driver and CUDA versions; ``None`` when
    ``text`` is not a version: no number in it, or a part longer than MAX_INT_DIGITS digits
    (a version read from a document may be hostile; no driver numbers a part that way)."""
    parts = re.findall(r"[0-9]+", text)
    if not parts or any(len(part) > MAX_INT_DIGITS for part in parts):
        return None
    return tuple(int(part) for part in parts)


def installed_torch_version() -> str | None:
    """The installed torch's version from package metadata; torch itself is never imported."""
    import importlib.metadata  # here: most commands never ask

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
