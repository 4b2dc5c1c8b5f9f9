"""The scan's variable filter and distribution-name normaliser, read as text, agree with the
patterns they spell out (the patterns are the specification)."""

from __future__ import annotations

import random
import re

from gpu_audit.collect.software import _normalized_name, relevant_variable

RELEVANT_ENV = re.compile(
    r"^(CUDA_.*|PYTORCH_.*|NCCL_.*|TORCH_.*|NVIDIA_.*|LD_PRELOAD|OMP_NUM_THREADS|"
    r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|NSYS_.*|NVTX_.*|CUDA_INJECTION64_PATH)$"
)
PIECES = ["CUDA_", "CUDA", "PYTORCH_", "NCCL_", "TORCH_", "NVIDIA_", "NSYS_", "NVTX_", "LD_PRELOAD",
          "OMP_NUM_THREADS", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
          "CUDA_INJECTION64_PATH", "\n", "_", "X", "x", "-", ".", " ", "cuda_", "Torch"]


def _generated(count: int) -> list[str]:
    rng = random.Random(11272026)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 4))) for _ in range(count)]


def test_the_variable_filter_agrees_with_its_pattern():
    for name in ["CUDA_VISIBLE_DEVICES", "LD_PRELOAD\n", "LD_PRELOAD\n\n", "CUDA_\nX", "PATH",
                 "cuda_visible_devices", "NCCL_", "XCUDA_", *_generated(20_000)]:
        assert relevant_variable(name) == (RELEVANT_ENV.match(name) is not None), repr(name)


def test_the_name_normaliser_agrees_with_importlib_metadata():
    for name in ["torch", "Torch", "nvidia-cuda-runtime-cu12", "a.-_b", "-x-", "..", "", "A__B",
                 *_generated(20_000)]:
        expected = re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")
        assert _normalized_name(name) == expected, repr(name)
