"""PyTorch as installed (from package metadata, torch never imported) and the allocator settings.

Importing torch costs seconds and can initialise CUDA; everything here reads files only.
"""

from __future__ import annotations

import importlib.metadata
import os
import re

from gpu_audit.model import AllocatorConfig, ProbeError
from gpu_audit.redact import redact_env

ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")

# Variables the environment lint looks at, kept (redacted) in the snapshot.
RELEVANT_ENV = re.compile(
    r"^(CUDA_.*|PYTORCH_.*|NCCL_.*|TORCH_.*|NVIDIA_.*|LD_PRELOAD|OMP_NUM_THREADS|"
    r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|NSYS_.*|NVTX_.*|CUDA_INJECTION64_PATH)$"
)


def torch_version() -> str | None:
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def torch_build(version: str | None) -> tuple[str | None, str | None]:
    """(variant, CUDA version) from a version's local label: ``2.5.1+cu124`` -> (cuda, 12.4)."""
    if version is None:
        return None, None
    local = version.partition("+")[2]
    if match := re.fullmatch(r"cu(\d+)(\d)", local):
        return "cuda", f"{int(match[1])}.{match[2]}"
    if local.startswith("rocm"):
        return "rocm", None
    if local == "cpu":
        return "cpu", None
    if local.startswith("xpu"):
        return "xpu", None
    return None, None  # no label: PyPI's default build, CUDA on Linux x86-64, but unconfirmed


def read_process_environ(pid: int) -> dict[str, str]:
    """Another process's environment (same user or root only; raises OSError otherwise)."""
    with open(f"/proc/{pid}/environ", "rb") as handle:
        raw = handle.read()
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def read_allocator_config(pid: int | None = None) -> tuple[AllocatorConfig, list[ProbeError]]:
    """The allocator settings of this process (``pid=None``) or of a running process."""
    errors: list[ProbeError] = []
    source = "env" if pid is None else f"pid:{pid}"
    if pid is None:
        env = dict(os.environ)
    else:
        try:
            env = read_process_environ(pid)
        except OSError as exc:
            errors.append(ProbeError("env", f"pid:{pid}", f"cannot read its environment: "
                                     f"{exc.strerror or exc}"))
            env = {}
    version = torch_version()
    variant, cuda = torch_build(version)
    relevant = {k: v for k, v in env.items() if RELEVANT_ENV.match(k) and k not in ALLOC_VARS}
    config = AllocatorConfig(
        source=source,
        pytorch_cuda_alloc_conf=env.get("PYTORCH_CUDA_ALLOC_CONF"),
        pytorch_alloc_conf=env.get("PYTORCH_ALLOC_CONF"),
        torch_version=version,
        torch_cuda_version=cuda,
        torch_variant=variant,
        environment=redact_env(relevant),
    )
    return config, errors
