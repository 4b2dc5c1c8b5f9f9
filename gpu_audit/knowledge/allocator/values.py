"""What torch reads from one value of each kind, and what is wrong with it.

Each check takes a key's :class:`~.keys.KeySpec` and its parsed value and returns (what torch
would read, or None when it refuses the value; the issues found). Numbers are read the way
torch's ``std::stoull`` / ``std::stod`` read them, which accept a leading number and ignore the
rest: ``100x`` is 100, and ``-5`` wraps around to 2**64 - 5.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gpu_audit.knowledge.allocator.grammar import ConfIssue, Token, Value
from gpu_audit.knowledge.allocator.keys import BACKENDS, BOOL_WORDS, KeySpec

UINT64_MAX = 2**64 - 1

Check = Callable[[KeySpec, Any], tuple[Any, list[ConfIssue]]]


def strtoull(text: str) -> tuple[int | None, str]:
    """What C's ``strtoull`` (torch's ``std::stoull``) reads: (value or None, unread rest).

    A leading sign is allowed and a minus wraps around (``-5`` reads as 2**64 - 5); ``None``
    means no digits at all, or a number too large (torch raises for both). Only ASCII digits
    count, as in C: ``١٢٨`` is not a number.
    """
    match = re.match(r"([+-]?)([0-9]+)", text)
    if not match:
        return None, text
    digits = match[2].lstrip("0") or "0"
    if len(digits) > len(str(UINT64_MAX)):  # also keeps int() below its digit limit
        return None, text
    number = int(digits)
    if number > UINT64_MAX:
        return None, text
    if match[1] == "-" and number:
        number = 2**64 - number
    return number, text[match.end():]


_FLOAT_PREFIX = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)",
    re.IGNORECASE | re.ASCII,
)


def strtod(text: str) -> tuple[float | None, str]:
    """What C's ``strtod`` (torch's ``std::stod``) reads: (value or None, unread rest)."""
    match = _FLOAT_PREFIX.match(text)
    if not match:
        return None, text
    return float(match[0]), text[match.end():]


def _leftover(spec: KeySpec, token: Token, rest: str, read: str) -> list[ConfIssue]:
    if not rest:
        return []
    return [ConfIssue(
        "lenient", f"torch reads only the leading {read!r} of {token.text!r} for {spec.name} "
        f"and ignores {rest!r}", token.start, token.end, "warning", key=spec.name, fix=read)]


def _check_bool(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    if token.text in ("True", "False"):
        return token.text == "True", []
    fix = BOOL_WORDS.get(token.text.lower())
    hint = f" (write {fix})" if fix else ""
    return None, [ConfIssue(
        "bad-value", f"{spec.name} must be exactly True or False (torch is case-sensitive), "
        f"got {token.text!r}{hint}", token.start, token.end, key=spec.name, fix=fix or "")]


def _check_mb(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    number, rest = strtoull(token.text)
    if number is None:
        problem = "too large" if re.match(r"[+-]?[0-9]", token.text) else "not a whole number"
        return None, [ConfIssue(
            "bad-value", f"{spec.name} must be a whole number of MiB; {token.text!r} is "
            f"{problem}", token.start, token.end, key=spec.name, fix="")]
    issues = _leftover(spec, token, rest, token.text[: len(token.text) - len(rest)])
    if token.text.startswith("-") and number:
        issues.append(ConfIssue(
            "lenient", f"{spec.name} is negative; torch wraps {token.text} around to {number}, "
            "which means no limit at all", token.start, token.end, "warning", key=spec.name,
            fix=""))
    if spec.minimum is not None and number < spec.minimum:
        floor = spec.minimum - 1
        issues.append(ConfIssue(
            "too-small", f"{spec.name} must be above {floor}, got {number}", token.start,
            token.end, key=spec.name, fix=str(spec.minimum) if spec.minimum > 0 else ""))
    return number, issues


def _check_fraction(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    number, rest = strtod(token.text)
    if number is None:
        return None, [ConfIssue(
            "bad-value", f"{spec.name} must be a number, got {token.text!r}", token.start,
            token.end, key=spec.name, fix="")]
    issues = _leftover(spec, token, rest, token.text[: len(token.text) - len(rest)])
    if spec.name == "garbage_collection_threshold":
        if not 0.0 < number < 1.0:  # NaN fails both comparisons, as in torch
            issues.append(ConfIssue(
                "bad-value", f"garbage_collection_threshold must lie strictly between 0 and 1 "
                f"(torch: \"set it in (0.0, 1.0)\"), got {token.text}", token.start,
                token.end, key=spec.name, fix=""))
    elif not 0.0 <= number <= 1.0:
        issues.append(ConfIssue(
            "bad-value", f"{spec.name} must lie between 0 and 1, got {token.text}",
            token.start, token.end, key=spec.name, fix=""))
    return number, issues


def _check_backend(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    if token.text in BACKENDS:
        return token.text, []
    fix = next((b for b in BACKENDS if b.lower() == token.text.lower()), None)
    hint = f" (write {fix}: torch is case-sensitive)" if fix else ""
    return None, [ConfIssue(
        "bad-value", f"backend must be native or cudaMallocAsync, got {token.text!r}{hint}",
        token.start, token.end, key=spec.name, fix=fix or "")]


def _power_of_two(number: int) -> bool:
    return number > 0 and number & (number - 1) == 0


def _check_threads(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    number, rest = strtoull(token.text)
    if number is None:
        return None, [ConfIssue("bad-value", f"{spec.name} must be a whole number, got "
                                f"{token.text!r}", token.start, token.end, key=spec.name, fix="")]
    issues = _leftover(spec, token, rest, token.text[: len(token.text) - len(rest)])
    if not _power_of_two(number) or number > 128:
        issues.append(ConfIssue(
            "bad-value", f"{spec.name} must be a power of 2 no larger than 128, got {number}",
            token.start, token.end, key=spec.name, fix=""))
    return number, issues


def _check_divisions(spec: KeySpec, value: Value) -> tuple[Any, list[ConfIssue]]:
    if isinstance(value, Token):
        number, rest = strtoull(value.text)
        if number is None:
            return None, [ConfIssue("bad-value", f"{spec.name} must be a power of 2 or a list "
                                    f"like [256:1,>:4], got {value.text!r}", value.start,
                                    value.end, key=spec.name, fix="")]
        issues = _leftover(spec, value, rest, value.text[: len(value.text) - len(rest)])
        if not _power_of_two(number):
            issues.append(ConfIssue("bad-value", f"{spec.name} must be a power of 2, got "
                                    f"{number}", value.start, value.end, key=spec.name, fix=""))
        return number, issues
    issues: list[ConfIssue] = []
    pairs: list[tuple[str, int]] = []
    previous: int | None = None
    for index, (interval, divisions) in enumerate(value):
        if interval.text == ">":
            if index != len(value) - 1:
                issues.append(ConfIssue(
                    "lenient", "the '>' entry should come last: it fills every interval after "
                    "the last one listed", interval.start, divisions.end, "warning",
                    key=spec.name))
            label = ">"
        else:
            size, rest = strtoull(interval.text)
            if size is None or not _power_of_two(size):
                issues.append(ConfIssue(
                    "bad-value", f"{spec.name}: interval {interval.text!r} must be a power of 2 "
                    "(in MiB) or '>'", interval.start, interval.end, key=spec.name, fix=""))
                continue
            issues.extend(_leftover(spec, interval, rest, str(size)))
            if previous is not None and size <= previous:
                issues.append(ConfIssue(
                    "lenient", f"{spec.name}: intervals should ascend ({size} follows "
                    f"{previous}); torch does not sort them", interval.start, interval.end,
                    "warning", key=spec.name))
            previous = size
            label = str(size)
        count, rest = strtoull(divisions.text)
        if count is None or not (count == 0 or _power_of_two(count)):
            issues.append(ConfIssue(
                "bad-value", f"{spec.name}: divisions {divisions.text!r} must be 0 or a power "
                "of 2", divisions.start, divisions.end, key=spec.name, fix=""))
            continue
        issues.extend(_leftover(spec, divisions, rest, str(count)))
        pairs.append((label, count))
    return pairs, issues


def _check_any(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    return token.text, []


VALUE_CHECKS: dict[str, Check] = {
    "bool": _check_bool,
    "mb": _check_mb,
    "fraction": _check_fraction,
    "backend": _check_backend,
    "threads": _check_threads,
    "divisions": _check_divisions,
    "any": _check_any,
}
