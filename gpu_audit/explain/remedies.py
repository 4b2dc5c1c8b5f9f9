"""Which allocator variable a given torch reads, and remedy lines a user can paste.

The rules live in :mod:`gpu_audit.allocconf` (one source of truth for scan, explain and
validate): up to 2.8 only ``PYTORCH_CUDA_ALLOC_CONF`` reaches the CUDA allocator; from 2.9 on,
and when the version is unknown, both names are set to the same string, which every release
reads the same way (2.9 reads only the old name, 2.10 and 2.11 prefer the new one, later
releases the old one again). These functions are pure.
"""

from __future__ import annotations

from gpu_audit.allocconf import CUDA_VAR, NEW_VAR, export_line, torch_minor

LEGACY_VAR = CUDA_VAR
UNIFIED_VAR = NEW_VAR


def torch_release(version: str | None) -> tuple[int, int] | None:
    """(major, minor) from a torch version string such as ``2.9.1+cu128`` or ``2.10.0a0+git1``."""
    return torch_minor(version)


def alloc_conf_variables(torch_version: str | None) -> tuple[str, ...]:
    """The variable(s) to set so the allocator setting takes effect for ``torch_version``."""
    release = torch_release(torch_version)
    if release is not None and release < (2, 9):
        return (LEGACY_VAR,)
    return (UNIFIED_VAR, LEGACY_VAR)


def alloc_conf_export(setting: str, torch_version: str | None) -> str:
    """A shell line setting the allocator option, e.g. ``export PYTORCH_ALLOC_CONF=... ...``."""
    return export_line(setting, torch_release(torch_version))


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
    import importlib.metadata

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
