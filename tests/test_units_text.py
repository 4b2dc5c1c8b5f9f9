"""The percentage and count wording every output shares (gpu_audit.units)."""

from __future__ import annotations

import pytest

from gpu_audit.units import fmt_pct, noun, plural


@pytest.mark.parametrize(("value", "kwargs", "text"), [
    (50.0, {}, "50%"), (33.3, {}, "33.3%"), (0, {}, "0%"), (12.345, {"decimals": 1}, "12.3%"),
    (7, {"decimals": 0}, "7%"), (None, {}, "n/a"), (None, {"missing": "-"}, "-"),
    ("12", {}, "n/a"), (True, {}, "n/a"), ({"x": 1}, {"decimals": 1}, "n/a"),
])
def test_percentages(value, kwargs, text) -> None:
    assert fmt_pct(value, **kwargs) == text


@pytest.mark.parametrize(("count", "args", "text"), [
    (1, ("GPU",), "1 GPU"), (0, ("GPU",), "0 GPUs"), (4, ("NVIDIA GPU",), "4 NVIDIA GPUs"),
    (1, ("process", "processes"), "1 process"), (3, ("process", "processes"), "3 processes"),
    (2, ("time",), "2 times"),
])
def test_counts(count, args, text) -> None:
    assert plural(count, *args) == text
    assert noun(count, *args) == text.split(" ", 1)[1]
