"""The allocator configuration syntax: torch's tokenizer, positions, entries as written."""

from __future__ import annotations

import pytest

from gpu_audit.knowledge import allocator as ac

# ---------------------------------------------------------------------------------- tokenizer


def test_tokens_keep_offsets_into_the_original_string():
    text = " expandable_segments : True ,max_split_size_mb:1 00"
    tokens = ac.tokenize(text)
    assert [t.text for t in tokens] == [
        "expandable_segments", ":", "True", ",", "max_split_size_mb", ":", "100"]
    for token in tokens:
        assert text[token.start:token.end].replace(" ", "") == token.text
    assert tokens[0].start == 1
    assert tokens[-1].start == text.index("1 00")


def test_torch_drops_whitespace_inside_words_and_so_do_we():
    # torch reads "True max_split_size_mb" as the single word "Truemax_split_size_mb"
    parsed = ac.analyse("expandable_segments:True max_split_size_mb:100")
    assert parsed.errors
    assert [t.text for t in ac.tokenize("a:b c")] == ["a", ":", "bc"]
    assert ac.normalised(" a : 1 ") == "a:1"
    assert ac.normalised(None) is None


# ------------------------------------------------------------------------------------- syntax


def test_syntax_error_points_at_the_offending_column():
    text = "expandable_segments:True:x"
    (issue,) = ac.analyse(text).issues
    assert issue.code == "syntax" and issue.severity == "error"
    assert issue.start == text.index(":x")
    assert issue.excerpt(text).splitlines()[1] == " " * issue.start + "^"
    assert ac.describe(issue).startswith(f"column {issue.start + 1}: ")


@pytest.mark.parametrize("text,column", [
    ("max_split_size_mb", 18),  # no ':' after the key: reported just after it
    ("max_split_size_mb:", 19),  # no value
    (":True", 1),  # no key
    ("a:b:c", 4),
    ("roundup_power2_divisions:[256:1,512:2", 26),  # unclosed list: from its '['
    ("roundup_power2_divisions:[256:1,,512:2]", 33),
    ("expandable_segments:True,,max_split_size_mb:100", 26),
    (",", 1),
])
def test_broken_syntax_is_an_error_with_its_position(text, column):
    parsed = ac.analyse(text)
    syntax = [i for i in parsed.errors if i.code == "syntax"]
    assert syntax, parsed.issues
    assert syntax[0].start + 1 == column


def test_one_mistake_does_not_cascade_into_bogus_keys():
    parsed = ac.analyse("roundup_power2_divisions:[256,512:2],expandable_segments:True")
    assert [i.code for i in parsed.errors] == ["syntax"]
    assert parsed.value("expandable_segments") is True


# ------------------------------------------------------- strings a running torch has accepted


def test_entries_split_at_top_level_commas_only():
    conf = ("max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,>:4],"
            "expandable_segments:True")
    assert ac.split_alloc_conf(conf) == [
        "max_split_size_mb:128", "roundup_power2_divisions:[256:1,512:2,>:4]",
        "expandable_segments:True"]
    assert ac.raw_settings(conf) == {
        "max_split_size_mb": "128",
        "roundup_power2_divisions": "[256:1,512:2,>:4]",
        "expandable_segments": "True",
    }
    assert ac.raw_settings("") == {} and ac.raw_settings(None) == {}
    assert ac.split_alloc_conf(" a : 1 ,, b:2,") == ["a:1", "b:2"]


def test_raw_settings_keep_keys_the_table_does_not_know():
    assert ac.raw_settings("some_future_key:7,expandable_segments:true") == {
        "some_future_key": "7", "expandable_segments": "true"}


def test_with_setting_replaces_one_key_and_keeps_every_other_entry():
    assert ac.with_setting("a:1,expandable_segments:False", "expandable_segments", "True") == \
        "a:1,expandable_segments:True"
    assert ac.with_setting("roundup_power2_divisions:[256:1,>:4]", "max_split_size_mb", "512") == \
        "roundup_power2_divisions:[256:1,>:4],max_split_size_mb:512"
    assert ac.with_setting(None, "expandable_segments", "True") == "expandable_segments:True"


def test_render_keeps_the_last_value_of_a_key():
    assert ac.render([("a", "1"), ("b", "2"), ("a", "3")]) == "b:2,a:3"
