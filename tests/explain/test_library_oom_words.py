"""GPU out-of-memory in a vector-search library's and older frameworks' own words (faiss's
failed cudaMalloc, PaddlePaddle Fluid's request against the free memory, PaddlePaddle's
exception type over its message, Caffe's check quoted by a reply in a thread), a constant's
spelling of PyTorch's head, and an out-of-memory told in words. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.explain import classify_text, explain_sources
from gpu_audit.units import GIB, MIB
from tests.explain.helpers import shape_incidents
from tests.explain.helpers import shape_root as root


def _failures(text: str) -> list[str]:
    return [i.cls for i in classify_text(text, torch_version=None) if i.is_failure]


# --- faiss ---------------------------------------------------------------------------------------

def test_faiss_failed_cudamalloc_with_the_runtimes_status() -> None:
    oom = root("faiss_cudamalloc_error_2.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert oom.title == "GPU out of memory (faiss)"
    assert oom.numbers["requested_bytes"] == 256 * MIB
    assert "setTempMemory" in oom.remedy


def test_faiss_allocators_request_wrapped_with_its_size_on_the_next_line() -> None:
    oom = root("faiss_alloc_fail_request_wrapped.log")
    assert oom.title == "GPU out of memory (faiss)"
    assert oom.numbers["requested_bytes"] == 768 * MIB


@pytest.mark.parametrize(("line", "requested", "gpu"), [
    ("Error: 'err == cudaSuccess' failed: Failed to cudaMalloc 536870912 bytes on device 1 "
     "(error 2 out of memory", 512 * MIB, 1),
    # (the oldest releases: no status, the size after the assertion's details)
    ("Faiss assertion 'cudaMalloc(p, size) == cudaSuccess' failed in void faiss::gpu::"
     "allocMemorySpace(faiss::gpu::MemorySpace, void**, size_t) at utils/MemorySpace.cpp:20; "
     "details: Failed to cudaMalloc 12000000000 bytes", 12000000000, None),
])
def test_faiss_failed_cudamalloc_in_each_versions_words(line: str, requested: int,
                                                        gpu: int | None) -> None:
    (oom,) = classify_text(line, torch_version=None)
    assert oom.title == "GPU out of memory (faiss)"
    assert oom.numbers["requested_bytes"] == requested
    assert oom.numbers.get("gpu_index") == gpu


def test_faiss_failed_cudamalloc_with_another_status_is_no_out_of_memory() -> None:
    assert "cuda-oom" not in _failures(
        "Error: 'err == cudaSuccess' failed: failed to cudaMalloc 4096 bytes (error 700 an "
        "illegal memory access was encountered)")


# --- PaddlePaddle --------------------------------------------------------------------------------

def test_paddle_fluids_request_against_the_free_memory() -> None:
    oom = root("paddle_enforce_allocating_available.log")
    assert oom.title == "GPU out of memory (PaddlePaddle)"
    assert oom.numbers["requested_bytes"] == 8 * GIB
    assert oom.numbers["free_bytes"] == 1 * GIB


def test_paddle_fluids_newer_wording_of_the_same_check() -> None:
    (oom,) = classify_text(
        "Enforce failed. Expected allocating <= available, but received allocating:3221225472 "
        "> available:536870912.", torch_version=None)
    assert oom.title == "GPU out of memory (PaddlePaddle)"
    assert (oom.numbers["requested_bytes"], oom.numbers["free_bytes"]) == (3 * GIB, 512 * MIB)


def test_paddles_exception_type_alone_above_its_message_is_no_tensorflow_failure() -> None:
    incidents = [i for i in shape_incidents("paddle_resource_exhausted_head_over_message.log")
                 if i.is_failure]
    assert [i.title for i in incidents] == ["GPU out of memory (PaddlePaddle)"]
    assert incidents[0].numbers["requested_bytes"] == round(64.5 * MIB)


def test_tensorflows_type_alone_above_its_own_message_stays_tensorflows() -> None:
    (oom,) = [i for i in classify_text(
        "ResourceExhaustedError:\n"
        "OOM when allocating tensor with shape[64,512,512] and type float on "
        "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n",
        torch_version=None) if i.is_failure]
    assert oom.title == "GPU out of memory (TensorFlow)"
    assert oom.numbers["requested_bytes"] == 64 * 512 * 512 * 4


# --- a message quoted by a reply in a thread ---------------------------------------------

def test_caffes_check_a_reply_points_at_in_the_thread_is_its_failure() -> None:
    oom = root("caffe_check_quoted_by_reply.log")
    assert oom.cls == "cuda-oom"


@pytest.mark.parametrize("text", [
    # (no thread: an explainer's sentence)
    "This error `Check failed: error == cudaSuccess (2 vs. 0) out of memory` means the GPU ran "
    "out of memory.",
    # (a thread's reply explaining the message in general, not pointing at the thread's own)
    "example-lab/action-nets · issue #15 · open · C++\n# Question about batch sizes\n\n"
    "maintainer · comment · 2017-03-02\nThe error `Check failed: error == cudaSuccess (2 vs. 0) "
    "out of memory` usually means the batch is too large.\n",
])
def test_the_same_check_quoted_in_general_stays_a_quotation(text: str) -> None:
    assert "cuda-oom" not in _failures(text)


# --- PyTorch's head as a constant's name ----------------------------------------------------

def test_cuda_out_of_memory_spelled_as_a_constant_in_a_title() -> None:
    assert root("cuda_out_of_memory_constant_title.log").cls == "cuda-oom"


def test_the_constant_in_a_question_how_to_fix_it_is_none() -> None:
    assert "cuda-oom" not in _failures("How do I fix CUDA_OUT_OF_MEMORY in a notebook?")


# --- told in words -------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "When I was training, it reported an error that the cuda out of memory",
    "把batch改成4之后，还是cuda out of memory",
    "The main problem seems that you are out of memory: the model needs 8 GB of VRAM and your "
    "card has 6 GB.",
])
def test_an_out_of_memory_told_in_words(text: str) -> None:
    assert _failures(text) == ["cuda-oom"]


@pytest.mark.parametrize("text", [
    "如果还是cuda out of memory，就把batch改小。",
    "If you are out of memory on the GPU, lower the batch size.",
    "It seems that you are out of memory: the machine has 16 GB of RAM and the GPU 24 GB.",
])
def test_an_out_of_memory_in_a_condition_or_the_hosts_tells_nothing(text: str) -> None:
    assert "cuda-oom" not in _failures(text)


# --- the prefilter finds them in a long log -------------------------------------------------

@pytest.mark.parametrize(("line", "title"), [
    # (faiss's assertion names its allocation function, "allocMemorySpace", on the same line)
    ("Faiss assertion 'cudaMalloc(p, size) == cudaSuccess' failed in void faiss::gpu::"
     "allocMemorySpace(faiss::gpu::MemorySpace, void**, size_t) at utils/MemorySpace.cpp:20; "
     "details: Failed to cudaMalloc 12000000000 bytes", "GPU out of memory (faiss)"),
    ("paddle.fluid.core.EnforceNotMet: enforce allocating <= available failed, 8589934592 > "
     "1073741824", "GPU out of memory (PaddlePaddle)"),
])
def test_lines_without_the_usual_words_are_found_in_a_long_log(tmp_path: Path, line: str,
                                                                title: str) -> None:
    steps = [f"epoch {i // 1000} step {i} loss 0.{i % 10000:04d}" for i in range(3000)]
    steps[1500] = line
    log = tmp_path / "train.log"
    log.write_text("\n".join(steps) + "\n")
    result = explain_sources([str(log)], torch_version="2.3.1")
    assert [i.title for i in result.incidents if i.is_failure] == [title]


def test_the_head_retyped_in_capitals_with_spaces_is_still_read() -> None:
    assert _failures("训练时显示CUDA OUT OF MEMORY，显卡只有4G显存") == ["cuda-oom"]
