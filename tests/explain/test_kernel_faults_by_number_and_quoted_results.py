"""Kernel faults printed as a status's number or in a driver wrapper's words, cuBLAS status
sentences after "Error:", kernel asserts whose "failed" a page wrapped, messages quoted inline as
what the writer's run returned, and a library reference's table of return values (no failure).
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "signature"), [
    # a molecular dynamics engine's "Error invoking kernel: CUDA error (700)"
    ("md_engine_kernel_fault_by_number.log", "illegal-memory-access/illegal-address"),
    # a renderer's driver-API wrapper: "CUDA error at cuCtxCreate: Illegal address"
    ("renderer_driver_words_illegal_address.log", "illegal-memory-access/illegal-address"),
    ("renderer_driver_words_launch_failed.log", "illegal-memory-access/launch-failure"),
])
def test_kernel_faults_by_number_and_in_driver_words(name: str, signature: str) -> None:
    assert root(name).signature == signature


@pytest.mark.parametrize(("line", "signature"), [
    ("RuntimeError: CUDA error 700 at kernels.cu:88", "illegal-memory-access/illegal-address"),
    ("Exception: Error invoking kernel: Invalid error code (700)",
     "illegal-memory-access/illegal-address"),
    ("Exception: Error invoking kernel: Invalid error code (719)",
     "illegal-memory-access/launch-failure"),
])
def test_status_numbers_of_kernel_faults(line: str, signature: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert failure.signature == signature


@pytest.mark.parametrize("line", [
    "CUDA error 7001 in the toy renderer",  # another number
    "CUDA error 700.5 ms after start",  # a figure, no status
    "Error invoking kernel: CUDA_ERROR_OUT_OF_MEMORY (2)",
])
def test_other_numbers_are_no_kernel_fault(line: str) -> None:
    assert not [i for i in classify_text(line, torch_version=None)
                if i.cls == "illegal-memory-access"]


def test_cublas_status_sentence_after_capital_error() -> None:
    failure = root("fp8_cublas_error_capital_title.log")
    assert failure.signature == "cublas-failure/status-sentence"
    assert failure.numbers["status"] == "CUBLAS_STATUS_NOT_SUPPORTED"


def test_kernel_assert_with_failed_cut_by_a_wrap() -> None:
    failure = root("lua_kernel_assert_failed_wrapped.log")
    assert failure.signature == "device-assert/kernel-assertion"
    assert failure.numbers["assertion"] == "t >= 0 && t < n_classes"


@pytest.mark.parametrize(("name", "signature"), [
    # "X returns `cuDNN error: ...` when ...", "this script results in `...`"
    ("quoted_message_a_run_returned.log", "cudnn-failure/status"),
    # "it throws this error for one of them:" then the quote on its own line
    ("quoted_message_thrown_for_one_input.log", "illegal-memory-access/illegal-address"),
])
def test_message_quoted_as_what_a_run_returned(name: str, signature: str) -> None:
    assert root(name).signature == signature


@pytest.mark.parametrize("name", [
    "library_reference_return_values_zh.log",
    # "returns `CUBLAS_STATUS_...` when": a status's name, not a printed message
    "library_reference_returns_status.log",
])
def test_reference_tables_of_return_values_raise_nothing(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure]


def test_explainer_that_says_what_raises_a_message_stays_a_mention() -> None:
    text = ("If the labels are out of range, PyTorch raises `RuntimeError: CUDA error: "
            "device-side assert triggered` when you call backward, as you will see below.")
    assert not [i for i in classify_text(text, torch_version=None) if i.is_failure]


def test_a_long_message_on_its_own_line_in_backticks_is_the_writers() -> None:
    # (160 characters, a usual terminal width: the prose line after it is joined on as if a
    # terminal had wrapped the long line; the quote still closes its own line, as a short
    # line's does, and its sizes are read)
    found = root("long_message_own_line_in_backticks.log")
    assert found.signature == "cuda-oom/caching-allocator"
    assert found.numbers["requested_bytes"] == 512 * 1024 ** 2


@pytest.mark.parametrize("text", [
    # a quote that a sentence goes on after, on its own line, is still an example
    "You will see:\n`RuntimeError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; "
    "7.79 GiB total capacity; 6.10 GiB already allocated; 301.44 MiB free)`\n"
    "It means the batch does not fit.\n",
    "The error `CUDA out of memory` means the batch does not fit.\n",
])
def test_a_quote_that_a_sentence_goes_on_after_is_no_report(text: str) -> None:
    assert [i for i in classify_text(text, torch_version=None) if i.is_failure] == []
