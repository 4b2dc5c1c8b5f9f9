"""Programs' own words for a GPU's memory and driver, read where they stand: a miner's DAG
that does not fit the card, the "CUDA by Example" check naming the file and line, a program's
GPU component before the runtime's words, XLA's status cut after "Out of memory", a program's
check of the driver naming the newest CUDA it supports (9010 is CUDA 9.1), and a cuDNN status
whose next line's timestamp ran into it. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_root as root


def _classes(text: str) -> set[str]:
    return {incident.cls for incident in classify_text(text, torch_version=None)}


@pytest.mark.parametrize("name", ["miner_dag_does_not_fit.log",
                                  "miner_dag_allocation_title.log"])
def test_a_miners_dag_that_does_not_fit_the_card(name: str) -> None:
    oom = root(name)
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert oom.title == "GPU out of memory: the miner's DAG does not fit the card"
    assert "DAG fits this card" in oom.remedy


def test_a_dag_named_in_other_words_is_no_failure() -> None:
    assert not _classes("The DAG for epoch 512 is 4.99 GB; generating DAG on GPU 2.")


def test_the_cuda_by_example_check_with_file_and_line() -> None:
    oom = root("cuda_check_file_line_oom.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/cuda-error")


def test_a_host_programs_own_out_of_memory_at_a_line_is_not_the_gpus() -> None:
    assert "cuda-oom" not in _classes("fatal: out of memory in src/xmalloc.c at line 41")


def test_a_programs_gpu_component_before_the_runtimes_words() -> None:
    oom = root("gpu_component_oom.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/cuda-error")
    assert "cuda-oom" in _classes("CudaWorker: Launch: out of memory")


def test_xlas_status_cut_after_out_of_memory() -> None:
    oom = root("xla_status_title.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/xla")
    assert "requested_bytes" not in oom.numbers


def test_xlas_full_status_keeps_its_size() -> None:
    line = "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1024 bytes."
    (oom,) = classify_text(line, torch_version=None)
    assert oom.numbers["requested_bytes"] == 1024


def test_a_programs_driver_check_names_the_newest_cuda_the_driver_supports() -> None:
    found = root("program_driver_check_cuda_number.log")
    assert (found.cls, found.signature) == ("driver-mismatch",
                                            "driver-mismatch/driver-older-than-cuda")
    assert found.numbers["driver_cuda_version"] == "10.1"
    (older,) = classify_text("Error: Insufficient CUDA driver: 9010", torch_version=None)
    assert older.numbers["driver_cuda_version"] == "9.1"


def test_a_cudnn_status_with_the_next_lines_timestamp_run_into_it() -> None:
    found = root("cudnn_status_lines_run_together.log")
    assert (found.cls, found.numbers["status"]) == ("cudnn-failure",
                                                    "CUDNN_STATUS_INTERNAL_ERROR")


def test_a_cudnn_status_run_into_other_digits_is_no_status() -> None:
    assert "cudnn-failure" not in _classes("see CUDNN_STATUS_INTERNAL_ERROR2 in the table")
