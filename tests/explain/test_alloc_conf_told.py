"""Allocator settings that broke a run, in other programs' words: torch.cuda.MemPool against
expandable segments, a writer who says expandable_segments:True makes the program fail,
PYTORCH_NO_CUDA_MEMORY_CACHING=0, and the cudaMallocAsync backend named by an application's
setting, its traceback or its assertion's condition. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.knowledge.allocator import NO_CACHING_VAR
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_mempool_against_expandable_segments() -> None:
    pool = root("mempool_expandable_segments.log")
    assert pool.signature == "alloc-conf/mempool-expandable"
    assert "expandable_segments:False" in pool.remedy


def test_expandable_segments_told_failing_in_a_title() -> None:
    told = root("expandable_told_title.log")
    assert told.signature == "alloc-conf/expandable-told"
    assert told.numbers.get("option") == "expandable_segments"


def test_expandable_segments_in_a_condition_is_no_failure() -> None:
    assert not [i for i in incidents("expandable_told_condition.log") if i.is_failure]


def test_no_caching_set_to_zero_is_the_root_of_a_report() -> None:
    zero = root("no_caching_zero_told.log")
    assert zero.signature == "alloc-conf/no-caching-zero"
    assert zero.remedy.startswith("Remove the variable") and f"unset {NO_CACHING_VAR}" in (
        zero.remedy)


@pytest.mark.parametrize(("name", "named"), [
    ("async_unsupported_app_path.log", "ComfyUI selects it by default"),
    ("async_unsupported_setting_words.log", "the log names it"),
])
def test_operation_not_supported_with_the_async_backend_named(name: str, named: str) -> None:
    unsupported = root(name)
    assert unsupported.signature == "alloc-conf/async-operation-unsupported"
    assert named in unsupported.explanation


def test_the_async_backends_condition_without_its_file() -> None:
    assert root("async_assert_condition_title.log").signature == "alloc-conf/async-assert"
