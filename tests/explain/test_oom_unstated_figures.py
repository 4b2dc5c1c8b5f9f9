"""An OOM message that leaves a figure out gets an explanation without it: never "PyTorch had
unknown allocated", in any of the message formats."""

from __future__ import annotations

import pytest

from gpu_audit.explain.api import classify_text

TRIED = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
CAPACITY = " GPU 0 has a total capacity of 79.15 GiB of which 1.52 GiB is free."


@pytest.mark.parametrize(("message", "present", "absent"), [
    # PyTorch 2.x, cut before the allocated/reserved sentence
    (TRIED + CAPACITY + " Including non-PyTorch memory, this process has 77.62 GiB memory in use.",
     ["2.00 GiB", "79.15 GiB GPU", "1.52 GiB free", "does not state how much memory PyTorch"],
     ["PyTorch had"]),
    (TRIED, ["2.00 GiB", "does not state"], ["free)", "GPU;"]),
    # PyTorch 1.x, without "already allocated"
    ("RuntimeError: CUDA out of memory. Tried to allocate 3.00 GiB (GPU 0; 15.90 GiB total "
     "capacity; 1.00 GiB free; 14.50 GiB reserved in total by PyTorch)",
     ["PyTorch had 14.50 GiB reserved on a 15.90 GiB GPU", "1.00 GiB free"],
     ["allocated to live tensors"]),
    # other processes, without this process's reserved figure or the free memory
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 79.15 GiB. Process 1234 has 70.00 GiB memory in use.",
     ["Other processes held 70.00 GiB", "failed: without"], ["this job had", " with "]),
    # larger than any GPU, with no capacity stated
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",
     ["larger than the whole GPU. That"], ["()"]),
])
def test_figures_the_message_left_out_are_left_out(message, present, absent) -> None:
    incidents = [i for i in classify_text(message + "\n", torch_version=None)
                 if i.signature.startswith("cuda-oom")]
    assert incidents, message
    text = incidents[0].explanation
    assert "unknown" not in text, text
    for part in present:
        assert part in text, (part, text)
    for part in absent:
        assert part not in text, (part, text)



@pytest.mark.parametrize("message", [
    TRIED,
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 3)",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
])
def test_a_request_size_alone_is_not_read_as_a_job_too_big_for_the_gpu(message) -> None:
    (oom,) = [i for i in classify_text(message + "\n", torch_version="2.3.1")
              if i.signature.startswith("cuda-oom")]
    assert oom.diagnosis == "unknown"
    assert "does not fit this GPU" not in oom.explanation
    assert "2.00 GiB" in oom.explanation and "cannot tell" in oom.explanation
    assert oom.title == "CUDA out of memory"
    # the advice covers every cause it could be: other processes, fragmentation, a smaller job
    assert "gpu-audit scan" in oom.remedy and "expandable_segments" in oom.remedy
