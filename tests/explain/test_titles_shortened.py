"""Failures a thread's title names in a shortened form, with no message in the text: "no kernel
image available" without "is", expandable segments "not working", PyTorch's NVML assert cut
before its file. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("title_no_kernel_image_shortened.log", "driver-mismatch", "driver-mismatch/no-kernel-image"),
    ("title_expandable_segments_not_working.log", "alloc-conf", "alloc-conf/expandable-told"),
    ("title_nvml_assert_cut.log", "nvml-assert-oom", "nvml-assert-oom/caching-allocator"),
])
def test_a_shortened_title_names_the_failure(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)
    assert found.line_numbers == [2]
