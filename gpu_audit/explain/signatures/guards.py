"""The guard that keeps a telling from being read in a condition, advice or a question.

A writer's words tell a failure ("the card died", "nvidia-smi does not work in the pod"); the
same words after "if", "you" or "should" are a condition or advice to the reader. Signatures
that read tellings open with a guard: the line, from its start, holds none of the given words.
Each signature names its own words (a hardware telling also stops at "might", a driver's at
"check"), so the guard is declared here once and each signature passes its words. Some guards
also end at a question mark or a sentence's end (a telling read in a longer paragraph), or
start after a sentence break or behind a check of the whole line: those pass ``stop`` and
``start``.
"""

from __future__ import annotations


def unless_words(words: str, also: str = "", *, start: str = "^", stop: str = r"\n") -> str:
    """A pattern for the text before a telling that holds none of ``words`` (an alternation,
    ``"if|you|avoid\\w*"``, matched as whole words and in any case) nor ``also`` (an
    alternation matched anywhere: words of scripts without word boundaries, ``"如果|是否"``).

    The text begins where ``start`` matches (a line's start; ``r"(?:^|(?<=[.!;:] ))"`` for a
    sentence's, ``""`` where the pattern around it places it) and holds none of the characters
    of ``stop`` (a character class's body: ``r"\\n?"`` keeps a question out as well)."""
    other = f"|{also}" if also else ""
    return rf"{start}(?i:(?:(?!\b(?:{words})\b{other})[^{stop}])*?)"


def unless_marks(marks: str, *, start: str = "^", stop: str = r"\n") -> str:
    """A pattern for the text before a telling that holds none of ``marks`` (an alternation
    matched anywhere and as written: a condition's or a question's words in a script without
    word boundaries, ``"如果|若|是否"``), from ``start`` and without the characters of ``stop``
    as in :func:`unless_words`."""
    return rf"{start}(?:(?!{marks})[^{stop}])*?"
