"""Shapes read since the 59th and 60th held-out sets: Kaldi's allocator, PyTorch without CUDA or
without NCCL, the driver's own library missing, darknet's cuDNN check, Blender Cycles' out of
memory, and titles and tellings: CUDA.jl's exception named, an out-of-memory the title leaves
unnamed in a thread about a GPU, a program told asking for more than the GPU has, the GPU's
space run out, torch.cuda.is_available() told turning False in Chinese, a system crash and
reboot under load. Written in the project's own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.explain.helpers import text_incidents

_ISSUE = "example-lab/trainer · issue #21 · open · Python\n"


def classes(tmp_path: Path, text: str) -> list[str]:
    return [i.cls for i in text_incidents(tmp_path, text) if i.is_failure]


@pytest.mark.parametrize(("title", "body", "expected"), [
    ("# OutOfGPUMemoryError with available memory",
     "I see it on every run of the solver.", "cuda-oom"),
    # a bare out-of-memory: the GPU's in a thread about a GPU, nobody's in one about RAM
    ("# Out of memory when running the recipe",
     "I use one V100 GPU with 32G memory, and it seems 32G is not enough for the training.",
     "cuda-oom"),
    ("# ollama tried to allocate more memory than the GPU has.",
     "It happens with the 70B model on my machine.", "cuda-oom"),
    ("# Running out of GPU space when running inference with the fine-tuned model",
     "I have the same problem with both checkpoints.", "cuda-oom"),
    ("# 为什么安装requirements之前print(torch.cuda.is_available())为True 安装之后变成了False",
     "我的显卡是4070。", "driver-mismatch"),
    ("# Reliably repeating system crash/reboot when using the imagenet examples",
     "I have the latest driver installed.", "gpu-hardware"),
    ("# cuDNN status Error in training", "I get it after a few hundred iterations.",
     "cudnn-failure"),
])
def test_titles_read_since_the_59th_and_60th_sets(tmp_path: Path, title: str, body: str,
                                                  expected: str) -> None:
    text = f"{_ISSUE}{title}\n\nsam · description · 2026-03-01\n{body}\n"
    assert classes(tmp_path, text)[:1] == [expected]


def test_a_bare_out_of_memory_in_a_thread_about_the_host_s_ram_is_not_the_gpu_s(
        tmp_path: Path) -> None:
    text = (f"{_ISSUE}# Out of memory when running the recipe\n\nsam · description · "
            "2026-03-01\nThe machine has 16 GB of RAM and the feature extraction stops.\n")
    assert "cuda-oom" not in classes(tmp_path, text)


def test_the_driver_s_library_told_not_found(tmp_path: Path) -> None:
    text = ("# Notes\nIt seems that `libcuda.so.1` is not found, which is the last file it "
            "tries before the error.\n")
    assert classes(tmp_path, text) == ["driver-mismatch"]
