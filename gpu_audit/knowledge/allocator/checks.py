"""Judging a configuration string for a torch release, and repairing it.

torch itself is an unreliable judge of a bad string: depending on the mistake it raises a
``ValueError`` at the first CUDA allocation, trips an internal assert ("Index out of bounds in
ConfigTokenizer"), or silently reads ``100x`` as 100. :func:`analyse` therefore applies a strict
grammar and sorts every problem into an ``error`` (torch refuses the string, or the syntax is
broken enough that what it reads is anyone's guess) or a ``warning`` (torch accepts it but not as
written). :func:`repaired` turns the verdict into a string torch accepts.
"""

from __future__ import annotations

from gpu_audit.knowledge.allocator.grammar import (
    AllocConfError,
    ConfIssue,
    ParsedConf,
    Parser,
    Setting,
    Token,
    Value,
    pairs,
    render,
    render_value,
)
from gpu_audit.knowledge.allocator.keys import (
    KEYS,
    LARGE_BUFFER_MB,
    KeySpec,
    split_minimum,
    suggest_key,
)
from gpu_audit.knowledge.allocator.values import VALUE_CHECKS
from gpu_audit.units import Release, release_text, torch_release


def analyse(text: str, torch_version: str | None = None) -> ParsedConf:
    """Parse and validate ``text`` for ``torch_version`` (None: judge for every version).

    Never raises: every problem becomes a :class:`ConfIssue` with its position.
    """
    parser = Parser(text)
    parser.parse()
    issues = list(parser.issues)
    version = torch_release(torch_version)
    settings: list[Setting] = []
    seen: dict[str, Setting] = {}
    for key_token, value_token, end in parser.entries:
        setting, found = _check_entry(key_token, value_token, end, version, torch_version)
        issues.extend(found)
        if setting is None:
            continue
        if setting.key in seen:
            issues.append(ConfIssue(
                "duplicate",
                f"{setting.key} is set twice; torch keeps the last value ({setting.raw})",
                key_token.start, end, "warning", key=setting.key))
        seen[setting.key] = setting
        settings.append(setting)
    issues.extend(_check_across(settings, version, torch_version))
    issues.sort(key=lambda i: (i.start, i.end))
    return ParsedConf(text=text, settings=settings, issues=issues, torch_version=torch_version)


def parse(text: str, torch_version: str | None = None, variable: str | None = None) -> ParsedConf:
    """Like :func:`analyse`, but the first error raises :class:`AllocConfError`."""
    parsed = analyse(text, torch_version)
    if parsed.errors:
        raise AllocConfError(text, parsed.errors[0], variable)
    return parsed


def _check_entry(
    key_token: Token,
    value_token: Value,
    end: int,
    version: Release | None,
    torch_version: str | None,
) -> tuple[Setting | None, list[ConfIssue]]:
    key = key_token.text
    raw = render_value(value_token)
    spec = KEYS.get(key)
    if spec is None:
        suggestion = suggest_key(key)
        hint = f" (did you mean {suggestion!r}?)" if suggestion else ""
        return None, [ConfIssue(
            "unknown-key",
            f"unknown allocator option {key!r}{hint}; torch refuses the whole string on CUDA "
            "builds (\"Unrecognized key\")",
            key_token.start, key_token.end, key=key, fix=None if suggestion is None else "")]
    issues = _version_issues(spec, key_token, version, torch_version)
    if isinstance(value_token, list) and not value_token:
        issues.append(ConfIssue("lenient", f"the list for {key} is empty and changes nothing",
                                key_token.start, end, "warning", key=key, fix=""))
        return Setting(key, raw, key_token.start, end, None), issues
    if isinstance(value_token, list) and spec.kind != "divisions":
        start = value_token[0][0].start if value_token else key_token.end
        issues.append(ConfIssue("bad-value", f"{key} takes a single value, not a list",
                                start, end, key=key, fix=""))
        return Setting(key, raw, key_token.start, end, None), issues
    check = VALUE_CHECKS[spec.kind]
    value, found = check(spec, value_token)
    issues.extend(found)
    return Setting(key, raw, key_token.start, end, value), issues


def _version_issues(spec: KeySpec, key_token: Token, version: Release | None,
                    torch_version: str | None) -> list[ConfIssue]:
    if version is None or spec.since is None or version >= spec.since:
        return []
    since = release_text(spec.since)
    if spec.since_confirmed:
        return [ConfIssue(
            "version", f"{spec.name} needs torch {since} or newer; torch {torch_version} "
            "refuses it as an unknown option", key_token.start, key_token.end, key=spec.name,
            fix="")]
    return [ConfIssue(
        "version", f"{spec.name} is probably unknown to torch {torch_version} (it first "
        f"appears around {since}); if so, torch refuses the whole string",
        key_token.start, key_token.end, "warning", key=spec.name)]


