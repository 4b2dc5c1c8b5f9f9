"""Shapes read since the 61st and 62nd held-out sets: PyTorch's old "cuda runtime error (N)" cut
after its number, RAPIDS' error code, run-time compilers that do not fit the GPU (NVRTC, XLA's
ptxas), JAX's CUDA backend, a TensorRT engine built on another GPU, a GPU told being lost, and a
guide's "set this in the environment:" that is no report's label. In the project's own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.explain.helpers import text_incidents

_ISSUE = "example-lab/solver · issue #31 · open · Python\n"


def classes(tmp_path: Path, text: str) -> list[str]:
    return [i.cls for i in text_incidents(tmp_path, text) if i.is_failure]


@pytest.mark.parametrize(("title", "expected"), [
    ("# RuntimeError: cuda runtime error (2)", "cuda-oom"),
    ("# RuntimeError: cuda runtime error (100)", "driver-mismatch"),
    ("# FAILED_PRECONDITION: Couldn't get ptxas version string: INTERNAL: Couldn't invok",
     "driver-mismatch"),
    ("# [BUG] RMM_ERROR_OUT_OF_MEMORY with minimal memory usage", "cuda-oom"),
])
def test_messages_copied_into_titles(tmp_path: Path, title: str, expected: str) -> None:
    text = f"{_ISSUE}{title}\n\nana · description · 2026-02-02\nIt fails the same every run.\n"
    assert classes(tmp_path, text)[:1] == [expected]


def test_a_gpu_told_being_lost(tmp_path: Path) -> None:
    text = (f"{_ISSUE}# Faulty GPU check\n\nana · description · 2026-02-02\nThere is no error "
            "from the sampler, but there is a message of GPU being lost and nvidia-smi shows "
            "nothing.\n")
    assert classes(tmp_path, text)[:1] == ["gpu-hardware"]


def test_a_guide_s_environment_colon_is_no_report(tmp_path: Path) -> None:
    text = ("docs.example.org · web page\nTroubleshooting collectives. A common problem occurs "
            "when a long operation times out and the training aborts: ```text Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLGATHER, Timeout(ms)="
            "1800000) ran for 1800431 milliseconds before timing out.``` To force NVLink, set "
            "this in the environment: ```shell export NCCL_P2P_LEVEL=NVL ```\n")
    assert classes(tmp_path, text) == []


def test_a_title_naming_the_driver_not_found(tmp_path: Path) -> None:
    text = (f"{_ISSUE}# CUDA driver not found\n\nana · description · 2026-02-02\nI installed "
            "the package and started the solver on the GPU node.\n")
    assert classes(tmp_path, text)[:1] == ["driver-mismatch"]


def test_a_documentation_request_quoting_errors_for_the_reader(tmp_path: Path) -> None:
    text = ("example-lab/boosting · issue #428 · closed · C++\nlabels: documentation\n"
            "# Tutorial on how to reduce the memory of GPU training\n\nana · description · "
            "2026-02-02\nWhat to do if you get error: \"CUDA out of memory. Tried to allocate "
            "20.00 MiB\" when training on GPU?\nOr if you get cudaErrorMemoryAllocation\n")
    assert classes(tmp_path, text) == []
