"""Work deferred to first use, so that importing gpu-audit costs only what a command needs.

- ``pattern = regex(r"...")``: a regular expression compiled on the first ``pattern()`` call.
  Compiling at import time costs every command that imports the module, even one that never
  matches anything (a scan of a machine with no GPU processes, a kernel log with no Xid line).
- ``__getattr__, __dir__ = exports(__name__, {"name": "defining.module"}, globals())``: a
  package's public names imported on first access (PEP 562), then kept in its namespace.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, MutableMapping
from typing import Any


def regex(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """A function returning ``re.compile(pattern, flags)``, compiled once, on the first call."""
    return functools.cache(lambda: re.compile(pattern, flags))


def exports(
    package: str, names: dict[str, str], namespace: MutableMapping[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each of ``names`` is imported from its
    module on first access and stored in ``namespace``, so later lookups cost nothing."""

    def getattr_(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *names})

    return getattr_, dir_
