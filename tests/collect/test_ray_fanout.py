"""The Ray edge's deadlines and address handling that need no cluster (the cluster itself:
tests/fleet/test_ray_cluster.py)."""

from __future__ import annotations

import socket
import time

import pytest

from gpu_audit.collect.ray_fanout import ClusterUnreachable, host_port, precheck, resolve_address
from gpu_audit.errors import UsageError


@pytest.mark.parametrize(("address", "expected"), [
    ("10.0.0.1:6379", ("10.0.0.1", 6379)),
    ("ray://head.example:10001", ("head.example", 10001)),
    ("[::1]:6379", ("::1", 6379)),
    ("auto", None),
    ("local", None),
])
def test_host_port(address, expected):
    assert host_port(address) == expected


def test_bad_address_is_a_usage_error():
    with pytest.raises(UsageError, match="expected HOST:PORT"):
        host_port("head:gcs")


def test_address_falls_back_to_ray_address_then_auto(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_address(None) == "auto"  # join this machine's cluster, never start one
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert resolve_address(None) == "10.1.2.3:6379"
    assert resolve_address("10.9.9.9:6379") == "10.9.9.9:6379"


def test_precheck_refused_port_fails_at_once():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ClusterUnreachable, match=f"cannot reach the Ray cluster at 127.0.0.1:{port}"
                       ) as caught:
        precheck(f"127.0.0.1:{port}", 3.0)
    assert caught.value.exit_code == 3
    assert time.monotonic() - started < 3.0


def test_precheck_passes_when_something_listens():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        precheck(f"127.0.0.1:{server.getsockname()[1]}", 3.0)
