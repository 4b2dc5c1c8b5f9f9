"""Memory failures read in the shapes people post them: a thread exported with the forge's
header above its title, an out-of-memory or a kill told in the writer's words, and a cuDNN
status that the text says was really the GPU running out of memory. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import read_head
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
    ("Batch size question\n\nAt batch 32 the first steps pass, then after 40 iterations it "
     "throws a Cuda oom error.\n", ["cuda-oom"]),
    ("Fine-tuning the large model\n\nOn one 48 GB card I repeatedly encountered the error: CUDA "
     "OutOfMemoryError.\n", ["cuda-oom"]),
    ("Nightly sweep\n\nJob 5521 FAILED after 12m04s on a genuine CUDA OutOfMemoryError in the "
     "attention block; not retried.\n", ["cuda-oom"]),
    ("Sweep notes\n\nthe trainer throws a GPU OOM error at batch 64 on the small card\n", []),
    # a condition, and advice to the reader, tell nothing
    ("Batch size advice\n\nIf it throws a CUDA OOM error, halve the batch.\n", []),
    ("Batch size advice\n\nWhen you get a CUDA OOM error you need to lower the batch.\n", []),
])
def test_gpu_oom_told_in_words(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


# --- a kill told in the writer's words, the exit status alone, Slurm's line cut ------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("Training stops\n\nDuring the second epoch the process is always killed. What can I do?\n",
     ["host-oom"]),
    ("Training stops\n\nWhen I start the job I simply get a Killed message and nothing else.\n",
     ["host-oom"]),
    ("训练中断\n\n训练到第9个epoch时，程序killed，没有任何报错。\n", ["host-oom"]),
    ("Exporter container\n\nThe exporter container keeps exiting due to 137 after a minute.\n",
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
