"""PyTorch as installed (from package metadata, torch never imported) and the allocator settings.

Importing torch costs seconds and can initialise CUDA; everything here reads files only. The one
place that imports torch is the opt-in child process of :mod:`gpu_audit.collect.torch_probe`.
"""

from __future__ import annotations

import importlib
import os
import re
import sys

from gpu_audit.bounds import MAX_ENVIRON_BYTES
from gpu_audit.collect.procfs import read_bounded
from gpu_audit.knowledge.allocator.names import BOTH_VARS, CUDA_VAR, NEW_VAR
from gpu_audit.lazy import regex
from gpu_audit.model import AllocatorConfig, ProbeError
from gpu_audit.redact import redact_env

# Variables the environment lint looks at, kept (redacted) in the scan: these prefixes and names.
RELEVANT_PREFIXES = ("CUDA_", "PYTORCH_", "NCCL_", "TORCH_", "NVIDIA_", "NSYS_", "NVTX_")
RELEVANT_NAMES = frozenset({"LD_PRELOAD", "OMP_NUM_THREADS", "HIP_VISIBLE_DEVICES",
                            "ROCR_VISIBLE_DEVICES", "CUDA_INJECTION64_PATH"})


def relevant_variable(name: str) -> bool:
    """Whether the scan keeps variable ``name``. Read as text (a pattern would cost every scan
    its compilation) and as the pattern ``^(CUDA_.*|...|LD_PRELOAD|...)$`` read it: no line
    break inside the name, one allowed at its end."""
    body = name[:-1] if name.endswith("\n") else name
    return "\n" not in body and (body.startswith(RELEVANT_PREFIXES) or body in RELEVANT_NAMES)

# NVIDIA's runtime wheels that PyPI's default (unlabelled) Linux torch depends on.
_CUDA_RUNTIME_WHEELS = ("nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11",
                        "nvidia-cuda-runtime")


def torch_version() -> str | None:
    return installed_version("torch")


def installed_version(name: str) -> str | None:
    """What ``importlib.metadata.version(name)`` says, or ``None`` when ``name`` is not installed.

    Importing importlib.metadata (and the email package it parses metadata with) costs about
    10 ms, a good part of a scan's start-up, so unless it is loaded already the version is read
    the way it would read it: the first ``<name>-*.dist-info`` or ``.egg-info`` on ``sys.path``,
    matched by normalised name, and its ``Version:`` header. Any layout that reader is not sure
    of (a zip on the path, another distribution finder, unusual metadata) goes to
    importlib.metadata itself.
    """
    if "importlib.metadata" not in sys.modules:
        try:
            return dist_info_version(name)
        except UnusualMetadata:
            pass
    metadata = importlib.import_module("importlib.metadata")
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


class UnusualMetadata(Exception):
    """Not a layout :func:`dist_info_version` reads exactly as importlib.metadata does."""


def _normalized_name(name: str) -> str:
    # importlib.metadata's Prepared.normalize: PEP 503, with underscores (each run of "-", "_"
    # and "." one "_"); its re.sub(r"[-_.]+", ...) spelt as text.
    name = name.replace("-", "_").replace(".", "_")
    while "__" in name:
        name = name.replace("__", "_")
    return name.lower()


def dist_info_version(name: str, paths: list[str] | None = None) -> str | None:
    """The version importlib.metadata finds for ``name`` along ``paths`` (default ``sys.path``).

    ``None`` when no folder holds it; raises :class:`UnusualMetadata` where its answer could
    differ from importlib.metadata's.
    """
    from importlib.machinery import PathFinder

    if any(f is not PathFinder and hasattr(f, "find_distributions") for f in sys.meta_path):
        raise UnusualMetadata("another finder provides distributions")
    wanted = _normalized_name(name)
    legacy = name.lower().replace("-", "_")
    for entry in sys.path if paths is None else paths:
        try:
            children = os.listdir(entry or ".")
        except NotADirectoryError:
            raise UnusualMetadata(f"{entry} is a file (a zip or an egg)") from None
        except OSError:
            continue  # missing or unreadable: importlib.metadata finds nothing there either
        base = os.path.basename(entry).lower()
        eggs = []
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                if _normalized_name(low.rpartition(".")[0].partition("-")[0]) == wanted:
                    return _metadata_version(os.path.join(entry, child))
            elif (
                low == "egg-info"
                and base.endswith(".egg")
                and base.rpartition(".")[0].partition("-")[0].replace("-", "_") == legacy
            ):
                eggs.append(os.path.join(entry, child))
        if eggs:
            return _metadata_version(eggs[0])
    return None


