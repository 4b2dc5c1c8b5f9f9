"""The stage worker's device: what it is, that it works, how much memory the stage may use.

Runs in the worker, after torch is imported: a small allocation round trip on the device,
``--emulate-memory`` applied as a per-process memory fraction, the allocator's settings as it
reports them. :func:`probe_devices` answers the runner's ``--device auto`` question.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from typing import Any

from gpu_audit.knowledge.allocator import BOTH_VARS
from gpu_audit.units import plural
from gpu_audit.validate.channels import StageFailed, one_line
from gpu_audit.validate.telemetry import host_memory_available

ROUND_TRIP_ELEMENTS = 1 << 20
CPU_THREADS_MAX = 8


def cpu_threads(environ: dict[str, str] | None = None,
                available: int | None = None) -> tuple[int, str]:
    """How many threads torch uses in a CPU stage, and why.

    ``OMP_NUM_THREADS`` when the user set it; else half the CPUs this process may run on (at
    least 1, at most :data:`CPU_THREADS_MAX`). torch's default is one thread per core, and its
    intra-op pool waits for its slowest thread at every operation: one other busy process on one
    core then stretches every cycle many times over. Leaving half the CPUs to the runner and the
    rest of the host, and using the same count in every stage and variant, keeps cycle times
    comparable between stages, variants and runs."""
    environ = os.environ if environ is None else environ
    given = (environ.get("OMP_NUM_THREADS") or "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given), "OMP_NUM_THREADS is set"
    if available is None:
        try:
            available = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            available = os.cpu_count() or 1
    count = max(1, min(CPU_THREADS_MAX, available // 2))
    return count, (f"half of the {plural(available, 'CPU')} this process may use (at least 1, "
                   f"at most {CPU_THREADS_MAX}), so that other processes on the host do not stall "
                   "torch's thread pool and cycle times stay comparable")


def device_info(torch: Any, device: str, emulate_bytes: int | None,
                warnings: list[str]) -> dict[str, Any]:
    """The ``ready`` event: the device (``cuda`` resolved to ``cuda:N``), its memory and the
    stage's memory budget; raises :class:`StageFailed` when the device does not work."""
    info: dict[str, Any] = {
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "torch_version": getattr(torch, "__version__", None) if torch else None,
        "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None) if torch else None,
        "device": device,
        "alloc_env": {name: os.environ.get(name) for name in BOTH_VARS},
        "allocator_settings": None,
        "allocator_backend": None,
        "device_name": None,
        "total_memory_bytes": None,
        "free_memory_bytes": None,
        "memory_budget_bytes": None,
        "memory_fraction": None,
        "warnings": warnings,
    }
    if device.startswith("cuda"):
        info.update(_init_cuda(torch, device, emulate_bytes, warnings))
    else:
        count, why = cpu_threads()
        if torch is not None:
            torch.set_num_threads(count)
            count = torch.get_num_threads()
            round_trip(torch, torch.device("cpu"))
        else:  # torch is read when the workload imports it later
            os.environ.setdefault("OMP_NUM_THREADS", str(count))
        info["torch_threads"] = {"count": count, "why": why}
        if emulate_bytes:
            warnings.append("--emulate-memory applies to GPUs only; the CPU run is not capped")
        info["memory_budget_bytes"] = host_memory_available()
    return info


