"""Unpickling data gpu-audit did not write (or may not have written) without trusting it.

A pickle can name any importable callable and run it while loading, and a small one can describe
a huge object: memo references let a few kilobytes stand for a list holding the same list a
million times, and ``set(...)`` of a long list copies it once per reference. :func:`loads_plain`
builds only builtin containers and primitives (no global is resolved except ``set``,
``frozenset`` and ``complex``, which are charged for what they copy), then measures the result as
a tree, counting every reference each time it is reached. Shared references cost nothing to
build but everything to walk, so the tree's size is what bounds the work of whoever reads the
data next. Real data shares small parts (PyTorch reuses one frame dictionary in many stack
traces), so the tree may be larger than the data, but only by a modest factor: a tree more than
:data:`MAX_EXPANSION` times the references actually stored, or larger than ``max_items``, is
refused. Cycles are refused too: plain data never refers to itself.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

# The only globals plain data may name: protocol 2 and older spell these through find_class.
PLAIN_GLOBALS = frozenset({"set", "frozenset", "complex"})
_MODULES = frozenset({"builtins", "__builtin__"})

# A pickle may stand for at most this many references in all (containers, keys, values, items),
# counted as a tree.
DEFAULT_MAX_ITEMS = 200_000_000
# ... and for at most this many times the references it stores, once past a million: a real
# snapshot's shared frame dictionaries (three keys each) inflate its tree some 5 to 10 times; a
# memo bomb, thousands of times. So a crafted file costs its reader at most this many times
# what an honest file of its size does.
MAX_EXPANSION = 16
_SMALL_TREE = 1_000_000
# ``set(...)`` and ``frozenset(...)`` may copy at most this many items in all (plain data that
# gpu-audit reads holds few sets, if any).
MAX_COPIED_ITEMS = 1_000_000

_CONTAINERS = (list, tuple, dict, set, frozenset)


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle asked for something other than plain data."""


class PickleTooLargeError(pickle.UnpicklingError):
    """The pickle describes more data than a reader should walk (a memo bomb), or a cycle."""


class PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds only builtin containers and primitives, within a copy budget."""

    def __init__(self, file: Any, *, refuse: str, max_items: int = DEFAULT_MAX_ITEMS) -> None:
        super().__init__(file)
        self._refuse = refuse
        self._budget = min(max_items, MAX_COPIED_ITEMS)

    def _charge(self, items: int) -> None:
        self._budget -= items
        if self._budget < 0:
            raise PickleTooLargeError("it describes more data than can be read safely")

    def _copying(self, kind: type) -> Any:
        def build(*args: Any) -> Any:
            if args and hasattr(args[0], "__len__"):
                self._charge(len(args[0]))
            return kind(*args)

        return build

    def find_class(self, module: str, name: str) -> Any:
        if module in _MODULES and name in PLAIN_GLOBALS:
            return complex if name == "complex" else self._copying(
                set if name == "set" else frozenset)
        raise UnsafePickleError(f"refusing to load {module}.{name}: {self._refuse}")


def expanded_items(root: Any, limit: int) -> int:
    """How many references ``root`` holds counted as a tree (shared parts counted each time).

    Raises :class:`PickleTooLargeError` past ``limit``, past :data:`MAX_EXPANSION` times the
    references stored, or on a cycle. Runs in time and memory proportional to the data stored,
    whatever the tree's size.
    """
    stored = 0
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        obj, finished = stack.pop()
        if not isinstance(obj, _CONTAINERS):
            continue
        key = id(obj)
        if finished:
            stored += len(obj) * (2 if isinstance(obj, dict) else 1)
            total = 1 + sum(sizes.get(id(child), 1) for child in _children(obj))
            if total > limit:
                raise PickleTooLargeError(
                    f"it describes more than {limit:,} items (shared references counted each "
                    "time they are reached), more than can be read safely")
            sizes[key] = total
            on_path.discard(key)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise PickleTooLargeError("it refers to itself (a cycle), which plain data never does")
        on_path.add(key)
        stack.append((obj, True))
        stack.extend((child, False) for child in _children(obj)
                     if isinstance(child, _CONTAINERS) and id(child) not in sizes)
    tree = sizes.get(id(root), 1)
    if tree > _SMALL_TREE and tree > MAX_EXPANSION * max(stored, 1):
        raise PickleTooLargeError(
            f"it repeats shared parts so often that its {stored:,} stored items stand for "
            f"{tree:,} (a memo bomb), more than can be read safely")
    return tree


def _children(obj: Any) -> Any:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield key
            yield value
    else:
        yield from obj


def loads_plain(data: bytes, *, refuse: str, max_items: int = DEFAULT_MAX_ITEMS) -> Any:
    """Unpickle plain data from ``data``; raises :class:`pickle.UnpicklingError` subclasses
    (and whatever a malformed stream raises) on anything else. ``refuse`` ends the message for a
    refused global (why this file should hold plain data only)."""
    value = PlainUnpickler(io.BytesIO(data), refuse=refuse, max_items=max_items).load()
    expanded_items(value, max_items)
    return value
