"""The one policy: every key a rule reads, defined once with its one default, and the checks
every value must pass wherever it comes from.

:class:`Policy` is ``[tool.gpu-audit]``: the thresholds the scan rules read, the severity that
fails (``fail_on``) and the ids to leave out (``ignore``).
:class:`~gpu_audit.config.check_policy.CheckPolicy` adds the keys only ``gpu-audit check``
reads. Field names are the configuration keys (a public contract) and, upper-cased behind
``GPU_AUDIT_``, the environment variables.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import msgspec

from gpu_audit.bounds import MAX_INT_DIGITS
from gpu_audit.config.schema import (  # noqa: F401 - MODES and STAGES are exported here
    CHECK,
    MAX_NUMBER,
    MODES,
    ROOT,
    SETTINGS,
    default,
    key_types,
)
from gpu_audit.config.schema import CHECK_STAGES as STAGES  # noqa: F401 - exported here
from gpu_audit.errors import ConfigError
from gpu_audit.lazy import regex
from gpu_audit.model import Severity
from gpu_audit.units import GIB, MIB

# ASCII digits, at most MAX_INT_DIGITS a part (each part is converted with int() to compare).
_VERSION = regex(rf"[0-9]{{1,{MAX_INT_DIGITS}}}(?:\.[0-9]{{1,{MAX_INT_DIGITS}}})*")
_EXAMPLES = {"min_driver_version": "535.104.05", "min_cuda_driver_version": "12.4"}


NOT_KEYS = ("source",)  # fields of a policy that no configuration key sets


class Policy(msgspec.Struct, frozen=True):
    """Every threshold a rule reads (``[tool.gpu-audit]``); what each means, its default and
    range are declared in :mod:`gpu_audit.config.schema`."""

    max_swap_used_gib: float = default(ROOT, "max_swap_used_gib")
    min_host_available_pct: float = default(ROOT, "min_host_available_pct")
    min_free_vram_pct: float = default(ROOT, "min_free_vram_pct")
    unattributed_vram_allowance_mib: float = default(ROOT, "unattributed_vram_allowance_mib")
    alloc_fragmentation_pct: float = default(ROOT, "alloc_fragmentation_pct")
    temperature_margin_c: float = default(ROOT, "temperature_margin_c")
    busy_utilization_pct: float = default(ROOT, "busy_utilization_pct")
    small_gpu_gib: float = default(ROOT, "small_gpu_gib")
    xid_recent_hours: float = default(ROOT, "xid_recent_hours")
    keep_reports: int = default(ROOT, "keep_reports")
    unreleased_vram_min_gib: float = default(ROOT, "unreleased_vram_min_gib")
    fail_on: str = default(ROOT, "fail_on")
    # finding ids (and, for check, check ids)
    ignore: list[str] = msgspec.field(default_factory=list)
    source: str | None = None  # where the values came from; no key sets it (NOT_KEYS)

    @property
    def max_swap_used_bytes(self) -> int:
        return int(self.max_swap_used_gib * GIB)

    @property
    def unattributed_vram_allowance_bytes(self) -> int:
        return int(self.unattributed_vram_allowance_mib * MIB)

    @property
    def unreleased_vram_min_bytes(self) -> int:
        return int(self.unreleased_vram_min_gib * GIB)

    @property
    def fail_on_severity(self) -> Severity:
        return Severity.parse(self.fail_on)


def keys_of(cls: type[Policy]) -> dict[str, tuple[type, bool]]:
    """Key name -> (base type, may be unset) for every configuration key of ``cls``: the keys
    of ``[tool.gpu-audit]``, and for :class:`CheckPolicy` those of its check table too, as the
    schema declares them."""
    return key_types(ROOT) if cls is Policy else key_types(ROOT, CHECK)


def policy_keys() -> dict[str, tuple[type, bool]]:
    """The ``[tool.gpu-audit]`` keys: what the scan rules read."""
    return keys_of(Policy)


def _quoted(text: str) -> str:
    """A value quoted back in a message: escaped, and only its start when it is long."""
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}… ({len(text)} characters)"


def _magnitude(value: int | float) -> str:
    """A number too large for a setting, as a message shows it (an int of hundreds of digits
    cannot be formatted as a float, and printing it whole helps nobody)."""
    if isinstance(value, float):
        return f"{value:g}"
    if abs(value) < 10**MAX_INT_DIGITS:
        return f"{float(value):g}"
    return f"an integer of more than {MAX_INT_DIGITS} digits"


Complaint = Callable[[str, str], ConfigError]  # (key, message) -> an error naming where it is set


_CHECKED = {s.key: s for s in SETTINGS if s.table in (ROOT, CHECK)}


def validate_values(values: dict[str, Any], complain: Complaint) -> None:
    """Range and vocabulary of values already of the right type, as the schema declares them;
    ``complain(key, message)`` builds the error that names where ``key`` was set."""
    for key, value in values.items():
        declared = _CHECKED.get(key)
        if declared is None or value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            _check_number(declared, value, complain)
        elif declared.format == "severity":
            try:
                Severity.parse(value)
            except ValueError as exc:
                raise complain(key, f"key {key!r}: {exc}") from None
        elif declared.format == "regex":
            try:
                re.compile(value)
            except re.error as exc:
                raise complain(key, f"key {key!r} is not a valid regular expression: "
                                    f"{exc}") from None
        elif declared.format == "version" and not _VERSION().fullmatch(value):
            raise complain(key, f"key {key!r} must be a dotted version such as "
                                f"{_EXAMPLES[key]!r} (at most {MAX_INT_DIGITS} digits a part), "
                                f"got {_quoted(value)}")
        elif declared.choices and isinstance(value, str) and value not in declared.choices:
            raise complain(key, f"key {key!r} must be one of "
                                f"{', '.join(map(repr, declared.choices))}, got {value!r}")
        elif declared.choices and isinstance(value, list):
            for item in value:
                if item not in declared.choices:
                    raise complain(key, f"key {key!r}: unknown stage {item!r} "
                                        f"(check can run: {', '.join(declared.choices)})")


def _check_number(declared: Any, value: int | float, complain: Complaint) -> None:
    """Finite, not negative, at most MAX_NUMBER, and within the key's declared range."""
    key = declared.key
    if isinstance(value, float) and not math.isfinite(value):
        raise complain(key, f"key {key!r} must be a finite number, got {value!r}")
    if abs(value) > MAX_NUMBER:
        raise complain(key, f"key {key!r} is too large (at most {MAX_NUMBER:g}), "
                            f"got {_magnitude(value)}")
    if value < 0:
        raise complain(key, f"key {key!r} must not be negative, got {value!r}")
    if declared.unit == "%" and declared.high is not None and value > declared.high:
        raise complain(key, f"key {key!r} is a percentage (0-100), got {value!r}")
    if declared.low is not None:
        low, high = declared.low, MAX_NUMBER if declared.high is None else declared.high
        if value < low or (value == low and declared.low_open) or value > high:
            above = f"above {low:g}" if declared.low_open else f"at least {low:g}"
            raise complain(key, f"key {key!r} must be {above} and at most {high:g} "
                                f"({declared.unit}), got {value!r}")
