"""Whom a fleet merge expects, and who sent no document.

A merge of documents gathered by srun, a CI matrix or a Kubernetes Job cannot know from the
documents alone that a node is missing (it crashed before writing, its document was deleted, it
never ran). Told whom to expect (``--expect N``, a Slurm host list such as
``gpu[001-004,010],login1``, or the alive nodes of a Ray cluster), it names the nodes that sent
nothing. Pure: the host list is expanded here, bounded by :mod:`gpu_audit.bounds` before anything
is expanded, so a merge needs no Slurm installed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import product

from gpu_audit import bounds
from gpu_audit.errors import UsageError

_LITERAL = re.compile(r"[A-Za-z0-9._-]*")
_DIGITS = 18  # a host list's number: ample for any node name, far below int64


@dataclass(frozen=True)
class Expected:
    """What the merge was told: a count, names (in order, unique), and where they came from."""

    count: int | None = None
    names: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # "--expect", "--expect-nodes", "ray"


@dataclass(frozen=True)
class Expectation:
    """The merge's answer: how many were expected, how many counted nodes were found, and
    which expected nodes (by name, where names were given) sent no document."""

    expected: int
    found: int
    missing: list[str] = field(default_factory=list)
    missing_count: int = 0
    sources: tuple[str, ...] = ()


def short(name: str) -> str:
    """A host name as names are compared: case-blind, without its domain (``gpu001`` in a
    host list is ``GPU001.cluster.local`` in its document)."""
    return name.strip().lower().split(".", 1)[0]


def expectation(expected: Expected, present: Iterable[str], found: int) -> Expectation:
    """Compare ``expected`` with the host names of the nodes found (``present``; ``found``: how
    many counted nodes the merge has, documents that named no host included)."""
    seen = {short(name) for name in present if name}
    missing = [name for name in expected.names if short(name) not in seen]
    total = expected.count if expected.count is not None else len(expected.names)
    if expected.names and expected.count is not None:
        total = max(expected.count, len(expected.names))
    count = max(len(missing), total - found)
    return Expectation(expected=total, found=found, missing=missing, missing_count=max(0, count),
                       sources=expected.sources)


def expand_hostlist(text: str, where: str = "--expect-nodes",
                    limit: int = bounds.MAX_FLEET_NODES) -> list[str]:
    """The host names of a Slurm host list, in order, each once: ``gpu[001-003,010],login1`` is
    gpu001, gpu002, gpu003, gpu010, login1 (zero padding kept; several bracket groups in one name
    multiply). Commas and spaces separate names. A list naming more than ``limit`` hosts, or
    malformed, is a :class:`UsageError` (exit 3), decided before anything is expanded."""
    if len(text) > bounds.MAX_HOSTLIST_CHARS:
        raise UsageError(f"{where}: a host list of {len(text)} characters, more than the "
                         f"{bounds.MAX_HOSTLIST_CHARS} accepted")
    items = [_parse_item(item, where) for item in _split(text, where)]
    total = 0
    for groups in items:
        total += math.prod(_size(g) for g in groups)
        if total > limit:
            raise UsageError(f"{where}: names more than {limit} hosts (the most one fleet "
                             "merge expects)")
    names = dict.fromkeys("".join(parts) for groups in items
                          for parts in product(*(_expand(g) for g in groups)))
    if not names:
        raise UsageError(f"{where}: no host names in {text[:60]!r}")
    return list(names)


# A group of one item: a literal (a str) or a bracket's ranges [(low, high, width), ...].
_Group = str | list[tuple[int, int, int]]


def _split(text: str, where: str) -> list[str]:
    """The items of a host list: split at commas and spaces outside brackets."""
    items, start, depth = [], 0, 0
    for at, ch in enumerate(text + ","):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"{where}: nested '[' at character {at + 1}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"{where}: ']' without '[' at character {at + 1}")
        elif (ch == "," or ch.isspace()) and depth == 0:
            if text[start:at].strip():
                items.append(text[start:at].strip())
            start = at + 1
    if depth:
        raise UsageError(f"{where}: '[' without ']'")
    return items


def _parse_item(item: str, where: str) -> list[_Group]:
    """``rack[1-2]-gpu[01-04]`` as groups: "rack", [(1, 2, 1)], "-gpu", [(1, 4, 2)]."""
    groups: list[_Group] = []
    for at, part in enumerate(re.split(r"\[([^\]]*)\]", item)):
        if at % 2 == 0:
            if _LITERAL.fullmatch(part) is None:
                raise UsageError(f"{where}: {item[:60]!r} is not a host name (letters, digits, "
                                 "'.', '-' and '_', with [ranges])")
            if part:
                groups.append(part)
        else:
            groups.append([_range(r, item, where) for r in part.split(",")])
    return groups


def _range(text: str, item: str, where: str) -> tuple[int, int, int]:
    low, dash, high = text.strip().partition("-")
    high = high if dash else low
    for number in (low, high):
        if not (number.isascii() and number.isdigit()) or len(number) > _DIGITS:
            raise UsageError(f"{where}: [{text}] in {item[:60]!r} is not a number or a range "
                             "(e.g. [001-004,010])")
    if int(high) < int(low):
        raise UsageError(f"{where}: [{text}] in {item[:60]!r} runs backwards")
    return int(low), int(high), len(low)


def _size(group: _Group) -> int:
    return 1 if isinstance(group, str) else sum(high - low + 1 for low, high, _ in group)


def _expand(group: _Group) -> list[str]:
    if isinstance(group, str):
        return [group]
    return [f"{n:0{width}d}" for low, high, width in group for n in range(low, high + 1)]
