"""PyTorch as installed (from package metadata, torch never imported) and the allocator settings.

Importing torch costs seconds and can initialise CUDA; everything here reads files only. The one
place that imports torch is the opt-in child process of :mod:`gpu_audit.collect.torch_probe`.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
from pathlib import Path

from gpu_audit.model import AllocatorConfig, ProbeError
from gpu_audit.redact import redact_env

ALLOC_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")

# Variables the environment lint looks at, kept (redacted) in the snapshot.
RELEVANT_ENV = re.compile(
    r"^(CUDA_.*|PYTORCH_.*|NCCL_.*|TORCH_.*|NVIDIA_.*|LD_PRELOAD|OMP_NUM_THREADS|"
    r"HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|NSYS_.*|NVTX_.*|CUDA_INJECTION64_PATH)$"
)

# NVIDIA's runtime wheels that PyPI's default (unlabelled) Linux torch depends on.
_CUDA_RUNTIME_WHEELS = ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11",
                        "nvidia-cuda-runtime")


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
    if local == "cpu" or local.startswith("cpu."):
        return "cpu", None
    if local.startswith("xpu"):
        return "xpu", None
    return None, None  # no label: PyPI's default build, see unlabelled_build()


def unlabelled_build(system: str | None = None) -> tuple[str | None, str | None]:
    """What a torch without a local label is: PyPI ships CUDA builds for Linux only.

    On Linux the CUDA version comes from the ``nvidia-cuda-runtime`` wheel installed beside it;
    Windows and macOS wheels from PyPI are CPU-only.
    """
    system = system or platform.system()
    if system in ("Windows", "Darwin"):
        return "cpu", None
    if system != "Linux":
        return None, None
    for wheel in _CUDA_RUNTIME_WHEELS:
        try:
            runtime = importlib.metadata.version(wheel)
        except importlib.metadata.PackageNotFoundError:
            continue
        if match := re.match(r"(\d+)\.(\d+)", runtime):
            return "cuda", f"{match[1]}.{match[2]}"
    return None, None


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


_TORCH_LIB = re.compile(r"\s(/\S*)/torch/lib/lib(?:c10|torch)\S*\.so")


def torch_version_of_process(pid: int) -> str | None:
    """The torch a running process has loaded, from its memory map and that torch's metadata.

    ``/proc/PID/maps`` names ``.../site-packages/torch/lib/libc10.so`` once the process has
    imported torch; the ``torch-*.dist-info`` beside it holds the version. ``None`` when the
    process has not imported torch, or its map is not readable (another user).
    """
    try:
        maps = Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:
        return None
    match = _TORCH_LIB.search(maps)
    if not match:
        return None
    site = Path(match[1])
    for dist_info in sorted(site.glob("torch-*.dist-info")):
        try:
            for line in (dist_info / "METADATA").read_text(errors="replace").splitlines():
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip()
                if not line.strip():
                    break
        except OSError:
            continue
    return None


def read_allocator_config(pid: int | None = None) -> tuple[AllocatorConfig, list[ProbeError]]:
    """The allocator settings of this process (``pid=None``) or of a running process.

    For a process, the torch judged is the one it has loaded when its memory map shows one,
    else the torch installed beside gpu-audit.
    """
    errors: list[ProbeError] = []
    source = "env" if pid is None else f"pid:{pid}"
    version = None
    if pid is None:
        env = dict(os.environ)
    else:
        try:
            env = read_process_environ(pid)
        except OSError as exc:
            errors.append(ProbeError("env", f"pid:{pid}", f"cannot read its environment: "
                                     f"{exc.strerror or exc}", call=f"/proc/{pid}/environ"))
            env = {}
        version = torch_version_of_process(pid)
    version = version or torch_version()
    variant, cuda = torch_build(version)
    if version is not None and variant is None:
        variant, cuda = unlabelled_build()
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
