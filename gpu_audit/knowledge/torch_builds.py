"""The CUDA builds of PyTorch published on download.pytorch.org, and the one to suggest for a
driver: every command that advises a torch install takes its build and its command from here.
"""

from __future__ import annotations

import re

# CUDA builds published on download.pytorch.org, oldest first (which exist varies by release).
PUBLISHED_CUDA_BUILDS = ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0")
INDEX_URL = "https://download.pytorch.org/whl"
GET_STARTED_URL = "https://pytorch.org/get-started/locally/"


def cuda_tuple(version: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """``"12.4"`` (or ``(12, 4)``) -> (12, 4); ``None`` when not a CUDA version."""
    if isinstance(version, tuple):
        return version
    if not version:
        return None
    match = re.match(r"([0-9]{1,20})\.([0-9]{1,20})(?![0-9])", version or "")
    return (int(match[1]), int(match[2])) if match else None


def build_for_driver(driver_cuda: str | tuple[int, int] | None) -> str | None:
    """The newest published CUDA build tag (``cu124``) that a driver supporting CUDA
    ``driver_cuda`` (``"12.4"`` as `nvidia-smi` shows it, or ``(12, 4)``) can run; ``None`` when
    the driver is unknown or older than every published build."""
    driver = cuda_tuple(driver_cuda)
    if driver is None:
        return None
    fitting = [v for v in PUBLISHED_CUDA_BUILDS if (cuda_tuple(v) or (99, 0)) <= driver]
    return "cu" + fitting[-1].replace(".", "") if fitting else None


def install_command(torch_version: str | None, driver_cuda: str | tuple[int, int] | None) -> str:
    """The paste-able install of torch (the installed ``torch_version``'s release, when known)
    built for this driver's CUDA; prose pointing at pytorch.org when no published build fits."""
    tag = build_for_driver(driver_cuda)
    if tag is None:
        return ("install a CUDA build of torch that this driver supports, as shown at "
                f"{GET_STARTED_URL}")
    if torch_version:
        pin = f"torch=={torch_version.partition('+')[0]}"
        return (f"pip install --force-reinstall '{pin}' --index-url {INDEX_URL}/{tag}  "
                f"# check at {GET_STARTED_URL} that {tag} exists for it")
    return f"pip install torch --index-url {INDEX_URL}/{tag}"
