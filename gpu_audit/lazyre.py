"""Regular expressions compiled on first use.

Compiling a module's patterns at import time costs every command that imports it, even one that
never matches anything (a scan of a machine with no GPU processes, a kernel log with no Xid
line). ``pattern = lazy(r"...")`` defers that to the first ``pattern()`` call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


def lazy(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """A function returning ``re.compile(pattern, flags)``, compiled once, on the first call."""
    return functools.cache(lambda: re.compile(pattern, flags))
