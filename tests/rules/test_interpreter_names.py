"""Interpreter names read as text agree with the patterns they spell out."""

from __future__ import annotations

import random
import re

from gpu_audit.rules.cmdline import interpreter
from gpu_audit.rules.duplicates import python_name

INTERPRETER = re.compile(r"^(python[\d.]*|pypy[\d.]*|node|ruby|perl|bash|sh|java)$")
PYTHON = re.compile(r"^(python|pypy)(\d+(\.\d+)?)?$")
PIECES = ["python", "pypy", "node", "ruby", "perl", "bash", "sh", "java", "3", "11", ".", "\n",
          "\u0663", "x", "-", " ", "/usr/bin/", "3.11"]


def _names() -> list[str]:
    rng = random.Random(2026)
    fixed = ["python", "python3", "python3.11", "python3.", "python.3", "pypy3.10", "python3.1.2",
             "node\n", "node\n\n", "sh", "bash5", "python\u0663", "Python3", "", "\n"]
    return fixed + ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
                    for _ in range(20_000)]


def test_interpreter_agrees_with_its_pattern():
    for name in _names():
        assert interpreter(name) == (INTERPRETER.match(name) is not None), repr(name)


def test_python_name_agrees_with_its_pattern():
    for name in _names():
        assert python_name(name) == (PYTHON.match(name) is not None), repr(name)
