"""The guard that keeps a telling from being read in a condition, advice or a question.

A writer's words tell a failure ("the card died", "nvidia-smi does not work in the pod"); the
same words after "if", "you" or "should" are a condition or advice to the reader. Signatures
that read tellings open with a guard: the line, from its start, holds none of the given words.
Each signature names its own words (a hardware telling also stops at "might", a driver's at
"check"), so the guard is declared here once and each signature passes its words.
"""

from __future__ import annotations


def unless_words(words: str, also: str = "") -> str:
    """A pattern for a line's start and the text before a telling, on a line without any of
    ``words`` (an alternation, ``"if|you|avoid\\w*"``, matched as whole words and in any case)
    nor ``also`` (an alternation matched anywhere: words of scripts without word boundaries,
    ``"如果|是否"``)."""
    other = f"|{also}" if also else ""
    return rf"^(?i:(?:(?!\b(?:{words})\b{other})[^\n])*?)"
