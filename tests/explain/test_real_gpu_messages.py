"""The messages the installed torch really prints on a GPU, read back by the classifier.

These make torch fail on purpose in a child process (an allocation larger than the GPU, an
embedding index out of range) and check that the message shape of this torch release is still
recognised, numbers included. They need a real NVIDIA GPU and are skipped elsewhere.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_audit.explain import classify_text

pytestmark = pytest.mark.gpu


def run_torch(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)


def test_a_real_oversized_allocation_is_read_as_too_large() -> None:
    done = run_torch(
        "import torch\n"
        "total = torch.cuda.get_device_properties(0).total_memory\n"
        "print(total, flush=True)\n"
        "torch.empty(2 * total, dtype=torch.uint8, device='cuda')\n")
    assert done.returncode != 0, done.stdout
    total = int(done.stdout.split()[0])
    incidents = classify_text(done.stderr)
    assert incidents, done.stderr
    oom = incidents[0]
    if oom.cls == "nvml-assert-oom":  # NVML broken on this machine: still an OOM, said so
        assert "out-of-memory" in oom.explanation
        return
    assert oom.cls == "cuda-oom", done.stderr
    assert oom.numbers["requested_bytes"] >= 2 * total * 0.99
    assert oom.numbers["capacity_bytes"] == pytest.approx(total, rel=0.01)
    assert oom.numbers["free_bytes"] is not None
    assert oom.diagnosis == "too-large"


def test_a_real_device_side_assert_is_read_with_its_assertion() -> None:
    done = run_torch(
        "import torch\n"
        "weights = torch.zeros(5, 3, device='cuda')\n"
        "out = torch.nn.functional.embedding(torch.tensor([10], device='cuda'), weights)\n"
        "torch.cuda.synchronize()\n")
    assert done.returncode != 0
    incidents = classify_text(done.stderr)
    assert incidents and incidents[0].cls == "device-assert", done.stderr
    assert incidents[0].role == "root-cause"
