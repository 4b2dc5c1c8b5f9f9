"""cuBLAS failures in programs' own words (a check's short words, a status sentence in quotes),
CUDA's "driver older than the runtime" in its description's and writers' words, the async
allocator's assert cut after its condition's start, and nvidia-smi's lost driver ranked before
CUDA's "no device". Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "status"), [
    ("cublas_enforce_short_words_numbered_paste.log", "CUBLAS_STATUS_EXECUTION_FAILED"),
    ("cublas_error_quoted_sentence_on_copy.log", "CUBLAS_STATUS_MAPPING_ERROR"),
])
def test_cublas_statuses_in_programs_own_words(name: str, status: str) -> None:
    failure = root(name)
    assert (failure.cls, failure.signature) == ("cublas-failure", "cublas-failure/status-sentence")
    assert failure.numbers["status"] == status


@pytest.mark.parametrize(("line", "status"), [
    ("EnforceNotMet: CUBLAS: alloc failed, at [blas.cu:12]", "CUBLAS_STATUS_ALLOC_FAILED"),
    ("RuntimeError: CUBLAS: Not supported", "CUBLAS_STATUS_NOT_SUPPORTED"),
    ("CUBLAS: architecture mismatch.", "CUBLAS_STATUS_ARCH_MISMATCH"),
])
def test_each_short_word_names_its_status(line: str, status: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert failure.numbers["status"] == status


def test_short_words_run_on_are_not_a_status() -> None:
    # ("CUBLAS: not supported types" is a sentence about support, not the check's words)
    assert classify_text("CUBLAS: not supported types are listed below", torch_version=None) == []


@pytest.mark.parametrize("name", ["driver_older_than_runtime_told_and_hint.log",
                                  "driver_older_than_runtime_library_hint.log"])
def test_driver_older_than_the_runtime_in_words(name: str) -> None:
    failure = root(name)
    assert (failure.cls, failure.signature) == ("driver-mismatch",
                                                "driver-mismatch/insufficient-driver")


def test_driver_older_than_the_runtime_told_by_the_writer() -> None:
    (failure,) = classify_text("it told me that gpu driver is older than gpu runtime version",
                               torch_version=None)
    assert failure.signature == "driver-mismatch/insufficient-driver"


def test_driver_older_than_the_runtime_as_advice_is_no_failure() -> None:
    assert incidents("driver_older_than_runtime_advice.log") == []


def test_async_assert_cut_after_the_conditions_start() -> None:
    failure = root("async_assert_title_cut_after_condition.log")
    assert (failure.cls, failure.signature) == ("alloc-conf", "alloc-conf/async-assert")


def test_the_pytorch_source_line_of_the_condition_is_no_failure() -> None:
    line = "    TORCH_INTERNAL_ASSERT(free_upper_bound + pytorch_used_bytes[device] <= total);"
    assert classify_text(line, torch_version=None) == []


def test_nvidia_smi_without_a_driver_is_the_root_of_cudas_no_device() -> None:
    found = incidents("cuinit_no_device_nvidia_smi_no_driver.log")
    roots = [i for i in found if i.role == "root-cause"]
    assert roots[0].signature == "nvml-unavailable/nvidia-smi-no-driver"
    assert any(i.cls == "driver-mismatch" and i.role != "root-cause" for i in found)


def test_nvidia_smi_table_that_cannot_read_the_gpu() -> None:
    # (a pull request that links the CI run that failed reports that run)
    failure = root("smi_table_err_gpu_unreadable_ci.log")
    assert (failure.cls, failure.signature) == ("gpu-hardware", "gpu-hardware/smi-unreadable")
    assert failure.numbers["gpu_index"] == 0


def test_one_err_field_in_nvidia_smi_is_no_failure() -> None:
    assert incidents("smi_table_one_err_field.log") == []


def test_rows_of_a_barred_table_are_read_one_by_one() -> None:
    text = ("|   0  ERR!                Off  | 00000000:00:1F.0 Off |                 ERR! |\n"
            "| N/A   31C    P0    40W / 300W |    610MiB / 32510MiB |      0%      Default |\n")
    (failure,) = classify_text(text, torch_version=None)
    assert failure.excerpt.count("|") == 4


def test_nccl_allreduce_told_failing() -> None:
    failure = root("nccl_allreduce_told_crash.log")
    assert (failure.cls, failure.signature) == ("nccl", "nccl/allreduce-fails-told")


def test_nccl_allreduce_in_a_condition_or_question_is_no_failure() -> None:
    assert incidents("nccl_allreduce_question.log") == []
