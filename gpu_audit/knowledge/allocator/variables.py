"""Which environment variable a torch release reads, and the shell lines that set it.

Which variable a torch version reads moved between releases (:func:`env_behaviour`): up to 2.8
only ``PYTORCH_CUDA_ALLOC_CONF``; 2.9 warns that this name is deprecated while its CUDA
allocator still reads only it; 2.10 reads ``PYTORCH_ALLOC_CONF`` first for the shared keys (from
its source); from 2.11 the old name is an alias again, read first, even when empty, and without
a warning (2.11.0 was checked on a GPU: whichever value ``PYTORCH_CUDA_ALLOC_CONF`` holds, empty
included, is what the CUDA allocator uses). Setting both names to the same string
works on every version, which is what :func:`export_line` writes from 2.9 on and when the version
is unknown. Every remedy line that sets an allocator variable comes from :func:`export_line`,
which single-quotes the string so that ``>`` and ``[`` never reach the shell, and masks any secret
pasted into it (a token in a training process's published settings must not reappear in a fix).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_audit.knowledge.allocator.checks import analyse
from gpu_audit.knowledge.allocator.grammar import pairs, render
from gpu_audit.knowledge.allocator.keys import scope, supports_expandable_segments
from gpu_audit.knowledge.allocator.names import CUDA_VAR, NEW_VAR
from gpu_audit.redact import redact_settings
from gpu_audit.units import Release, release_text, torch_release

# The torch releases that print "PYTORCH_CUDA_ALLOC_CONF is deprecated, use PYTORCH_ALLOC_CONF
# instead" (once per process, when only the old name is set): from the first release here up to,
# not including, the second. 2.9.0 is the first confirmed to print it; from 2.11 the old name is
# an alias again, read first and without a warning (2.11.0 on a GPU: no warning with the old
# name alone, and the old name's value wins over the new one's, even when empty). Quoted by the
# scan rule alloc-conf-deprecated-name and by explain's signature for the warning.
DEPRECATION_WARNING_RELEASES: tuple[Release, Release] = ((2, 9), (2, 11))


def warns_on_old_name(version: Release | None) -> bool:
    """Whether this torch prints the deprecation warning for the old name used alone."""
    first, stop = DEPRECATION_WARNING_RELEASES
    return version is not None and first <= version[:2] < stop


def deprecation_warning_releases() -> str:
    """The releases that print the warning, as a sentence says them: "2.9, 2.10 and 2.11"."""
    (major, first), (_, stop) = DEPRECATION_WARNING_RELEASES
    names = [f"{major}.{minor}" for minor in range(first, stop)]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


def deprecation_alias_release() -> str:
    """The first release that reads the old name as an alias again, with no warning: "2.11"."""
    return release_text(DEPRECATION_WARNING_RELEASES[1])


# The first release whose CUDA allocator takes PYTORCH_CUDA_ALLOC_CONF before PYTORCH_ALLOC_CONF
# again, whole and even when empty: the first that no longer warns. And the releases in which
# that was seen on a GPU (a child process's allocator_settings under each pair of values,
# tests/knowledge, `gpu`-marked).
ALIAS_RELEASE: Release = DEPRECATION_WARNING_RELEASES[1]
CONFIRMED_ALIAS_RELEASES: tuple[Release, ...] = ((2, 11),)


@dataclass(frozen=True)
class EnvBehaviour:
    """How one torch release treats the two variable names."""

    era: str  # "legacy", "split", "unified", "alias", "unknown"
    summary: str
    warns_on_old_name: bool  # prints "PYTORCH_CUDA_ALLOC_CONF is deprecated" when used alone
    confirmed: bool


def env_behaviour(version: Release | None) -> EnvBehaviour:
    if version is None:
        return EnvBehaviour("unknown", "torch not found here: which name it reads depends on its "
                            "version", False, False)
    if version < (2, 9):
        return EnvBehaviour("legacy", f"torch {release_text(version)} reads only {CUDA_VAR}",
                            warns_on_old_name(version), True)
    if version < (2, 10):
        return EnvBehaviour(
            "split", f"torch 2.9 warns that {CUDA_VAR} is deprecated, yet its CUDA allocator "
            f"reads only {CUDA_VAR} and ignores {NEW_VAR} (pytorch/pytorch#183387)",
            warns_on_old_name(version), True)
    if version < ALIAS_RELEASE:
        return EnvBehaviour(
            "unified", f"torch {release_text(version)} reads {NEW_VAR} first and warns when "
            f"only {CUDA_VAR} is set", warns_on_old_name(version), False)
    warns = warns_on_old_name(version)
    how = "though it warns that the name is deprecated" if warns else "an alias, no warning"
    return EnvBehaviour(
        "alias", f"torch {release_text(version)} reads {CUDA_VAR} first ({how}), then "
        f"{NEW_VAR}; a set but empty {CUDA_VAR} still wins", warns,
        version[:2] in CONFIRMED_ALIAS_RELEASES or version >= (2, 13))


@dataclass(frozen=True)
class Resolution:
    """What reaches the CUDA allocator, given both variables and the torch version."""

    text: str | None  # the effective string (None: neither applies, or version unknown)
    read: list[str]  # variables torch parses
    ignored: list[str]  # variables set but not reaching the CUDA allocator
    explanation: str


def resolve(cuda_value: str | None, new_value: str | None, version: Release | None) -> Resolution:
    """Which variable(s) take effect for the CUDA allocator on this torch version."""
    behaviour = env_behaviour(version)
    both = cuda_value is not None and new_value is not None
    if behaviour.era == "unknown":
        read = [v for v, val in ((CUDA_VAR, cuda_value), (NEW_VAR, new_value)) if val is not None]
        return Resolution(None, read, [], behaviour.summary)
    if behaviour.era in ("legacy", "split"):
        ignored = [NEW_VAR] if new_value is not None else []
        read = [CUDA_VAR] if cuda_value is not None else []
        return Resolution(cuda_value, read, ignored, behaviour.summary)
    if behaviour.era == "alias":
        if cuda_value is not None:
            return Resolution(cuda_value, [CUDA_VAR], [NEW_VAR] if new_value is not None else [],
                              behaviour.summary)
        return Resolution(new_value, [NEW_VAR] if new_value is not None else [], [],
                          behaviour.summary)
    # unified (2.10): the shared parser takes PYTORCH_ALLOC_CONF first; the CUDA-specific
    # parser takes PYTORCH_CUDA_ALLOC_CONF first, even when empty (inferred from the source).
    if not both:
        only = cuda_value if cuda_value is not None else new_value
        read = [CUDA_VAR] if cuda_value is not None else (
            [NEW_VAR] if new_value is not None else [])
        return Resolution(only, read, [], behaviour.summary)
    assert cuda_value is not None and new_value is not None
    common = [(k, v) for k, v in pairs(analyse(new_value)) if scope(k) == "common"]
    specific = [(k, v) for k, v in pairs(analyse(cuda_value)) if scope(k) != "common"]
    explanation = (f"{behaviour.summary}: the shared keys come from {NEW_VAR}, the CUDA-only "
                   f"keys (backend, pinned_*, ...) from {CUDA_VAR}")
    return Resolution(render(common + specific), [NEW_VAR, CUDA_VAR], [], explanation)


# ------------------------------------------------------------------------------ lines to paste


def variables_to_set(version: Release | None) -> tuple[str, ...]:
    """The name(s) to set so a string reaches the CUDA allocator of this torch release.

    Up to 2.8 only the old name matters; from 2.9 on (and when the version is unknown) both,
    to the same string, which every release reads the same way.
    """
    if env_behaviour(version).era == "legacy":
        return (CUDA_VAR,)
    return (NEW_VAR, CUDA_VAR)


def alloc_conf_variables(torch_version: str | None) -> tuple[str, ...]:
    """The variable(s) to set so the allocator setting takes effect for ``torch_version``."""
    return variables_to_set(torch_release(torch_version))


def shell_quote(text: str) -> str:
    """Always single-quoted, so ``>`` and ``[`` in a configuration never reach the shell."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def export_line(conf: str, version: Release | None) -> str:
    """The line to paste so that ``conf`` reaches the CUDA allocator of this torch release.

    ``export PYTORCH_ALLOC_CONF='...' PYTORCH_CUDA_ALLOC_CONF='...'`` (the old name alone up to
    2.8); an empty ``conf`` unsets both names.
    """
    if not conf:
        return f"unset {NEW_VAR} {CUDA_VAR}"
    quoted = shell_quote(redact_settings(conf))
    return "export " + " ".join(f"{name}={quoted}" for name in variables_to_set(version))


def alloc_conf_export(setting: str, torch_version: str | None) -> str:
    """:func:`export_line` for a torch version string such as ``2.9.1+cu128``."""
    return export_line(setting, torch_release(torch_version))


def fragmentation_setting(torch_version: str | None) -> tuple[str, str]:
    """The allocator option (key, value) that fights fragmentation on this torch.

    Expandable segments from 2.1 (and when the version is unknown); before 2.1 the only lever
    is to stop large blocks from being split.
    """
    if supports_expandable_segments(torch_version) is False:
        return ("max_split_size_mb", "128")
    return ("expandable_segments", "True")


def fragmentation_remedy(torch_version: str | None) -> str:
    """The allocator setting that fights fragmentation on this torch, as lines to paste."""
    key, value = fragmentation_setting(torch_version)
    if key == "max_split_size_mb":
        return (
            f"{alloc_conf_export(f'{key}:{value}', torch_version)}\n"
            f"(torch before 2.1 has no expandable_segments; tune {value} to just above the size "
            "of your largest frequent allocation, or upgrade torch)"
        )
    return alloc_conf_export(f"{key}:{value}", torch_version)
