"""An InfiniBand completion error retold without "with" or the colon ("NCCL WARN NET/IB Got
completion error 12", as titles copy it) is still NCCL's network failure."""

from __future__ import annotations

from tests.explain.helpers import shape_root


def test_a_retold_completion_error_is_a_network_failure():
    root = shape_root("nccl_ib_completion_retold_title.log")
    assert (root.signature, root.numbers.get("status")) == ("nccl/network", 12)
