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

# Whole sentences skipped before a guard, from a line's start (after its own checks of the
# whole line), and the break a guard then does not cross (pass it in ``also``): the guard covers
# only the telling's own sentence, so an earlier sentence's question or condition ("is there
# any way I can change the batch size? I always get an error saying tensorflow ran out of
# memory") does not keep a later telling from being read. Every sentence break is tried, and
# each sentence is read once (the guard stops at the next break): linear in the line.
SENTENCE_BREAK = r"[.!?;] |[。！？；]"
SKIP_SENTENCES = r"(?:[^\n]*?(?:(?<=[.!?;] )|(?<=[。！？；])))??"


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


# The words that say a change fixed the writer's run, in the past: the change was made and the
# run went through ("fixed it", "solved the issue", "did the trick"). Not the present tense ("X
# fixes this"): a guide's or a release note's sentence says that.
_CURED_WHAT = ("it", "this", "that", "the issue", "the problem", "the crash", "the error",
               "the hang")
CURED = (r"(?i:\b(?:fixed|solved|resolved) (?:" + "|".join(_CURED_WHAT) + r")\b|"
         r"\bdid the trick\b)")
# ... or, right after the change, that the run worked ("--medvram worked", "NCCL_IB_DISABLE=1 made
# it work")
_WORKED = r"(?i:\b(?:worked|made it work)\b)"
# ... the literals one of which a line that tells a cure holds (the signatures' needles)
CURED_NEEDLES = (*(stem + what for stem in ("ixed ", "olved ") for what in _CURED_WHAT),
                 "the trick", "worked", "made it work")
# The words before a cure that make it a condition, a guess, advice or a cure that did not work.
_NOT_CURED = (r"if|whether|unless|should|might|may|could|would|maybe|perhaps|hope\w*|not|never|"
              r"didn't|hasn't|haven't|doesn't|wasn't|won't|without")


def cure_told(cures: str) -> str:
    """A pattern for a change told as what fixed the writer's run: one of ``cures`` (an
    alternation: "NCCL_P2P_DISABLE=1", "more swap") then :data:`CURED` within the same stretch
    of text ("Setting NCCL_P2P_DISABLE=1 fixed it"), or the other way round ("solved it by adding
    swap"); none of the words of a condition, advice or a negation before either."""
    guarded = unless_words(_NOT_CURED, stop=r"\n?")
    return (rf"(?:{guarded}(?:{cures})(?:(?i:(?!\b(?:{_NOT_CURED})\b))[^\n?]){{0,80}}?(?:{CURED})"
            rf"|{guarded}(?:{CURED}) (?:by|with|after|using) [^\n?]{{0,40}}?(?:{cures})"
            rf"|{guarded}(?:{cures})(?:(?i:(?!\b(?:{_NOT_CURED})\b))[^\n?.]){{0,20}}?{_WORKED})")
