"""A thread's title that names its failure in general words: a GPU's memory growing until the
run crashes, a Japanese title after the space a title's reading puts between scripts, the
expandable_segments setting as a crash's cause, a card not supported by the installed build, a
cuDNN error, the driver too old. Synthetic threads in the project's own words."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text


def _thread(title: str) -> str:
    return (f"owner/trainer · issue #12 · open\n# {title}\nkim-l · description · 2026-06-26\n"
            "It happens every time on my machine; logs were not kept. Any ideas?\n")


@pytest.mark.parametrize(("title", "cls"), [
    ("GPU memory keeps increasing until crash", "cuda-oom"),
    ("GPUメモリ不足で学習が止まる", "cuda-oom"),
    ("expandable_segments causes crash on startup", "alloc-conf"),
    ("RTX 5090 not supported by current PyTorch", "driver-mismatch"),
    ("cuDNN error on RTX 4090 with conv3d", "cudnn-failure"),
    ("Driver too old for CUDA 12.1", "driver-mismatch"),
])
def test_a_title_names_the_failure(title: str, cls: str) -> None:
    roots = [i for i in classify_text(_thread(title), torch_version="2.3.1")
             if i.role == "root-cause"]
    assert [i.cls for i in roots] == [cls]


@pytest.mark.parametrize("title", [
    "How to reduce VRAM usage?",
    "Add support for RTX 5090",
    "Improve cuDNN error messages",
    "Is the RTX 5090 supported by the latest PyTorch?",
])
def test_a_question_or_a_request_in_a_title_names_none(title: str) -> None:
    assert not [i for i in classify_text(_thread(title), torch_version="2.3.1") if i.is_failure]
