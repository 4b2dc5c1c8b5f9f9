"""Memory failures read in the shapes people post them: a thread exported with the forge's
header above its title, an out-of-memory or a kill told in the writer's words, and a cuDNN
status that the text says was really the GPU running out of memory. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import read_head, title_failure
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(text: str) -> list[str]:
    return [i.cls for i in classify_text(text, torch_version=None) if i.is_failure]


# --- a thread exported with a header line above its title ----------------------------------------

def test_title_under_a_forge_header_is_read() -> None:
    found = root("thread_export_header_title.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/kernel-oom-killer")
    assert found.title.startswith("Named in the title")
    assert found.line_numbers == [3]


def test_header_and_labels_are_not_the_title() -> None:
    head = read_head(b"acme/x \xc2\xb7 issue #1 \xc2\xb7 open \xc2\xb7 C\nlabels: bug\n# Title\n"
                     b"\nbody\n", whole=True)
    assert (head.title, head.title_line, head.heading) == ("# Title", 3, True)


def test_pull_request_header_keeps_its_title_unread() -> None:
    assert not [i for i in incidents("thread_export_header_change_title.log") if i.is_failure]


# --- a GPU's out-of-memory told in the writer's words ---------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("Batch size question\n\nWith 32 samples per step the warm-up passes and then it raises a "
     "Cuda oom error.\n", ["cuda-oom"]),
    ("Fine-tuning the large model\n\nWe sometimes hit CUDA OutOfMemoryError on the 48 GB "
     "card.\n", ["cuda-oom"]),
    ("Nightly sweep\n\nThe run failed after 3h on a real CUDA OOM at step 900 of the "
     "attention sweep.\n", ["cuda-oom"]),
    # (any subject, told as a fact; not where the out-of-memory is the sweep's expected way)
    ("Sweep notes\n\nthe trainer throws a GPU OOM error at batch 64 on the small card\n",
     ["cuda-oom"]),
    ("Sweep notes\n\nthe trainer throws a GPU OOM error at batch 64, as expected, and the sweep "
     "goes on to 32\n", []),
    # a condition, and advice to the reader, tell nothing
    ("Batch size advice\n\nIf it throws a CUDA OOM error, halve the batch.\n", []),
    ("Batch size advice\n\nWhen you get a CUDA OOM error you need to lower the batch.\n", []),
])
def test_gpu_oom_told_in_words(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


# --- a kill told in the writer's words, the exit status alone, Slurm's line cut ------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("Training stops\n\nHalfway through epoch 2 my training gets killed, no traceback.\n",
     ["host-oom"]),
    ("Training stops\n\nEach time I launch it I get a Killed message once the loader starts.\n",
     ["host-oom"]),
    ("训练中断\n\n跑到第9轮的时候程序killed了，日志里没有报错。\n", ["host-oom"]),
    ("Exporter container\n\nOur sidecar restarts: it is exiting due to 137 every few minutes.\n",
     ["host-oom"]),
    ("Exporter container\n\nexporter   Exited (137) 3 minutes ago\n", ["host-oom"]),
    ("IDE run\n\nProcess finished with exit code 1 (interrupted by signal 9: sigkill)\n",
     ["host-oom"]),
    ("# slurmstepd: error: Detected 2 oom-kill event(s)\n\nMy array job stops there.\n",
     ["host-oom"]),
    # a condition, an answer about a kill in general, a vague "it"
    ("Training stops\n\nIf the process is killed, the machine has too little RAM.\n", []),
    ("Training stops\n\nit shows killed and prints no stack trace\n", []),
    ("Exporter container\n\nThe exporter exits with 1370 lines of output.\n", []),
])
def test_host_kill_told_in_words(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


# --- a cuDNN status the text says was an out-of-memory ------------------------------------------

def test_causeless_cudnn_status_told_oom_later_is_cuda_oom() -> None:
    found = incidents("cudnn_status_told_oom_later.log")
    failing = [(i.cls, i.role) for i in found if i.is_failure]
    assert failing == [("cuda-oom", "root-cause"), ("cudnn-failure", "consequence")]
    assert "CUDNN_STATUS_EXECUTION_FAILED" in found[0].explanation


@pytest.mark.parametrize(("text", "expected"), [
    # on one line with the status
    ("Worker start\n\nTurns out that was just OOM; with a smaller batch "
     "CUDNN_STATUS_NOT_INITIALIZED is gone\n", ["cuda-oom"]),
    # a status with a cause of its own stays cuDNN's
    ("Worker start\n\nRuntimeError: cuDNN error: CUDNN_STATUS_NOT_SUPPORTED\nit was not out of "
     "memory, it was OOM once before\n", ["cudnn-failure"]),
    # the telling alone is context, and "if" tells nothing
    ("Worker start\n\nSolved: it turned out to be an out-of-memory.\n", []),
    ("Worker start\n\nRuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR\nif it is out of "
     "memory, lower the batch\n", ["cudnn-failure"]),
    # XLA's autotuner in a title, the thread saying it masked an out-of-memory
    ("# Failed to determine best cudnn convolution algorithm\n\nI run the notebook on a T4.\n"
     "A colleague had this and it turned out to be an out-of-memory, so I lowered the memory "
     "fraction.\n",
     ["cuda-oom", "cudnn-failure"]),
])
def test_cudnn_status_and_told_oom(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_heading_naming_a_plan_warning_is_no_failure() -> None:
    assert not [i for i in incidents("cudnn_heading_names_plan_warning.log") if i.is_failure]


# --- titles that tell when the failure came, in Chinese, or without saying whose memory ----------

@pytest.mark.parametrize(("text", "expected"), [
    # the title tells when it came: an event the writer met, with nothing else in the text
    ("# Out of memory on the GPU while fine-tuning the adapter\n\nmaintainer · comment\nTry a "
     "smaller rank.\n", ["cuda-oom"]),
    ("# 数据加载时进程突然被杀死\n\nmaintainer · comment\n应该是内存泄漏。\n", ["host-oom"]),
    ("# 模型推理时Killed了\n\n我用了两张卡都一样。\n", ["host-oom"]),
    # one typing slip in "cuda"
    ("# cuda-chat cuad out of memory error\n\nI am getting it on the small card.\n",
     ["cuda-oom"]),
    # TensorFlow's status in a title over its allocator's dump
    ("# Resource exhausted on the second fold\n\n```\n2026-01-02 10:00:00.000001: I "
     "tensorflow/core/common_runtime/bfc_allocator.cc:1034] 3 Chunks of size 1048576 totalling "
     "3.00MiB\n```\n", ["cuda-oom"]),
    # whose memory, from the text's own messages: TensorFlow's allocator retrying
    ("# OOM after 5 epochs of the small CNN\n\n> 12/80 [==>....] - loss: 0.51W tensorflow/core/"
     "common_runtime/bfc_allocator.cc:215] Allocator (GPU_0_bfc) ran out of memory trying to "
     "allocate 301.12MiB. The caller indicates that this is not a failure, but may mean that "
     "there could be performance gains if more memory were available.\n", ["cuda-oom"]),
    # no time told, no writer's words: a topic
    ("# Out of memory on the GPU\n\nmaintainer · comment\nTry a smaller rank.\n", []),
    # whose memory unsaid, and nothing in the text says
    ("# OOM after 5 epochs of the small CNN\n\nmaintainer · comment\nHow much RAM?\n", []),
    # a condition in Chinese
    ("# 如果程序被杀死怎么办\n\n我用了两张卡。\n", []),
    # the host's memory named beside the GPU: whose memory ran out is left open
    ("# Out of memory while loading shards into RAM on the GPU node\n\nmaintainer · comment\n"
     "Which node type?\n", []),
])
def test_titles_told(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


# --- host memory named in a thread's title ---------------------------------------------------

@pytest.mark.parametrize(("name", "signature"), [
    ("title_killed_when_saving.log", "host-oom/shell-killed"),  # "Killed when ..."
    ("title_merge_got_killed_zh.log", "host-oom/shell-killed"),  # "... 自动被killed"
    ("title_notebook_ram_exhaustion.log", "host-oom/notebook-session-ram"),
])
def test_host_memory_named_in_a_title(name: str, signature: str) -> None:
    killed = root(name)
    assert (killed.cls, killed.signature) == ("host-oom", signature)


@pytest.mark.parametrize("title", ["# GPU RAM exhaustion when training",
                                   "# RAM exhaustion on the build server",
                                   "# 如果被killed怎么办", "# Killed two birds"])
def test_titles_that_name_no_host_kill(title: str) -> None:
    head = read_head(f"example/x · issue #1 · open\n{title}\n\nI see it.\n".encode(), whole=True)
    assert title_failure(head) is None
