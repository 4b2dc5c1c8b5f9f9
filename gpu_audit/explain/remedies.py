"""Which allocator variable a given torch reads, and remedy lines a user can paste.

PyTorch renamed the caching allocator's variable: up to 2.9.x the CUDA allocator reads only
``PYTORCH_CUDA_ALLOC_CONF`` (2.9 already warns that this name is deprecated, yet ignores the
new one for CUDA); from 2.10 ``PYTORCH_ALLOC_CONF`` is read. When the version is unknown (torch
not installed here, or an unreadable version string) both names are given, set to the same
string, which works everywhere. These functions are pure so that other parts of gpu-audit
(the allocator checks, validate) can share them.
"""

from __future__ import annotations

import re

LEGACY_VAR = "PYTORCH_CUDA_ALLOC_CONF"
UNIFIED_VAR = "PYTORCH_ALLOC_CONF"

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)")


def torch_release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) from a torch version string such as ``2.9.1+cu128`` or ``2.10.0a0+git1``."""
    if not version:
        return None
    match = _VERSION.match(version)
    return (int(match[1]), int(match[2])) if match else None


def alloc_conf_variables(torch_version: str | None) -> tuple[str, ...]:
    """The variable(s) that make the allocator setting take effect for ``torch_version``."""
    release = torch_release(torch_version)
    if release is None:
        return (LEGACY_VAR, UNIFIED_VAR)
    return (UNIFIED_VAR,) if release >= (2, 10) else (LEGACY_VAR,)


def alloc_conf_export(setting: str, torch_version: str | None) -> str:
    """A shell line setting the allocator option, e.g. ``export PYTORCH_ALLOC_CONF=...``."""
    return "export " + " ".join(f"{var}={setting}" for var in alloc_conf_variables(torch_version))


def supports_expandable_segments(torch_version: str | None) -> bool | None:
    """``expandable_segments`` exists from torch 2.1; None when the version is unknown."""
    release = torch_release(torch_version)
    return None if release is None else release >= (2, 1)


def fragmentation_remedy(torch_version: str | None) -> str:
    """The allocator setting that fights fragmentation on this torch, as lines to paste."""
    if supports_expandable_segments(torch_version) is False:
        # Before 2.1 the only lever is to stop large blocks from being split.
        return (
            f"{alloc_conf_export('max_split_size_mb:128', torch_version)}\n"
            "(torch before 2.1 has no expandable_segments; tune 128 to just above the size of "
            "your largest frequent allocation, or upgrade torch)"
        )
    return alloc_conf_export("expandable_segments:True", torch_version)


def installed_torch_version() -> str | None:
    """torch's version from package metadata; torch itself is never imported."""
    from gpu_audit.collect.software import torch_version

    return torch_version()
