"""``scan --torch``: ask the installed torch itself, in a child process with a deadline.

Importing torch takes seconds, may initialise CUDA (hundreds of MiB per GPU) and can hang on a
sick driver, so gpu-audit never imports it in its own process. The child reports, as one JSON
line: torch's version and CUDA build, the architectures the build ships
(``torch.cuda.get_arch_list()``), whether CUDA is usable and each device's compute capability,
the allocator backend, and how torch itself parses the allocator configuration string.

The child sees every GPU in PCI bus order (``CUDA_VISIBLE_DEVICES`` unset,
``CUDA_DEVICE_ORDER=PCI_BUS_ID``) so its device ``i`` is NVML's GPU ``i``; the allocator
variables are those of the environment being judged (this one, or ``scan --pid``'s process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping

import msgspec

from gpu_audit.knowledge.allocator.names import CUDA_VAR, NEW_VAR
from gpu_audit.model import ProbeError, Scan, TorchDevice, TorchProbe
from gpu_audit.redact import redact_text

DEFAULT_TIMEOUT_S = 120.0  # a cold `import torch` on network storage can take a minute
MARKER = "GPU_AUDIT_TORCH_PROBE="

# Runs in the child. Every step is guarded: one failing call must not hide the others.
CHILD_SOURCE = r"""
import json, sys, time, warnings
started = time.perf_counter()
out = {"python": sys.executable, "warnings": []}

def note(step, exc):
    out["warnings"].append(f"{step} failed: {type(exc).__name__}: {exc}")

