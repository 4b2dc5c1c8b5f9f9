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
