"""Host memory in more places: a Go program's words for its child's SIGKILL (a model server's
runner), systemd's and systemd-oomd's kill lines, OpenCV's allocator refusing RAM, a dataset
cache told filling RAM, the writer's machine told out of memory, and a kill told in Chinese
with the English verb. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_root as root


def signatures(text: str) -> list[str]:
    return [i.signature for i in classify_text(text, torch_version=None) if i.is_failure]


# --- a kill seen by the program that started the killed one ------------------------------------

def test_runner_terminated_by_signal_killed_is_a_sigkill() -> None:
    found = root("model_server_runner_signal_killed.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/sigkill")


@pytest.mark.parametrize(("text", "expected"), [
    ('level=ERROR msg="runner failed" error="exec: signal: killed"\n', ["host-oom/sigkill"]),
    ("trainer.service: Main process exited, code=killed, status=9/KILL\n", ["host-oom/sigkill"]),
    # PyTorch's own words for a worker stay the DataLoader's
    ("RuntimeError: DataLoader worker (pid 7781) is killed by signal: Killed.\n",
     ["host-oom/dataloader-killed"]),
    # another signal is no SIGKILL
    ('error="llama runner process has terminated: signal: segmentation fault"\n', []),
    ("trainer.service: Main process exited, code=killed, status=15/TERM\n", []),
])
def test_go_and_systemd_words_for_sigkill(text: str, expected: list[str]) -> None:
    assert signatures(text) == expected


def test_runner_told_killed_in_a_reply() -> None:
    text = ("Most of the layers stay in system RAM; maybe at the time the runner was killed "
            "another program asked for memory.\n")
    assert signatures(text) == ["host-oom/shell-killed"]


# --- systemd and systemd-oomd -------------------------------------------------------------------

def test_systemd_unit_failed_with_oom_kill() -> None:
    found = root("systemd_unit_failed_oom_kill.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/systemd-oom-kill")
    assert found.numbers.get("unit") == "inference.service"
    assert "journalctl -k" in found.remedy  # the kernel's OOM killer chose the process


def test_systemd_oomd_killed_a_scope_for_pressure() -> None:
    found = root("systemd_oomd_killed_scope_pressure.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/systemd-oom-kill")
    assert found.numbers.get("oomd_reason") == "pressure"
    assert str(found.numbers.get("cgroup", "")).endswith("app-train-4f2a.scope")
    # systemd-oomd kills from user space: its own log has the kill, the kernel's has none
    assert "journalctl -u systemd-oomd" in found.remedy
    assert "journalctl -k" not in found.remedy


@pytest.mark.parametrize(("text", "expected"), [
    ("Mar 01 systemd-oomd[640]: Marked /system.slice/docker-3a9.scope for killing due to memory "
     "used (63000000000) / total (67000000000) and swap used (8000000000) / total "
     "(8500000000) being more than 90.00%\n", ["host-oom/systemd-oom-kill"]),
    ("worker.service: A process has been killed by the OOM killer.\n",
     ["host-oom/systemd-oom-kill"]),
    # a unit that failed for another reason
    ("trainer.service: Failed with result 'exit-code'.\n", []),
])
def test_systemd_kill_wordings(text: str, expected: list[str]) -> None:
    assert signatures(text) == expected


# --- OpenCV's allocator, and the dataset cache told filling RAM ---------------------------------

def test_opencv_insufficient_memory_is_host_memory() -> None:
    found = root("opencv_insufficient_memory_dataset_cache.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/opencv-allocator")
    assert found.numbers.get("requested_bytes") == 1228800


@pytest.mark.parametrize(("text", "expected"), [
    ("OpenCV Error: Insufficient memory (Failed to allocate 92160000 bytes) in "
     "OutOfMemoryError, file alloc.cpp, line 52\n", ["host-oom/opencv-allocator"]),
    ("error: (-4:Insufficient memory) Failed to allocate xxxx bytes in function "
     "'cv::OutOfMemoryError'\n", ["host-oom/opencv-allocator"]),
    # OpenCV's CUDA module is the GPU's
    ("cv2.error: OpenCV(4.8.0) gpu_mat.cu:116: error: (-217:Gpu API call) out of memory in "
     "function 'allocate'\n", []),
])
def test_opencv_allocator_wordings(text: str, expected: list[str]) -> None:
    assert [s for s in signatures(text) if s.startswith("host-oom/")] == expected


def test_dataset_cache_told_filling_ram() -> None:
    found = root("dataset_cache_told_fills_ram.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/dataset-cache-told")


@pytest.mark.parametrize(("text", "expected"), [
    ("Even with --cache off, a memory shortage stops the training in colab and I get ^C.\n",
     ["host-oom/dataset-cache-told"]),
    # the trainer's own notice that it will not cache: the run goes on, nothing is an error
    ("train: 212.4GB RAM required to cache images with 50% safety margin but only "
     "180.2/251.6GB available, not caching images\n", []),
    # advice, a condition, and an LLM's KV cache on the GPU
    ("If you use cache=ram and run out of memory, the training may crash; use cache=disk.\n",
     []),
    ("After the KV cache is turned on the memory is too large and the server crashes.\n", []),
])
def test_dataset_cache_told_wordings(text: str, expected: list[str]) -> None:
    assert [s for s in signatures(text) if s == "host-oom/dataset-cache-told"] == expected


# --- the writer's machine told out of memory, a kill told in Chinese ----------------------------

def test_machine_told_out_of_memory() -> None:
    found = root("system_told_out_of_memory_keras_fit.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/host-memory-told")


@pytest.mark.parametrize(("text", "expected"), [
    ("After 20 epochs our server ran out of RAM.\n", ["host-oom/host-memory-told"]),
    # a condition, an explainer, and the GPU's
    ("When the system runs out of memory, the kernel picks a process to kill.\n", []),
    ("If my laptop runs out of memory, will swap help?\n", []),
    ("My machine runs out of memory on the GPU after two batches.\n", []),
])
def test_machine_told_out_of_memory_wordings(text: str, expected: list[str]) -> None:
    assert [s for s in signatures(text) if s == "host-oom/host-memory-told"] == expected


def test_model_load_told_killed_in_chinese() -> None:
    found = root("model_load_killed_told_zh.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/shell-killed")


@pytest.mark.parametrize(("text", "expected"), [
    ("训练到第3轮时被kill了，没有报错。\n", ["host-oom/shell-killed"]),
    # a condition is no telling
    ("如果程序在加载模型中被kill了，先看内存够不够。\n", []),
])
def test_kill_told_in_chinese_wordings(text: str, expected: list[str]) -> None:
    assert [s for s in signatures(text) if s == "host-oom/shell-killed"] == expected


def test_cache_notice_alone_is_no_failure() -> None:
    text = ("train: 212.4GB RAM required to cache images with 50% safety margin but only "
            "180.2/251.6GB available, not caching images\n"
            "train: Scanning /data/labels/train.cache... 180000 images, 0 corrupt\n")
    assert signatures(text) == []


@pytest.mark.parametrize("text", [
    # a setting's value is no RAM: "cache=ram" in a condition put to the reader
    "If you use cache=ram and run out of memory, the training may crash.\n",
    "With cache='ram' set you should watch free -h; running out crashes the run.\n",
])
def test_a_cache_setting_is_no_ram_told_full(text: str) -> None:
    assert "host-oom/ram-full-told" not in signatures(text)


@pytest.mark.parametrize("text", [
    # a rule and the advice that follows it, not a run that ended
    "When the RAM is full with --cache the process crashes, so use cache=disk.\n",
    "Once the memory runs out with cache=ram training stops; try cache=disk instead.\n",
])
def test_a_rule_about_the_cache_is_no_telling(text: str) -> None:
    assert "host-oom/dataset-cache-told" not in signatures(text)
