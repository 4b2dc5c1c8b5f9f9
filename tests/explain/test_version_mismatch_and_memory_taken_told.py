"""NCCL's ranks on different NCCL releases (its start-up check's message, and the same told), a
run told taking all of the host's RAM, and the GPU's memory told taken by another user's work;
guides and checklists that name the same conditions raise nothing. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.signatures.nccl import _nccl_release
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_nccl_s_check_names_both_ranks_and_their_releases() -> None:
    found = root("nccl_version_mismatch_printed.log")
    assert found.signature == "nccl/version-mismatch"
    assert {key: found.numbers[key] for key in ("rank_a", "version_a", "rank_b", "version_b")} == {
        "rank_a": 0, "version_a": "2.19.3", "rank_b": 8, "version_b": "2.18.5"}
    assert "Rank 0 runs NCCL 2.19.3 and rank 8 NCCL 2.18.5" in found.explanation


@pytest.mark.parametrize(("code", "release"), [
    ("21903", "2.19.3"), ("22005", "2.20.5"), ("2708", "2.7.8"), ("2406", "2.4.6"), ("", None)])
def test_nccl_version_codes_read_as_releases(code: str, release: str | None) -> None:
    assert _nccl_release(code) == release


@pytest.mark.parametrize(("name", "signature"), [
    ("nccl_version_mismatch_told.log", "nccl/version-mismatch"),
    ("host_ram_used_up_told.log", "host-oom/out-of-ram-told"),
    ("gpu_memory_taken_by_other_user_told.log", "cuda-oom/memory-told"),
])
def test_told_in_words(name: str, signature: str) -> None:
    assert root(name).signature == signature


@pytest.mark.parametrize("name", [
    "nccl_version_advice_guide.log", "gpu_memory_check_other_users_advice.log"])
def test_guides_naming_the_conditions_raise_nothing(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure]


def test_nccl_s_check_with_absurd_numbers_reads_no_release() -> None:
    line = ("NCCL WARN Mismatched NCCL version detected : rank 0 version " + "9" * 40
            + " rank 1 version 21805")
    assert not [i for i in classify_text(line, torch_version=None)
                if i.signature == "nccl/version-mismatch" and "version_a" in i.numbers]
