"""What a failed command said: its last error line, the last frames of its traceback, and a
plain reading of a Python exception when ``gpu-audit explain`` knows no signature for it.

Pure: reads the (already redacted) tail of a stage log. The lines gpu-audit itself writes
there (``gpu-audit: running ...``, the worker's and the hook's) are not the command's.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

FRAMES_SHOWN = 3
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)(?:, in (.+))?$')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?::\s*(.*))?$")  # as Python prints one
_ARGPARSE = re.compile(r"^\S+: error: (.+)$")
_OURS = ("gpu-audit", "=== ")


def read_error(tail: str) -> dict[str, Any] | None:
    """The command's error in ``tail``: ``error_line`` (its own words), ``frames`` (the last
    frames of its last traceback, innermost last, each with its source line), ``exception``
    and ``message`` (a Python exception), ``user_frame`` (``file:line`` of the innermost frame
    of the user's own code) and ``kind`` (``python``, ``arguments`` or ``output``); ``None``
    when the command printed nothing."""
    lines = [line.rstrip() for line in tail.splitlines()
             if line.strip() and not line.startswith(_OURS)]
    if not lines:
        return None
    start = max((i for i, line in enumerate(lines)
                 if line.startswith("Traceback (most recent call last)")), default=None)
    if start is not None:
        found = _python_error(lines[start + 1:])
        if found is not None:
            return found
    for line in reversed(lines):
        match = _ARGPARSE.match(line)
        if match and any(other.startswith("usage:") for other in lines):
            return {"kind": "arguments", "error_line": line, "frames": [],
                    "exception": None, "message": match[1], "user_frame": None}
    return {"kind": "output", "error_line": lines[-1], "frames": [], "exception": None,
            "message": None, "user_frame": None}


def _python_error(lines: list[str]) -> dict[str, Any] | None:
    frames: list[dict[str, Any]] = []
    error_line = None
    for position, line in enumerate(lines):
        match = _FRAME.match(line)
        if match:
            code = lines[position + 1].strip() if position + 1 < len(lines) and \
                not _FRAME.match(lines[position + 1]) and lines[position + 1].startswith(" ") \
                else ""
            frames.append({"file": match[1], "line": int(match[2]), "function": match[3],
                           "code": code})
        elif frames and not line.startswith((" ", "\t")):
            error_line = line
            break
    if error_line is None:
        return None
    exception = _EXCEPTION.match(error_line)
    own = next((f for f in reversed(frames) if not library_file(f["file"])), None)
    return {"kind": "python", "error_line": error_line, "frames": frames[-FRAMES_SHOWN:],
            "exception": exception[1] if exception else None,
            "message": (exception[2] or "") if exception else error_line,
            "user_frame": f"{own['file']}:{own['line']}" if own else None}


def frame_lines(error: dict[str, Any]) -> list[str]:
    """The traceback's last frames as Python prints them (two lines each)."""
    lines = []
    for frame in error.get("frames") or []:
        where = f'  File "{frame["file"]}", line {frame["line"]}'
        lines.append(where + (f", in {frame['function']}" if frame.get("function") else ""))
        if frame.get("code"):
            lines.append(f"    {frame['code']}")
    return lines


def reading(error: dict[str, Any]) -> str | None:
    """A plain reading of the error, for when no explain signature matched."""
    if error.get("kind") == "arguments":
        return (f"the script's argument parser refused the command line ({error['message']}): "
                "check the words after `--` against the script's --help")
    if error.get("kind") != "python" or not error.get("exception"):
        return None
    text = f"the script raised {error['exception']}"
    if error.get("message"):
        text += f" ({error['message']})"
    if error.get("user_frame"):
        text += f" in your code at {error['user_frame']}"
    elif error.get("frames"):
        last = error["frames"][-1]
        text += f" at {last['file']}:{last['line']}"
    return text


def library_file(path: str) -> bool:
    """A file of Python's own library, an installed package, or gpu-audit itself."""
    package = str(Path(__file__).resolve().parents[1])
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return (path.startswith(package) or "site-packages" in path or "dist-packages" in path
            or path.startswith("<") or any(path.startswith(p + os.sep + "lib") for p in prefixes))
