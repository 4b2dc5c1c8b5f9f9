"""The allocator configuration at fault as reports tell it, and messages pasted in the shapes
people paste them: an out-of-memory message one sentence per line in the middle of a report, a
status a heading names above the warning it restates. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import gib
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root

# --- an out-of-memory message pasted one sentence per line ---------------------------------------


def test_the_requested_size_on_a_line_of_its_own_mid_report_is_read() -> None:
    # ("Tried to allocate 2.25 GiB." has no prefilter key; it is read only as the next
    # sentence of the message above it, wherever the paste sits in the text)
    oom = root("oom_one_sentence_per_line_mid_report.log")
    assert oom.signature == "cuda-oom/caching-allocator"
    assert oom.numbers["requested_bytes"] == gib(2.25)
    assert oom.numbers["free_bytes"] == round(20.10 * 1024**3)


# --- a heading that names a status above the warning it restates --------------------------------


def test_a_heading_naming_a_status_over_its_warning_is_no_failure() -> None:
    found = incidents("cudnn_status_heading_over_plan_warning.log")
    assert not any(i.is_failure for i in found)
    heading = next(i for i in found if i.signature == "cudnn-failure/status")
    assert heading.line_numbers == [1] and heading.role == "context"


def test_a_heading_naming_a_status_over_its_error_or_alone_stays_a_failure() -> None:
    below = classify_text("# CUDNN_STATUS_NOT_SUPPORTED\n\nI get this on every run:\n"
                          "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may "
                          "appear if you passed in a non-contiguous input.\n")
    assert below[0].role == "root-cause" and below[0].cls == "cudnn-failure"
    alone = classify_text("# CUDNN_STATUS_EXECUTION_FAILED\n\nMy training stops at the first "
                          "convolution with this status.\n")
    assert alone[0].role == "root-cause" and alone[0].cls == "cudnn-failure"


def test_an_error_line_with_its_status_is_no_heading() -> None:
    found = classify_text("# the log\nRuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED\n"
                          "conv.py:456: UserWarning: Plan failed with a cudnnException: "
                          "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor "
                          "Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED\n")
    assert found[0].role == "root-cause" and found[0].signature == "cudnn-failure/status"


# --- internal asserts of the allocator that its configuration explains ---------------------------


def test_an_assert_in_the_async_backend_is_the_backend_failing() -> None:
    conf = root("async_backend_internal_assert_title.log")
    assert (conf.cls, conf.signature) == ("alloc-conf", "alloc-conf/async-assert")
    assert conf.numbers == {"source_file": "CUDAMallocAsyncAllocator.cpp", "source_line": 512}
    assert "backend:cudaMallocAsync" in conf.remedy


def test_an_assert_on_an_expandable_segments_pages_is_a_half_mapped_segment() -> None:
    conf = root("expandable_half_mapped_assert_told.log")
    assert (conf.cls, conf.signature) == ("alloc-conf", "alloc-conf/expandable-mapping-assert")
    assert conf.numbers["assertion"] == "!handles_.at(i)"
    assert conf.numbers["source_line"] == 455
    assert "expandable_segments:False" in conf.remedy


def test_other_internal_asserts_in_the_caching_allocator_are_not_these() -> None:
    found = classify_text('RuntimeError: block->pool INTERNAL ASSERT FAILED at '
                          '"../c10/cuda/CUDACachingAllocator.cpp":1201\n')
    assert not any(i.signature in ("alloc-conf/async-assert",
                                   "alloc-conf/expandable-mapping-assert") for i in found)


# --- the cudaMallocAsync backend named away from its error ---------------------------------------


@pytest.mark.parametrize("name", [
    # the option named in the title only, the error pasted in single backticks over lines
    "async_flag_in_title_error_in_backticks.log",
    # the option named before the error on the same line
    "async_option_before_error_title.log",
])
def test_operation_not_supported_with_the_async_backend_named(name: str) -> None:
    conf = root(name)
    assert (conf.cls, conf.signature) == ("alloc-conf", "alloc-conf/async-operation-unsupported")
    assert "backend:cudaMallocAsync" in conf.remedy


def test_an_error_in_a_backtick_quote_within_a_sentence_stays_a_quotation() -> None:
    found = classify_text("The docs say `RuntimeError: CUDA error: operation not supported` "
                          "means the backend is missing, see the cuda-malloc notes.\n")
    assert not any(i.is_failure for i in found)


# --- a change made because its run printed an allocator warning ----------------------------------


def test_a_change_pasting_the_deprecation_warning_its_title_names_reports_it() -> None:
    conf = root("pr_renames_deprecated_alloc_variable.log")
    assert (conf.cls, conf.signature) == ("alloc-conf", "alloc-conf/deprecated-variable")
    assert conf.numbers["variable"] == "PYTORCH_CUDA_ALLOC_CONF"
    assert conf.line_numbers == [8]


def test_a_change_about_something_else_still_quotes_the_warning() -> None:
    found = incidents("pr_unrelated_pastes_deprecation_warning.log")
    assert found and not any(i.is_failure for i in found)


def test_a_change_quoting_the_warning_as_source_code_reports_nothing() -> None:
    found = classify_text(
        "# Deprecate PYTORCH_CUDA_ALLOC_CONF in favour of PYTORCH_ALLOC_CONF\n\n"
        "## Solution\nThe allocator now calls\n```\nTORCH_WARN_ONCE(\"PYTORCH_CUDA_ALLOC_CONF is "
        "deprecated, use PYTORCH_ALLOC_CONF instead\");\n```\n")
    assert not any(i.is_failure for i in found)


def test_the_option_a_platform_ignored_is_named() -> None:
    found = classify_text("[W1120 11:02:12.000000000 CUDACachingAllocator.cpp:823] Warning: "
                          "expandable_segments not supported on this platform (function "
                          "operator())\n")
    assert found[0].numbers == {"option": "expandable_segments"}
