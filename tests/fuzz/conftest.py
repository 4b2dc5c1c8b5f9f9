"""Fuzz tests write hundreds of small reports: skip the fsync that makes each write durable
(durability is not what they test), so that the suite stays quick on a busy disk."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", lambda fd: None)


@pytest.fixture(autouse=True)
def bounded_memory():
    """No generated input may make the process grow by more than this."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 512 * 1024, f"peak memory grew by {grown_kib // 1024} MiB"
