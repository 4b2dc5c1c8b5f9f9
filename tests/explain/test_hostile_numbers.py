"""Numbers of hundreds or thousands of digits inside a log line: the line is still classified,
the unreadable number is left out."""

from __future__ import annotations

from gpu_audit.explain.api import classify_text
from gpu_audit.units import size_or_none

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. GPU {gpu} has a "
       "total capacity of 3.63 GiB of which {free} MiB is free.")


def test_a_size_too_large_for_a_float_is_not_a_size():
    assert size_or_none("9" * 400 + " MiB") is None
    assert size_or_none("1" + "0" * 300 + " PiB") is None
    assert size_or_none("2.00 GiB") == 2 * 1024**3


def test_an_oom_line_with_a_huge_free_size_is_still_an_oom():
    (incident,) = classify_text(OOM.format(gpu=0, free="9" * 400))
    assert incident.cls == "cuda-oom"


def test_an_oom_line_with_a_gpu_index_past_int_limits_is_still_an_oom():
    (incident,) = classify_text(OOM.format(gpu="9" * 5000, free="201.06"))
    assert incident.cls == "cuda-oom"
