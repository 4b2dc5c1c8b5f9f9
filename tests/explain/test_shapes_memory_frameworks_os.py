"""Memory failures of older and smaller frameworks and of the operating system: CuPy's pool as
Chainer printed it, Theano's CNMeM, CTranslate2's check, a CUDA status retyped with its number,
an error report that names only the exception's class; MXNet's CPU storage, ENOMEM (errno 12),
Windows' page file (WinError 1455), and host memory told in the writer's words. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(text: str) -> list[str]:
    return [i.cls for i in classify_text(text, torch_version=None) if i.is_failure]


# --- GPU memory: older and smaller frameworks ----------------------------------------------------

def test_old_cupy_pool_message_is_a_gpu_oom_with_its_sizes() -> None:
    found = root("chainer_old_cupy_pool_oom.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/array-library")
    assert found.numbers["requested_bytes"] == 134217728
    assert found.numbers["allocated_bytes"] == 11811160064


def test_theano_cnmem_preallocation_is_a_gpu_oom() -> None:
    found = root("theano_cnmem_preallocate_oom.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert found.numbers["framework"] == "theano"
    assert "lib.cnmem" in found.remedy


def test_error_report_naming_only_the_class_is_a_gpu_oom() -> None:
    found = root("webui_load_model_oom_class_only.log")
    assert (found.cls, found.line_numbers) == ("cuda-oom", [3])


@pytest.mark.parametrize(("text", "expected"), [
    # CTranslate2's check, and Theano's allocator with its size
    ("Transcribing\n\nRuntimeError: CUDA failed with error out of memory\n", ["cuda-oom"]),
    ("Enhancing\n\nMemoryError: Error allocating 25165824 bytes of device memory "
     "(CNMEM_STATUS_OUT_OF_MEMORY).\n", ["cuda-oom"]),
    # the runtime's status retyped against its number, with a comma
    ("Training on the small card\n\nI encountered the \"cuda error(2), out of memory\", what "
     "now?\n", ["cuda-oom"]),
    # PyTorch's head retyped in capitals, and asked about: only the report reads
    ("训练\n\n跑了几个step就报CUDA OUT OF MEMORY\n", ["cuda-oom"]),
    ("Notes\n\nHOW TO FIX CUDA OUT OF MEMORY IN FIVE STEPS\n", []),
    # a class name after prose that is not a report's
    ("Notes\n\nThe class is java.lang.OutOfMemoryError\n", []),
])
def test_gpu_oom_shapes(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_faq_quoting_the_numbered_status_is_no_failure() -> None:
    text = ("Frequently Asked Questions\n\nMy model reports \"cuda runtime error(2): out of "
            "memory\"\n\nAs the error message suggests, the GPU has no memory left.\n")
    assert failures(text) == []


# --- host memory: frameworks and the operating system --------------------------------------------

def test_mxnet_cpu_storage_in_a_pool_workers_traceback_is_host_oom() -> None:
    # (the pool prints its worker's traceback between triple quotes: no string literal)
    found = root("mxnet_dataloader_cpu_alloc.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/framework-allocator")
    assert found.numbers["framework"] == "mxnet"
    assert found.title == "Host out of memory (MXNet)"


def test_errno_12_is_host_memory() -> None:
    found = root("dataloader_fork_errno12.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/os-allocation")
    assert found.numbers["os_error"] == "enomem"
    assert "overcommit" in found.remedy


def test_gpu_oom_before_errno_12_keeps_the_root() -> None:
    found = [(i.cls, i.role) for i in incidents("cuda_oom_then_errno12.log") if i.is_failure]
    assert found == [("cuda-oom", "root-cause"), ("host-oom", "consequence")]


def test_gpu_oom_after_a_page_file_failure_is_the_root() -> None:
    text = ("Epoch 1\nOSError: [WinError 1455] The paging file is too small for this operation "
            "to complete.\nEpoch 2\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to "
            "allocate 2.00 GiB.\n")
    found = [(i.cls, i.role) for i in classify_text(text, torch_version=None) if i.is_failure]
    assert found[0] == ("cuda-oom", "root-cause")
    assert ("host-oom", "consequence") in found


def test_windows_paging_file_is_host_memory() -> None:
    found = root("windows_paging_file_workers.log")
    assert (found.cls, found.numbers["os_error"]) == ("host-oom", "paging-file")
    assert "page file" in found.title


@pytest.mark.parametrize(("text", "expected"), [
    ("Spawning workers\n\nbash: fork: Cannot allocate memory\n", ["host-oom"]),
    # an answer that reads the writer's error from the names it printed
    ("owner/app · issue #7 · closed\n# Training fails\n\nmaintainer · comment\nThis error looks "
     "like the host's memory, given the `WinError 1455` in your output.\n", ["host-oom"]),
    # an explanation that only names it
    ("Windows notes\n\nYou may see `WinError 1455` when the page file is small.\n", []),
])
def test_operating_system_refusals(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


# --- host memory told in words ------------------------------------------------------------------

_TOLD = ("host-oom/host-memory-told", "host-oom/ram-full-told")


@pytest.mark.parametrize(("text", "expected"), [
    ("# RAM OOM with eight workers\n\nThe detector training grows from 90GB to 300GB.\n",
     ["host-oom"]),
    ("Detector training\n\nWith workers=8 it caused a CPU OOM after two epochs.\n", ["host-oom"]),
    ("Checkpoint save\n\nmaintainer · comment\nThe error is system memory, not VRAM: saving "
     "gathers the weights.\n", ["host-oom"]),
    ("Training stops\n\nThe training fails because the machine memory is used up.\n",
     ["host-oom"]),
    ("保存时中断\n\nmaintainer · comment\n应该是系统内存溢出了\n", ["host-oom"]),
    ("Merging shards\n\nMy laptop, which has 16GB of RAM, kills the process at 90%.\n",
     ["host-oom"]),
    ("Merging shards\n\nWhen the machine kills the process for its RAM, lower the shard "
     "size.\n", []),
    ("Merging shards\n\nMy server kills the job when the GPU RAM is full.\n", []),
    ("训练中断\n\n训练时内存占用太高，内存爆掉以后进程被killed\n", ["host-oom"]),
    # the GPU's memory, a condition, advice, an explainer's comparison
    ("训练中断\n\nGPU内存爆掉了，日志最后是killed\n", []),
    ("训练中断\n\n如果系统内存不足，可以减少workers\n", []),
    ("训练中断\n\n一般系统内存不足会导致程序被杀\n", []),
    ("Notes\n\nTo avoid a RAM OOM, lower the number of workers.\n", []),
    ("Notes\n\nDiagnose host OOM vs cgroup limits with dmesg.\n", []),
])
def test_host_memory_told(text: str, expected: list[str]) -> None:
    told = [i.cls for i in classify_text(text, torch_version=None)
            if i.is_failure and i.signature in _TOLD]
    assert told == expected


def test_web_page_showing_a_log_without_the_writers_run_is_no_failure() -> None:
    text = ("example.org · web page\n# Thoughts on big models\n\n```\ntorch.OutOfMemoryError: "
            "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 "
            "GiB of which 1.02 GiB is free.\n```\nThat is what a model that grew too big looks "
            "like.\n")
    assert failures(text) == []
    # ... the same page where the writer met it reports it
    told = text.replace("That is what", "I got this on my training run. That is what")
    assert failures(told) == ["cuda-oom"]
