"""Memory failures and allocator settings told in words: an allocator option torch ignored,
expandable segments named as the subject that does not work, vLLM's sleep mode freeing nothing,
a cuDNN status a reply says was the GPU's memory (memory growth, "I was out of GPU memory"), the
GPU's memory told filled or run out of, a server told killed, and a pull request's "## Fix"
section, which is no remedy offered to readers. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_expandable_segments_as_the_subject_that_does_not_work() -> None:
    told = root("expandable_subject_does_not_work_title.log")
    assert told.signature == "alloc-conf/expandable-told"
    assert told.numbers.get("option") == "expandable_segments"


def test_an_allocator_option_told_ignored() -> None:
    told = root("option_ignored_told_title.log")
    assert told.signature == "alloc-conf/option-ignored-told"
    assert told.numbers.get("option") == "max_split_size_mb"
    assert "PYTORCH_ALLOC_CONF" in told.remedy and "PYTORCH_CUDA_ALLOC_CONF" in told.remedy


def test_an_option_ignored_in_advice_is_no_failure() -> None:
    assert not [i for i in incidents("option_ignored_advice.log") if i.is_failure]


def test_sleep_mode_that_freed_nothing() -> None:
    sleep = next(i for i in incidents("sleep_mode_freed_nothing.log")
                 if i.signature == "alloc-conf/sleep-freed-nothing")
    assert sleep.numbers == {"freed_gib": 0.0, "in_use_gib": 41.2}
    assert "expandable_segments:False" in sleep.remedy


def test_a_pull_requests_fix_section_does_not_make_its_paste_a_quote() -> None:
    assert root("change_fix_section_pasted_assert.log").signature == (
        "nvml-assert-oom/caching-allocator")


@pytest.mark.parametrize("name", ["cudnn_handle_fixed_by_memory_growth.log",
                                  "cudnn_status_writer_was_out_of_gpu_memory.log"])
def test_a_cudnn_status_told_to_be_the_gpus_memory(name: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/told-cause")
    assert found.title == "CUDA out of memory, reported as a cuDNN failure"


@pytest.mark.parametrize("name", ["gpu_memory_filled_told.log",
                                  "gpu_ran_out_of_resource_told.log"])
def test_gpu_memory_told_filled_or_run_out(name: str) -> None:
    assert root(name).cls == "cuda-oom"


def test_a_server_told_killed() -> None:
    assert root("server_killed_told.log").signature == "host-oom/shell-killed"
