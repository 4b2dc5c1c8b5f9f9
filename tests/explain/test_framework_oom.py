"""GPU out-of-memory in the words of other frameworks and libraries: MXNet's pooled storage,
PaddlePaddle's allocator, ONNX Runtime's arena, the BFC allocator's line as JAX prints it or as
a writer keeps it, and C++ programs' own spellings of the CUDA runtime's status. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.units import GIB, MIB
from tests.explain.helpers import shape_root as root


def test_mxnets_pooled_storage_out_of_memory() -> None:
    oom = root("mxnet_pooled_storage_cudamalloc.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert oom.title == "GPU out of memory (MXNet)"
    assert "MXNET_CUDNN_AUTOTUNE_DEFAULT=0" in oom.remedy


def test_paddles_out_of_memory_with_its_numbers_in_binary_units() -> None:
    oom = root("paddle_out_of_memory_error_on_gpu.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert oom.numbers["gpu_index"] == 1
    assert oom.numbers["requested_bytes"] == round(3.25 * GIB)
    assert oom.numbers["free_bytes"] == round(412.5 * MIB)
    assert oom.numbers["allocated_bytes"] == round(9.8125 * GIB)
    assert "FLAGS_allocator_strategy=auto_growth" in oom.remedy


def test_onnx_runtimes_arena_failure_cut_after_the_function() -> None:
    oom = root("onnxruntime_arena_status_cut.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (ONNX Runtime)")


def test_onnx_runtimes_arena_failure_states_its_size() -> None:
    (oom,) = classify_text(
        "onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, "
        "onnxruntime::WaitNotificationFn) Failed to allocate memory for requested buffer of "
        "size 1073741824", torch_version=None)
    assert oom.cls == "cuda-oom" and oom.numbers["requested_bytes"] == 1 << 30


def test_a_cuda_samples_error_macro_in_a_title() -> None:
    oom = root("cuda_sample_gpuassert_title.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/cuda-error")


@pytest.mark.parametrize(("line", "sig"), [
    # (the runtime's status, not PyTorch's caching allocator)
    ("Warp CUDA error 2: out of memory (in function wp_alloc_device_async, warp.cu:769)",
     "cuda-oom/cuda-error"),
    ("[TM][ERROR] CUDA runtime error: out of memory /src/turbomind/core/allocator.cc:49",
     "cuda-oom/cuda-error"),
    ("GPUassert: out of memory kernels.cuh 310", "cuda-oom/cuda-error"),
    ("F tensorflow/core/kernels/random_op_gpu.h:232] Non-OK-status: GpuLaunchKernel(FillKernel, "
     "blocks, threads, 0, d.stream()) status: Internal: out of memory", "cuda-oom/cuda-error"),
    ("MXNetError: cudaMalloc retry failed: out of memory", "cuda-oom/framework-allocator"),
    ("Check failed: e == cudaSuccess (2 vs. 0) : out of memory", "cuda-oom/framework-allocator"),
])
def test_programs_own_spellings_of_the_runtimes_out_of_memory(line: str, sig: str) -> None:
    (oom,) = classify_text(line, torch_version=None)
    assert (oom.cls, oom.signature) == ("cuda-oom", sig)


def test_the_bfc_allocators_line_cut_after_its_head_is_jaxs_out_of_memory() -> None:
    oom = root("xla_bfc_allocator_line_cut.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (JAX/XLA)")
    assert oom.numbers["gpu_index"] == 0


def test_the_bfc_allocators_retry_stays_a_note() -> None:
    (note,) = classify_text(
        "W bfc_allocator.cc:243] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
        "2.18GiB with freed_by_count=0. The caller indicates that this is not a failure, but "
        "may mean that there could be performance gains if more memory were available.",
        torch_version=None)
    assert note.signature == "cuda-oom/tensorflow-not-a-failure"


def test_the_bfc_allocators_words_kept_in_a_sentence_with_their_size() -> None:
    oom = root("bfc_words_kept_in_prose.log")
    assert oom.cls == "cuda-oom" and oom.numbers["requested_bytes"] == round(3.25 * GIB)


def test_another_allocators_words_are_not_the_gpus() -> None:
    assert not classify_text("Allocator (cpu) ran out of memory trying to allocate 3.25GiB",
                             torch_version=None)


def test_a_writer_naming_the_gpus_ram_tells_a_gpu_out_of_memory() -> None:
    (oom,) = classify_text("How much GPU RAM does it need? It looks like I ran out of memory "
                           "on a 24gb RTX 4090.", torch_version=None)
    assert oom.cls == "cuda-oom"
    assert not classify_text("How much RAM does it need? I ran out of memory on the node "
                             "with the RTX 4090.", torch_version=None)


def test_a_causeless_cudnn_status_the_thread_found_to_be_a_full_gpu() -> None:
    oom = root("cudnn_internal_error_told_memory_full.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "CUDA out of memory, reported as a cuDNN failure")
    assert "CUDNN_STATUS_INTERNAL_ERROR" in oom.explanation


def test_a_full_gpu_only_wondered_about_tells_nothing() -> None:
    failures = classify_text(
        "RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR\n"
        "Could it be that the GPU memory was full?\n", torch_version=None)
    assert [f.cls for f in failures if f.role == "root-cause"] == ["cudnn-failure"]


# --- gradient-boosting libraries' own GPU allocators ---------------------------------------------

def test_catboosts_memory_pool_out_of_memory_with_its_sizes_in_mib() -> None:
    oom = root("catboost_pool_out_of_memory.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert oom.title == "GPU out of memory (CatBoost)"
    assert oom.numbers["requested_bytes"] == round(6144.5 * MIB)
    assert oom.numbers["free_bytes"] == round(1024.25 * MIB)
    assert "in its memory pool" in oom.explanation and "gpu_ram_part" in oom.remedy


def test_catboosts_older_message_without_its_unit_after_the_exception_type() -> None:
    oom = root("catboost_pool_out_of_memory_unitless.log")
    assert oom.title == "GPU out of memory (CatBoost)"
    assert oom.numbers["requested_bytes"] == 2048 * MIB
    assert oom.numbers["free_bytes"] == round(512.5 * MIB)


def test_another_allocators_requested_and_free_words_are_not_catboosts() -> None:
    assert not [i for i in classify_text("zbx_malloc: out of memory. Requested 1024 bytes.",
                                         torch_version=None) if i.is_failure]


@pytest.mark.parametrize(("name", "requested", "free"), [
    ("xgboost_device_allocator_oom.log", 268435456, 16777216),
    # (since 2.0 in binary units written "GB")
    ("xgboost_device_allocator_oom_units.log", round(3.25 * GIB), round(1.5 * GIB)),
])
def test_xgboosts_device_allocator_with_its_sizes_on_the_lines_below(
        name: str, requested: int, free: int) -> None:
    oom = root(name)
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (XGBoost)")
    assert oom.numbers["requested_bytes"] == requested
    assert oom.numbers["free_bytes"] == free
    assert "QuantileDMatrix" in oom.remedy
