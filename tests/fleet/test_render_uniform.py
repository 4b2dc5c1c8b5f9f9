"""Columns of mixed types become text before Parquet sees them, without pandas warnings."""

from __future__ import annotations

import warnings

import pytest

pd = pytest.importorskip("pandas")

from gpu_audit.fleet.render import _uniform  # noqa: E402


def test_mixed_columns_become_text_and_the_rest_is_kept():
    frame = pd.DataFrame({"ecc": [True, "enabled", None], "name": ["a", "b", None],
                          "gpus": [8, 4, 2], "pct": [1.5, float("nan"), 3.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        uniform = _uniform(frame)
    assert uniform["ecc"].tolist()[:2] == ["True", "enabled"] and pd.isna(uniform["ecc"].iloc[2])
    assert uniform["name"].tolist()[:2] == ["a", "b"] and pd.isna(uniform["name"].iloc[2])
    assert uniform["gpus"].tolist() == [8, 4, 2] and uniform["gpus"].dtype == frame["gpus"].dtype
    assert uniform["pct"].iloc[0] == 1.5 and pd.isna(uniform["pct"].iloc[1])
    assert frame["ecc"].tolist() == [True, "enabled", None]  # the input is left alone