def _check_across(settings: list[Setting], version: Release | None,
                  torch_version: str | None) -> list[ConfIssue]:
    """Rules that involve more than one key, or the torch version: the split-size floors."""
    latest: dict[str, Setting] = {s.key: s for s in settings}
    large = latest.get("large_segment_size_mb")
    large_mb = large.value if large is not None and isinstance(large.value, int) else None
    floor = split_minimum(version, large_mb)
    issues: list[ConfIssue] = []
    for key in ("max_split_size_mb", "max_non_split_rounding_mb"):
        setting = latest.get(key)
        if setting is None or not isinstance(setting.value, int):
            continue
        number = setting.value
        value_start = setting.end - len(setting.raw)
        if version is not None and version < (2, 1):
            if number < LARGE_BUFFER_MB:
                issues.append(ConfIssue(
                    "too-small", f"torch {torch_version} silently raises {key} {number} to "
                    f"{LARGE_BUFFER_MB}", value_start, setting.end, "warning", key=key,
                    fix=str(LARGE_BUFFER_MB)))
            continue
        assert floor is not None
        if number >= floor:
            continue
        if version is None:
            if number == LARGE_BUFFER_MB:
                issues.append(ConfIssue(
                    "too-small", f"{key} 20 is accepted from torch 2.10 but refused by 2.1-2.9 "
                    "(\"must be > 20\"); 21 works on every version", value_start, setting.end,
                    "warning", key=key, fix="21"))
            else:
                issues.append(ConfIssue(
                    "too-small", f"{key} {number} is too small for every torch version "
                    "(2.1-2.9 need more than 20, 2.10+ at least 20)", value_start, setting.end,
                    key=key, fix="21"))
            continue
        rule = "> 20" if version < (2, 10) else f">= {floor}"
        because = (f" (large_segment_size_mb is {large_mb})"
                   if large_mb and version >= (2, 10) and floor > LARGE_BUFFER_MB else "")
        issues.append(ConfIssue(
            "too-small", f"{key} {number} is too small: torch {torch_version} requires {rule}"
            f"{because} (\"too small, must be {rule}\")", value_start, setting.end, key=key,
            fix=str(floor)))
    return issues


# ---------------------------------------------------------------------------------- repairing


def repaired(parsed: ParsedConf) -> str:
    """A string torch accepts that keeps what ``parsed`` meant: fixes applied, the rest dropped.

    A known fix replaces a value ("" drops the key); an error without one drops the key. Fixes
    for errors win over fixes for warnings on the same key.
    """
    fixes: dict[str, str] = {}
    for severity in ("warning", "error"):
        for issue in parsed.issues:
            if issue.key is None or issue.severity != severity:
                continue
            if issue.fix is not None:
                fixes[issue.key] = issue.fix
            elif severity == "error":
                fixes[issue.key] = ""
    renamed: dict[str, str] = {}
    for issue in parsed.issues:
        if issue.code == "unknown-key" and issue.key and (target := suggest_key(issue.key)):
            renamed[issue.key] = target
    kept: list[tuple[str, str]] = []
    for setting in parsed.settings:
        fix = fixes.get(setting.key)
        if fix == "":
            continue
        kept.append((setting.key, fix if fix is not None else setting.raw))
    for wrong, right in renamed.items():
        raw = _raw_of_unknown(parsed.text, wrong)
        if raw is not None and right not in dict(kept):
            fixed = repaired(analyse(f"{right}:{raw}", parsed.torch_version))
            kept.extend(pairs(analyse(fixed)))
    return render(kept)


def _raw_of_unknown(text: str, key: str) -> str | None:
    parser = Parser(text)
    parser.parse()
    for key_token, value_token, _ in parser.entries:
        if key_token.text == key:
            return render_value(value_token)
    return None


def with_settings(text: str, updates: dict[str, str | None]) -> str:
    """``text`` with keys set (value) or removed (None); other usable entries keep their order.

    Entries torch cannot use (unknown keys, broken syntax) are dropped; for a string a running
    torch accepted, :func:`~.grammar.with_setting` keeps every entry as written.
    """
    kept = [(k, v) for k, v in pairs(analyse(text)) if k not in updates]
    kept.extend((k, v) for k, v in updates.items() if v is not None)
    return render(kept)
