"""The outside facts the log shapes rely on: NCCL's result codes, the shell's word for a
SIGKILL in each language, the allocator options that conflict with expandable segments."""

from __future__ import annotations

import re

from gpu_audit.knowledge.allocator import expandable_conflicts, raw_settings
from gpu_audit.knowledge.nccl import NCCL_RESULTS, nccl_error_text
from gpu_audit.knowledge.signals import KILLED_WORDS, SIGKILL_EXIT_STATUS, killed_words_pattern


def test_nccl_result_codes_by_number_and_by_enum_name() -> None:
    assert nccl_error_text(2) == nccl_error_text("2") == "unhandled system error"
    assert nccl_error_text("ncclRemoteError") == nccl_error_text("RemoteError") == (
        "remote process exited or there was a network error")
    assert nccl_error_text(None) is None and nccl_error_text(99) is None
    assert sorted(NCCL_RESULTS) == list(range(1, 8))


def test_the_killed_words_pattern_matches_each_word_whole() -> None:
    pattern = re.compile(rf"^(?:{killed_words_pattern()})$")
    for word in KILLED_WORDS.values():
        assert pattern.match(word), word
    assert not pattern.match("Kill") and SIGKILL_EXIT_STATUS == 137


def test_expandable_segments_conflicts() -> None:
    both = raw_settings("expandable_segments:True,max_split_size_mb:128,"
                        "garbage_collection_threshold:0.8")
    assert expandable_conflicts(both) == ["max_split_size_mb", "garbage_collection_threshold"]
    assert expandable_conflicts(raw_settings("expandable_segments:False,max_split_size_mb:128")) \
        == []
    assert expandable_conflicts(raw_settings("max_split_size_mb:128")) == []
