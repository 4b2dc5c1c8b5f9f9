"""A GPU's memory told running out in the writer's own words, in the languages people report
in, where no message of the program's was kept; the same words in advice, a condition, a
release note or a failure that is over raise nothing; a title that asks ahead whether a run
would fail is no report; OpenCV's CUDA allocation failure in the middle of a log. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize("name", [
    "gpu_memory_told_card_named.log",  # "my RTX 3060 12GB runs out of VRAM"
    "gpu_memory_oom_event_named_gpu.log",  # "Getting OOM on A100 80GB", not in the tail
    "gpu_memory_told_other_languages.log",  # "läuft der Grafikspeicher voll"
    "gpu_memory_told_zh.log",  # "就爆显存了"
    "gpu_memory_told_ja.log",  # "GPUのメモリが不足して"
    "gpu_memory_told_ru.log",  # "не хватает видеопамяти"
    "gpu_memory_told_es_fr.log",  # "me quedo sin memoria en la GPU"
])
def test_a_gpus_memory_told_running_out(name: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/memory-told")
    assert found.numbers == {}  # the sizes in prose are the card's, not a message's
    assert "gpu-audit scan" in found.remedy


@pytest.mark.parametrize("name", [
    "gpu_memory_told_advice_languages.log",  # conditions and advice in eight languages
    "gpu_memory_told_over_now.log",  # "I had OOM ... before, ... it works fine now"
    "question_title_ahead_no_run.log",  # "Does training 13B on one A100 run out of memory?"
])
def test_the_same_words_in_advice_or_a_question_raise_nothing(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure]


def test_opencvs_cuda_allocation_failure_mid_log() -> None:
    found = root("opencv_gpu_mat_oom_mid_log.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/cuda-error")
    assert 8 in found.line_numbers
