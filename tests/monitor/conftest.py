"""Fixtures for monitor tests: a private runtime folder and real publishing child processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_audit import monitor
from tests.monitor.children import Child


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where publications go for this test (created by the monitor, mode 0700)."""
    folder = tmp_path / "runtime"
    monkeypatch.setenv("GPU_AUDIT_RUNTIME_DIR", str(folder))
    return folder


@pytest.fixture(autouse=True)
def no_monitor_left_running() -> Iterator[None]:
    yield
    monitor.stop()


@pytest.fixture
def spawn(runtime_dir: Path) -> Iterator:
    children: list[Child] = []

    def start(*args: str) -> Child:
        child = Child(runtime_dir, *args)
        children.append(child)
        return child

    yield start
    for child in children:
        if child.proc.poll() is None:
            child.kill()
