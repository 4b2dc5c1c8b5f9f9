"""A reply's reading of the writer's run ("Looks like you ran out of GPU memory", "You're running
out of RAM"), a model told too big for the card or not fitting its memory, an out-of-memory as a
verb ("it's OOMing on my 4090"), the host's RAM told too little, and a notebook's notice of its
dead kernel. The same words as advice, a plan, a condition or a release note raise nothing.
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain.scanner import PREFILTER
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "line"), [
    ("replies_read_gpu_memory.log", 7),  # "you ran out of GPU memory ... doesn't fit in 12GB"
    ("gpu_memory_told_model_too_big.log", 4),  # "The model is too big for my GPU"
    ("gpu_memory_oom_as_a_verb.log", 6),  # "It's OOMing on my 4090", mid-text
])
def test_a_gpus_memory_read_or_told(name: str, line: int) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/memory-told")
    assert line in found.line_numbers


def test_the_hosts_ram_read_in_replies() -> None:
    found = root("host_ram_read_in_replies.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/out-of-ram-told")
    # "You're running out of RAM", and "Colab's 12GB of RAM is not enough" after a "when"
    # in the sentence before
    assert found.line_numbers == [6, 8]


def test_the_same_words_as_advice_or_a_plan_raise_nothing() -> None:
    assert not [i for i in incidents("memory_words_not_a_reading.log") if i.is_failure
                or i.role == "context"]


@pytest.mark.parametrize("told", [b"It's OOMing on my 4090", b"the model is too big for my GPU",
                                  b"it is too large to fit in the card"])
def test_the_tellings_are_keyed_mid_text(told: bytes) -> None:
    assert any(pattern.search(b"step 1\n" + told + b"\nstep 2\n") for pattern in PREFILTER)


def test_a_notebooks_own_notice_of_its_dead_kernel() -> None:
    # Jupyter's "The kernel for X appears to have died" and VS Code's "The Kernel crashed while
    # executing code ...", mid-text: no Python error of the kernel's own, most often host RAM
    found = root("notebook_kernel_died_notices.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/notebook-kernel-restarted")
    assert found.line_numbers == [6, 8]
