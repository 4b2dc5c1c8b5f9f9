"""Environment variables that silently change how a PyTorch job runs, or do nothing at all.

They are read from the scanned environment (this shell, or ``scan --pid``'s process) as the
scan keeps it: ``CUDA_*``, ``PYTORCH_*``, ``TORCH_*``, ``NVTX_*``, ``LD_PRELOAD``, redacted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.knowledge.allocator.names import CUDA_VAR, NEW_VAR, NO_CACHING_VAR
from gpu_audit.lazy import regex
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.rules import rule
from gpu_audit.units import plural
from gpu_audit.visible_devices import interpret_visible_devices


def _env(scan: Scan) -> dict[str, str]:
    return dict(scan.allocator.environment) if scan.allocator is not None else {}


def _gpu_count(scan: Scan) -> int | None:
    """GPUs on the host: NVML's list, or the PCI bus count when NVML did not answer."""
    if scan.gpus:
        return len(scan.gpus)
    if scan.nvml.available:
        return 0
    return scan.host.nvidia_pci_devices


@rule("pytorch-no-nvml")
def pytorch_no_nvml(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """`PYTORCH_NO_NVML` is set, but PyTorch has no such variable.

    It is passed around as a cure for `NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL
    ASSERT FAILED at ...CUDACachingAllocator.cpp`; PyTorch never reads it. That assert is an
    out-of-memory error whose report failed because NVML could not start: the real causes are
    running out of GPU memory, and an NVML library that does not match the kernel driver
    (typically after a driver upgrade without a reboot).

    Why it matters: nobody should rely on it: the crash it is meant to prevent comes back, and the
    real cause goes unfixed.

    Example: `PYTORCH_NO_NVML does nothing: PyTorch has no such variable` (evidence:
    `PYTORCH_NO_NVML`).

    Fix: `unset PYTORCH_NO_NVML`, fix the mismatch (`nvidia-smi` fails the same way when it
    exists), and treat the crash as an out-of-memory.
    """
    env = _env(scan)
    if "PYTORCH_NO_NVML" not in env:
        return
    yield Finding(
        subject="env",
        title="PYTORCH_NO_NVML does nothing: PyTorch has no such variable",
        detail=(f"PYTORCH_NO_NVML={env['PYTORCH_NO_NVML']!r} is set. PyTorch never reads it; the "
                "NVML assert it is meant to avoid is an out-of-memory error whose report failed "
                "because NVML could not initialise (a driver/library mismatch after an upgrade "
                "is the usual cause; a reboot fixes it)."),
        remedy="unset PYTORCH_NO_NVML  # then check that `nvidia-smi` runs cleanly",
        evidence={"PYTORCH_NO_NVML": env["PYTORCH_NO_NVML"]},
    )


@rule("caching-allocator-disabled")
def caching_allocator_disabled(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """`PYTORCH_NO_CUDA_MEMORY_CACHING` is set: every allocation goes to cudaMalloc.

    PyTorch checks only whether the variable exists, so `PYTORCH_NO_CUDA_MEMORY_CACHING=0` turns
    caching off too (pytorch/pytorch#145661). Settings in `PYTORCH_CUDA_ALLOC_CONF` or
    `PYTORCH_ALLOC_CONF` are named in the finding, as never used. Useful for memory debugging
    only.

    Why it matters: without the cache every tensor allocation and free synchronises with the
    driver, which slows training severalfold, and `memory_stats()` and the allocator settings stop
    meaning anything.

    Example: `PYTORCH_NO_CUDA_MEMORY_CACHING disables PyTorch's caching allocator` -
    PYTORCH_NO_CUDA_MEMORY_CACHING='0' turns the cache off (0 included: torch only checks that
    the variable exists).

    Fix: `unset PYTORCH_NO_CUDA_MEMORY_CACHING`.
    """
    env = _env(scan)
    if NO_CACHING_VAR not in env:
        return
    value = env[NO_CACHING_VAR]
    zero = " (0 included: torch only checks that the variable exists)" if value.strip() in (
        "0", "", "false", "False") else ""
    alloc = scan.allocator
    unused = {name: setting for name, setting in (
        (CUDA_VAR, alloc.pytorch_cuda_alloc_conf if alloc else None),
        (NEW_VAR, alloc.pytorch_alloc_conf if alloc else None)) if setting}
    moot = "".join(f" {name}={setting!r} is never used." for name, setting in unused.items())
    yield Finding(
        subject="env",
        title=f"{NO_CACHING_VAR} disables PyTorch's caching allocator",
        detail=(f"{NO_CACHING_VAR}={value!r} turns the cache off{zero}: every "
                f"allocation and free calls the driver, which slows a run severalfold.{moot}"),
        remedy=f"unset {NO_CACHING_VAR}",
        evidence={NO_CACHING_VAR: value, **unused},
    )


@rule("launch-blocking")
def launch_blocking(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """`CUDA_LAUNCH_BLOCKING=1`: every kernel launch waits for the kernel to finish.

    Meant for debugging (an error then points at the right line), it serialises the CPU and the
    GPU.

    Why it matters: it typically costs a large share of throughput; forgotten in a shell profile
    or a job script, it makes a long run much longer.

    Example: `CUDA_LAUNCH_BLOCKING=1 serialises every kernel launch`.

    Fix: `unset CUDA_LAUNCH_BLOCKING`.
    """
    value = _env(scan).get("CUDA_LAUNCH_BLOCKING")
    if value is None or value.strip() != "1":
        return
    yield Finding(
        subject="env",
        title="CUDA_LAUNCH_BLOCKING=1 serialises every kernel launch",
        detail=("Each kernel launch blocks the CPU until the GPU has finished it, so nothing "
                "overlaps: a debugging setting that slows training substantially."),
        remedy="unset CUDA_LAUNCH_BLOCKING",
        evidence={"CUDA_LAUNCH_BLOCKING": value},
    )


@rule("visible-devices-missing")
def visible_devices_missing(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """`CUDA_VISIBLE_DEVICES` names GPUs that do not exist, or hides every GPU.

    CUDA reads the list up to the first entry that names no device and silently drops the rest;
    a repeated device, an empty value or `-1` leaves the job with no GPU at all. Checked against
    the GPUs NVML lists: indices must be below their count, `GPU-` entries must match exactly one
    UUID (a unique prefix is enough). MIG instance UUIDs are not checked.

    Why it matters: the job gets fewer GPUs than it asked for, or none: torch then reports
    `torch.cuda.is_available() == False` or "no CUDA GPUs are available".

    Example: `CUDA_VISIBLE_DEVICES='0,4,1' leaves 1 of 4 GPUs visible` - CUDA will use 1 GPU and
    ignore 4, 1.

    Fix: export a list of existing GPUs; the remedy gives it (`export CUDA_VISIBLE_DEVICES=0,1`).
    """
    value = _env(scan).get("CUDA_VISIBLE_DEVICES")
    count = _gpu_count(scan)
    if value is None or not count:
        return
    seen = interpret_visible_devices(value, scan.gpus, count)
    if not seen.checkable or seen.reason is None:
        return
    valid = ",".join(str(i) for i in seen.visible) or ",".join(str(i) for i in range(count))
    yield Finding(
        subject="env",
        title=(f"CUDA_VISIBLE_DEVICES={value!r} leaves {len(seen.visible)} of "
               f"{plural(count, 'GPU')} visible"),
        detail=(f"{seen.reason}. CUDA will use {plural(len(seen.visible), 'GPU')}"
                + (f" and ignore {', '.join(seen.dropped)}" if seen.dropped else "") + "."),
        remedy=f"export CUDA_VISIBLE_DEVICES={valid}",
        evidence={"CUDA_VISIBLE_DEVICES": value, "gpu_count": count,
                  "visible": seen.visible, "ignored_entries": seen.dropped},
    )


@rule("device-order-mismatch")
def device_order_mismatch(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """`CUDA_VISIBLE_DEVICES` picks GPUs by index on a multi-GPU host without PCI ordering.

    CUDA numbers devices fastest first unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`, while
    `nvidia-smi`, NVML and this scan number them by PCI bus. On a host with different GPU models
    the orders differ (warning); with identical models they usually agree, but nothing guarantees
    it (info). UUIDs in `CUDA_VISIBLE_DEVICES` are never ambiguous.

    Why it matters: `CUDA_VISIBLE_DEVICES=1` may select another card than the `nvidia-smi` GPU 1
    you looked at, so the job lands on a busy or smaller GPU.

    Example: `CUDA device indices may not match nvidia-smi's (no CUDA_DEVICE_ORDER=PCI_BUS_ID)`
    (evidence: `CUDA_VISIBLE_DEVICES`, `gpu_count`, `models`).

    Fix: `export CUDA_DEVICE_ORDER=PCI_BUS_ID`, or select GPUs by UUID.
    """
    env = _env(scan)
    value = env.get("CUDA_VISIBLE_DEVICES")
    count = _gpu_count(scan)
    if value is None or not value.strip() or count is None or count < 2:
        return
    if value.strip().startswith(("GPU-", "MIG-")):
        return
    if env.get("CUDA_DEVICE_ORDER", "").strip() == "PCI_BUS_ID":
        return
    models = sorted({g.name or "?" for g in scan.gpus})
    mixed = len(models) > 1
    yield Finding(
        subject="env",
        title="CUDA device indices may not match nvidia-smi's (no CUDA_DEVICE_ORDER=PCI_BUS_ID)",
        detail=(f"CUDA_VISIBLE_DEVICES={value!r} selects by index, and CUDA orders devices "
                f"fastest first while nvidia-smi orders them by PCI bus"
                + (f"; this host mixes {', '.join(models)}, so the orders differ."
                   if mixed else "; with identical GPUs they usually agree, but not always.")),
        remedy="export CUDA_DEVICE_ORDER=PCI_BUS_ID",
        evidence={"CUDA_VISIBLE_DEVICES": value,
                  "CUDA_DEVICE_ORDER": env.get("CUDA_DEVICE_ORDER"), "gpu_count": count,
                  "models": models},
        severity=None if mixed else Severity.INFO,
    )


# name -> what it does while set
_INJECTION = {
    "CUDA_INJECTION64_PATH": "loads a profiler's injection library (Nsight Systems/Compute, "
                             "CUPTI tools) into every CUDA process",
    "NVTX_INJECTION64_PATH": "loads an NVTX tool library into every process that uses NVTX",
    "CUDA_DEVICE_WAITS_ON_EXCEPTION": "makes a GPU exception wait for a debugger instead of "
                                      "failing: the job hangs",
    "CUDA_ENABLE_COREDUMP_ON_EXCEPTION": "writes a GPU core dump on any device exception",
    "CUDA_ENABLE_CPU_COREDUMP_ON_EXCEPTION": "writes a CPU core dump on any device exception",
    "CUDA_ENABLE_USER_TRIGGERED_COREDUMP": "arms user-triggered GPU core dumps",
    "TORCH_COMPILE_DEBUG": "makes torch.compile write debug traces for every compiled graph",
}
_OFF_VALUES = ("", "0", "false", "no", "off")
_PROFILER_LIBS = regex(r"(cupti|nvperf|ToolsInjection|nsys|ncu|compute-sanitizer|"
                            r"sanitizer-public|libnvtx3interop|libinjection)", re.I)


@rule("profiler-injection")
def profiler_injection(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Profiler or debugger hooks are left set in the environment.

    `CUDA_INJECTION64_PATH` and `NVTX_INJECTION64_PATH` load a tool's library into every CUDA
    process (Nsight Systems and Nsight Compute set them); `CUDA_DEVICE_WAITS_ON_EXCEPTION=1`
    makes a GPU fault wait for a debugger; `CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1` writes
    multi-gigabyte core dumps; `TORCH_COMPILE_DEBUG=1` traces every compiled graph to disk; an
    `LD_PRELOAD` of a profiler library (CUPTI, Nsight, compute-sanitizer) instruments every call.

    Why it matters: each slows or stalls a long run, and a job that should fail on a GPU fault
    hangs instead.

    Example: `profiler/debugger hooks left set: CUDA_INJECTION64_PATH, TORCH_COMPILE_DEBUG`.

    Fix: unset the variables the finding names (`unset CUDA_INJECTION64_PATH TORCH_COMPILE_DEBUG`).
    """
    env = _env(scan)
    found: dict[str, str] = {}
    for name, effect in _INJECTION.items():
        value = env.get(name)
        # A path counts when non-empty; a switch when not set to an "off" value.
        is_path = name.endswith("_PATH")
        if value is not None and (value.strip() if is_path else
                                  value.strip().lower() not in _OFF_VALUES):
            found[name] = effect
    preload = env.get("LD_PRELOAD", "")
    profiler_libs = [lib for lib in re.split(r"[\s:]+", preload) if lib and
                     _PROFILER_LIBS().search(lib.rsplit("/", 1)[-1])] if preload else []
    if profiler_libs:
        found["LD_PRELOAD"] = f"preloads {', '.join(profiler_libs)} into every process"
    if not found:
        return
    listing = "; ".join(f"{name} {effect}" for name, effect in found.items())
    unset = " ".join(found)
    yield Finding(
        subject="env",
        title=f"profiler/debugger hooks left set: {', '.join(found)}",
        detail=f"{listing}.",
        remedy=f"unset {unset}",
        evidence={name: env.get(name) for name in found},
    )
