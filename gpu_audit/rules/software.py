"""Software compatibility: torch's CUDA build against the driver and the GPUs.

Without ``scan --torch`` these rules use package metadata only (the ``+cu124`` label, or the
``nvidia-cuda-runtime`` wheel beside an unlabelled Linux build). With it, they use what the
installed torch reports about itself: ``torch.version.cuda``, ``torch.cuda.get_arch_list()`` and
each device's compute capability.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.model import Finding, Scan, Severity, TorchDevice
from gpu_audit.rules import rule
from gpu_audit.units import plural

# Jetson/integrated parts: their binaries run on that exact part only (CUDA docs).
_INTEGRATED = {53, 62, 72, 87, 101}


def _torch_cuda(scan: Scan) -> tuple[str | None, str]:
    """(torch's CUDA version, where that came from)."""
    probe = scan.torch_probe
    if probe is not None and probe.torch_version is not None:
        return probe.cuda_version, "torch.version.cuda"
    alloc = scan.allocator
    if alloc is not None and alloc.torch_cuda_version:
        return alloc.torch_cuda_version, "package metadata"
    return None, ""


def _torch_version(scan: Scan) -> str | None:
    probe = scan.torch_probe
    if probe is not None and probe.torch_version:
        return probe.torch_version
    return scan.allocator.torch_version if scan.allocator is not None else None


@rule("driver-too-old")
def driver_too_old(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """torch was built for a newer CUDA than the NVIDIA driver supports.

    The driver reports the newest CUDA version it supports (`nvidia-smi` shows it top right).
    A torch built for a newer major version (a `+cu130` build on a CUDA 12 driver) cannot use
    the GPU at all. Within one major version CUDA's minor-version compatibility usually lets it
    run, so that case is a warning.

    Why it matters: across major versions `torch.cuda.is_available()` is False with "The NVIDIA
    driver on your system is too old" and the job never reaches the GPU; within one, features that
    need the newer driver (PTX compiled at run time, some APIs) fail partway through.

    Example: `torch needs CUDA 13.0; the driver supports 12.4` (evidence: `torch_version`,
    `torch_cuda_version`, `driver_cuda_version`).

    Fix: upgrade the NVIDIA driver, or install a torch build for the driver's CUDA (the remedy
    gives the install command).
    """
    if scan.driver is None:
        return
    torch_cuda_text, source = _torch_cuda(scan)
    if not torch_cuda_text:  # no torch with a CUDA build: nothing to compare with the driver
        return
    from gpu_audit.knowledge.torch_builds import cuda_tuple, install_command

    needed = cuda_tuple(torch_cuda_text)
    if needed is None:
        return
    driver = cuda_tuple(scan.driver.cuda_driver_version)
    if driver is None or needed <= driver:
        return
    version = _torch_version(scan)
    major = needed[0] > driver[0]
    evidence = {"torch_version": version, "torch_cuda_version": torch_cuda_text,
                "torch_cuda_source": source,
                "driver_version": scan.driver.driver_version,
                "driver_cuda_version": scan.driver.cuda_driver_version}
    if major:
        detail = (f"torch {version} is built for CUDA {torch_cuda_text} ({source}); driver "
                  f"{scan.driver.driver_version} supports CUDA up to "
                  f"{scan.driver.cuda_driver_version}. torch cannot use the GPU with this "
                  "driver: CUDA initialisation fails with \"driver too old\".")
    else:
        detail = (f"torch {version} is built for CUDA {torch_cuda_text} ({source}); driver "
                  f"{scan.driver.driver_version} supports CUDA up to "
                  f"{scan.driver.cuda_driver_version}. It runs under CUDA's minor-version "
                  "compatibility, but anything that needs the newer driver (run-time PTX "
                  "compilation, newer APIs) fails.")
    yield Finding(
        subject="host",
        title=(f"torch needs CUDA {torch_cuda_text}; the driver supports "
               f"{scan.driver.cuda_driver_version}"),
        detail=detail,
        remedy=f"Upgrade the NVIDIA driver, or {install_command(version, driver)}",
        evidence=evidence,
        severity=None if major else Severity.WARNING,
    )


def _gpu_host(scan: Scan) -> int:
    if scan.gpus:
        return len(scan.gpus)
    return scan.host.nvidia_pci_devices or 0


@rule("torch-cpu-only")
def torch_cpu_only(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The installed torch is a CPU-only build on a machine with NVIDIA GPUs.

    A CPU build (`+cpu`, or the default wheel from PyPI on Windows and macOS) cannot use the GPU.
    It usually happens when a plain `pip install` (or a dependency's) replaced the CUDA build.

    Why it matters: `torch.cuda.is_available()` is False and `.cuda()` raises "Torch not compiled
    with CUDA enabled"; a job may also quietly fall back to the CPU and run a hundred times
    slower.

    Example: `torch 2.5.1+cpu is a CPU-only build on a host with 8 NVIDIA GPUs`.

    Fix: reinstall a CUDA build of the same torch version for the driver's CUDA; the remedy gives
    the install command.
    """
    gpus = _gpu_host(scan)
    version = _torch_version(scan)
    if not gpus or version is None:
        return
    probe = scan.torch_probe
    if probe is not None and probe.torch_version is not None:
        cpu_only = probe.cuda_version is None and probe.hip_version is None
        source = "torch.version.cuda is None"
    else:
        variant = scan.allocator.torch_variant if scan.allocator is not None else None
        cpu_only = variant == "cpu"
        source = f"package version {version}"
    if not cpu_only:
        return
    driver = scan.driver.cuda_driver_version if scan.driver else None
    from gpu_audit.knowledge.torch_builds import install_command

    yield Finding(
        subject="host",
        title=f"torch {version} is a CPU-only build on a host with {plural(gpus, 'NVIDIA GPU')}",
        detail=(f"{source}: this torch cannot use the GPUs; torch.cuda.is_available() is "
                "False and a job either fails or runs on the CPU."),
        remedy=install_command(version, driver),
        evidence={"torch_version": version, "gpu_count": gpus, "source": source,
                  "driver_cuda_version": scan.driver.cuda_driver_version if scan.driver else None},
    )


def _cc(text: str | None) -> int | None:
    match = re.fullmatch(r"(\d+)\.(\d+)", (text or "").strip())
    return int(match[1]) * 10 + int(match[2]) if match else None


def _arch(entry: str) -> tuple[str, int, str] | None:
    """``sm_90a`` -> ("sm", 90, "a"); ``compute_80`` -> ("compute", 80, "")."""
    match = re.fullmatch(r"(sm|compute)_(\d+)([af]?)", entry.strip())
    return (match[1], int(match[2]), match[3]) if match else None


def runs_on(entry: str, device_cc: int) -> bool:
    """Whether code built as ``entry`` (from the arch list) runs on a device of ``device_cc``.

    NVIDIA's rules: binary code (``sm_XY``) runs on the same major version at the same or a
    higher minor, except that integrated (Jetson) binaries run only on their own part and
    architecture-specific ``a`` binaries only on exactly that version; ``f`` (family) binaries
    run on later minors of the family. PTX (``compute_XY``) is compiled by the driver for any
    newer device.
    """
    parsed = _arch(entry)
    if parsed is None:
        return False
    kind, code_cc, suffix = parsed
    if kind == "compute":
        return device_cc >= code_cc
    if suffix == "a" or code_cc in _INTEGRATED or device_cc in _INTEGRATED:
        return device_cc == code_cc
    return device_cc // 10 == code_cc // 10 and device_cc >= code_cc


def _gpu_for(scan: Scan, device: TorchDevice) -> int:
    """NVML's index for a torch device: by UUID, else the same index (the probe runs PCI order)."""
    for gpu in scan.gpus:
        if device.uuid and gpu.uuid and gpu.uuid.lower() == device.uuid.lower():
            return gpu.index
    return device.index


@rule("no-kernel-image")
def no_kernel_image(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The installed torch ships no kernels for this GPU's architecture (`scan --torch`).

    Each torch build carries machine code for a list of architectures
    (`torch.cuda.get_arch_list()`) and sometimes PTX the driver can compile for newer ones: old
    GPUs (Maxwell, Pascal) fall outside it after builds dropped them, and so does a brand-new GPU
    on an older build. Needs `scan --torch`, which imports torch in a child process to read the
    list.

    Why it matters: a GPU outside that list fails at its first kernel with "CUDA error: no kernel
    image is available for execution on the device".

    Example: `torch 2.8.0 has no kernels for Tesla P100-PCIE-16GB (sm_60)`.

    Fix: install a torch build whose architecture list includes the GPU's: older GPUs need an
    older CUDA build (e.g. cu126 for sm_50-sm_61), new ones a newer CUDA build; see
    https://pytorch.org/get-started/locally/.
    """
    probe = scan.torch_probe
    if probe is None or not probe.arch_list or not probe.devices:
        return
    for device in probe.devices:
        device_cc = _cc(device.compute_capability)
        if device_cc is None or any(runs_on(a, device_cc) for a in probe.arch_list):
            continue
        index = _gpu_for(scan, device)
        name = device.name or f"GPU {index}"
        sm = f"sm_{device_cc}"
        yield Finding(
            subject=f"gpu:{index}",
            title=f"torch {probe.torch_version} has no kernels for {name} ({sm})",
            detail=(f"{name} has compute capability {device.compute_capability}; torch "
                    f"{probe.torch_version} (CUDA {probe.cuda_version}) ships "
                    f"{' '.join(probe.arch_list)}. Every kernel launch fails with \"no kernel "
                    "image is available for execution on the device\"."),
            remedy=("Install a torch build whose architecture list includes "
                    f"{sm}: older GPUs need an older CUDA build (e.g. cu126 for sm_50-sm_61), "
                    "new ones a newer CUDA build; see https://pytorch.org/get-started/locally/"),
            evidence={"compute_capability": device.compute_capability,
                      "arch_list": probe.arch_list, "torch_version": probe.torch_version,
                      "torch_cuda_version": probe.cuda_version, "device_name": device.name},
        )


@rule("torch-cuda-unavailable")
def torch_cuda_unavailable(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """torch is built with CUDA but cannot use the GPUs this host has (`scan --torch`).

    `torch.cuda.is_available()` returned False in a fresh process although NVML lists GPUs: a
    driver too old for the build, a driver/library mismatch after an upgrade (reboot), missing
    `/dev/nvidia*` device files in a container, or a broken CUDA runtime. The warnings torch
    printed while trying are in the evidence. (The probe sees every GPU:
    `CUDA_VISIBLE_DEVICES` is judged separately.)

    Why it matters: every job in this environment runs without the GPUs: it fails at its first
    `.cuda()` or falls back to the CPU.

    Example: `torch 2.6.0 cannot use CUDA on this host` - torch.cuda.is_available() is False with
    4 GPUs present.

    Fix: run `nvidia-smi`: if it fails, reboot after the driver upgrade (or reload the nvidia
    kernel modules); in a container, start it with the GPUs passed through (`--gpus all`).
    """
    probe = scan.torch_probe
    if probe is None or probe.torch_version is None or probe.cuda_version is None:
        return
    if probe.cuda_available is not False or not scan.gpus:
        return
    said = [w for w in probe.warnings if "CUDA" in w or "driver" in w.lower()]
    yield Finding(
        subject="host",
        title=f"torch {probe.torch_version} cannot use CUDA on this host",
        detail=(f"torch.cuda.is_available() is False with {plural(len(scan.gpus), 'GPU')} present"
                + (f"; torch said: {said[0]}" if said else "") + "."),
        remedy=("Run `nvidia-smi`: if it fails, reboot after the driver upgrade (or reload the "
                "nvidia kernel modules); in a container, start it with the GPUs passed through "
                "(`--gpus all`)."),
        evidence={"torch_version": probe.torch_version, "torch_cuda_version": probe.cuda_version,
                  "gpu_count": len(scan.gpus), "torch_warnings": probe.warnings[:5]},
    )


@rule("torch-import-failed")
def torch_import_failed(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """`import torch` fails in this environment (`scan --torch`).

    Typical causes: a CUDA library that the wheel needs is missing or shadowed
    (`libcudnn.so.9: cannot open shared object file`, an `LD_LIBRARY_PATH` pointing at another
    CUDA), a half-finished upgrade, or a NumPy built against another ABI.

    Why it matters: every job in this environment would die at its first line.

    Example: `import torch fails: ImportError: libcudnn.so.9: cannot open shared object file`
    (evidence: `python`, `import_error`).

    Fix: reproduce it with `PYTHON -c 'import torch'`, then reinstall torch from
    https://pytorch.org/get-started/locally/ or fix `LD_LIBRARY_PATH`.
    """
    probe = scan.torch_probe
    if probe is None or probe.import_error is None:
        return
    yield Finding(
        subject="host",
        title=f"import torch fails: {probe.import_error.splitlines()[0][:160]}",
        detail=f"In {probe.python}, `import torch` raised {probe.import_error!r}.",
        remedy=(f"{probe.python} -c 'import torch'  # reproduces it; reinstall torch from "
                "https://pytorch.org/get-started/locally/ or fix LD_LIBRARY_PATH"),
        evidence={"python": probe.python, "import_error": probe.import_error},
    )
