"""Where a hung command waits: the line each process's main thread is on, from its stack dump.

The hook makes SIGUSR1 write every thread's stack into the process's registration file
(faulthandler's format, innermost frame first). Of each dump, the main thread's stack is read
(the thread whose outermost frame is not ``threading``'s bootstrap), and in it the innermost
frame of the user's own code: not Python's library, not an installed package (``torch``, a
launcher's ``bin/`` entry point such as ``torchrun``), not gpu-audit. A process with no frame of
its own (``torchrun``'s launcher waiting in ``api.py _invoke_run``) comes after those with one.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

_PACKAGE = str(Path(__file__).resolve().parents[2])
_PREFIXES = {sys.prefix, sys.base_prefix, sys.exec_prefix}
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):")


def library_frame(frame: str) -> bool:
    """A frame (``File "PATH", line N in NAME``) in Python's library, an installed package,
    an installed program's entry point, or gpu-audit itself."""
    match = re.match(r'File "([^"]+)"', frame)
    path = match[1] if match else ""
    return (path.startswith(_PACKAGE) or "site-packages" in path or "dist-packages" in path
            or path.startswith("<")
            or any(path.startswith(p + os.sep + sub) for p in _PREFIXES for sub in ("lib",
                                                                                   "bin")))


def threads(dump: str) -> list[list[str]]:
    """The frames of each thread in ``dump``, innermost first."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in dump.splitlines():
        if _THREAD.match(line) or line.startswith("Stack (most recent call first)"):
            current = []
            blocks.append(current)
        elif current is not None and line.startswith("  File "):
            current.append(line.strip())
        elif line.strip():
            current = None
    return blocks


def main_thread(dump: str) -> list[str]:
    """The main thread's frames, innermost first (empty when the dump holds none)."""
    blocks = [b for b in threads(dump) if b]
    for frames in blocks:
        outer = frames[-1]
        if not (outer.endswith(" in _bootstrap") and "threading.py" in outer):
            return frames
    return blocks[0] if blocks else []


def waiting_line(dump: str) -> dict[str, Any]:
    """Where the main thread waits: its innermost frame of the user's own code (``where``),
    the innermost frame (``innermost``), and whether ``where`` is the user's (``own``)."""
    frames = main_thread(dump)
    if not frames:
        return {"where": None, "innermost": None, "own": False}
    own = next((f for f in frames if not library_frame(f)), None)
    return {"where": own or frames[0], "innermost": frames[0], "own": own is not None}


def describe(entry: dict[str, Any]) -> str:
    """One process's waiting line as a sentence part: ``rank 0 (pid 12) at File ...``."""
    who = f"rank {entry['rank']}" if entry.get("rank") is not None else "a process"
    text = f"{who} (pid {entry['pid']}) at {entry['where']}"
    if entry.get("innermost") and entry["innermost"] != entry["where"]:
        text += f", waiting in {entry['innermost']}"
    return text


def order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """User frames first: processes with a line of their own, rank 0 first; then the rest."""
    return sorted(entries, key=lambda e: (not e.get("own"), e.get("rank") is None,
                                          e.get("rank") or 0, e.get("pid") or 0))