def _init_cuda(torch: Any, device: str, cap: int | None, warnings: list[str]) -> dict[str, Any]:
    try:
        available = torch.cuda.is_available()
    except Exception as exc:
        raise StageFailed("cuda", f"CUDA cannot initialise: {one_line(exc)}",
                          {"traceback": traceback.format_exc()}) from None
    if not available:
        raise StageFailed("cuda", no_cuda_reason(torch))
    count = torch.cuda.device_count()
    index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
    if index >= count:
        raise StageFailed("cuda", f"{device} does not exist: {plural(count, 'CUDA device')} "
                          f"visible (cuda:0..cuda:{count - 1}; "
                          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    device = f"cuda:{index}"
    try:
        torch.cuda.set_device(index)
        round_trip(torch, torch.device(device))
        props = torch.cuda.get_device_properties(index)
        free, total = torch.cuda.mem_get_info(index)
    except StageFailed:
        raise
    except Exception as exc:
        raise StageFailed("cuda", f"CUDA initialisation on {device} failed: {one_line(exc)}",
                          {"traceback": traceback.format_exc()}) from None
    info: dict[str, Any] = {"device": device, "device_name": props.name,
                            "total_memory_bytes": total, "free_memory_bytes": free}
    budget = free
    if cap:
        if cap >= total:
            warnings.append(f"--emulate-memory {cap} bytes is not below the device's "
                            f"{total} bytes; nothing to cap")
        else:
            fraction = cap / total
            torch.cuda.set_per_process_memory_fraction(fraction, index)
            info["memory_fraction"] = fraction
            budget = min(free, cap)
    info["memory_budget_bytes"] = budget
    info["allocator_settings"] = allocator_settings(torch)
    with contextlib.suppress(Exception):
        info["allocator_backend"] = torch.cuda.memory.get_allocator_backend()
    return info


def round_trip(torch: Any, device: Any) -> None:
    """A 4 MiB tensor made, summed and copied back: the device computes and answers right."""
    try:
        values = torch.arange(ROUND_TRIP_ELEMENTS, dtype=torch.float32, device=device)
        total = float(values.sum().item())
        back = values[-4:].cpu().tolist()
    except Exception as exc:
        raise StageFailed("cuda" if device.type == "cuda" else "error",
                          f"a small allocation round trip on {device} failed: "
                          f"{one_line(exc)}", {"traceback": traceback.format_exc()}) from None
    expected = ROUND_TRIP_ELEMENTS * (ROUND_TRIP_ELEMENTS - 1) / 2
    if abs(total - expected) > expected * 1e-4 or back[-1] != ROUND_TRIP_ELEMENTS - 1:
        raise StageFailed("cuda", f"a small allocation round trip on {device} returned "
                          f"wrong values (sum {total}, expected {expected})")
    del values


def probe_devices() -> dict[str, Any]:
    """CUDA devices as torch numbers them, with free memory, for ``--device auto``."""
    try:
        import torch
    except BaseException as exc:
        return {"torch": None, "cuda": False, "reason": f"torch does not import: {one_line(exc)}",
                "torch_missing": torch_missing(exc), "devices": []}
    result: dict[str, Any] = {"torch": torch.__version__, "cuda": False, "devices": []}
    try:
        if not torch.cuda.is_available():
            result["reason"] = no_cuda_reason(torch)
            return result
        for index in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(index)
            result["devices"].append({"index": index, "name": torch.cuda.get_device_name(index),
                                      "free_bytes": free, "total_bytes": total})
        result["cuda"] = True
    except Exception as exc:
        result["reason"] = f"CUDA cannot initialise: {one_line(exc)}"
    return result


def torch_missing(exc: BaseException) -> bool:
    """Whether ``import torch`` failed because torch is not installed (rather than broken)."""
    if not isinstance(exc, ModuleNotFoundError):
        return False
    name = exc.name or (str(exc).split("'")[1] if str(exc).count("'") >= 2 else "")
    return name.split(".")[0] == "torch"


def no_cuda_reason(torch: Any) -> str:
    version = getattr(torch, "__version__", "?")
    if getattr(torch.version, "cuda", None) is None:
        return (f"torch {version} is a CPU-only build (no CUDA support); install a CUDA build "
                "(https://pytorch.org/get-started/locally/)")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
    return (f"torch {version} (CUDA {torch.version.cuda}) finds no usable CUDA device{hint}: no "
            "NVIDIA GPU, no driver loaded, or a driver older than this CUDA build; run "
            "`gpu-audit scan` to see which")


def allocator_settings(torch: Any) -> dict[str, Any] | None:
    """``torch.cuda.memory._snapshot()["allocator_settings"]``, as plain JSON data."""
    try:
        settings = torch.cuda.memory._snapshot().get("allocator_settings")
    except Exception:
        return None
    return json.loads(json.dumps(settings, default=str)) if settings is not None else None
