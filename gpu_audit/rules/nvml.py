"""Whether gpu-audit could talk to the NVIDIA driver at all."""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.rules import rule

_REMEDIES = {
    "library-not-found": (
        "Install the NVIDIA driver for this GPU (it ships libnvidia-ml.so.1), e.g. on Ubuntu "
        "`sudo ubuntu-drivers install`; in a container, run it with the NVIDIA Container Toolkit "
        "(`docker run --gpus all ...`)."
    ),
    "driver-not-loaded": (
        "Load the kernel module (`sudo modprobe nvidia`) and check `dmesg | grep -i nvidia`; "
        "after a driver or kernel upgrade, reboot. With Secure Boot the module must be signed."
    ),
    "version-mismatch": (
        "The kernel module and the user-space library come from different driver versions, "
        "usually after a driver upgrade without a reboot: reboot, or reload the module "
        "(`sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`). "
        "Compare `cat /proc/driver/nvidia/version` with the library's version."
    ),
    "no-permission": (
        "This user may not open /dev/nvidia*: add it to the group that owns those devices "
        "(`ls -l /dev/nvidia*`), or in a container pass the devices through."
    ),
    "insufficient-resources": "The driver is out of resources: close other GPU programs and retry.",
    "timeout": (
        "The driver did not answer in time: check `dmesg` for Xid errors and whether `nvidia-smi` "
        "also hangs; a hung driver usually needs the GPU reset or the machine rebooted."
    ),
}


@rule("nvml-hung", severity=Severity.ERROR)
def nvml_hung(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The NVIDIA driver did not answer a query within the scan's timeout.

    A healthy driver answers every NVML query in milliseconds. One that hangs on a GPU usually
    means the GPU or the driver is in trouble (an Xid error, a GPU falling off the bus, a
    driver deadlock), and `nvidia-smi` and CUDA programs on that GPU are likely to hang too.
    gpu-audit stops waiting after `--timeout` seconds, reports what it had, and says which call
    hung. A hang while initialising NVML is reported by `nvml-unavailable` (cause `timeout`).
    """
    hung: dict[str, list[str]] = {}
    for error in scan.probe_errors:
        if error.source == "nvml" and error.timed_out:
            hung.setdefault(error.subject, []).append(error.call or "NVML")
    if not scan.nvml.available:
        return  # nvml-unavailable already says the driver hung
    for subject, calls in sorted(hung.items()):
        target = subject.replace("gpu:", "GPU ") if subject.startswith("gpu:") else "the driver"
        reset = (
            f" If it persists: `sudo nvidia-smi --gpu-reset -i {subject[4:]}` with no "
            "process on it, or reboot."
            if subject.startswith("gpu:")
            else " Reboot if it persists."
        )
        yield Finding(
            subject=subject,
            title=f"{target}: the driver did not answer {', '.join(calls)}",
            detail=(
                f"NVML call(s) {', '.join(calls)} on {target} did not return within the "
                "scan's timeout; the readings they give are missing."
            ),
            remedy=(
                "Check the kernel log for Xid errors (`sudo dmesg -T | grep -i xid`) and "
                "whether `timeout 30 nvidia-smi` also hangs." + reset
            ),
            evidence={"calls": calls, "subject": subject},
        )


@rule("nvml-unavailable", severity=Severity.ERROR)
def nvml_unavailable(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """NVML, the NVIDIA driver's management library, could not be used.

    Without NVML nothing can be known about the GPUs: neither their memory nor the processes
    holding it. The cause decides the fix: no library at all (no driver installed, or a container
    started without GPU support), a driver whose kernel module is not loaded, a kernel module and a
    library from different driver versions (typical after an upgrade without a reboot), or no
    permission to open the device files. On a host with no NVIDIA GPU on its PCI bus this is a
    warning (the host simply has no GPU to run on); where NVIDIA hardware is present it is an error.
    """
    status = scan.nvml
    if status.available:
        return
    cause = status.cause or "unknown"
    no_hardware = cause == "library-not-found" and scan.host.nvidia_pci_devices == 0
    if no_hardware:
        title = "No NVIDIA GPU on this host"
        detail = (
            "No NVIDIA display controller is on the PCI bus and no NVIDIA driver library "
            "is installed: GPU jobs cannot run here."
        )
        remedy = "Run GPU jobs on a machine with an NVIDIA GPU; CPU-only work is unaffected."
    else:
        title = f"NVML unavailable: {cause.replace('-', ' ')}"
        detail = status.message or "NVML could not be initialised."
        remedy = _REMEDIES.get(
            cause,
            "Run `nvidia-smi`: its error message names the problem; "
            "check `dmesg | grep -i nvidia` for driver errors.",
        )
    yield Finding(
        subject="host",
        title=title,
        detail=detail,
        remedy=remedy,
        evidence={
            "cause": cause,
            "nvidia_pci_devices": scan.host.nvidia_pci_devices,
            "library_path": status.library_path,
        },
        severity=Severity.WARNING if no_hardware else None,
    )
