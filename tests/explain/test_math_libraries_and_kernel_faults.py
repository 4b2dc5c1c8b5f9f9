"""cuDNN and cuBLAS failures in the shapes people post them (a status glued to a Chinese
sentence, shortened, printed as its number by either cuDNN numbering, a check with its numbers
the other way round, DyNet's and TensorFlow's own words), and kernel faults told in words.
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import OWN_RUN
from gpu_audit.explain.mentions import explainer_cues
from gpu_audit.knowledge.cudnn import (
    EXECUTION,
    MEMORY,
    MEMORY_OR_MISMATCH,
    UNSUPPORTED,
    cudnn_status_kind,
    cudnn_status_name,
)
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "signature", "status", "diagnosis"), [
    # "报CUDNN_STATUS_MAPPING_ERROR错误": no word boundary between a CJK character and the name
    ("cudnn_status_glued_to_chinese.log", "cudnn-failure/status", "CUDNN_STATUS_MAPPING_ERROR",
     "execution"),
    # "fails with CUDNN_BAD_PARAM": the status without its STATUS_
    ("cudnn_status_shortened_in_report.log", "cudnn-failure/status", "CUDNN_STATUS_BAD_PARAM",
     "unsupported"),
    # a glog check with cuDNN 9's number alone: 4004 is a device allocation that failed, the
    # GPU out of memory
    ("cudnn_glog_check_number_only.log", "cuda-oom/cudnn-alloc-failed",
     "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED", "unknown"),
    # "CUBLAS_STATUS_SUCCESS(0 vs 14)": the numbers the other way round, no variable named
    ("cublas_check_numbers_reversed_zh.log", "cublas-failure/status-code",
     "CUBLAS_STATUS_INTERNAL_ERROR", "execution"),
])
def test_library_statuses_in_the_shapes_people_post(name: str, signature: str, status: str,
                                                    diagnosis: str) -> None:
    failure = root(name)
    assert (failure.signature, failure.numbers.get("status")) == (signature, status)
    assert failure.diagnosis == diagnosis


@pytest.mark.parametrize(("check", "status", "diagnosis"), [
    ("status == CUDNN_STATUS_SUCCESS (4 vs. 0)", "CUDNN_STATUS_INTERNAL_ERROR",
     "memory-or-mismatch"),
    ("status == CUDNN_STATUS_SUCCESS. 9 vs 0.", "CUDNN_STATUS_NOT_SUPPORTED", "unsupported"),
    ("e == CUDNN_STATUS_SUCCESS (3003 vs. 0)", "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE",
     "unsupported"),
    ("e == CUDNN_STATUS_SUCCESS (5000 vs. 0)", "CUDNN_STATUS_EXECUTION_FAILED", "execution"),
    # the name printed after the number is the same status
    ("status == CUDNN_STATUS_SUCCESS (8 vs. 0)  CUDNN_STATUS_EXECUTION_FAILED",
     "CUDNN_STATUS_EXECUTION_FAILED", "execution"),
])
def test_cudnn_checks_read_either_numbering(check: str, status: str, diagnosis: str) -> None:
    (failure,) = classify_text(f"F0101 00:00:00.000000 7 conv.cu:28] Check failed: {check}",
                               torch_version=None)
    assert (failure.cls, failure.numbers["status"], failure.diagnosis) == (
        "cudnn-failure", status, diagnosis)


@pytest.mark.parametrize("line", [
    "F0101 00:00:00.000000 7 conv.cu:28] Check failed: CUDNN_STATUS_SUCCESS == status (0 vs. 2)",
    "Error: cuDNN failure 2: CUDNN_STATUS_ALLOC_FAILED ; GPU=0 ; expr=finder(algo, perf)",
    "cudnnFindConvolutionForwardAlgorithm: 2: CUDNN_STATUS_ALLOC_FAILED",
    "RuntimeError: cuDNN error: CUDNN_ALLOC_FAILED",
])
def test_cudnn_allocation_failures_are_the_gpu_out_of_memory(line: str) -> None:
    # cuDNN allocates outside the framework's cache: its allocation failure is a full GPU,
    # whether the check printed the status's name or its number
    (failure,) = classify_text(line, torch_version=None)
    assert (failure.cls, failure.signature, failure.numbers["status"]) == (
        "cuda-oom", "cuda-oom/cudnn-alloc-failed", "CUDNN_STATUS_ALLOC_FAILED")
    assert "cuDNN" in failure.explanation and failure.is_failure


def test_a_cudnn_check_with_a_number_no_table_knows_keeps_it() -> None:
    (failure,) = classify_text("Check failed: e == CUDNN_STATUS_SUCCESS (77 vs. 0)",
                               torch_version=None)
    assert failure.cls == "cudnn-failure"
    assert failure.numbers == {"status_code": 77}


@pytest.mark.parametrize("line", [
    "运行时出现CUDNN_STATUS_SUCCESS提示",  # success, glued to Chinese: no failure
    "CUDNN_STATUS_NOT_SUPPORTEDx is not a status",
    "set CUDNN_NOT_SUPPORTED_FALLBACK=1",
])
def test_no_cudnn_failure_without_a_whole_status(line: str) -> None:
    assert [i for i in classify_text(line, torch_version=None) if i.is_failure] == []


def test_cudnn_statuses_by_number_and_kind() -> None:
    assert cudnn_status_name(8) == cudnn_status_name(5000) == "CUDNN_STATUS_EXECUTION_FAILED"
    assert cudnn_status_name(9) == cudnn_status_name(3000) == "CUDNN_STATUS_NOT_SUPPORTED"
    assert cudnn_status_name(999) is None
    assert cudnn_status_kind("CUDNN_STATUS_ALLOC_FAILED") == MEMORY
    assert cudnn_status_kind("CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH") == UNSUPPORTED
    assert cudnn_status_kind("CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED") == (
        MEMORY_OR_MISMATCH)
    assert cudnn_status_kind("CUDNN_STATUS_EXECUTION_FAILED_CUBLAS") == EXECUTION


def test_dynet_names_the_cublas_call_that_failed() -> None:
    failure = root("dynet_cublas_failure_in_call.log")
    assert (failure.signature, failure.numbers.get("call")) == (
        "cublas-failure/call-failed", "cublasSgemm")


@pytest.mark.parametrize("line", [
    "InternalError: Blas GEMM launch failed : a.shape=(64, 10), b.shape=(10, 10), m=64, n=10, "
    "k=10",
    "# Blas xGEMMBatched launch failed",
    "升级后报Blas SGEMM launch failed",
    "tensorflow.python.framework.errors_impl.InternalError: Attempting to perform BLAS "
    "operation using StreamExecutor without BLAS support [Op:MatMul]",
])
def test_tensorflow_blas_launch_failures(line: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert (failure.signature, failure.diagnosis) == ("cublas-failure/tensorflow-blas",
                                                      "out-of-memory")
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in failure.remedy


def test_tensorflow_blas_failure_in_a_keras_traceback() -> None:
    failure = root("tf_blas_gemm_launch_failed.log")
    assert failure.signature == "cublas-failure/tensorflow-blas"


@pytest.mark.parametrize(("sentence", "status"), [
    ("the requested functionality is not supported", "CUBLAS_STATUS_NOT_SUPPORTED"),
    ("the requested feature is not supported", "CUBLAS_STATUS_NOT_SUPPORTED"),
    ("an invalid value was used as an argument", "CUBLAS_STATUS_INVALID_VALUE"),
])
def test_cublas_status_sentences_as_other_versions_word_them(sentence: str, status: str) -> None:
    (failure,) = classify_text(f"CUDA error: {sentence}", torch_version=None)
    assert (failure.signature, failure.numbers["status"]) == ("cublas-failure/status-sentence",
                                                               status)


def test_an_analysis_page_of_device_side_asserts_raises_none() -> None:
    # "developers may encounter ...", "Typical error causes include:": an explainer's words
    failures = [i for i in incidents("explainer_device_assert_causes_en.log") if i.is_failure]
    assert failures == []


@pytest.mark.parametrize(("line", "kind"), [
    ("In notebooks, developers may encounter this exception on a later line.", "you-have-seen"),
    ("Typical error causes include:", "why"),
])
def test_explainer_phrases_of_an_analysis_page(line: str, kind: str) -> None:
    assert kind in explainer_cues([line])


def test_memory_faults_told_come_before_the_cublas_failure_they_left() -> None:
    found = incidents("memory_faults_told_cublas_echo.log")
    assert [(i.role, i.signature) for i in found if i.is_failure][:2] == [
        ("root-cause", "illegal-memory-access/told"),
        ("consequence", "cublas-failure/cublas-status")]


@pytest.mark.parametrize("line", [
    "If you get memory access faults, rerun with CUDA_LAUNCH_BLOCKING=1.",
    "- Memory access violations: an out-of-range index in a kernel",
    "Could the kernel be hitting memory access errors on Hopper only?",
    "I see memory access patterns that are not coalesced.",
])
def test_memory_faults_not_told_as_the_writers_own(line: str) -> None:
    assert [i for i in classify_text(line, torch_version=None) if i.is_failure] == []


def test_an_indexing_assertion_named_in_a_thread_title() -> None:
    failure = root("index_assertion_title_replies_only.log")
    assert (failure.cls, failure.signature) == ("device-assert", "device-assert/triggered")
    assert failure.title.startswith("Named in the title")


def test_a_change_that_tells_the_failure_it_met_reports_it() -> None:
    # "... aborted the worker with:" and the paste below it: the writer's own run, though the
    # text then offers its fix
    failure = root("change_tells_its_own_cublas_failure.log")
    assert (failure.signature, failure.numbers.get("status")) == (
        "cublas-failure/status-sentence", "CUBLAS_STATUS_NOT_SUPPORTED")


@pytest.mark.parametrize(("line", "own"), [
    ("The second epoch crashed with the following error:", True),
    ("Long prompts aborted the server with:", True),
    ("If it fails with:", False),
    ("A run that crashed with an error is retried.", False),
])
def test_a_past_failure_introducing_a_paste_is_the_writers_own(line: str, own: bool) -> None:
    assert bool(OWN_RUN.search(line)) is own


@pytest.mark.parametrize(("line", "signature"), [
    ("训练时出现CUBLAS_STATUS_EXECUTION_FAILED错误", "cublas-failure/cublas-status"),
    ("推理时报CUDA error: an internal operation failed错误", "cublas-failure/status-sentence"),
    ("报错CUBLAS error(7).", "cublas-failure/status-code"),
    ("出现cuBLAS API failed with status 7的提示", "cublas-failure/status-code"),
    ("启动时Create cublas handle failed", "cublas-failure/handle-failed"),
])
def test_cublas_messages_run_into_a_chinese_sentence(line: str, signature: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert failure.signature == signature


def test_cublas_success_run_into_a_chinese_sentence_is_no_failure() -> None:
    assert classify_text("检查CUBLAS_STATUS_SUCCESS返回值", torch_version=None) == []
