"""Memory failures in older programs' own words: CatBoost's exception type cut short, cuFFT's
sentence for its allocation status, TensorRT 7's allocator and tactic errors and the size its
warning states, MXNet's message wrapped inside a word, PaddlePaddle 1.x's check, PBS
Professional's sizes in bytes, the shell's Killed after a progress bar and a kill told in
Chinese, CUDA's no-kernel-image status retyped "on this device"; and a pasted error followed
by the writer's request for help (not an explainer). Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_root as root


def test_catboosts_exception_type_cut_short() -> None:
    oom = root("catboost_type_name_cut.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (CatBoost)")


def test_cuffts_sentence_for_its_allocation_status() -> None:
    oom = root("cufft_plan_alloc_failed.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (cuFFT)")
    assert "plan" in oom.remedy


def test_tensorrt7_allocator_and_tactic_errors() -> None:
    oom = root("tensorrt7_allocator_tactic_oom.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/tensorrt")


def test_tensorrts_warning_gives_the_size_it_could_not_get() -> None:
    oom = root("tensorrt_requested_amount_warning.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/tensorrt")
    assert oom.numbers["requested_bytes"] == 6 << 30
    assert "6.00 GiB" in oom.explanation


def test_tensorrts_size_warning_alone_is_no_failure() -> None:
    line = ("[W] [TRT] Requested amount of GPU memory (6442450944 bytes) could not be allocated. "
            "There may not be enough free memory for allocation to succeed.")
    assert not classify_text(line, torch_version=None)


def test_mxnets_message_wrapped_inside_a_word_retyped_in_a_title() -> None:
    oom = root("mxnet_cudamalloc_wrapped_inside_word.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (MXNet)")


def test_paddle_1x_check_of_a_cuda_call() -> None:
    oom = root("paddle_check_error_out_of_memory.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (PaddlePaddle)")


def test_pbs_professionals_limit_in_bytes() -> None:
    kill = root("pbs_pro_vmem_bytes.log")
    assert (kill.cls, kill.signature) == ("host-oom", "host-oom/batch-memory-limit")
    assert kill.numbers["used_bytes"] == 42 << 30
    assert kill.numbers["limit_bytes"] == 40 << 30


def test_the_shells_killed_right_after_a_progress_bars_estimate() -> None:
    kill = root("progress_bar_then_shell_killed_zh.log")
    assert (kill.cls, kill.signature) == ("host-oom", "host-oom/shell-killed")


def test_a_kill_told_in_chinese_with_two_adverbs() -> None:
    kill = root("killed_told_zh_two_adverbs.log")
    assert (kill.cls, kill.signature) == ("host-oom", "host-oom/shell-killed")


def test_a_kill_told_in_a_condition_is_still_not_read() -> None:
    assert not classify_text("如果训练进程就会被kill, 请减少 num_workers", torch_version=None)


def test_a_pasted_error_then_a_request_for_help_is_a_report() -> None:
    oom = root("cuda_error_pasted_then_asked_how_to_solve.log")
    assert oom.cls == "cuda-oom" and oom.severity.name == "ERROR"


def test_no_kernel_image_retyped_on_this_device_in_a_title() -> None:
    found = root("no_kernel_image_this_device_title.log")
    assert (found.cls, found.signature) == ("driver-mismatch", "driver-mismatch/no-kernel-image")


def test_out_of_memory_error_in_prose_is_not_tensorrts() -> None:
    # (TensorRT 7 names a function and its status after "Error in"; prose names no function)
    assert not classify_text("We hit an OutOfMemory Error in production last week",
                             torch_version=None)
