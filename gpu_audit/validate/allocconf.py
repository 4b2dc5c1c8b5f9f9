"""Allocator settings for validation workers: checked before any worker starts.

Parsing, the per-version rules and the export line live in :mod:`gpu_audit.knowledge.allocator`
(shared with ``scan``); this module turns its verdict into a usage error naming the flag, adds what
only matters here (``garbage_collection_threshold`` needs a memory fraction, which
``--emulate-memory`` sets), and compares what was asked with what the allocator reports in the
worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpu_audit.errors import UsageError
from gpu_audit.knowledge import allocator as shared
from gpu_audit.units import MIB


@dataclass(frozen=True)
class AllocConf:
    """A checked configuration string and what it asks of the allocator."""

    text: str  # normalised: what each worker gets in both variables
    parsed: Any = field(repr=False, compare=False, default=None)
    warnings: list[str] = field(default_factory=list)

    def has(self, key: str) -> bool:
        return self.parsed is not None and self.parsed.has(key)

    def expected_settings(self) -> dict[str, Any]:
        """What ``_snapshot()["allocator_settings"]`` should show if this string took effect."""
        if self.parsed is None:
            return {}
        expected: dict[str, Any] = {}
        split = self.parsed.value("max_split_size_mb")
        if isinstance(split, int):
            expected["max_split_size"] = split * MIB
        expandable = self.parsed.value("expandable_segments")
        if isinstance(expandable, bool):
            expected["expandable_segments"] = expandable
        threshold = self.parsed.value("garbage_collection_threshold")
        if isinstance(threshold, float):
            expected["garbage_collection_threshold"] = threshold
        return expected


def parse_alloc_conf(text: str, *, torch_version: str | None, flag: str = "--alloc-conf",
                     memory_fraction_set: bool = False) -> AllocConf:
    """Check ``text`` for ``torch_version``; raises :class:`UsageError` naming ``flag``."""
    parsed = shared.analyse(text, torch_version)
    if parsed.errors:
        issue = parsed.errors[0]
        fix = f" (use {issue.key}:{issue.fix})" if issue.key and issue.fix else ""
        raise UsageError(f"{flag} {text!r}: {shared.describe(issue)}{fix}")
    warnings = [f"{flag}: {shared.describe(issue)}" for issue in parsed.warnings]
    if parsed.has("garbage_collection_threshold") and not (
        memory_fraction_set or parsed.has("per_process_memory_fraction")
    ):
        warnings.append(f"{flag}: garbage_collection_threshold has no effect unless a "
                        "per-process memory fraction is set (--emulate-memory sets one)")
    normal = shared.render(shared.pairs(parsed))
    return AllocConf(text=normal, parsed=parsed, warnings=warnings)


def with_max_split(conf: AllocConf | None, megabytes: int | None, *, torch_version: str | None,
                   memory_fraction_set: bool = False) -> AllocConf | None:
    """``conf`` plus ``max_split_size_mb:N`` (``None`` leaves ``conf`` as it is)."""
    if megabytes is None:
        return conf
    if conf is not None and conf.has("max_split_size_mb"):
        raise UsageError("--max-split-size-mb and a max_split_size_mb inside the allocator "
                         "settings contradict each other; give it once")
    base = conf.text if conf is not None else ""
    text = shared.with_settings(base, {"max_split_size_mb": str(megabytes)})
    return parse_alloc_conf(text, torch_version=torch_version, flag="--max-split-size-mb",
                            memory_fraction_set=memory_fraction_set)


def compare_settings(expected: dict[str, Any], in_effect: dict[str, Any] | None) -> list[str]:
    """Differences between what was asked and what the allocator reports, one line each."""
    if not in_effect:
        return []
    problems = []
    for key, want in expected.items():
        if key not in in_effect:
            continue
        have = in_effect[key]
        if isinstance(want, float):
            same = isinstance(have, (int, float)) and abs(float(have) - want) < 1e-9
        else:
            same = have == want
        if not same:
            problems.append(f"{key}: asked {want!r}, allocator reports {have!r}")
    return problems

