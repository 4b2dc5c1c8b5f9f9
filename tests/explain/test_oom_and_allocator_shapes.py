"""GPU out-of-memory and allocator-configuration failures in more of the shapes posts carry
them: a notebook's traceback header with the message cut below it, a title in Chinese, an
out-of-memory told beside an allocator setting, a library's handle failure the text says was an
out-of-memory, PyTorch's refusal of the cudaMallocAsync backend, and explainers in Russian that
quote the message. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.mentions import explainer_cues
from tests.explain.helpers import shape_incidents
from tests.explain.helpers import shape_root as root


def failures(text: str) -> list[str]:
    return [i.cls for i in classify_text(text, torch_version=None) if i.is_failure]


# --- a notebook's traceback header, the message cut below it -------------------------------------

def test_a_notebook_header_naming_the_oom_class_is_the_failure() -> None:
    oom = root("notebook_oom_header_cut.log")
    assert (oom.cls, oom.signature, oom.line_numbers) == (
        "cuda-oom", "cuda-oom/caching-allocator", [11])


@pytest.mark.parametrize("line", [
    # (the class named in prose, or with one space before a word, is no header)
    "OutOfMemoryError Traceback handling is described in the FAQ",
    "java.lang.OutOfMemoryError: Java heap space",
])
def test_the_class_without_a_notebook_header_is_not_read(line: str) -> None:
    assert failures(f"Notes\n\n{line}\n") == []


# --- a GPU's out-of-memory named in a thread's title: in Chinese, beside CJK text, beside an
# allocator setting -------------------------------------------------------------------------------

_ISSUE = ("acme/trainer · issue #7 · open · Python\n# {title}\n\n"
          "writer · description · 2025-01-02\n{body}\n")


@pytest.mark.parametrize(("title", "body"), [
    # "fine-tuning a 14B model on two cards runs short of video memory"
    ("用两张显卡微调14B模型时显存不足", "按说两张卡应该够用。"),
    ("训练到一半爆显存", "batch size 已经改成 1 了。"),
    # OOM glued to Chinese words, beside a GPU-only library or the allocator's setting
    ("用了Unsloth以后反而OOM了", "关掉就能跑。"),
    ("oom以后在哪里设置max_split_size_mb？", "新手，不太会改。"),
])
def test_a_title_names_the_gpus_out_of_memory(title: str, body: str) -> None:
    assert failures(_ISSUE.format(title=title, body=body)) == ["cuda-oom"]


@pytest.mark.parametrize(("title", "body"), [
    # host memory ("内存") is not the GPU's; a question title; a pull request
    ("加载数据时内存不足", "机器只有 16G。"),
    ("如何解决显存不足", "有什么好办法？"),
])
def test_titles_that_do_not_tell_a_gpu_out_of_memory(title: str, body: str) -> None:
    assert failures(_ISSUE.format(title=title, body=body)) == []


def test_a_pull_requests_title_about_the_gpus_memory_is_no_report() -> None:
    text = ("acme/trainer · pull request #9 · open · Python\n# 修复多卡微调显存不足\n\n"
            "writer · description · 2025-01-02\n减少一次拷贝。\n")
    assert failures(text) == []


# --- a writer's telling of their own run is no explainer's phrase ---------------------------------

@pytest.mark.parametrize(("line", "cues"), [
    ("The error happens specifically on the line model.compose(text)", set()),
    ("The error occurs when I call generate() with a long prompt", set()),
    # (an explainer's general "when you ...", as before)
    ("This error occurs when you allocate more than the card holds", {"error-means"}),
])
def test_where_the_writers_error_happened_is_not_an_explainers_cue(line: str,
                                                                  cues: set[str]) -> None:
    assert explainer_cues([line]) == cues


def test_a_report_with_its_own_solution_keeps_the_failure_in_its_title() -> None:
    oom = root("issue_error_line_and_own_solution.log")
    assert (oom.cls, oom.signature, oom.line_numbers) == (
        "cuda-oom", "cuda-oom/caching-allocator", [2])


# --- a library's handle failure the text says was an out-of-memory ------------------------------

_HANDLE = ("Several worker threads share one GPU in our PyTorch service.\n"
           "{told}\n\n"
           "`RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
           "cublasCreate(handle)`\n")


def test_a_handle_failure_the_text_says_set_off_the_oom_is_the_oom() -> None:
    told = ("Now and then the call that triggers the OOM is a cublasCreate made by a new thread, "
            "outside the PyTorch cache.")
    found = [i for i in classify_text(_HANDLE.format(told=told), torch_version=None)
             if i.is_failure]
    assert (found[0].cls, found[0].signature) == ("cuda-oom", "cuda-oom/told-cause")
    assert found[0].title == "CUDA out of memory, reported as a cuBLAS failure"


@pytest.mark.parametrize("told", [
    "A new thread calls cublasCreate, which does not trigger an OOM in the PyTorch cache.",
    "A new thread calls cublasCreate when it starts.",
])
def test_a_handle_failure_without_that_telling_stays_cublas(told: str) -> None:
    found = [i for i in classify_text(_HANDLE.format(told=told), torch_version=None)
             if i.is_failure]
    assert found[0].cls == "cublas-failure"


# --- allocator configuration: the async backend missing from the build, vLLM's pool check --------

def test_a_build_without_the_async_backend_refuses_it() -> None:
    found = root("rocm_async_backend_missing_abort.log")
    assert (found.cls, found.signature) == ("alloc-conf", "alloc-conf/async-backend-missing")
    assert found.numbers == {"needs": "11.4"}
    assert "backend:cudaMallocAsync" in found.remedy


@pytest.mark.parametrize("text", [
    # the check's assert statement in a thread's title ("... 报错": "... errors out")
    "acme/rl · issue #3 · open · Python\n# assert \"expandable_segments:True\" not in conf 报错\n"
    "\nwriter · description · 2025-05-01\n用官方镜像跑训练脚本出错了\n",
    # ... and its message under a traceback
    "Traceback (most recent call last):\n  File \"/srv/rl/sleep.py\", line 88, in enable\n"
    "AssertionError: Expandable segments are not compatible with memory pool. Please turn "
    "them off.\n",
])
def test_vllms_memory_pool_check_against_expandable_segments(text: str) -> None:
    found = [i for i in classify_text(text, torch_version=None) if i.is_failure]
    assert [(i.cls, i.signature) for i in found] == [
        ("alloc-conf", "alloc-conf/mempool-expandable")]


# --- explainers in Russian that quote the message ------------------------------------------------

def test_a_russian_explainer_quoting_the_oom_raises_no_error() -> None:
    found = shape_incidents("ru_explainer_reserved_memory.log")
    assert [(i.cls, i.is_failure) for i in found] == [("cuda-oom", False)]


@pytest.mark.parametrize(("line", "cues"), [
    ("Самая частая ошибка. Твоя программа падает с сообщением X.", {"you-have-seen"}),
    ("Почему так? Кэш может разрастись из-за фрагментации.", {"why"}),
    # the writer's own question, not answered on its line
    ("Почему так?", set()),
])
def test_russian_explainer_phrases(line: str, cues: set[str]) -> None:
    assert explainer_cues([line]) == cues


def test_a_russian_report_asking_why_still_fails() -> None:
    text = ("acme/boost · issue #5 · open · C++\n# Ошибка на GPU\n\nwriter · description · "
            "2023-01-02\nПри обучении на GPU получаю RuntimeError: CUDA out of memory.\n"
            "Почему так?\n")
    assert failures(text) == ["cuda-oom"]


def test_nccls_calloc_states_the_size_it_could_not_get() -> None:
    text = ("node7:2211:2290 [1] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n"
            "node7:2211:2290 [1] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 4194304 "
            "bytes\n")
    failure = next(i for i in classify_text(text, torch_version=None) if i.is_failure)
    assert (failure.cls, failure.numbers.get("requested_bytes")) == ("cuda-oom", 4194304)
    assert "4.00 MiB" in failure.explanation


@pytest.mark.parametrize("line", [
    "/opt/src/kmeans/kernels.cu:88 -> out of memory",
    "src/solver.cc:1203 -> out of memory",
])
def test_a_cpp_check_with_its_file_line_and_an_arrow_is_the_gpus_oom(line: str) -> None:
    # the check prints the call it made (cudaMalloc), then where, then the runtime's words
    (failure,) = classify_text(f"cudaMalloc(&ptr, bytes)\n{line}\n", torch_version=None)
    assert (failure.cls, failure.is_failure) == ("cuda-oom", True)


def test_a_programs_own_words_give_the_size_it_could_not_get() -> None:
    line = "Error: failed to allocate 6442450944 bytes for centroids: cudaErrorMemoryAllocation"
    (failure,) = classify_text(line, torch_version=None)
    assert (failure.cls, failure.numbers.get("requested_bytes")) == ("cuda-oom", 6442450944)


def test_an_arrow_to_out_of_memory_in_prose_is_no_check() -> None:
    assert [i for i in classify_text("low batch -> out of memory less often",
                                     torch_version=None) if i.is_failure] == []


def test_onnx_runtimes_arena_growing_at_info_level_is_no_oom() -> None:
    text = ("2024-05-02 10:00:01.100 [I:onnxruntime:Env, bfc_arena.cc:317 onnxruntime::BFCArena::"
            "AllocateRawInternal] Extending BFCArena for Cuda. bin_num:18 (requested) num_bytes: "
            "268435456 (actual) rounded_bytes:268435456\n"
            "2024-05-02 10:00:01.101 [I:onnxruntime:Env, bfc_arena.cc:197 onnxruntime::BFCArena::"
            "Extend] Extended allocation by 268435456 bytes.\n")
    assert [i for i in classify_text(text, torch_version=None) if i.is_failure] == []


def test_onnx_runtimes_arena_failing_is_still_the_oom() -> None:
    line = ("[E:onnxruntime:, bfc_arena.cc:342 onnxruntime::BFCArena::AllocateRawInternal] "
            "Failed to allocate memory for requested buffer of size 268435456")
    (failure,) = classify_text(line, torch_version=None)
    assert (failure.cls, failure.is_failure) == ("cuda-oom", True)


def test_a_codes_gloss_in_parentheses_is_no_telling() -> None:
    line = ("- the check records `HEALTH_ERR_MEM_ALLOC` (insufficient GPU memory could be "
            "allocated for the test) and still passes")
    assert [i for i in classify_text(line, torch_version=None) if i.is_failure] == []


def test_a_telling_after_a_function_call_is_still_read() -> None:
    line = "Even after torch.cuda.empty_cache() (twice) my 3060 runs out of VRAM at step 10."
    (failure,) = classify_text(line, torch_version=None)
    assert failure.signature == "cuda-oom/memory-told"


def test_nvccs_passes_out_of_host_memory_in_a_build_are_the_hosts() -> None:
    # ptxas's and the front end's own words, inside a parallel build of CUDA sources
    failures = [i for i in shape_incidents("cuda_build_compiler_out_of_host_memory.log")
                if i.is_failure]
    assert [(i.cls, i.signature) for i in failures] == [
        ("host-oom", "host-oom/native-allocation")]
    assert failures[0].line_numbers[:2] == [7, 8]
    assert "parallel" in failures[0].remedy
