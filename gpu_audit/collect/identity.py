"""What the kernel driver and ``/dev`` know of the GPUs, read for :mod:`gpu_audit.gpu_identity`.

- ``/proc/driver/nvidia/gpus/<bus id>/information``: ``Device Minor``, ``Bus Location`` and
  ``GPU UUID`` of each GPU the driver bound, even one NVML cannot reach;
- ``/dev/nvidiaN``: the character devices Slurm's gres hands to jobs (their minor numbers).

``GPU_AUDIT_PROC_NVIDIA`` and ``GPU_AUDIT_DEV`` replace ``/proc/driver/nvidia`` and ``/dev``
(tests play a node's driver with files of their own). Every read is bounded: at most
:data:`~gpu_audit.bounds.MAX_GPUS` GPUs, a few kilobytes a file, regular files and character
devices only (a FIFO planted in their place is passed over, never waited on).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from gpu_audit.bounds import MAX_GPUS
from gpu_audit.gpu_identity import DEV_NAME, kernel_gpus, parse_information
from gpu_audit.model import KernelGpu

ENV_PROC = "GPU_AUDIT_PROC_NVIDIA"
ENV_DEV = "GPU_AUDIT_DEV"
_INFO_BYTES = 16_384
_DEV_ENTRIES = 65_536  # entries of /dev looked at: a node has a few hundred


def roots(environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(the driver's /proc folder, the /dev folder) in force."""
    env = os.environ if environ is None else environ
    return (env.get(ENV_PROC) or "/proc/driver/nvidia", env.get(ENV_DEV) or "/dev")


def read_kernel_gpus(environ: Mapping[str, str] | None = None) -> list[KernelGpu]:
    """The GPUs the driver lists, then the ``/dev/nvidiaN`` devices it does not."""
    proc, dev = roots(environ)
    return kernel_gpus(read_driver_gpus(proc), read_dev_minors(dev))


def read_driver_gpus(proc: str | os.PathLike[str]) -> list[KernelGpu]:
    found: list[KernelGpu] = []
    try:
        with os.scandir(os.path.join(proc, "gpus")) as entries:
            for entry in entries:
                if len(found) >= MAX_GPUS:
                    break
                text = _read_small(os.path.join(entry.path, "information"))
                gpu = None if text is None else parse_information(text, entry.name)
                if gpu is not None:
                    found.append(gpu)
    except OSError:
        return found
    return found


def _read_small(path: str) -> str | None:
    """A regular file's first bytes as text; ``None`` for anything else or an error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, _INFO_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def read_dev_minors(dev: str | os.PathLike[str]) -> list[int]:
    """Minor numbers of the ``nvidiaN`` character devices in ``dev``."""
    minors: list[int] = []
    try:
        with os.scandir(dev) as entries:
            for seen, entry in enumerate(entries):
                if seen >= _DEV_ENTRIES or len(minors) >= MAX_GPUS:
                    break
                if DEV_NAME.fullmatch(entry.name) is None:
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISCHR(info.st_mode) and os.minor(info.st_rdev) < MAX_GPUS:
                    minors.append(os.minor(info.st_rdev))
    except OSError:
        return minors
    return minors
