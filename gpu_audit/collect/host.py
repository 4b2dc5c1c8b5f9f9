"""The host: OS, kernel, WSL2 or container, CPUs, RAM and swap (with swap-in/out activity)."""

from __future__ import annotations

import datetime as dt
import os
import sys

from gpu_audit.collect import procfs
from gpu_audit.hostname import host_name
from gpu_audit.model import Host, ProbeError
from gpu_audit.units import utc_iso

NVIDIA_PCI_VENDOR = "0x10de"
# PCI class 0x03xxxx: display controllers (VGA 0x0300, 3D 0x0302): GPUs, not NVIDIA's audio/USB.
DISPLAY_CLASS_PREFIX = "0x03"


def _read_text(path: str) -> str:
    """A small kernel file as text (bounded, never blocking)."""
    raw = procfs.read_bounded(path, procfs.MAX_PROC_FILE_BYTES)
    text = raw.decode()  # as Path.read_text did: undecodable bytes are an error
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def detect_wsl(kernel_release: str, proc: str | os.PathLike[str] = "/proc") -> bool:
    if "microsoft" in kernel_release.lower() or "wsl" in kernel_release.lower():
        return True
    try:
        return "microsoft" in _read_text(os.path.join(proc, "version")).lower()
    except OSError:
        return False


def detect_container(
    root: str | os.PathLike[str] = "/", environ: dict[str, str] | None = None
) -> str | None:
    """The container runtime this process runs under, or ``None`` on a plain host."""
    env = os.environ if environ is None else environ
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return "docker"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return "podman"
    container_env = env.get("container")
    if container_env:
        return container_env  # systemd-nspawn, lxc, podman set this
    try:
        cgroup = _read_text(os.path.join(root, "proc/1/cgroup"))
    except OSError:
        return None
    for marker in ("kubepods", "docker", "containerd", "lxc", "libpod"):
        if marker in cgroup:
            return {"kubepods": "kubernetes", "libpod": "podman"}.get(marker, marker)
    return None


def count_nvidia_pci_devices(
    sysfs: str | os.PathLike[str] = "/sys/bus/pci/devices",
) -> int | None:
    """NVIDIA GPUs visible on the PCI bus, whether or not a driver is bound (None: no sysfs)."""
    if not os.path.isdir(sysfs):
        return None
    count = 0
    for device in os.listdir(sysfs):
        try:
            if _read_text(os.path.join(sysfs, device, "vendor")).strip() != NVIDIA_PCI_VENDOR:
                continue  # the class of another vendor's device is not needed
            klass = _read_text(os.path.join(sysfs, device, "class")).strip()
        except OSError:
            continue
        if klass.startswith(DISPLAY_CLASS_PREFIX):
            count += 1
    return count


def _system_release() -> tuple[str, str]:
    """The OS name and kernel release as ``platform.uname()`` gives them; from ``os.uname()``
    where there is one (importing platform costs every scan some 9 million instructions)."""
    if hasattr(os, "uname"):
        uname = os.uname()
        return uname.sysname, uname.release
    import platform

    info = platform.uname()
    return info.system or platform.system(), info.release


def _memory(root: str, guarded) -> tuple[tuple[int, int] | None, tuple[int, ...] | None]:
    """(RAM total, available) and (swap total, used, in, out) as psutil computes them: from
    ``/proc`` where it is there and psutil would take its ordinary route, else from psutil."""
    if procfs.usable(root):
        try:
            figures = procfs.read_memory(root)
        except (OSError, ValueError):
            figures = None  # psutil reports it in its own words
        if figures is not None:
            return figures[:2], figures[2:]
    import psutil  # only here: importing it costs a scan more than all of its reading

    memory = guarded("memory", psutil.virtual_memory)
    swap = guarded("swap", psutil.swap_memory)
    return (
        (memory.total, memory.available) if memory else None,
        (swap.total, swap.used, swap.sin, swap.sout) if swap else None,
    )


def _boot_time(root: str) -> float:
    if procfs.usable(root):
        try:
            return procfs.boot_time(root)
        except (OSError, ValueError, RuntimeError):
            pass  # psutil reports it in its own words
    import psutil

    return psutil.boot_time()


def read_host(root: str = procfs.PROC) -> tuple[Host, list[ProbeError]]:
    errors: list[ProbeError] = []
    system, release = _system_release()

    def guarded(what: str, func, default=None):
        try:
            return func()
        except Exception as exc:
            errors.append(ProbeError("host", "host", f"cannot read {what}: {exc}"))
            return default

    memory, swap = _memory(root, guarded)
    boot = guarded("boot time", lambda: _boot_time(root))
    host = Host(
        hostname=host_name(),
        os=system,
        kernel=release or None,
        wsl=system == "Linux" and detect_wsl(release),
        container=detect_container() if system == "Linux" else None,
        cpu_count=os.cpu_count(),
        memory_total_bytes=memory[0] if memory else None,
        memory_available_bytes=memory[1] if memory else None,
        swap_total_bytes=swap[0] if swap else None,
        swap_used_bytes=swap[1] if swap else None,
        swap_in_bytes=swap[2] if swap else None,
        swap_out_bytes=swap[3] if swap else None,
        python_version=sys.version.split()[0],  # as platform.python_version() reads it
        boot_time=iso_utc(boot) if boot else None,
        nvidia_pci_devices=count_nvidia_pci_devices() if system == "Linux" else None,
    )
    return host, errors


def iso_utc(epoch_s: float) -> str:
    """Seconds since the epoch (as psutil reports start and boot times) as ISO 8601 UTC."""
    return utc_iso(dt.datetime.fromtimestamp(epoch_s, dt.UTC))
