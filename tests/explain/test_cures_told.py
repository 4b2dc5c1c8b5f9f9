"""A failure told by its cure: the run went through once NCCL's peer-to-peer path was turned
off, once the host had more swap, once the job used less GPU memory. Conditions, guesses, cures
that did not work and a guide's present tense raise nothing. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain.scanner import PREFILTER
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "cls", "line"), [
    # the cure in a reply, its "fixed it" in the next sentence
    ("cures_told_in_threads.log", "nccl", 6),
    ("cure_told_host_swap.log", "host-oom", 7),  # "solved it by adding a 32 GB swap file"
    ("cure_told_gpu_memory_modes.log", "cuda-oom", 6),  # "lowering the batch size ... fixed it"
])
def test_a_failure_told_by_its_cure(name: str, cls: str, line: int) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, f"{cls}/cure-told")
    assert found.line_numbers == [line]
    assert found.numbers == {}


def test_cures_advised_guessed_or_not_working_raise_nothing() -> None:
    assert not [i for i in incidents("cures_advised_or_not_working.log") if i.is_failure]


@pytest.mark.parametrize("told", [b"Adding swap fixed it", b"that solved the issue",
                                  b"--medvram did the trick", b"--lowvram worked",
                                  b"NCCL_IB_DISABLE=1 made it work"])
def test_a_cure_mid_text_is_keyed(told: bytes) -> None:
    # the prefilter finds the line without a memory word or a message on it
    assert any(pattern.search(b"step 1\n" + told + b"\nstep 2\n") for pattern in PREFILTER)
