"""Command lines shortened for a person: whole arguments only, the ones that tell copies apart.

A GPU process's command line is often a long interpreter path followed by a script and many
options. Shortened, it keeps the program, the script or module, and the arguments that tell one
copy from another (``--port``, ``--local-rank`` and the like), marks what was left out with
``…``, and never shows a flag without its value.
"""

from __future__ import annotations

import os

ELLIPSIS = "…"

# Arguments that tell one copy of a program from another; shown whenever the command is cut.
KEY_FLAGS = frozenset({
    "--port", "-p", "--bind", "-b", "--local-rank", "--local_rank", "--rank", "--node-rank",
    "--node_rank", "--nproc-per-node", "--nproc_per_node", "--master-port", "--master_port",
})
_INTERPRETERS = frozenset({"node", "ruby", "perl", "bash", "sh", "java"})
# Python options that take a value: ``python -X dev script.py``.
_PY_VALUE_OPTIONS = frozenset({"-X", "-W", "-Q"})


def interpreter(name: str) -> bool:
    """``python3.11``, ``pypy3``, ``node``, ``bash``, ...: the pattern
    ``^(python[\\d.]*|pypy[\\d.]*|node|ruby|perl|bash|sh|java)$`` read as text (compiling it
    would cost every scan more than reading), a line break allowed at the end as ``$`` allows."""
    body = name[:-1] if name.endswith("\n") else name
    if body in _INTERPRETERS:
        return True
    for prefix in ("python", "pypy"):
        if body.startswith(prefix):
            return all(c == "." or c.isdecimal() for c in body[len(prefix):])
    return False


def _base(token: str) -> str:
    return os.path.basename(token.rstrip("/")) or token if "/" in token else token


def _is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not token[1:2].isdigit()


def _takes_value(tokens: list[str], i: int) -> bool:
    """``tokens[i]`` is a flag without ``=`` and the next token is its value."""
    return (_is_flag(tokens[i]) and "=" not in tokens[i] and i + 1 < len(tokens)
            and not _is_flag(tokens[i + 1]))


def _head(tokens: list[str]) -> int:
    """How many leading tokens name what runs: the program, then a script or ``-m module``."""
    if not interpreter(_base(tokens[0])):
        return 1
    i = 1
    while i < len(tokens):
        token = tokens[i]
        if token in ("-m", "-c") and i + 1 < len(tokens):
            return i + 2
        if token in _PY_VALUE_OPTIONS:
            i += 2
            continue
        if not _is_flag(token):
            return i + 1
        i += 1
    return len(tokens)


def _groups(tokens: list[str], start: int) -> list[list[int]]:
    """Token indexes from ``start`` on, a flag and its value kept together."""
    groups, i = [], start
    while i < len(tokens):
        if _takes_value(tokens, i):
            groups.append([i, i + 1])
            i += 2
        else:
            groups.append([i])
            i += 1
    return groups


def _is_key(tokens: list[str], group: list[int]) -> bool:
    flag = tokens[group[0]].split("=", 1)[0]
    return flag in KEY_FLAGS


def _join(tokens: list[str], shown: set[int]) -> str:
    out, skipped = [], False
    for i, token in enumerate(tokens):
        if i in shown:
            if skipped:
                out.append(ELLIPSIS)
            out.append(token)
            skipped = False
        else:
            skipped = True
    if skipped:
        out.append(ELLIPSIS)
    return " ".join(out)


def command_head(argv: list[str], count: int) -> str:
    """The first ``count`` arguments of ``argv``, one more when the last is a flag whose value
    follows: ``uvicorn app:app --host 127.0.0.1``, never ``uvicorn app:app --host``."""
    tokens = list(argv)
    end = min(count, len(tokens))
    if end and end < len(tokens) and _takes_value(tokens, end - 1):
        end += 1
    return " ".join(tokens[:end])


def short_command(argv: list[str], width: int) -> str:
    """``argv`` as at most ``width`` characters, cut at argument boundaries.

    Whole when it fits; then with the program and script paths reduced to their names; then the
    program, script or module and the distinguishing arguments, adding the others from the left
    while they fit, with ``…`` for each run of left-out arguments. Only a head that alone is
    wider than ``width`` is cut inside an argument.
    """
    width = max(width, 1)
    tokens = [t for t in argv if t != ""]
    if not tokens:
        return ""
    full = " ".join(tokens)
    if len(full) <= width:
        return full
    head = _head(tokens)
    tokens = [_base(t) if i < head else t for i, t in enumerate(tokens)]
    full = " ".join(tokens)
    if len(full) <= width:
        return full
    shown = set(range(head))
    groups = _groups(tokens, head)
    for group in groups:
        if _is_key(tokens, group):
            shown.update(group)
    if len(_join(tokens, shown)) > width:
        return _essentials(tokens, head, [g for g in groups if _is_key(tokens, g)], width)
    for group in groups:
        trial = shown | set(group)
        if len(_join(tokens, trial)) <= width:
            shown = trial
    return _join(tokens, shown)


def _essentials(tokens: list[str], head: int, keys: list[list[int]], width: int) -> str:
    """The program, script and distinguishing arguments in ``width``: a script or module
    without its interpreter, then whole units (a flag with its value) from the left while they
    fit, then ``…``."""
    units = [tokens[i] for i in range(head)] + [" ".join(tokens[i] for i in g) for g in keys]
    if head >= 2 and interpreter(tokens[0]):
        # The script or module says more than the interpreter running it.
        units = units[head - 1:]
        trial = " ".join([units[0], ELLIPSIS, *units[1:]]) if len(units) > 1 else units[0]
        if len(trial) <= width:
            return trial
    kept: list[str] = []
    for unit in units:
        if len(" ".join([*kept, unit, ELLIPSIS])) > width:
            break
        kept.append(unit)
    if kept:
        return " ".join([*kept, ELLIPSIS])
    return units[0][: width - 1] + ELLIPSIS
