"""PyTorch allocator configuration: validity, whether it takes effect, and what to set.

All judgments are for the torch this scan found (``scan --pid``: the one that process loaded);
what torch accepts and reads lives in :mod:`gpu_audit.knowledge.allocator`. Remedies are lines to
paste; from torch 2.9 on they set both variable names to the same string, which every release
reads the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from gpu_audit.config import Policy
from gpu_audit.knowledge import allocator as ac
from gpu_audit.knowledge.allocator import CUDA_VAR, NEW_VAR, NO_CACHING_VAR
from gpu_audit.model import AllocatorConfig, Finding, Scan, Severity
from gpu_audit.redact import redact_settings, redact_text
from gpu_audit.rules import rule
from gpu_audit.units import GIB, Release, release_text, torch_release


def judged_torch_version(scan: Scan) -> str | None:
    """The torch version the allocator settings will meet."""
    alloc = scan.allocator
    if alloc is not None and alloc.torch_version:
        return alloc.torch_version
    probe = scan.torch_probe
    return probe.torch_version if probe is not None else None


def _allocator(scan: Scan) -> AllocatorConfig | None:
    """The scan's allocator settings with their secrets masked (:func:`redact_settings`).

    The strings are judged as they will be shown, so a token pasted into them reaches no
    finding's title, detail, evidence or export line; the mask reads as one more bad value.
    """
    alloc = scan.allocator
    if alloc is None:
        return None
    return msgspec.structs.replace(alloc,
                                   pytorch_cuda_alloc_conf=_masked(alloc.pytorch_cuda_alloc_conf),
                                   pytorch_alloc_conf=_masked(alloc.pytorch_alloc_conf))


def _masked(value: str | None) -> str | None:
    return None if value is None else redact_settings(value)


def _variables(alloc: AllocatorConfig) -> list[tuple[str, str]]:
    return [(name, value) for name, value in ((CUDA_VAR, alloc.pytorch_cuda_alloc_conf),
                                              (NEW_VAR, alloc.pytorch_alloc_conf))
            if value is not None]


def _caching_disabled(alloc: AllocatorConfig) -> bool:
    return NO_CACHING_VAR in alloc.environment


def effective_configs(scan: Scan) -> list[tuple[str, ac.ParsedConf]]:
    """(where it comes from, parsed) for the configuration(s) that reach the CUDA allocator.

    With a known torch version that is one string; with an unknown one, each variable set.
    """
    alloc = _allocator(scan)
    if alloc is None or not _variables(alloc):
        return []  # nothing to parse (and the parser is not even loaded)
    version_str = judged_torch_version(scan)
    version = torch_release(version_str)
    resolution = ac.resolve(alloc.pytorch_cuda_alloc_conf, alloc.pytorch_alloc_conf, version)
    if version is None:
        return [(name, ac.analyse(value, None)) for name, value in _variables(alloc)]
    if resolution.text is None:
        return []
    return [(" + ".join(resolution.read) or CUDA_VAR, ac.analyse(resolution.text, version_str))]


def _issue_record(text: str, issue: ac.ConfIssue) -> dict[str, object]:
    return {"column": issue.start + 1, "severity": issue.severity, "code": issue.code,
            "message": issue.message, "excerpt": issue.excerpt(text)}


@rule("alloc-conf-invalid")
def alloc_conf_invalid(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The allocator configuration string is malformed, or a value is out of range.

    Some mistakes torch accepts without a word: `max_split_size_mb:100x` reads as 100, a negative
    size wraps around to "no limit", and a key given twice keeps its last value.

    Checked, with the column of each problem: the `key:value,key:value` syntax and bracketed
    lists; unknown keys, with the key you probably meant; booleans, which must be exactly `True`
    or `False`; each key's type and range; keys newer than the installed torch; and
    `max_split_size_mb`'s minimum for that version (above 20 up to 2.9, at least 20 from 2.10,
    at least `large_segment_size_mb` where that is set). With `scan --torch`, torch's own
    verdict on the string is added.

    Severity: error when torch refuses or misreads a string it reads; warning for strings it
    accepts but not as written, or for problems in a variable this torch does not read.

    Why it matters: PyTorch parses `PYTORCH_CUDA_ALLOC_CONF` / `PYTORCH_ALLOC_CONF` when the first
    CUDA tensor is allocated, so a bad string kills the run after the model has loaded: with a
    `ValueError` ("Unrecognized key", "max_split_size_mb too small", "Expected 'True' or
    'False'"), or with an internal assert ("Index out of bounds in ConfigTokenizer") for a broken
    syntax.

    Example: `PYTORCH_CUDA_ALLOC_CONF is invalid: unknown key 'expandable_segment'` (evidence:
    `issues`, each with its column).

    Fix: the remedy is the repaired string, ready to paste (an `export` line).
    """
    alloc = _allocator(scan)
    probe = scan.torch_probe
    torch_says = probe.allocator_error if probe is not None else None
    torch_says = redact_text(torch_says) if torch_says else torch_says  # a saved scan's too
    if alloc is None or not (_variables(alloc) or torch_says):
        return
    version_str = judged_torch_version(scan)
    version = torch_release(version_str)
    resolution = ac.resolve(alloc.pytorch_cuda_alloc_conf, alloc.pytorch_alloc_conf, version)
    reported_error = False
    for name, value in _variables(alloc):
        parsed = ac.analyse(value, version_str)
        if not parsed.issues:
            continue
        read = version is None or name in resolution.read
        fatal = bool(parsed.errors) and read
        reported_error = reported_error or fatal
        first = (parsed.errors or parsed.warnings)[0]
        fixed = ac.repaired(parsed)
        problems = "; ".join(ac.describe(i) for i in parsed.issues)
        unread = "" if read else (f" torch {version_str} does not read {name}, so this only "
                                  "matters once it does.")
        for_torch = f"torch {version_str}" if version_str else "any torch version"
        yield Finding(
            subject="env",
            title=f"{name} {'is invalid' if parsed.errors else 'is not read as written'}: "
                  f"{first.message}",
            detail=f"{name}={value!r}, judged for {for_torch}: {problems}.{unread}",
            remedy=ac.export_line(fixed, version),
            evidence={
                "variable": name,
                "value": value,
                "torch_version": version_str,
                "read_by_torch": read,
                "issues": [_issue_record(value, i) for i in parsed.issues],
                "repaired": fixed,
                **({"torch_says": torch_says} if torch_says else {}),
            },
            severity=None if fatal else Severity.WARNING,
        )
    if torch_says and not reported_error:
        effective = resolution.text if resolution.text is not None else (
            alloc.pytorch_cuda_alloc_conf or alloc.pytorch_alloc_conf or "")
        yield Finding(
            subject="env",
            title=f"torch refuses the allocator configuration: {torch_says}",
            detail=(f"Asked to parse {effective!r}, torch {probe.torch_version or ''} raised "
                    f"{torch_says!r}. The run would fail at its first CUDA allocation."),
            remedy=(f"Fix or remove the string; to run without it: "
                    f"{ac.export_line('', version)}"),
            evidence={"value": effective, "torch_version": probe.torch_version,
                      "torch_says": torch_says},
        )


