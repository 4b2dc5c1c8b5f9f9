"""Suite-wide set-up: the repository on sys.path, and the `gpu` marker's skip rule."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@functools.cache
def cuda_available() -> bool:
    """A real CUDA device, checked in a child process so this one never initialises CUDA."""
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    try:
        return (
            subprocess.run(
                [sys.executable, "-c", probe], timeout=120, capture_output=True
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and not cuda_available():
        skip = pytest.mark.skip(reason="needs a real NVIDIA GPU with CUDA")
        for item in gpu_items:
            item.add_marker(skip)


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running ``python -m gpu_audit`` in a subprocess from the source tree."""
    # A developer's own GPU_AUDIT_* settings (GPU_AUDIT_FAIL_ON=warning, ...) must not change
    # what the tests see; the monitor's folder variable is set by the tests that use it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("PYTORCH_ALLOC_CONF", None)
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "200"
    return env


@pytest.fixture
def torch() -> Any:
    """torch, for the tests that need it: they skip where it is not installed."""
    return pytest.importorskip("torch")
