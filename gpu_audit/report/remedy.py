"""Remedies laid out so that what is pasted is what was meant.

A remedy is either a shell command (``pip install …``, ``export …``, ``kill …``; perhaps with a
trailing ``# comment``) or a sentence that quotes commands in backticks. A command is never broken
inside an argument: it is printed whole when it fits, otherwise one argument (or flag and value)
per line joined by `` \\`` continuations, and its comment follows on ``#`` lines of its own.
"""

from __future__ import annotations

import re
import textwrap

from gpu_audit.report.escape import md_fence, md_prose

_COMMAND_START = re.compile(r"^(?:[a-z][\w.+-]*|\./\S+|/\S+)(?:\s|$)")
_CODE_SPAN = re.compile(r"`[^`\n]+`")  # a command quoted in a sentence


def is_command(line: str) -> bool:
    """A line to paste into a shell, not a sentence: it starts with a lower-case program name,
    a path, or a variable assignment, quotes nothing in backticks, and does not end as a
    sentence or a step of a list does (``.`` or ``;``)."""
    text = line.strip()
    code = split_comment(text)[0]
    return bool(_COMMAND_START.match(text)) and "`" not in code and not code.endswith((".", ";"))


def split_comment(line: str) -> tuple[str, str]:
    """``(command, comment)``: the comment from the first ``#`` that starts a word outside
    quotes (without the ``#``), or ``""``."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1:].strip()
    return line.rstrip(), ""


def shell_words(command: str) -> list[str]:
    """The words of ``command`` as written (quotes kept), split at unquoted whitespace."""
    words, current, quote = [], "", ""
    for ch in command:
        if quote:
            current += ch
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            current += ch
        elif ch.isspace():
            if current:
                words.append(current)
            current = ""
        else:
            current += ch
    if current:
        words.append(current)
    return words


def _argument_groups(words: list[str]) -> list[str]:
    """Words with each ``--flag`` joined to its value, so a flag never ends a line."""
    groups: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if (word.startswith("-") and "=" not in word and i + 1 < len(words)
                and not words[i + 1].startswith("-")):
            groups.append(f"{word} {words[i + 1]}")
            i += 2
        else:
            groups.append(word)
            i += 1
    return groups


def command_lines(line: str, width: int) -> list[str]:
    """``line`` as lines of at most ``width`` characters where arguments allow: whole if it
    fits, else continued with `` \\`` between whole arguments (later lines indented by two),
    its comment on ``# `` lines after it."""
    if len(line) <= width:
        return [line]
    command, comment = split_comment(line)
    out: list[str] = []
    current = ""
    for group in _argument_groups(shell_words(command)):
        candidate = f"{current} {group}" if current else group
        if current and len(candidate) + 2 > width:
            out.append(current + " \\")
            current = "  " + group
        else:
            current = candidate
    if current:
        out.append(current)
    if comment:
        out += ["# " + part for part in textwrap.wrap(comment, max(width - 2, 20),
                                                       break_long_words=False,
                                                       break_on_hyphens=False)]
    return out


def wrapped(text: str, width: int, indent: str = "") -> list[str]:
    """Prose wrapped at ``width`` between words, never inside one (a flag such as ``--device``
    must not break across lines); later lines start with ``indent``. A command quoted in
    backticks is not broken either (half a command on each line pastes as two). A word or
    quoted command wider than ``width`` stays whole on a line of its own."""
    # Spaces inside a quoted command become a character the text lacks, then spaces again.
    glue = next((chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text), "")
    held = _CODE_SPAN.sub(lambda m: m[0].replace(" ", glue), text) if glue else text
    lines = textwrap.wrap(held, max(width, 20), subsequent_indent=indent,
                          break_long_words=False, break_on_hyphens=False)
    return [line.replace(glue, " ") if glue else line for line in lines] or [text]


def fix_lines(line: str, width: int, prefix: str) -> list[str]:
    """A remedy line after ``prefix`` (``"    fix: "``): a command stays whole or continues with
    `` \\`` between whole arguments; a sentence wraps between words."""
    pad = " " * len(prefix)
    if not is_command(line):
        return wrapped(prefix + line, width, indent=pad)
    first, *rest = command_lines(line, max(width - len(prefix), 20))
    return [prefix + first, *(pad + more for more in rest)]


def remedy_markdown(remedy: str) -> str:
    """A remedy as markdown: commands in a code block to copy, sentences as text."""
    blocks: list[str] = []
    code: list[str] = []
    for line in remedy.splitlines():
        if is_command(line):
            code.append(line.strip())
            continue
        if code:
            blocks.append(md_fence("\n".join(code)))
            code = []
        if line.strip():
            blocks.append(md_prose(line.strip()))
    if code:
        blocks.append(md_fence("\n".join(code)))
    return "\n\n".join(blocks)
