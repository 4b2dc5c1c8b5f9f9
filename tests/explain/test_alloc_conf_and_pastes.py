"""The allocator configuration at fault as reports tell it, and messages pasted in the shapes
people paste them: an out-of-memory message one sentence per line in the middle of a report, a
status a heading names above the warning it restates. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from tests.explain.helpers import gib
from tests.explain.helpers import shape_root as root

# --- an out-of-memory message pasted one sentence per line ---------------------------------------


def test_the_requested_size_on_a_line_of_its_own_mid_report_is_read() -> None:
    # ("Tried to allocate 2.25 GiB." has no prefilter key; it is read only as the next
    # sentence of the message above it, wherever the paste sits in the text)
    oom = root("oom_one_sentence_per_line_mid_report.log")
    assert oom.signature == "cuda-oom/caching-allocator"
    assert oom.numbers["requested_bytes"] == gib(2.25)
    assert oom.numbers["free_bytes"] == round(20.10 * 1024**3)
