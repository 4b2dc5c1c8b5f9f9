"""The guard that keeps a telling out of a condition, advice or a question (guards.py)."""

from __future__ import annotations

import re

from gpu_audit.explain.signatures.guards import unless_marks, unless_words

TOLD = r"\bthe card died\b"


def _reads(guard: str, line: str) -> bool:
    return re.search(guard + TOLD, line) is not None


def test_a_line_with_none_of_the_words_is_read_in_any_case() -> None:
    guard = unless_words("if|you")
    assert _reads(guard, "Yesterday the card died again")
    assert not _reads(guard, "IF the card died, reboot")
    assert not _reads(guard, "tell you when the card died")
    # whole words only: "gift" holds "if" and "your" holds "you" without being them
    assert _reads(guard, "a gift: the card died")


def test_also_words_are_refused_anywhere() -> None:
    guard = unless_words("if", also="如果")
    assert not _reads(guard, "如果 the card died")
    assert _reads(guard, "昨天 the card died")


def test_stop_keeps_a_question_mark_out_of_the_text_before_a_telling() -> None:
    guard = unless_words("if", stop=r"\n?")
    assert _reads(guard, "so the card died")
    assert not _reads(guard, "why? the card died")
    assert _reads(unless_words("if"), "why? the card died")  # the line's guard alone reads it


def test_start_opens_the_guard_after_a_sentence_break() -> None:
    guard = unless_words("if", start=r"(?:^|(?<=[.!;:] ))", stop=r"\n.!;")
    # the condition is in an earlier sentence; the telling's own sentence has none
    assert _reads(guard, "If it fails, call us. At 3am the card died")
    assert not _reads(guard, "Ok. If it fails, the card died")
    assert not _reads(unless_words("if"), "If it fails, call us. At 3am the card died")


def test_an_empty_start_leaves_the_place_to_the_pattern_around_it() -> None:
    guard = unless_words("if", start="")
    assert guard.startswith("(?i:")
    assert re.search(r"^(?=" + guard + r"X\b)", "a b X") is not None
    assert re.search(r"^(?=" + guard + r"X\b)", "if X") is None


def test_the_default_guard_is_the_lines_from_its_start() -> None:
    assert unless_words("if|you") == r"^(?i:(?:(?!\b(?:if|you)\b)[^\n])*?)"


def test_marks_are_refused_anywhere_and_as_written() -> None:
    guard = unless_marks("如果|若是|是否")
    assert re.search(guard + "报NCCL超时", "训练卡住，30分钟后报NCCL超时") is not None
    assert re.search(guard + "报NCCL超时", "如果训练卡住后报NCCL超时") is None
    assert re.search(guard + "报NCCL超时", "是否会报NCCL超时？") is None
    # the marks need no word boundary, and nothing else on the line stops the guard
    assert re.search(guard + "X", "ab-if X") is not None


def test_marks_guard_stops_where_told() -> None:
    guard = unless_marks("如果", stop=r"\n。")
    assert re.search(guard + "X", "好了 X") is not None
    assert re.search(guard + "X", "好了。X") is None
    assert unless_marks("如果") == r"^(?:(?!如果)[^\n])*?"