def emit():
    out["duration_s"] = round(time.perf_counter() - started, 3)
    sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")
    sys.stdout.flush()

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        import torch
    except BaseException as exc:
        out["import_error"] = f"{type(exc).__name__}: {exc}"
        emit()
        sys.exit(0)
    out["torch_version"] = str(torch.__version__)
    out["cuda_version"] = getattr(torch.version, "cuda", None)
    out["hip_version"] = getattr(torch.version, "hip", None)
    try:
        out["cudnn_version"] = torch.backends.cudnn.version()
    except Exception as exc:
        note("torch.backends.cudnn.version()", exc)
    getter = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    if getter is not None:
        try:
            out["allocator_settings"] = getter()
        except Exception as exc:
            out["allocator_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    compiled = out["cuda_version"] is not None or out["hip_version"] is not None
    if compiled:
        try:
            out["arch_list"] = list(torch.cuda.get_arch_list())
        except Exception as exc:
            note("torch.cuda.get_arch_list()", exc)
        try:
            out["allocator_backend"] = torch.cuda.memory.get_allocator_backend()
        except Exception as exc:
            if "allocator_error" not in out and "alloc" in str(exc).lower():
                out["allocator_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
            else:
                note("torch.cuda.memory.get_allocator_backend()", exc)
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as exc:
        note("torch.cuda.is_available()", exc)
    devices = []
    if out.get("cuda_available"):
        try:
            count = torch.cuda.device_count()
            out["device_count"] = count
            for index in range(count):
                props = torch.cuda.get_device_properties(index)
                uuid = getattr(props, "uuid", None)
                uuid = str(uuid) if uuid is not None else None
                if uuid and not uuid.startswith(("GPU-", "MIG-")):
                    uuid = "GPU-" + uuid
                devices.append({
                    "index": index, "name": props.name,
                    "compute_capability": f"{props.major}.{props.minor}",
                    "total_memory_bytes": int(props.total_memory), "uuid": uuid,
                })
        except Exception as exc:
            note("torch.cuda.get_device_properties()", exc)
    elif compiled:
        out["device_count"] = 0
    out["devices"] = devices
    out["warnings"] += [str(w.message).strip() for w in caught]
emit()
""".replace("MARKER", repr(MARKER))


def child_environment(alloc_env: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment, every GPU visible in PCI order, the allocator vars judged."""
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    for name, value in (alloc_env or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def probe_torch(
    *,
    python: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    alloc_env: Mapping[str, str | None] | None = None,
) -> tuple[TorchProbe, list[ProbeError]]:
    """Run the probe in ``python`` (default: this interpreter); never raises.

    ``alloc_env`` sets (or, with ``None``, removes) the allocator variables in the child, so the
    configuration of ``scan --pid``'s process is the one torch parses.
    """
    python = python or sys.executable
    started = time.perf_counter()
    try:
        result = subprocess.run(
            [python, "-c", CHILD_SOURCE], capture_output=True, text=True, errors="replace",
            timeout=timeout_s, env=child_environment(alloc_env), stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return _failed(python, started, f"timed out after {timeout_s:g} s (importing torch or "
                       "initialising CUDA hung: a sick driver, or very slow storage)")
    except OSError as exc:
        return _failed(python, started, f"cannot run {python}: {exc.strerror or exc}")
    payload = _payload(result.stdout)
    if payload is None:
        tail = redact_text(result.stderr.strip()[-800:]) or "no output"
        how = (f"killed by signal {-result.returncode}" if result.returncode < 0
               else f"exit status {result.returncode}")
        return _failed(python, started, f"the probe ended without a report ({how}): {tail}")
    probe = _from_payload(payload, python)
    errors = [ProbeError("torch", "host", f"torch probe: {w}") for w in probe.warnings
              if w.startswith(("torch.", "torch.backends")) and " failed: " in w]
    return probe, errors


def _payload(stdout: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER):])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def _text(value: object) -> str | None:
    return None if value is None else redact_text(str(value))


def _from_payload(data: dict, python: str) -> TorchProbe:
    devices = []
    for item in data.get("devices") or []:
        if isinstance(item, dict) and isinstance(item.get("index"), int):
            devices.append(TorchDevice(
                index=item["index"],
                name=_text(item.get("name")),
                compute_capability=_text(item.get("compute_capability")),
                total_memory_bytes=item.get("total_memory_bytes")
                if isinstance(item.get("total_memory_bytes"), int) else None,
                uuid=_text(item.get("uuid")),
            ))
    arch = data.get("arch_list")
    cudnn = data.get("cudnn_version")
    count = data.get("device_count")
    return TorchProbe(
        python=data.get("python") or python,
        torch_version=_text(data.get("torch_version")),
        cuda_version=_text(data.get("cuda_version")),
        hip_version=_text(data.get("hip_version")),
        cudnn_version=cudnn if isinstance(cudnn, int) else None,
        cuda_available=data.get("cuda_available") if isinstance(
            data.get("cuda_available"), bool) else None,
        device_count=count if isinstance(count, int) else None,
        arch_list=[str(a) for a in arch] if isinstance(arch, list) else None,
        devices=devices,
        allocator_backend=_text(data.get("allocator_backend")),
        allocator_settings=data.get("allocator_settings")
        if isinstance(data.get("allocator_settings"), str) else None,
        allocator_error=_text(data.get("allocator_error")),
        import_error=_text(data.get("import_error")),
        warnings=[redact_text(str(w))[:2000] for w in data.get("warnings") or []][:50],
        duration_s=data.get("duration_s") if isinstance(data.get("duration_s"), float) else None,
    )


def _failed(python: str, started: float, message: str) -> tuple[TorchProbe, list[ProbeError]]:
    probe = TorchProbe(python=python, error=message,
                       duration_s=round(time.perf_counter() - started, 3))
    return probe, [ProbeError("torch", "host", f"torch probe: {message}")]


def attach_torch_probe(scan: Scan, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> Scan:
    """``scan`` with the probe's result, judged against the scanned allocator settings."""
    alloc = scan.allocator
    alloc_env = None
    if alloc is not None:
        alloc_env = {CUDA_VAR: alloc.pytorch_cuda_alloc_conf, NEW_VAR: alloc.pytorch_alloc_conf}
    probe, errors = probe_torch(timeout_s=timeout_s, alloc_env=alloc_env)
    return msgspec.structs.replace(scan, torch_probe=probe,
                               probe_errors=[*scan.probe_errors, *errors])