def _metadata_version(info: str) -> str | None:
    """The ``Version`` header of a dist-info or egg-info, for plainly written headers only."""
    text = None
    for filename in ("METADATA", "PKG-INFO", None):  # None: an egg-info that is a file
        try:
            with open(os.path.join(info, filename) if filename else info, encoding="utf-8") as f:
                text = f.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            continue
        except UnicodeDecodeError:
            raise UnusualMetadata(f"{info}: not UTF-8") from None
        if text:
            break
    if not text:
        raise UnusualMetadata(f"{info}: no metadata")
    for line in text.split("\n"):  # read in text mode: "\r\n" and "\r" arrive as "\n"
        if not line:
            break  # the end of the headers
        key, colon, value = line.partition(":")
        # A field name as the email parser reads one: printable ASCII, no space (nor colon).
        plain = key.isascii() and key.isprintable() and " " not in key
        if line[0] in " \t" or not colon or not key or not plain:
            raise UnusualMetadata(f"{info}: headers the email parser would have to read")
        if key.lower() == "version":
            return value.lstrip(" \t")
    raise UnusualMetadata(f"{info}: no Version header")


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
    if not system:
        import platform  # only here: a scan of a labelled torch (or none) never imports it

        system = platform.system()
    if system in ("Windows", "Darwin"):
        return "cpu", None
    if system != "Linux":
        return None, None
    for wheel in _CUDA_RUNTIME_WHEELS:
        runtime = installed_version(wheel)
        if runtime is None:
            continue
        if match := re.match(r"(\d+)\.(\d+)", runtime):
            return "cuda", f"{match[1]}.{match[2]}"
    return None, None


def read_process_environ(pid: int) -> dict[str, str]:
    """Another process's environment (same user or root only; raises OSError otherwise), its
    first :data:`~gpu_audit.bounds.MAX_ENVIRON_BYTES` (the variables gpu-audit reads
    are set by launchers, near the start)."""
    raw = read_bounded(f"/proc/{pid}/environ", MAX_ENVIRON_BYTES)
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


_TORCH_LIB = regex(r"\s(/\S*)/torch/lib/lib(?:c10|torch)\S*\.so")


def torch_version_of_process(pid: int) -> str | None:
    """The torch a running process has loaded, from its memory map and that torch's metadata.

    ``/proc/PID/maps`` names ``.../site-packages/torch/lib/libc10.so`` once the process has
    imported torch; the ``torch-*.dist-info`` beside it holds the version. ``None`` when the
    process has not imported torch, or its map is not readable (another user).
    """
    from pathlib import Path  # here: only a scan of a given --pid reads another map

    try:
        maps = Path(f"/proc/{pid}/maps").read_text(errors="replace")
    except OSError:
        return None
    match = _TORCH_LIB().search(maps)
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
    relevant = {k: v for k, v in env.items() if relevant_variable(k) and k not in BOTH_VARS}
    config = AllocatorConfig(
        source=source,
        pytorch_cuda_alloc_conf=env.get(CUDA_VAR),
        pytorch_alloc_conf=env.get(NEW_VAR),
        torch_version=version,
        torch_cuda_version=cuda,
        torch_variant=variant,
        environment=redact_env(relevant),
    )
    return config, errors
