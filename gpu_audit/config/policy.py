"""The one policy: every key a rule reads, defined once with its one default, and the checks
every value must pass wherever it comes from.

:class:`Policy` is ``[tool.gpu-audit]``: the thresholds the scan rules read, the severity that
fails (``fail_on``) and the ids to leave out (``ignore``).
:class:`~gpu_audit.config.check_policy.CheckPolicy` adds the keys only ``gpu-audit check``
reads. Field names are the configuration keys (a public contract) and, upper-cased behind
``GPU_AUDIT_``, the environment variables.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.bounds import MAX_INT_DIGITS
from gpu_audit.errors import ConfigError
from gpu_audit.lazy import regex
from gpu_audit.model import Severity
from gpu_audit.units import GIB, MIB

# No threshold needs more (a petabyte in GiB, 30,000 years in hours); larger ones overflow.
MAX_NUMBER = 1e12
MODES = ("fail", "warn", "ignore")  # what a check makes of the problem it judges
STAGES = ("imports", "smoke")  # the validation stages check may run; later ones take minutes
# ASCII digits, at most MAX_INT_DIGITS a part (each part is converted with int() to compare).
_VERSION = regex(rf"[0-9]{{1,{MAX_INT_DIGITS}}}(?:\.[0-9]{{1,{MAX_INT_DIGITS}}})*")

# How a dataclass field's declared type (a string under ``from __future__ import annotations``)
# is read from a file or the environment: (base type, may be unset).
_DECLARED = {
    "float": (float, False), "float | None": (float, True), "int": (int, False),
    "str": (str, False), "str | None": (str, True), "bool": (bool, False),
    "list[str]": (list, False),
}


@dataclass(frozen=True)
class Policy:
    """Every threshold a rule reads (``[tool.gpu-audit]``)."""

    max_swap_used_gib: float = 2.0
    min_host_available_pct: float = 10.0
    min_free_vram_pct: float = 10.0
    unattributed_vram_allowance_mib: float = 512.0
    alloc_fragmentation_pct: float = 50.0
    temperature_margin_c: float = 5.0
    busy_utilization_pct: float = 20.0  # a GPU this busy should run its PCIe link at full speed
    small_gpu_gib: float = 8.0  # at or below this, allocator advice is given unasked
    xid_recent_hours: float = 24.0  # application-caused Xids older than this are only noted
    keep_reports: int = 50  # reports per command kept in the report folder (0: keep all)
    # diff (and the Slurm epilog): memory in use that no process accounts for may grow this much
    unreleased_vram_min_gib: float = 1.0
    fail_on: str = "error"
    ignore: list[str] = field(default_factory=list)  # finding ids (and, for check, check ids)
    source: str | None = field(default=None, metadata={"internal": True})

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


# Keys with a narrower range than "not negative, at most MAX_NUMBER": key -> (lowest, whether
# the lowest itself is allowed, highest, unit for messages).
RANGES: dict[str, tuple[float, bool, float, str]] = {
    "unreleased_vram_min_gib": (0.0, False, MAX_NUMBER, "GiB"),
    "slurm_hook_deadline_s": (0.0, False, 3600.0, "seconds"),
    "slurm_settle_s": (0.0, True, 300.0, "seconds"),
}

MODE_KEYS = ("free_vram", "swap", "duplicate_backends", "unattributed_vram", "foreign_processes",
             "own_processes")


def keys_of(cls: type[Policy]) -> dict[str, tuple[type, bool]]:
    """Key name -> (base type, may be unset) for every configuration key of ``cls``."""
    return {f.name: _DECLARED[str(f.type)] for f in dataclasses.fields(cls)
            if not f.metadata.get("internal")}


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


def validate_values(values: dict[str, Any], complain: Complaint) -> None:
    """Range and vocabulary of values already of the right type; ``complain(key, message)``
    builds the error that names where ``key`` was set."""
    for key, value in values.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                raise complain(key, f"key {key!r} must be a finite number, got {value!r}")
            if abs(value) > MAX_NUMBER:
                raise complain(key, f"key {key!r} is too large (at most {MAX_NUMBER:g}), "
                                    f"got {_magnitude(value)}")
            if value < 0:
                raise complain(key, f"key {key!r} must not be negative, got {value!r}")
            if key.endswith("_pct") and value > 100:
                raise complain(key, f"key {key!r} is a percentage (0-100), got {value!r}")
            if key in RANGES:
                low, low_allowed, high, unit = RANGES[key]
                if value < low or (value == low and not low_allowed) or value > high:
                    above = f"at least {low:g}" if low_allowed else f"above {low:g}"
                    raise complain(key, f"key {key!r} must be {above} and at most {high:g} "
                                        f"({unit}), got {value!r}")
    for key in MODE_KEYS:
        if key in values and values[key] not in MODES:
            raise complain(key, f"key {key!r} must be one of {', '.join(map(repr, MODES))}, "
                                f"got {values[key]!r}")
    for key in ("fail_on", "warn_on"):
        if key in values:
            try:
                Severity.parse(values[key])
            except ValueError as exc:
                raise complain(key, f"key {key!r}: {exc}") from None
    if values.get("gpu_name") is not None:
        try:
            re.compile(values["gpu_name"])
        except re.error as exc:
            raise complain("gpu_name",
                           f"key 'gpu_name' is not a valid regular expression: {exc}") from None
    for key, example in (("min_driver_version", "535.104.05"), ("min_cuda_driver_version", "12.4")):
        if values.get(key) is not None and not _VERSION().fullmatch(values[key]):
            raise complain(key, f"key {key!r} must be a dotted version such as {example!r} "
                                f"(at most {MAX_INT_DIGITS} digits a part), "
                                f"got {_quoted(values[key])}")
    for stage in values.get("stages") or []:
        if stage not in STAGES:
            raise complain("stages", f"key 'stages': unknown stage {stage!r} "
                                     f"(check can run: {', '.join(STAGES)})")
