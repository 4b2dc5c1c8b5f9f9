"""The verdict on an allocator configuration string for a torch release, and its repair."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_audit.errors import InputError
from gpu_audit.knowledge import allocator as ac


def codes(text: str, version: str | None = None) -> list[tuple[str, str]]:
    return [(i.severity, i.code) for i in ac.analyse(text, version).issues]


# --------------------------------------------------------------------------------- good input


@pytest.mark.parametrize("text", [
    "",
    "   ",
    "expandable_segments:True",
    "expandable_segments:False,max_split_size_mb:128",
    "max_split_size_mb:512,garbage_collection_threshold:0.7",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "roundup_power2_divisions:4",
    "backend:cudaMallocAsync",
    "pinned_num_register_threads:8,pinned_use_cuda_host_register:True",
    "expandable_segments:True,",  # one trailing comma is harmless
])
def test_valid_strings_have_no_issues(text):
    parsed = ac.analyse(text, "2.13.0")
    assert parsed.issues == []


def test_values_are_read_as_torch_reads_them():
    parsed = ac.analyse("max_split_size_mb:128,expandable_segments:True,"
                        "garbage_collection_threshold:0.6,roundup_power2_divisions:[256:1,>:4]")
    assert parsed.value("max_split_size_mb") == 128
    assert parsed.value("expandable_segments") is True
    assert parsed.value("garbage_collection_threshold") == pytest.approx(0.6)
    assert parsed.value("roundup_power2_divisions") == [("256", 1), (">", 4)]
    assert parsed.key_names() == ["max_split_size_mb", "expandable_segments",
                                  "garbage_collection_threshold", "roundup_power2_divisions"]


# ---------------------------------------------------------------------------------- bad input


def test_unknown_key_suggests_the_intended_one():
    (issue,) = ac.analyse("expandable_segment:True").issues
    assert issue.code == "unknown-key"
    assert "did you mean 'expandable_segments'" in issue.message
    (issue,) = ac.analyse("Max-Split-Size-MB:128").issues
    assert "'max_split_size_mb'" in issue.message
    (issue,) = ac.analyse("totally_made_up:1").issues
    assert "did you mean" not in issue.message


@pytest.mark.parametrize("value,hint", [("true", "True"), ("1", "True"), ("FALSE", "False"),
                                        ("maybe", None)])
def test_booleans_are_case_sensitive_like_torch(value, hint):
    (issue,) = ac.analyse(f"expandable_segments:{value}").issues
    assert issue.severity == "error" and issue.code == "bad-value"
    assert issue.fix == (hint or "")


# Checked against torch 2.13.0 (CPU build), which raises for each of these.
@pytest.mark.parametrize("text,code", [
    ("max_split_size_mb:abc", "bad-value"),
    ("max_split_size_mb:99999999999999999999999", "bad-value"),
    ("garbage_collection_threshold:1.0", "bad-value"),
    ("garbage_collection_threshold:0", "bad-value"),
    ("garbage_collection_threshold:nan", "bad-value"),
    ("garbage_collection_threshold:abc", "bad-value"),
    ("roundup_power2_divisions:3", "bad-value"),
    ("roundup_power2_divisions:0", "bad-value"),
    ("roundup_power2_divisions:[300:2]", "bad-value"),
    ("roundup_power2_divisions:[256:3]", "bad-value"),
    ("large_segment_size_mb:10", "too-small"),
    ("max_non_split_rounding_mb:10", "too-small"),
])
def test_values_torch_refuses_are_errors(text, code):
    parsed = ac.analyse(text, "2.13.0")
    assert [(i.severity, i.code) for i in parsed.errors] == [("error", code)]


# The CUDA-specific keys are checked by the CUDA parser, absent from a CPU build; the rules
# (and error texts) follow that parser's source.
@pytest.mark.parametrize("text", [
    "backend:foo",
    "pinned_num_register_threads:3",
    "pinned_num_register_threads:256",
    "per_process_memory_fraction:1.5",
    "max_split_size_mb:[1:2]",
])
def test_values_the_cuda_parser_refuses_are_errors(text):
    parsed = ac.analyse(text, "2.13.0")
    assert [(i.severity, i.code) for i in parsed.errors] == [("error", "bad-value")]


@pytest.mark.parametrize("text,message", [
    ("max_split_size_mb:100x", "reads only the leading '100'"),
    ("garbage_collection_threshold:0.5x", "reads only the leading '0.5'"),
    ("max_split_size_mb:-5", "wraps -5 around"),
    ("expandable_segments:False,expandable_segments:True", "set twice"),
    ("roundup_power2_divisions:[]", "empty"),
    ("roundup_power2_divisions:[256:1,128:2]", "should ascend"),
    ("roundup_power2_divisions:[>:4,256:2]", "should come last"),
])
def test_strings_torch_accepts_but_misreads_are_warnings(text, message):
    # torch 2.13.0 accepts each of these silently; the warning says what it really reads.
    parsed = ac.analyse(text, "2.13.0")
    assert parsed.errors == []
    assert any(message in w.message for w in parsed.warnings), parsed.warnings


def test_backend_case_mistake_offers_the_right_spelling():
    (issue,) = ac.analyse("backend:cudamallocasync").issues
    assert issue.fix == "cudaMallocAsync"


# ------------------------------------------------------------------------------------ versions


@pytest.mark.parametrize("version,value,verdict", [
    ("2.0.1", 10, ("warning", "too-small")),  # raised to 20 silently
    ("2.5.1+cu124", 20, ("error", "too-small")),  # "must be > 20"
    ("2.9.1", 21, None),
    ("2.10.0", 20, None),  # "must be >= 20"
    ("2.10.0", 19, ("error", "too-small")),
    (None, 20, ("warning", "too-small")),  # fine on 2.10+, refused by 2.1-2.9
    (None, 19, ("error", "too-small")),
    (None, 21, None),
])
def test_max_split_minimum_follows_the_torch_version(version, value, verdict):
    found = codes(f"max_split_size_mb:{value}", version)
    assert found == ([verdict] if verdict else [])


@pytest.mark.parametrize("version,minimum", [
    ("2.0.1", 20), ("2.5.1+cu124", 21), ("2.10.0", 20), ("2.13.0+cpu", 20), (None, 21)])
def test_the_smallest_split_size_that_means_what_it_says(version, minimum):
    assert ac.max_split_minimum(version) == minimum


def test_large_segment_size_raises_the_split_minimum_as_in_torch_2_13():
    parsed = ac.analyse("max_split_size_mb:20,large_segment_size_mb:25", "2.13.0")
    (issue,) = parsed.errors
    assert ">= 25" in issue.message and issue.fix == "25"


def test_expandable_segments_before_2_1_is_refused():
    (issue,) = ac.analyse("expandable_segments:True", "2.0.1").issues
    assert issue.code == "version" and issue.severity == "error"
    assert ac.analyse("expandable_segments:True", "2.1.0").issues == []
    assert ac.supports_expandable_segments("2.0.1") is False
    assert ac.supports_expandable_segments("2.1.0") is True
    assert ac.supports_expandable_segments(None) is None


def test_keys_whose_first_release_is_only_estimated_give_a_warning():
    (issue,) = ac.analyse("large_segment_size_mb:25", "2.8.0").issues
    assert issue.code == "version" and issue.severity == "warning"
    assert "probably unknown" in issue.message


# ------------------------------------------------------------------------------------ repairs


def test_repaired_keeps_intent_and_drops_what_cannot_be_fixed():
    parsed = ac.analyse("Expandable_Segments:true,max_split_size_mb:19,foo:1", "2.9.1")
    fixed = ac.repaired(parsed)
    assert ac.analyse(fixed, "2.9.1").issues == []
    again = ac.analyse(fixed)
    assert again.value("expandable_segments") is True
    assert again.value("max_split_size_mb") == 21
    assert not again.has("foo")


def test_with_settings_replaces_adds_and_removes_keys():
    out = ac.with_settings("max_split_size_mb:128,garbage_collection_threshold:0.6",
                           {"expandable_segments": "True", "max_split_size_mb": None})
    assert out == "garbage_collection_threshold:0.6,expandable_segments:True"


def test_parse_raises_our_own_error_with_the_column():
    with pytest.raises(ac.AllocConfError) as caught:
        ac.parse("expandable_segments:true", "2.13.0", variable="PYTORCH_ALLOC_CONF")
    assert isinstance(caught.value, InputError)
    assert "column 21" in str(caught.value)
    assert str(caught.value).startswith("PYTORCH_ALLOC_CONF='expandable_segments:true'")
    assert ac.parse("expandable_segments:True").value("expandable_segments") is True


# --------------------------------------------------------------------------------------- fuzzing

_WORDS = st.sampled_from([*ac.KEYS, "True", "False", "true", "1", "0", "20", "21", "-5", "0.5",
                          "1e3", "nan", ">", "256", "cudaMallocAsync", "x", "", " "])
_PIECES = st.one_of(_WORDS, st.sampled_from(list(",:[]")), st.text(max_size=4))
CONFIG_LIKE = st.lists(_PIECES, max_size=14).map("".join)
VERSIONS = st.sampled_from([None, "2.0.1", "2.5.1+cu124", "2.9.1", "2.10.0", "2.13.0+cpu"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=60), CONFIG_LIKE), version=VERSIONS)
def test_analyse_never_raises_and_positions_stay_inside_the_string(text, version):
    parsed = ac.analyse(text, version)
    for issue in parsed.issues:
        assert 0 <= issue.start <= issue.end <= len(text)
        assert issue.severity in ("error", "warning")
        assert issue.message


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=60), CONFIG_LIKE))
def test_entries_as_written_agree_with_the_parser_on_sound_strings(text):
    parsed = ac.analyse(text)
    if parsed.errors or parsed.warnings:
        return
    assert ac.raw_settings(text) == dict(ac.pairs(parsed))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(st.text(max_size=60), CONFIG_LIKE), version=VERSIONS)
def test_parse_raises_nothing_but_its_own_error(text, version):
    try:
        ac.parse(text, version)
    except ac.AllocConfError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=CONFIG_LIKE, version=VERSIONS)
def test_repaired_strings_are_accepted_for_the_same_torch(text, version):
    fixed = ac.repaired(ac.analyse(text, version))
    assert ac.analyse(fixed, version).errors == []