@rule("alloc-conf-ignored")
def alloc_conf_ignored(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """An allocator setting is set but will not reach the CUDA allocator.

    The variable's name moved between releases, and the settings only help if torch reads them:

    - up to torch 2.8 only `PYTORCH_CUDA_ALLOC_CONF` is read; `PYTORCH_ALLOC_CONF` alone does
      nothing;
    - torch 2.9 prints "PYTORCH_CUDA_ALLOC_CONF is deprecated, use PYTORCH_ALLOC_CONF instead",
      yet its CUDA allocator still reads only the old name: following the warning silently
      turns the settings off (pytorch/pytorch#183387);
    - from torch 2.11 the old name is read first even when it is set to an empty string, which
      then hides `PYTORCH_ALLOC_CONF` (seen on 2.11.0 with a GPU);
    - `PYTORCH_NO_CUDA_MEMORY_CACHING` (any value) bypasses the caching allocator, and with it
      every setting (reported once, by `caching-allocator-disabled`);
    - expandable segments are not supported on Windows (torch warns "not supported on this
      platform" and carries on without them).

    When torch is not installed where gpu-audit runs, the finding says what each version would
    do.

    Why it matters: the run goes ahead without the settings someone chose against fragmentation or
    out-of-memory errors, and nothing says so.

    Example: `PYTORCH_ALLOC_CONF is set alone; torch 2.9.0 ignores it for CUDA` (evidence:
    `torch_version`, both variables, `ignored`).

    Fix: the remedy sets both names to the same string, which every version reads.
    """
    alloc = _allocator(scan)
    if alloc is None or not _variables(alloc):
        return
    version_str = judged_torch_version(scan)
    version = torch_release(version_str)
    behaviour = ac.env_behaviour(version)
    cuda_value, new_value = alloc.pytorch_cuda_alloc_conf, alloc.pytorch_alloc_conf
    resolution = ac.resolve(cuda_value, new_value, version)
    evidence = {"torch_version": version_str, CUDA_VAR: cuda_value, NEW_VAR: new_value}

    if new_value and cuda_value is None and behaviour.era in ("legacy", "split", "unknown"):
        severity = Severity.INFO if behaviour.era == "unknown" else None
        why = behaviour.summary if behaviour.era != "unknown" else (
            f"torch is not installed where gpu-audit runs; torch up to 2.9 ignores {NEW_VAR} "
            f"for CUDA (2.9 even while warning about the old name)")
        yield Finding(
            subject="env",
            title=f"{NEW_VAR} is set alone; torch {version_str or '<= 2.9'} ignores it for CUDA",
            detail=f"{why}. {NEW_VAR}={new_value!r} has no effect on the CUDA allocator.",
            remedy=ac.export_line(new_value, version),
            evidence={**evidence, "ignored": [NEW_VAR]},
            severity=severity,
        )
    if (behaviour.era == "alias" and cuda_value is not None and not ac.normalised(cuda_value)
            and ac.normalised(new_value)):
        yield Finding(
            subject="env",
            title=f"an empty {CUDA_VAR} hides {NEW_VAR} from torch {version_str}",
            detail=(f"{behaviour.summary}. {CUDA_VAR} is set but empty, so "
                    f"{NEW_VAR}={new_value!r} is never read."),
            remedy=ac.export_line(new_value or "", version),
            evidence={**evidence, "ignored": [NEW_VAR]},
        )
    if behaviour.era == "unified" and cuda_value is not None and new_value is not None:
        cuda_only = [k for k in ac.analyse(new_value).key_names() if ac.KEYS.get(k, None)
                     and ac.KEYS[k].scope == "cuda" and k not in ac.analyse(cuda_value).key_names()]
        if cuda_only:
            yield Finding(
                subject="env",
                title=f"torch {version_str} takes {', '.join(cuda_only)} from {CUDA_VAR}, "
                      f"not {NEW_VAR}",
                detail=(f"{resolution.explanation}. {', '.join(cuda_only)} set only in "
                        f"{NEW_VAR} is ignored while {CUDA_VAR} is set (inferred from torch's "
                        "source; not confirmed on hardware)."),
                remedy=ac.export_line(new_value, version),
                evidence={**evidence, "ignored_keys": cuda_only},
            )
    if scan.host.os == "Windows":
        for where, parsed in effective_configs(scan):
            if parsed.value("expandable_segments") is True:
                yield Finding(
                    subject="env",
                    title="expandable segments are not supported on Windows",
                    detail=(f"{where} enables expandable_segments, but torch on Windows warns "
                            "\"expandable_segments not supported on this platform\" and runs "
                            "without them."),
                    remedy=ac.export_line(
                        ac.with_settings(parsed.text, {"expandable_segments": None}), version),
                    evidence={**evidence, "os": scan.host.os},
                )
                break


@rule("alloc-conf-deprecated-name")
def alloc_conf_deprecated_name(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """torch will print "PYTORCH_CUDA_ALLOC_CONF is deprecated, use PYTORCH_ALLOC_CONF instead".

    torch {alloc_conf_warning_releases} print this once per process when only the old name is
    set. The warning is harmless: the settings still apply, and a job that dies next to it died
    of something else. From {alloc_conf_alias_release} the old name is a documented alias again
    and no warning is printed.

    Why it matters: do not simply rename the variable: torch 2.9's CUDA allocator reads only the
    old name, so `PYTORCH_ALLOC_CONF` alone silently turns the settings off there.

    Example: `torch 2.10.0 warns that PYTORCH_CUDA_ALLOC_CONF is deprecated`.

    Fix: set both names to the same string: that silences the warning and works on every version.
    """
    alloc = _allocator(scan)
    # Only the old name set: with PYTORCH_ALLOC_CONF present (even empty) torch finds it first.
    if alloc is None or alloc.pytorch_cuda_alloc_conf is None or (
            alloc.pytorch_alloc_conf is not None):
        return
    version_str = judged_torch_version(scan)
    version = torch_release(version_str)
    if not ac.env_behaviour(version).warns_on_old_name:
        return
    value = alloc.pytorch_cuda_alloc_conf
    yield Finding(
        subject="env",
        title=f"torch {version_str} warns that {CUDA_VAR} is deprecated",
        detail=(f"Only {CUDA_VAR} is set; torch {version_str} prints a deprecation warning once "
                f"per process. The settings still apply. Renaming the variable would break torch "
                f"2.9, whose CUDA allocator reads only {CUDA_VAR}; set both names instead."),
        remedy=ac.export_line(value, version),
        evidence={"torch_version": version_str, CUDA_VAR: value},
    )


def _winner(version: Release | None) -> str:
    era = ac.env_behaviour(version).era
    if era in ("legacy", "split", "alias"):
        return CUDA_VAR
    if era == "unified":
        return f"{NEW_VAR} for the shared keys, {CUDA_VAR} for the CUDA-only keys"
    return (f"{CUDA_VAR} on torch <= 2.9 and >= {release_text(ac.ALIAS_RELEASE)}; {NEW_VAR} "
            "for the shared keys on 2.10")


@rule("alloc-conf-conflict")
def alloc_conf_conflict(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Both variable names are set, to different strings.

    Which one wins depends on the torch version: up to 2.9 the CUDA allocator reads only
    `PYTORCH_CUDA_ALLOC_CONF`; 2.10 takes the shared keys (`max_split_size_mb`,
    `expandable_segments`, `garbage_collection_threshold`, `roundup_power2_divisions`, ...) from
    `PYTORCH_ALLOC_CONF` and the CUDA-only keys (`backend`, `pinned_*`, ...) from
    `PYTORCH_CUDA_ALLOC_CONF` (read from its source); from 2.11 `PYTORCH_CUDA_ALLOC_CONF` wins
    outright, even when empty (2.11.0 checked on a GPU). The finding
    names the winner for the installed torch and shows what takes effect.

    Why it matters: some of the settings are silently not applied, and a torch upgrade can change
    which ones behind your back.

    Example: `PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF differ; torch 2.11.0 uses
    PYTORCH_CUDA_ALLOC_CONF` (evidence: `winner`, `effective`).

    Fix: the remedy sets both names to the string that takes effect, so an upgrade cannot change
    it.
    """
    alloc = _allocator(scan)
    if alloc is None or alloc.pytorch_cuda_alloc_conf is None or alloc.pytorch_alloc_conf is None:
        return
    cuda_value, new_value = alloc.pytorch_cuda_alloc_conf, alloc.pytorch_alloc_conf
    if ac.normalised(cuda_value) == ac.normalised(new_value):
        return
    version_str = judged_torch_version(scan)
    version = torch_release(version_str)
    resolution = ac.resolve(cuda_value, new_value, version)
    effective = resolution.text if resolution.text is not None else cuda_value
    winner = _winner(version)
    takes = (f"What takes effect: {resolution.text!r}." if resolution.text is not None
             else "torch is not installed here, so which one takes effect is unknown.")
    yield Finding(
        subject="env",
        title=f"{CUDA_VAR} and {NEW_VAR} differ; torch {version_str or '(unknown)'} uses {winner}",
        detail=f"{CUDA_VAR}={cuda_value!r}, {NEW_VAR}={new_value!r}. {takes}",
        remedy=ac.export_line(effective, version),
        evidence={"torch_version": version_str, CUDA_VAR: cuda_value, NEW_VAR: new_value,
                  "winner": winner, "effective": resolution.text},
    )


@rule("alloc-conf-risky-combination")
def alloc_conf_risky_combination(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Allocator options that work against each other, or do nothing together.

    - `expandable_segments:True` with `max_split_size_mb`: expandable segments already avoid the
      fragmentation `max_split_size_mb` fights, and the limit still stops requests below it from
      reusing free expandable blocks at or above it, so memory is mapped anew instead of reused.
    - `garbage_collection_threshold` without a per-process memory fraction: the collector only
      runs when `torch.cuda.set_per_process_memory_fraction()` (or the `per_process_memory_fraction`
      key of newer torch) has set one; otherwise the threshold does nothing.
    - `garbage_collection_threshold` with expandable segments: it only reclaims whole,
      non-expandable blocks, so it never finds anything to collect.
    - `backend:cudaMallocAsync` with options of the native allocator (`max_split_size_mb`,
      `expandable_segments`, `garbage_collection_threshold`, `roundup_power2_divisions`, ...):
      the driver's pool allocator ignores them, with a warning.

    Why it matters: the run pays for a setting that does nothing or wastes memory, while whoever
    set it believes the allocator is tuned.

    Example: `expandable_segments with max_split_size_mb` (evidence: `variable`, `value`,
    `max_split_size_mb`).

    Fix: drop the option that does not help; the remedy is the string without it, as an `export`
    line.
    """
    version_str = judged_torch_version(scan)
    version = torch_release(version_str)
    for where, parsed in effective_configs(scan):
        text = parsed.text
        expandable = parsed.value("expandable_segments") is True
        backend = parsed.value("backend", "native")
        base = {"variable": where, "value": text, "torch_version": version_str}
        if backend == "cudaMallocAsync":
            native = [k for k in parsed.key_names() if ac.KEYS.get(k) and ac.KEYS[k].native_only]
            if native:
                yield Finding(
                    subject="env",
                    title=f"backend:cudaMallocAsync ignores {', '.join(native)}",
                    detail=(f"{where}={text!r}: the cudaMallocAsync backend hands allocation to "
                            f"the CUDA driver's pool; {', '.join(native)} tune the native "
                            "caching allocator and are ignored (torch warns at start-up)."),
                    remedy=ac.export_line(
                        ac.with_settings(text, {k: None for k in native}), version),
                    evidence={**base, "ignored_keys": native},
                )
            continue
        if expandable and parsed.has("max_split_size_mb"):
            yield Finding(
                subject="env",
                title="expandable_segments with max_split_size_mb",
                detail=(f"{where}={text!r}: with expandable segments, max_split_size_mb no "
                        "longer limits splitting but still keeps smaller requests from reusing "
                        "large free blocks, so memory is mapped anew instead of reused. "
                        "Expandable segments alone usually cure fragmentation."),
                remedy=ac.export_line(
                    ac.with_settings(text, {"max_split_size_mb": None}), version),
                evidence={**base, "max_split_size_mb": parsed.value("max_split_size_mb")},
            )
        if parsed.has("garbage_collection_threshold"):
            threshold = parsed.value("garbage_collection_threshold")
            without = ac.export_line(
                ac.with_settings(text, {"garbage_collection_threshold": None}), version)
            if expandable:
                yield Finding(
                    subject="env",
                    title="garbage_collection_threshold has nothing to collect with "
                          "expandable segments",
                    detail=(f"{where}={text!r}: the collector only frees whole, non-expandable "
                            "cached blocks; with expandable segments there are none."),
                    remedy=without,
                    evidence={**base, "garbage_collection_threshold": threshold},
                )
            elif not parsed.has("per_process_memory_fraction"):
                yield Finding(
                    subject="env",
                    title="garbage_collection_threshold without a memory fraction does nothing",
                    detail=(f"{where}={text!r}: the threshold is a share of the per-process "
                            "memory fraction, and the collector never runs unless one is set. "
                            "Keep it only if your program calls "
                            "torch.cuda.set_per_process_memory_fraction(...)."),
                    remedy=without,
                    evidence={**base, "garbage_collection_threshold": threshold},
                )


@rule("alloc-conf-advice")
def alloc_conf_advice(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """What to set first against fragmentation: expandable segments, before max_split_size_mb.

    Given before a run, when a GPU is small (at most `small_gpu_gib`, {small_gpu_gib} GiB by
    default: every MiB lost to fragmentation counts there), or when `max_split_size_mb` is set
    without expandable segments. Fragmentation measured in a running process is reported by
    `allocator-fragmentation`. Not given on Windows (no expandable segments there), on torch
    older than 2.1 (no such option), with the cudaMallocAsync backend, or when expandable
    segments are already on.

    Why it matters: PyTorch's own out-of-memory message recommends expandable segments when
    reserved but unallocated memory is large; its documentation calls `max_split_size_mb` a last
    resort, paid for with more cudaMalloc/cudaFree traffic.

    Example: `try expandable segments first against fragmentation` - small GPU: GPU 0 (11.6 GiB)
    (evidence: `reasons`, `small_gpus`, `suggested`).

    Fix: the remedy exports the current string with `expandable_segments:True` added and
    `max_split_size_mb` removed.
    """
    alloc = _allocator(scan)
    if alloc is None or scan.host.os == "Windows" or _caching_disabled(alloc):
        return
    version_str = judged_torch_version(scan)
    version = torch_release(version_str)
    configs = effective_configs(scan)
    small = [g for g in scan.gpus
             if g.memory_total_bytes is not None
             and g.memory_total_bytes <= policy.small_gpu_gib * GIB]
    if not configs and not small:
        return  # no setting to improve on and no small GPU: nothing to advise
    if ac.supports_expandable_segments(version_str) is False:
        return
    if any(p.value("expandable_segments") is True or p.value("backend") == "cudaMallocAsync"
           for _, p in configs):
        return
    current = configs[0][1] if configs else ac.analyse("")
    reasons: list[str] = []
    if small:
        names = ", ".join(f"GPU {g.index} ({g.memory_total_bytes / GIB:.1f} GiB)" for g in small)
        reasons.append(f"small GPU: {names}")
    if current.has("max_split_size_mb"):
        reasons.append(f"max_split_size_mb:{current.value('max_split_size_mb')} is set, which "
                       "PyTorch documents as a last resort")
    if not reasons:
        return
    suggestion = ac.with_settings(current.text, {"expandable_segments": "True",
                                                 "max_split_size_mb": None})
    yield Finding(
        subject="env",
        title="try expandable segments first against fragmentation",
        detail=("; ".join(reasons) + ". Expandable segments let one segment per stream grow "
                "instead of leaving many part-used segments; try them before "
                "max_split_size_mb, which only helps at the cost of more cudaMalloc traffic."),
        remedy=ac.export_line(suggestion, version),
        evidence={"torch_version": version_str, "reasons": reasons,
                  "small_gpus": [g.index for g in small], "small_gpu_gib": policy.small_gpu_gib,
                  "suggested": suggestion},
    )
