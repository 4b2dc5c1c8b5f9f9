"""Tellings in more word orders: a GPU's memory run out "of all 8GB of VRAM", told with the verb
first in Russian and of "ma carte vidéo" in French; the host's RAM told full in German, Spanish
and Portuguese beside a sentence that sets the GPU apart, and a run told OOM-killed. The same
words in a condition, an avoidance or a question raise nothing, nor does a message named as the
subject of its definition, nor a title that sets a condition with no run of the writer's.
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize("name", [
    "gpu_memory_told_all_of_its_size.log",  # "ran out of all 8GB of VRAM"
    "gpu_memory_told_fr_ru_word_order.log",  # "la mémoire de ma carte vidéo est saturée"
])
def test_a_gpus_memory_told_in_more_word_orders(name: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/memory-told")


def test_the_russian_telling_with_its_verb_first_is_read_alone() -> None:
    # the French post is the first telling; the Russian reply's line is read as well
    lines = {n for i in incidents("gpu_memory_told_fr_ru_word_order.log")
             if i.signature == "cuda-oom/memory-told" for n in i.line_numbers}
    assert {4, 7} <= lines


@pytest.mark.parametrize("name", [
    "host_ram_told_de_es_pt.log",  # "ist der Arbeitsspeicher voll", "la memoria RAM se llena"
    "host_run_told_oom_killed.log",  # "then the job gets OOM killed"
])
def test_the_hosts_memory_told_running_out(name: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("host-oom", "host-oom/out-of-ram-told")


def test_each_language_of_the_ram_telling_is_read() -> None:
    lines = {n for i in incidents("host_ram_told_de_es_pt.log")
             if i.signature == "host-oom/out-of-ram-told" for n in i.line_numbers}
    # German (the GPU set apart in the next sentence), Spanish, Portuguese
    assert {4, 7, 9} <= lines


@pytest.mark.parametrize("name", [
    "host_ram_conditions_and_avoidance.log",  # "How can we prevent our pods from being OOM killed"
    "messages_defined_in_sentences.log",  # "A CUDA out of memory error means ..."
    "condition_title_advice_zh.log",  # "如果训练时显存不足，可以尝试以下方法"
])
def test_conditions_avoidance_and_definitions_raise_nothing(name: str) -> None:
    assert not [i for i in incidents(name) if i.is_failure]


def test_a_condition_title_with_the_writers_run_is_a_report() -> None:
    found = root("condition_title_own_run.log")
    assert found.cls == "cuda-oom"


def test_chinese_tellings_with_a_word_between_or_oom_as_a_verb() -> None:
    # "就OOM了" on a line that names the card (keyed mid-text), "显存直接被占满"
    found = root("gpu_memory_told_zh_more.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/memory-told")
    assert found.line_numbers == [6, 9]
