"""The host: OS, kernel, WSL2 or container, CPUs, RAM and swap (with swap-in/out activity)."""

from __future__ import annotations

import datetime as dt
import os
import socket
import sys
from pathlib import Path

import psutil

from gpu_audit.model import Host, ProbeError
from gpu_audit.units import utc_iso

NVIDIA_PCI_VENDOR = "0x10de"
# PCI class 0x03xxxx: display controllers (VGA 0x0300, 3D 0x0302): GPUs, not NVIDIA's audio/USB.
DISPLAY_CLASS_PREFIX = "0x03"


def detect_wsl(kernel_release: str, proc: Path = Path("/proc")) -> bool:
    if "microsoft" in kernel_release.lower() or "wsl" in kernel_release.lower():
        return True
    try:
        return "microsoft" in (proc / "version").read_text().lower()
    except OSError:
        return False


def detect_container(root: Path = Path("/"), environ: dict[str, str] | None = None) -> str | None:
    """The container runtime this process runs under, or ``None`` on a plain host."""
    env = os.environ if environ is None else environ
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if (root / ".dockerenv").exists():
        return "docker"
    if (root / "run/.containerenv").exists():
        return "podman"
    container_env = env.get("container")
    if container_env:
        return container_env  # systemd-nspawn, lxc, podman set this
    try:
        cgroup = (root / "proc/1/cgroup").read_text()
    except OSError:
        return None
    for marker in ("kubepods", "docker", "containerd", "lxc", "libpod"):
        if marker in cgroup:
            return {"kubepods": "kubernetes", "libpod": "podman"}.get(marker, marker)
    return None


def count_nvidia_pci_devices(sysfs: Path = Path("/sys/bus/pci/devices")) -> int | None:
    """NVIDIA GPUs visible on the PCI bus, whether or not a driver is bound (None: no sysfs)."""
    if not sysfs.is_dir():
        return None
    count = 0
    for device in sysfs.iterdir():
        try:
            vendor = (device / "vendor").read_text().strip()
            klass = (device / "class").read_text().strip()
        except OSError:
            continue
        if vendor == NVIDIA_PCI_VENDOR and klass.startswith(DISPLAY_CLASS_PREFIX):
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


def read_host() -> tuple[Host, list[ProbeError]]:
    errors: list[ProbeError] = []
    system, release = _system_release()

    def guarded(what: str, func, default=None):
        try:
            return func()
        except Exception as exc:
            errors.append(ProbeError("host", "host", f"cannot read {what}: {exc}"))
            return default

    memory = guarded("memory", psutil.virtual_memory)
    swap = guarded("swap", psutil.swap_memory)
    boot = guarded("boot time", psutil.boot_time)
    host = Host(
        hostname=socket.gethostname(),
        os=system,
        kernel=release or None,
        wsl=system == "Linux" and detect_wsl(release),
        container=detect_container() if system == "Linux" else None,
        cpu_count=os.cpu_count(),
        memory_total_bytes=memory.total if memory else None,
        memory_available_bytes=memory.available if memory else None,
        swap_total_bytes=swap.total if swap else None,
        swap_used_bytes=swap.used if swap else None,
        swap_in_bytes=swap.sin if swap else None,
        swap_out_bytes=swap.sout if swap else None,
        python_version=sys.version.split()[0],  # as platform.python_version() reads it
        boot_time=iso_utc(boot) if boot else None,
        nvidia_pci_devices=count_nvidia_pci_devices() if system == "Linux" else None,
    )
    return host, errors


def iso_utc(epoch_s: float) -> str:
    """Seconds since the epoch (as psutil reports start and boot times) as ISO 8601 UTC."""
    return utc_iso(dt.datetime.fromtimestamp(epoch_s, dt.UTC))
