"""Allocator values read as torch reads them: ASCII digits only, and any length of digits is a
clear "too large", never a crash."""

from __future__ import annotations

import pytest

from gpu_audit.knowledge.allocator.checks import analyse
from gpu_audit.knowledge.allocator.values import strtod, strtoull


@pytest.mark.parametrize("digits", ["١٢٨", "１２８", "۱۲۸", "१२८", "𝟏𝟐𝟖"])
def test_unicode_digits_are_not_a_number(digits):
    assert strtoull(digits) == (None, digits)
    assert strtod(digits) == (None, digits)
    parsed = analyse(f"max_split_size_mb:{digits}")
    assert [i.code for i in parsed.issues] == ["bad-value"]
    assert "not a whole number" in parsed.issues[0].message


def test_a_number_after_unicode_digits_is_not_read_either():
    assert strtoull("12٣") == (12, "٣")


@pytest.mark.parametrize("conf", [
    "max_split_size_mb:" + "9" * 5000,
    "max_split_size_mb:-" + "1" * 4400,
    "garbage_collection_threshold:0." + "9" * 5000,
    "roundup_power2_divisions:[256:" + "8" * 5000 + "]",
    "max_split_size_mb:" + "0" * 5000 + "128",
])
def test_thousands_of_digits_are_an_issue_not_a_crash(conf):
    parsed = analyse(conf)
    assert parsed.issues or conf.endswith("0128")


def test_leading_zeros_do_not_count_as_too_large():
    assert strtoull("0" * 50 + "128") == (128, "")
