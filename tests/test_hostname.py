"""The node's name is read one way: the kernel's node name on Linux, socket's elsewhere."""

from __future__ import annotations

import socket
import sys

import pytest

from gpu_audit.hostname import host_name


def test_the_name_is_what_socket_reports() -> None:
    assert host_name() == socket.gethostname()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: uname's node name")
def test_on_linux_it_is_unames_node_name(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    real = os.uname()
    monkeypatch.setattr(os, "uname", lambda: os.uname_result((real[0], "gpu-node-07",
                                                              *real[2:])))
    assert host_name() == "gpu-node-07"
