"""What a person pastes from a ``fix:`` line: the command, its `` \\`` continuations joined."""

from __future__ import annotations

import shlex


def pasted_commands(text: str) -> list[str]:
    """Each ``fix:`` command in ``text`` as the shell reads it once pasted."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        if "fix:" not in line:
            continue
        command = line.split("fix:", 1)[1].strip()
        j = i
        while command.endswith(" \\"):
            j += 1
            command = command[:-2] + " " + lines[j].strip()
        out.append(command)
    return out


def same_command(pasted: str, remedy_line: str) -> bool:
    """``pasted`` runs what ``remedy_line`` says (its trailing comment aside)."""
    return shlex.split(pasted, comments=True) == shlex.split(remedy_line, comments=True)
