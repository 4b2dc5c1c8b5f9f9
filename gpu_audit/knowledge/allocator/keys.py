"""The keys torch's allocator configuration knows, by torch release, and their limits.

Each :class:`KeySpec` says what kind of value a key takes, which parser reads it (the shared one
from 2.10, or the CUDA-specific one), since which release, and whether only the native caching
allocator uses it. Releases marked ``since_confirmed=False`` are estimates: a key seen in a
release's source but not yet checked against that release. Sources: the allocator configuration
parsers in PyTorch's ``c10/core/AllocatorConfig.cpp`` and ``c10/cuda/CUDAAllocatorConfig.cpp``,
checked against torch 2.13.0 where a CPU build can show them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from gpu_audit.units import Release, torch_release

LARGE_BUFFER_MB = 20  # kLargeBuffer: the floor for max_split_size_mb before large_segment_size_mb


@dataclass(frozen=True)
class KeySpec:
    """A key torch knows: its value kind, where it applies, and since when."""

    name: str
    kind: str  # "bool", "mb", "fraction", "backend", "divisions", "threads", "any"
    scope: str  # "common" (shared parser, 2.10+) or "cuda" (CUDA-specific parser)
    since: Release | None = None  # first release that reads it; None: older than 2.0
    since_confirmed: bool = True  # False: the release is only estimated
    native_only: bool = False  # tunes the native caching allocator; cudaMallocAsync ignores it
    minimum: int | None = None  # for "mb": the smallest accepted value (after version rules)
    summary: str = ""


def _spec(name: str, kind: str, scope: str, summary: str, **kw: Any) -> KeySpec:
    return KeySpec(name=name, kind=kind, scope=scope, summary=summary, **kw)


KEYS: dict[str, KeySpec] = {
    spec.name: spec
    for spec in (
        _spec("backend", "backend", "cuda", "native or cudaMallocAsync; read when torch loads"),
        _spec("max_split_size_mb", "mb", "common", "blocks this large (MiB) are never split",
              native_only=True),
        _spec("max_non_split_rounding_mb", "mb", "common",
              "how much larger a cached oversize block may be and still be reused",
              since=(2, 6), since_confirmed=False, native_only=True),
        _spec("roundup_power2_divisions", "divisions", "common",
              "round request sizes to power-of-two divisions", native_only=True),
        _spec("garbage_collection_threshold", "fraction", "common",
              "reclaim old cached blocks above this share of the allowed memory",
              native_only=True),
        _spec("expandable_segments", "bool", "common",
              "grow one segment per stream instead of allocating new ones", since=(2, 1),
              native_only=True),
        _spec("release_lock_on_cudamalloc", "bool", "cuda",
              "drop the allocator lock around cudaMalloc", native_only=True),
        _spec("release_lock_on_hipmalloc", "bool", "cuda", "ROCm spelling of release_lock",
              native_only=True),
        _spec("pinned_use_cuda_host_register", "bool", "cuda",
              "pinned host memory through cudaHostRegister"),
        _spec("pinned_use_hip_host_register", "bool", "cuda", "ROCm spelling of the above"),
        _spec("pinned_num_register_threads", "threads", "cuda",
              "threads that register pinned memory (a power of 2, at most 128)"),
        _spec("pinned_use_background_threads", "bool", "common",
              "process pinned-memory events in a background thread", since=(2, 6),
              since_confirmed=False),
        _spec("pinned_reserve_segment_size_mb", "mb", "cuda",
              "pinned host memory reserved up front (MiB)", since=(2, 9), since_confirmed=False,
              minimum=1),
        _spec("graph_capture_record_stream_reuse", "bool", "cuda",
              "reuse blocks across streams during CUDA graph capture", since=(2, 9),
              since_confirmed=False),
        _spec("per_process_memory_fraction", "fraction", "cuda",
              "cap this process at a share of the device memory", since=(2, 12),
              since_confirmed=False),
        _spec("pinned_free_catch_all", "bool", "cuda", "pinned allocator free-path option",
              since=(2, 12), since_confirmed=False),
        _spec("throw_on_cudamalloc_oom", "bool", "cuda",
              "refuse allocations that would likely fail before calling cudaMalloc",
              since=(2, 12), since_confirmed=False),
        _spec("large_segment_size_mb", "mb", "common", "size of the large-pool segments (MiB)",
              since=(2, 12), since_confirmed=False, native_only=True, minimum=11),
        _spec("pinned_max_round_threshold_mb", "mb", "common",
              "above this, pinned allocations are not rounded to powers of two", since=(2, 12),
              since_confirmed=False),
        _spec("pinned_max_cached_size_mb", "mb", "common",
              "above this, freed pinned blocks are not cached", since=(2, 12),
              since_confirmed=False),
        _spec("expandable_segments_reserve", "any", "cuda",
              "virtual address space reserved per expandable segment", since=(2, 14),
              since_confirmed=False, native_only=True),
        _spec("expandable_segments_reserve_by_class", "any", "cuda",
              "per-class variant of expandable_segments_reserve", since=(2, 14),
              since_confirmed=False, native_only=True),
    )
}

BOOL_WORDS = {"true": "True", "false": "False", "1": "True", "0": "False", "yes": "True",
              "no": "False", "on": "True", "off": "False"}  # what was meant -> what torch takes
BACKENDS = ("native", "cudaMallocAsync", "hipMallocAsync")


def scope(key: str) -> str:
    """Which parser reads ``key``: "common" or "cuda" (an unknown key counts as CUDA-only)."""
    spec = KEYS.get(key)
    return spec.scope if spec else "cuda"


def suggest_key(key: str) -> str | None:
    """The known key ``key`` was probably meant to be (case, hyphens, typos)."""
    normal = key.strip().lower().replace("-", "_")
    if normal in KEYS:
        return normal
    close = difflib.get_close_matches(normal, list(KEYS), n=1, cutoff=0.75)
    return close[0] if close else None


def supports_expandable_segments(torch_version: str | None) -> bool | None:
    """``expandable_segments`` exists from torch 2.1; None when the version is unknown."""
    release = torch_release(torch_version)
    since = KEYS["expandable_segments"].since
    return None if release is None or since is None else release >= since


def split_minimum(version: Release | None, large_segment_mb: int | None = None) -> int | None:
    """The smallest ``max_split_size_mb`` torch accepts; ``None`` where it silently raises it.

    Before 2.1 values below 20 were raised to 20 without a word; 2.1-2.9 require more than 20;
    2.10 and later at least 20, or at least ``large_segment_size_mb`` where that key is set.
    For an unknown version this is 21, which every version accepts.
    """
    if version is None:
        return LARGE_BUFFER_MB + 1
    if version < (2, 1):
        return None
    if version < (2, 10):
        return LARGE_BUFFER_MB + 1
    return max(LARGE_BUFFER_MB, large_segment_mb or LARGE_BUFFER_MB)


def max_split_minimum(torch_version: str | None) -> int:
    """The smallest ``max_split_size_mb`` that takes effect as written on ``torch_version``."""
    floor = split_minimum(torch_release(torch_version))
    return floor if floor is not None else LARGE_BUFFER_MB


# Options that, together with expandable_segments:True, let the native allocator free or split
# an expandable segment like an ordinary one near the memory limit, tripping an internal assert
# (``!block->expandable_segment_``); torch 2.5 keeps them apart (PyTorch pull request 134338).
EXPANDABLE_CONFLICTS = ("max_split_size_mb", "garbage_collection_threshold")
EXPANDABLE_CONFLICTS_FIXED_IN: Release = (2, 5)


def expandable_conflicts(settings: dict[str, str]) -> list[str]:
    """The options in ``settings`` (key -> raw value) that conflict with expandable segments
    on torch before 2.5; empty unless expandable_segments is on."""
    if str(settings.get("expandable_segments", "")).strip().lower() not in ("true", "1"):
        return []
    return [key for key in EXPANDABLE_CONFLICTS if key in settings]
