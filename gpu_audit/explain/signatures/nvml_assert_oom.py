"""An out-of-memory hidden behind an NVML INTERNAL ASSERT.

When PyTorch's caching allocator runs out of memory it asks NVML which processes use the GPU,
to list them in its message. If NVML does not work in the process, that call fails and
``NVML_SUCCESS == ... INTERNAL ASSERT FAILED at ...CUDACachingAllocator.cpp`` replaces the
out-of-memory message.

Why it matters: two things are wrong at once: the job ran out of GPU memory, and NVML is
broken (usually a driver upgraded without a reboot, or a container whose NVML library does not
match the host's driver); the assert hides the numbers that would say why memory ran out.

Example: ``RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at
.../c10/cuda/CUDACachingAllocator.cpp``.

Fix: first fix NVML (`nvidia-smi` or `gpu-audit scan`; a "Driver/library version mismatch"
means reboot the node, and in a container use the host's driver libraries); then treat it as
an out-of-memory. ``PYTORCH_NO_NVML`` does not exist in PyTorch and changes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Signature,
    advice,
    document_class,
    signature,
)
from gpu_audit.explain.signatures.texts import REBOOT_MISMATCH, REDUCE_MEMORY

CLASS = document_class("nvml-assert-oom", __doc__)

# The caching allocator's NVML assert, and (more general) the same assert anywhere in PyTorch.
NVML_ASSERT_IN_ALLOCATOR = (  # also as a translator rendered "INTERNAL ASSERT FAILED at"
    r"NVML_SUCCESS == (?P<call>.{1,200}?)\s*(?:INTERNAL ASSERT FAILED at |[^\x00-\x7f]{1,20})"
    r"[\"'`]?"
    r"(?P<file>[^\"'`\s:]*CUDACachingAllocator\.cpp)[\"'`]?(?::|[^\d\n]{1,4})?"
    r"(?P<source_line>\d+)?")  # the path in double, single or back quotes, or none
NVML_ASSERT = (r"NVML_SUCCESS == (?P<call>.{1,200}?) INTERNAL ASSERT FAILED at [\"'`]?"
               r"(?P<file>[^\"'`\s:]+)[\"'`]?:?(?P<source_line>\d+)?")


def nvml_assert(match: re.Match[str], _line: str) -> dict[str, Any]:
    """The NVML call that failed, and the PyTorch source file and line of the assert."""
    call = match["call"].strip()
    if "nvmlInit" in call:
        nvml_call = "nvmlInit_v2"
    elif "HandleByPciBusId" in call:
        nvml_call = "nvmlDeviceGetHandleByPciBusId_v2"
    elif call == "r":
        nvml_call = "nvmlDeviceGetComputeRunningProcesses"
    else:
        nvml_call = call
    return {"nvml_call": nvml_call, "source_file": match["file"].rsplit("/", 1)[-1],
            "source_line": int(match["source_line"]) if match["source_line"] else None}


@signature("nvml-assert-oom/caching-allocator", NVML_ASSERT_IN_ALLOCATOR, ("NVML_SUCCESS",),
           "Out of memory, hidden behind an NVML INTERNAL ASSERT", extract=nvml_assert,
           tier=1.0,
           example='RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at '
           '"../c10/cuda/CUDACachingAllocator.cpp":838, please report a bug to PyTorch.')
def _nvml_assert_oom(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    call = numbers.get("nvml_call") or "an NVML call"
    explanation = (
        "This RuntimeError is an ordinary CUDA out-of-memory. When PyTorch's caching allocator "
        "runs out of memory it asks NVML which processes use the GPU, to list them in the OOM "
        f"message; {call} failed, and the INTERNAL ASSERT replaced the OOM message. Its "
        "'please report a bug' is misleading, and so is blaming fragmentation or the allocator. "
        "Two things are wrong: the job ran out of GPU memory, and NVML does not work in this "
        "process: typically the NVIDIA driver was upgraded without a reboot (NVML library and "
        "kernel module differ), a container carries a libnvidia-ml that does not match the host "
        "driver, or MIG/restricted containers refuse process queries.")
    remedy = (
        "1. Fix NVML: run `nvidia-smi` (or `gpu-audit scan`); \"Driver/library version "
        "mismatch\" means: " + REBOOT_MISMATCH + " In a container, use the host's driver "
        "libraries (NVIDIA Container Toolkit) instead of a copy in the image.\n"
        "2. Then treat it as an out-of-memory: rerun to get the real OOM message, and see its "
        "numbers with `gpu-audit explain`, or:\n" + REDUCE_MEMORY + "\n"
        "PYTORCH_NO_NVML does not exist in PyTorch and changes nothing; "
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1 avoids the NVML call but switches the caching "
        "allocator off (very slow; for diagnosis only).")
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")
