"""Whether gpu-audit could talk to the NVIDIA driver at all, and to each GPU."""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.gpu_identity import bus_key
from gpu_audit.model import Finding, Gpu, Scan, Severity
from gpu_audit.rules import rule
from gpu_audit.units import noun

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


@rule("nvml-hung")
def nvml_hung(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The NVIDIA driver did not answer a query within the scan's timeout.

    A healthy driver answers every NVML query in milliseconds. One that hangs on a GPU usually
    means the GPU or the driver is in trouble (an Xid error, a GPU falling off the bus, a
    driver deadlock). gpu-audit stops waiting after `--timeout` seconds, reports what it had, and
    says which call hung. A hang while initialising NVML is reported by `nvml-unavailable` (cause
    `timeout`).

    Why it matters: `nvidia-smi` and CUDA programs on that GPU are likely to hang too, so a job
    placed there stalls instead of failing, and the readings the calls give are missing.

    Example: `GPU 2: the driver did not answer nvmlDeviceGetMemoryInfo` (evidence: `calls`,
    `subject`).

    Fix: check the kernel log for Xid errors (`sudo dmesg -T | grep -i xid`) and whether
    `timeout 30 nvidia-smi` also hangs. If it persists, `sudo nvidia-smi --gpu-reset -i N` with no
    process on the GPU, or reboot.
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
                f"NVML {noun(len(calls), 'call')} {', '.join(calls)} on {target} did not return "
                "within the "
                "scan's timeout; the readings they give are missing."
            ),
            remedy=(
                "Check the kernel log for Xid errors (`sudo dmesg -T | grep -i xid`) and "
                "whether `timeout 30 nvidia-smi` also hangs." + reset
            ),
            evidence={"calls": calls, "subject": subject},
        )


@rule("nvml-unavailable")
def nvml_unavailable(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """NVML, the NVIDIA driver's management library, could not be used.

    The cause decides the fix: no library at all (no driver installed, or a container started
    without GPU support), a driver whose kernel module is not loaded, a kernel module and a
    library from different driver versions (typical after an upgrade without a reboot), or no
    permission to open the device files. On a host with no NVIDIA GPU on its PCI bus this is a
    warning (the host simply has no GPU to run on); where NVIDIA hardware is present it is an
    error.

    Why it matters: without NVML nothing can be known about the GPUs, neither their memory nor the
    processes holding it, and the same fault usually stops CUDA jobs from starting.

    Example: `NVML unavailable: version mismatch` (evidence: `cause`,
    `nvidia_pci_devices`, `library_path`).

    Fix: the remedy follows the cause: install the driver, load its module, reboot after a driver
    upgrade, or start the container with the GPUs passed through. Otherwise run `nvidia-smi`: its
    error message names the problem; check `dmesg | grep -i nvidia` for driver errors.
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


def _lost_bus_ids(scan: Scan, lost: list[Gpu]) -> dict[int, tuple[str, str]]:
    """Lost GPU index -> (PCI bus id, where it came from). NVML's own reading first; a lost GPU
    NVML could not name takes the one kernel-log Xid address that matches no other GPU (Xid 79,
    "fallen off the bus", preferred), when that pairing is unambiguous."""
    # A bus id the kernel driver kept for a GPU NVML cannot reach says so ("proc").
    found = {g.index: (g.pci_bus_id, g.identity_source or "nvml") for g in lost if g.pci_bus_id}
    unnamed = [g for g in lost if not g.pci_bus_id]
    log = scan.kernel_log
    if len(unnamed) != 1 or log is None:
        return found
    known = {bus_key(g.pci_bus_id) for g in scan.gpus if g.pci_bus_id}
    addresses: dict[tuple, str] = {}
    for event in sorted(log.xid_events, key=lambda e: e.xid != 79):
        key = bus_key(event.pci_bus_id)
        if key is not None and key not in known:
            addresses.setdefault(key, event.pci_bus_id or "")
    if len(addresses) == 1:
        found[unnamed[0].index] = (next(iter(addresses.values())), "kernel-log")
    return found


@rule("gpu-lost")
def gpu_lost(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """A GPU has fallen off the bus: NVML answers "GPU is lost" and it cannot run anything.

    The driver lost contact with the card (usually logged as Xid 79). The bus id comes from NVML
    when it still answers, else from the kernel driver's `/proc/driver/nvidia` (see
    `docs/gpu-identity.md`), otherwise from the one kernel-log Xid address that no other GPU has.
    `check`'s `gpu-count` fails on this finding.

    Why it matters: every job placed on the GPU fails, and collective jobs on the other GPUs of
    the node hang waiting for it.

    Example: `GPU 3 (PCI 00000000:41:00.0) is lost: it has fallen off the bus`.

    Fix: drain the node, then reset the GPU with no process on it (`sudo nvidia-smi -r -i N`) or
    reboot. A GPU that falls off again is a hardware fault (card, riser, slot or power) to return
    under RMA, identified by its PCI bus id.
    """
    lost = [g for g in scan.gpus if g.lost]
    bus_ids = _lost_bus_ids(scan, lost)
    for gpu in lost:
        bus, source = bus_ids.get(gpu.index, (None, None))
        where = f"PCI {bus}" if bus else "PCI address unknown"
        rma = (f"the GPU at PCI {bus}" if bus else
               "the GPU whose address `lspci -D -d 10de:` lists but `nvidia-smi` does not")
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"GPU {gpu.index} ({where}) is lost: it has fallen off the bus",
            detail=("NVML answers NVML_ERROR_GPU_IS_LOST for this GPU: the driver cannot reach "
                    "it, so no job can use it, and multi-GPU jobs on this node will hang or "
                    "fail."),
            remedy=(f"Drain the node, then reset the GPU with no process on it: "
                    f"`sudo nvidia-smi -r -i {gpu.index}` (or reboot). If it falls off the bus "
                    f"again (`sudo dmesg -T | grep -i xid` shows Xid 79), open an RMA for {rma}."),
            evidence={"gpu_index": gpu.index, "pci_bus_id": bus, "pci_bus_id_source": source,
                      "uuid": gpu.uuid, "name": gpu.name},
        )
