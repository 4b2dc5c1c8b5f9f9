"""PyTorch allocator configuration strings: parse, validate by torch version, explain, repair.

``PYTORCH_ALLOC_CONF`` / ``PYTORCH_CUDA_ALLOC_CONF`` hold ``key:value`` pairs separated by commas;
list values sit in brackets (``roundup_power2_divisions:[256:1,512:2,>:4]``); booleans are exactly
``True``/``False``. torch splits the string at ``,`` ``:`` ``[`` ``]`` and drops whitespace
everywhere, even inside a word, and so does :func:`tokenize`, so every position reported here is
an offset into the user's own string.

torch itself is an unreliable judge of a bad string: depending on the mistake it raises a
``ValueError`` at the first CUDA allocation, trips an internal assert ("Index out of bounds in
ConfigTokenizer"), or silently reads ``100x`` as 100. :func:`analyse` therefore applies a strict
grammar and sorts every problem into an ``error`` (torch refuses the string, or the syntax is
broken enough that what it reads is anyone's guess) or a ``warning`` (torch accepts it but not as
written). Facts and their sources: ``shared/reference/pytorch-allocator.md`` §3, checked against
torch 2.13.0 where a CPU build can show them.

Which variable a torch version reads moved between releases (:func:`env_behaviour`): up to 2.8
only ``PYTORCH_CUDA_ALLOC_CONF``; 2.9 warns that this name is deprecated while its CUDA
allocator still reads only it; 2.10 and 2.11 read ``PYTORCH_ALLOC_CONF`` first; from 2.12 the old
name is an alias again and is read first, even when empty. Setting both names to the same string
works on every version, which is what :func:`export_line` suggests.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.errors import InputError

CUDA_VAR = "PYTORCH_CUDA_ALLOC_CONF"
NEW_VAR = "PYTORCH_ALLOC_CONF"
SEPARATORS = ",:[]"
UINT64_MAX = 2**64 - 1
LARGE_BUFFER_MB = 20  # kLargeBuffer: the floor for max_split_size_mb before large_segment_size_mb

Version = tuple[int, int]  # (major, minor); patch releases never changed the allocator config


def torch_minor(version: str | None) -> Version | None:
    """``"2.9.1+cu128"`` -> (2, 9); ``"2.12.0.dev20260301"`` -> (2, 12); ``None`` when unknown."""
    if not version:
        return None
    match = re.match(r"\s*v?(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def version_text(version: Version) -> str:
    return f"{version[0]}.{version[1]}"


# ------------------------------------------------------------------------------------- errors


class AllocConfError(InputError):
    """A configuration string torch would refuse or misread; names the position and the fix."""

    def __init__(self, text: str, issue: ConfIssue, variable: str | None = None) -> None:
        self.text = text
        self.issue = issue
        self.variable = variable
        where = f"{variable}={text!r}" if variable else repr(text)
        super().__init__(f"{where}: column {issue.start + 1}: {issue.message}")


@dataclass(frozen=True)
class ConfIssue:
    """One problem in a configuration string. ``start``/``end`` are offsets into the string."""

    code: str  # "syntax", "unknown-key", "bad-value", "too-small", "version", "duplicate", ...
    message: str
    start: int
    end: int
    severity: str = "error"  # "error": torch refuses or misreads it; "warning": accepted, dubious
    key: str | None = None
    fix: str | None = None  # the replacement value for ``key``; "" means drop the key

    def excerpt(self, text: str) -> str:
        """Two lines: the string and a caret under the offending part."""
        width = max(1, self.end - self.start)
        return f"{text}\n{' ' * self.start}{'^' * width}"


# ------------------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int  # exclusive

    @property
    def is_separator(self) -> bool:
        return self.text in SEPARATORS


def tokenize(text: str) -> list[Token]:
    """torch's tokenizer: each of ``,:[]`` is a token; whitespace is dropped, even mid-word."""
    tokens: list[Token] = []
    word: list[str] = []
    word_start = word_end = 0
    for offset, char in enumerate(text):
        if char in SEPARATORS:
            if word:
                tokens.append(Token("".join(word), word_start, word_end))
                word = []
            tokens.append(Token(char, offset, offset + 1))
        elif not char.isspace():
            if not word:
                word_start = offset
            word.append(char)
            word_end = offset + 1
    if word:
        tokens.append(Token("".join(word), word_start, word_end))
    return tokens


# --------------------------------------------------------------------------------------- keys


@dataclass(frozen=True)
class KeySpec:
    """A key torch knows: its value kind, where it applies, and since when."""

    name: str
    kind: str  # "bool", "mb", "fraction", "backend", "divisions", "threads", "any"
    scope: str  # "common" (shared parser, 2.10+) or "cuda" (CUDA-specific parser)
    since: Version | None = None  # first release that reads it; None: older than 2.0
    since_confirmed: bool = True  # False: the reference only estimates the release
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

_BOOL_WORDS = {"true": "True", "false": "False", "1": "True", "0": "False", "yes": "True",
               "no": "False", "on": "True", "off": "False"}
_BACKENDS = ("native", "cudaMallocAsync", "hipMallocAsync")


def split_minimum(version: Version | None, large_segment_mb: int | None = None) -> int | None:
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


# ----------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Setting:
    """One ``key:value`` entry as written; ``value`` is what torch would read (None: unusable)."""

    key: str
    raw: str  # the value as written (a list is rendered back as ``[k:v,...]``)
    start: int  # offset of the key
    end: int  # offset just after the value
    value: Any = None


@dataclass(frozen=True)
class ParsedConf:
    """The result of :func:`analyse`: settings in order, and every issue found."""

    text: str
    settings: list[Setting] = field(default_factory=list)
    issues: list[ConfIssue] = field(default_factory=list)
    torch_version: str | None = None  # the version it was judged for

    @property
    def errors(self) -> list[ConfIssue]:
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[ConfIssue]:
        return [i for i in self.issues if i.severity == "warning"]

    def get(self, key: str) -> Setting | None:
        """The entry that wins for ``key`` (torch keeps the last one)."""
        found = [s for s in self.settings if s.key == key]
        return found[-1] if found else None

    def value(self, key: str, default: Any = None) -> Any:
        setting = self.get(key)
        return default if setting is None or setting.value is None else setting.value

    def has(self, key: str) -> bool:
        return self.get(key) is not None

    def key_names(self) -> list[str]:
        return list(dict.fromkeys(s.key for s in self.settings))


# ------------------------------------------------------------------------------------ parsing


class _Parser:
    """Recursive-descent parse of the token list; records issues and recovers at commas."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.entries: list[tuple[Token, Token | list[tuple[Token, Token]], int]] = []
        self.issues: list[ConfIssue] = []

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def syntax(self, message: str, start: int, end: int | None = None) -> None:
        # A problem at the very end (a missing value) sits at len(text), with no width.
        start = min(start, len(self.text))
        end = max(start, min(end if end is not None else start + 1, len(self.text)))
        self.issues.append(ConfIssue("syntax", message, start, end))

    def skip_entry(self) -> None:
        """Recover: move past the rest of a broken entry (to the next top-level comma)."""
        depth = 0
        while (token := self.peek()) is not None:
            if token.text == "[":
                depth += 1
            elif token.text == "]":
                depth = max(0, depth - 1)
            elif token.text == "," and depth == 0:
                return
            self.pos += 1

    def parse(self) -> None:
        if self.tokens and all(t.text == "," for t in self.tokens):
            self.syntax("no key:value entry, only commas (torch stops with an internal assert)",
                        self.tokens[0].start, self.tokens[-1].end)
            self.pos = len(self.tokens)
            return
        first = True
        while (token := self.peek()) is not None:
            if token.text == ",":
                self.pos += 1
                following = self.peek()
                if first and following is not None:
                    self.issues.append(ConfIssue(
                        "syntax", "stray ',' at the start", token.start, token.end, "warning"))
                elif following is not None and following.text == ",":
                    self.syntax("empty entry between two commas (torch's parser may stop with "
                                "an internal assert here)", following.start)
                first = False
                continue
            first = False
            self.parse_entry()

    def parse_entry(self) -> None:
        key = self.peek()
        assert key is not None
        if key.is_separator:
            what = "a key is missing before ':'" if key.text == ":" else f"unexpected {key.text!r}"
            self.syntax(f"{what} (the form is key:value,key:value)", key.start)
            self.pos += 1
            self.skip_entry()
            return
        self.pos += 1
        colon = self.peek()
        if colon is None or colon.text != ":":
            at = colon.start if colon is not None else key.end
            found = f", found {colon.text!r}" if colon is not None else ""
            self.syntax(f"expected ':' and a value after {key.text!r}{found}", at)
            self.skip_entry()
            return
        self.pos += 1
        value = self.peek()
        if value is None or value.text in ",:]":
            at = value.start if value is not None else colon.end
            self.syntax(f"{key.text!r} has no value", at)
            self.skip_entry()
            return
        if value.text == "[":
            items = self.parse_list(key, value)
            if items is None:
                self.skip_entry()
                return
            end = self.tokens[self.pos - 1].end
            self.entries.append((key, items, end))
        else:
            self.pos += 1
            self.entries.append((key, value, value.end))
        after = self.peek()
        if after is not None and after.text != ",":
            self.syntax(f"expected ',' after the value of {key.text!r}, found {after.text!r}",
                        after.start, after.end)
            self.skip_entry()

    def parse_list(self, key: Token, opening: Token) -> list[tuple[Token, Token]] | None:
        items = self._list_items(key, opening)
        if items is None:  # recover: move past this list's closing bracket, if it has one
            while (token := self.peek()) is not None:
                self.pos += 1
                if token.text == "]":
                    break
        return items

    def _list_items(self, key: Token, opening: Token) -> list[tuple[Token, Token]] | None:
        self.pos += 1  # past "["
        items: list[tuple[Token, Token]] = []
        while True:
            token = self.peek()
            if token is None:
                self.syntax(f"the list for {key.text!r} has no closing ']'", opening.start,
                            len(self.text))
                return None
            if token.text == "]":
                self.pos += 1
                return items
            if token.text == "," and items:
                self.pos += 1
                token = self.peek()
                if token is None or token.is_separator:
                    at = token.start if token is not None else len(self.text)
                    self.syntax(f"empty item in the list for {key.text!r}", at)
                    return None
            if token.is_separator:
                self.syntax(f"expected interval:value in the list for {key.text!r}, found "
                            f"{token.text!r}", token.start)
                return None
            self.pos += 1
            colon, value = self.peek(), None
            if colon is not None and colon.text == ":":
                self.pos += 1
                value = self.peek()
            if value is None or value.is_separator:
                at = (value or colon or token).start if (value or colon) else token.end
                self.syntax(f"list items for {key.text!r} are interval:value pairs, e.g. "
                            "[256:1,>:4]", at)
                return None
            self.pos += 1
            items.append((token, value))
            nxt = self.peek()
            if nxt is not None and nxt.text not in ",]":
                self.syntax(f"expected ',' or ']' in the list for {key.text!r}, found "
                            f"{nxt.text!r}", nxt.start)
                return None


def analyse(text: str, torch_version: str | None = None) -> ParsedConf:
    """Parse and validate ``text`` for ``torch_version`` (None: judge for every version).

    Never raises: every problem becomes a :class:`ConfIssue` with its position.
    """
    parser = _Parser(text)
    parser.parse()
    issues = list(parser.issues)
    version = torch_minor(torch_version)
    settings: list[Setting] = []
    seen: dict[str, Setting] = {}
    for key_token, value_token, end in parser.entries:
        setting, found = _check_entry(text, key_token, value_token, end, version, torch_version)
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


def _render_value(value_token: Token | list[tuple[Token, Token]]) -> str:
    if isinstance(value_token, Token):
        return value_token.text
    return "[" + ",".join(f"{k.text}:{v.text}" for k, v in value_token) + "]"


def _check_entry(
    text: str,
    key_token: Token,
    value_token: Token | list[tuple[Token, Token]],
    end: int,
    version: Version | None,
    torch_version: str | None,
) -> tuple[Setting | None, list[ConfIssue]]:
    key = key_token.text
    raw = _render_value(value_token)
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
    check = _VALUE_CHECKS[spec.kind]
    value, found = check(spec, value_token)
    issues.extend(found)
    return Setting(key, raw, key_token.start, end, value), issues


def _version_issues(spec: KeySpec, key_token: Token, version: Version | None,
                    torch_version: str | None) -> list[ConfIssue]:
    if version is None or spec.since is None or version >= spec.since:
        return []
    since = version_text(spec.since)
    if spec.since_confirmed:
        return [ConfIssue(
            "version", f"{spec.name} needs torch {since} or newer; torch {torch_version} "
            "refuses it as an unknown option", key_token.start, key_token.end, key=spec.name,
            fix="")]
    return [ConfIssue(
        "version", f"{spec.name} is probably unknown to torch {torch_version} (it first "
        f"appears around {since}); if so, torch refuses the whole string",
        key_token.start, key_token.end, "warning", key=spec.name)]


def suggest_key(key: str) -> str | None:
    """The known key ``key`` was probably meant to be (case, hyphens, typos)."""
    normal = key.strip().lower().replace("-", "_")
    if normal in KEYS:
        return normal
    close = difflib.get_close_matches(normal, list(KEYS), n=1, cutoff=0.75)
    return close[0] if close else None


# ------------------------------------------------------------------------------ value checks


def _strtoull(text: str) -> tuple[int | None, str]:
    """What C's ``strtoull`` (torch's ``std::stoull``) reads: (value or None, unread rest).

    A leading sign is allowed and a minus wraps around (``-5`` reads as 2**64 - 5); ``None``
    means no digits at all, or a number too large (torch raises for both).
    """
    match = re.match(r"([+-]?)(\d+)", text)
    if not match:
        return None, text
    number = int(match[2])
    if number > UINT64_MAX:
        return None, text
    if match[1] == "-" and number:
        number = 2**64 - number
    return number, text[match.end():]


_FLOAT_PREFIX = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)", re.IGNORECASE
)


def _strtod(text: str) -> tuple[float | None, str]:
    """What C's ``strtod`` (torch's ``std::stod``) reads: (value or None, unread rest)."""
    match = _FLOAT_PREFIX.match(text)
    if not match:
        return None, text
    return float(match[0]), text[match.end():]


def _leftover(spec: KeySpec, token: Token, rest: str, read: str) -> list[ConfIssue]:
    if not rest:
        return []
    return [ConfIssue(
        "lenient", f"torch reads only the leading {read!r} of {token.text!r} for {spec.name} "
        f"and ignores {rest!r}", token.start, token.end, "warning", key=spec.name, fix=read)]


def _check_bool(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    if token.text in ("True", "False"):
        return token.text == "True", []
    fix = _BOOL_WORDS.get(token.text.lower())
    hint = f" (write {fix})" if fix else ""
    return None, [ConfIssue(
        "bad-value", f"{spec.name} must be exactly True or False (torch is case-sensitive), "
        f"got {token.text!r}{hint}", token.start, token.end, key=spec.name, fix=fix or "")]


def _check_mb(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    number, rest = _strtoull(token.text)
    if number is None:
        problem = "too large" if re.match(r"[+-]?\d", token.text) else "not a whole number"
        return None, [ConfIssue(
            "bad-value", f"{spec.name} must be a whole number of MiB; {token.text!r} is "
            f"{problem}", token.start, token.end, key=spec.name, fix="")]
    issues = _leftover(spec, token, rest, token.text[: len(token.text) - len(rest)])
    if token.text.startswith("-") and number:
        issues.append(ConfIssue(
            "lenient", f"{spec.name} is negative; torch wraps {token.text} around to {number}, "
            "which means no limit at all", token.start, token.end, "warning", key=spec.name,
            fix=""))
    if spec.minimum is not None and number < spec.minimum:
        floor = spec.minimum - 1
        issues.append(ConfIssue(
            "too-small", f"{spec.name} must be above {floor}, got {number}", token.start,
            token.end, key=spec.name, fix=str(spec.minimum) if spec.minimum > 0 else ""))
    return number, issues


def _check_fraction(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    number, rest = _strtod(token.text)
    if number is None:
        return None, [ConfIssue(
            "bad-value", f"{spec.name} must be a number, got {token.text!r}", token.start,
            token.end, key=spec.name, fix="")]
    issues = _leftover(spec, token, rest, token.text[: len(token.text) - len(rest)])
    if spec.name == "garbage_collection_threshold":
        if not 0.0 < number < 1.0:  # NaN fails both comparisons, as in torch
            issues.append(ConfIssue(
                "bad-value", f"garbage_collection_threshold must lie strictly between 0 and 1 "
                f"(torch: \"set it in (0.0, 1.0)\"), got {token.text}", token.start,
                token.end, key=spec.name, fix=""))
    elif not 0.0 <= number <= 1.0:
        issues.append(ConfIssue(
            "bad-value", f"{spec.name} must lie between 0 and 1, got {token.text}",
            token.start, token.end, key=spec.name, fix=""))
    return number, issues


def _check_backend(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    if token.text in _BACKENDS:
        return token.text, []
    fix = next((b for b in _BACKENDS if b.lower() == token.text.lower()), None)
    hint = f" (write {fix}: torch is case-sensitive)" if fix else ""
    return None, [ConfIssue(
        "bad-value", f"backend must be native or cudaMallocAsync, got {token.text!r}{hint}",
        token.start, token.end, key=spec.name, fix=fix or "")]


def _power_of_two(number: int) -> bool:
    return number > 0 and number & (number - 1) == 0


def _check_threads(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    number, rest = _strtoull(token.text)
    if number is None:
        return None, [ConfIssue("bad-value", f"{spec.name} must be a whole number, got "
                                f"{token.text!r}", token.start, token.end, key=spec.name, fix="")]
    issues = _leftover(spec, token, rest, token.text[: len(token.text) - len(rest)])
    if not _power_of_two(number) or number > 128:
        issues.append(ConfIssue(
            "bad-value", f"{spec.name} must be a power of 2 no larger than 128, got {number}",
            token.start, token.end, key=spec.name, fix=""))
    return number, issues


def _check_divisions(
    spec: KeySpec, value: Token | list[tuple[Token, Token]]
) -> tuple[Any, list[ConfIssue]]:
    if isinstance(value, Token):
        number, rest = _strtoull(value.text)
        if number is None:
            return None, [ConfIssue("bad-value", f"{spec.name} must be a power of 2 or a list "
                                    f"like [256:1,>:4], got {value.text!r}", value.start,
                                    value.end, key=spec.name, fix="")]
        issues = _leftover(spec, value, rest, value.text[: len(value.text) - len(rest)])
        if not _power_of_two(number):
            issues.append(ConfIssue("bad-value", f"{spec.name} must be a power of 2, got "
                                    f"{number}", value.start, value.end, key=spec.name, fix=""))
        return number, issues
    issues: list[ConfIssue] = []
    pairs: list[tuple[str, int]] = []
    previous: int | None = None
    for index, (interval, divisions) in enumerate(value):
        if interval.text == ">":
            if index != len(value) - 1:
                issues.append(ConfIssue(
                    "lenient", "the '>' entry should come last: it fills every interval after "
                    "the last one listed", interval.start, divisions.end, "warning",
                    key=spec.name))
            label = ">"
        else:
            size, rest = _strtoull(interval.text)
            if size is None or not _power_of_two(size):
                issues.append(ConfIssue(
                    "bad-value", f"{spec.name}: interval {interval.text!r} must be a power of 2 "
                    "(in MiB) or '>'", interval.start, interval.end, key=spec.name, fix=""))
                continue
            issues.extend(_leftover(spec, interval, rest, str(size)))
            if previous is not None and size <= previous:
                issues.append(ConfIssue(
                    "lenient", f"{spec.name}: intervals should ascend ({size} follows "
                    f"{previous}); torch does not sort them", interval.start, interval.end,
                    "warning", key=spec.name))
            previous = size
            label = str(size)
        count, rest = _strtoull(divisions.text)
        if count is None or not (count == 0 or _power_of_two(count)):
            issues.append(ConfIssue(
                "bad-value", f"{spec.name}: divisions {divisions.text!r} must be 0 or a power "
                "of 2", divisions.start, divisions.end, key=spec.name, fix=""))
            continue
        issues.extend(_leftover(spec, divisions, rest, str(count)))
        pairs.append((label, count))
    return pairs, issues


def _check_any(spec: KeySpec, token: Token) -> tuple[Any, list[ConfIssue]]:
    return token.text, []


_VALUE_CHECKS = {
    "bool": _check_bool,
    "mb": _check_mb,
    "fraction": _check_fraction,
    "backend": _check_backend,
    "threads": _check_threads,
    "divisions": _check_divisions,
    "any": _check_any,
}


def _check_across(settings: list[Setting], version: Version | None,
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


# ---------------------------------------------------------------------------------- rendering


def render(settings: Iterable[tuple[str, str]]) -> str:
    """``[("expandable_segments", "True")]`` -> ``"expandable_segments:True"`` (last wins)."""
    merged: dict[str, str] = {}
    for key, raw in settings:
        merged.pop(key, None)
        merged[key] = raw
    return ",".join(f"{k}:{v}" for k, v in merged.items())


def pairs(parsed: ParsedConf) -> list[tuple[str, str]]:
    """The usable entries of ``parsed`` as (key, raw value), last occurrence of each key."""
    merged: dict[str, str] = {}
    for setting in parsed.settings:
        merged.pop(setting.key, None)
        merged[setting.key] = setting.raw
    return list(merged.items())


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
    parser = _Parser(text)
    parser.parse()
    for key_token, value_token, _ in parser.entries:
        if key_token.text == key:
            return _render_value(value_token)
    return None


def with_settings(text: str, updates: dict[str, str | None]) -> str:
    """``text`` with keys set (value) or removed (None); other entries keep their order."""
    kept = [(k, v) for k, v in pairs(analyse(text)) if k not in updates]
    kept.extend((k, v) for k, v in updates.items() if v is not None)
    return render(kept)


def normalised(text: str | None) -> str | None:
    """``text`` as torch sees it (whitespace gone), for comparing two variables."""
    return None if text is None else "".join(t.text for t in tokenize(text))


# ------------------------------------------------------------------- which variable is read


@dataclass(frozen=True)
class EnvBehaviour:
    """How one torch release treats the two variable names."""

    era: str  # "legacy", "split", "unified", "alias", "unknown"
    summary: str
    warns_on_old_name: bool  # prints "PYTORCH_CUDA_ALLOC_CONF is deprecated" when used alone
    confirmed: bool


def env_behaviour(version: Version | None) -> EnvBehaviour:
    if version is None:
        return EnvBehaviour("unknown", "torch not found here: which name it reads depends on its "
                            "version", False, False)
    if version < (2, 9):
        return EnvBehaviour("legacy", f"torch {version_text(version)} reads only {CUDA_VAR}",
                            False, True)
    if version < (2, 10):
        return EnvBehaviour(
            "split", f"torch 2.9 warns that {CUDA_VAR} is deprecated, yet its CUDA allocator "
            f"reads only {CUDA_VAR} and ignores {NEW_VAR} (pytorch/pytorch#183387)", True, True)
    if version < (2, 12):
        return EnvBehaviour(
            "unified", f"torch {version_text(version)} reads {NEW_VAR} first and warns when "
            f"only {CUDA_VAR} is set", True, False)
    return EnvBehaviour(
        "alias", f"torch {version_text(version)} reads {CUDA_VAR} first (an alias, no warning), "
        f"then {NEW_VAR}; a set but empty {CUDA_VAR} still wins", False, version >= (2, 13))


@dataclass(frozen=True)
class Resolution:
    """What reaches the CUDA allocator, given both variables and the torch version."""

    text: str | None  # the effective string (None: neither applies, or version unknown)
    read: list[str]  # variables torch parses
    ignored: list[str]  # variables set but not reaching the CUDA allocator
    explanation: str


def resolve(cuda_value: str | None, new_value: str | None, version: Version | None) -> Resolution:
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
    # unified (2.10, 2.11): the shared parser takes PYTORCH_ALLOC_CONF first; the CUDA-specific
    # parser takes PYTORCH_CUDA_ALLOC_CONF first, even when empty (inferred from the source).
    if not both:
        only = cuda_value if cuda_value is not None else new_value
        read = [CUDA_VAR] if cuda_value is not None else (
            [NEW_VAR] if new_value is not None else [])
        return Resolution(only, read, [], behaviour.summary)
    assert cuda_value is not None and new_value is not None
    common = [(k, v) for k, v in pairs(analyse(new_value)) if _scope(k) == "common"]
    specific = [(k, v) for k, v in pairs(analyse(cuda_value)) if _scope(k) != "common"]
    explanation = (f"{behaviour.summary}: the shared keys come from {NEW_VAR}, the CUDA-only "
                   f"keys (backend, pinned_*, ...) from {CUDA_VAR}")
    return Resolution(render(common + specific), [NEW_VAR, CUDA_VAR], [], explanation)


def _scope(key: str) -> str:
    spec = KEYS.get(key)
    return spec.scope if spec else "cuda"


# ------------------------------------------------------------------------------------ remedies


def shell_quote(text: str) -> str:
    """Always single-quoted, so ``>`` and ``[`` in a configuration never reach the shell."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def export_line(conf: str, version: Version | None) -> str:
    """The line to paste so that ``conf`` reaches the CUDA allocator of this torch version.

    Up to 2.8 only the old name matters; from 2.9 on (and when the version is unknown) both
    names are set to the same string, which every release reads the same way.
    """
    if not conf:
        return f"unset {NEW_VAR} {CUDA_VAR}"
    quoted = shell_quote(conf)
    if version is not None and version < (2, 9):
        return f"export {CUDA_VAR}={quoted}"
    return f"export {NEW_VAR}={quoted} {CUDA_VAR}={quoted}"


def describe(issue: ConfIssue) -> str:
    """``column 19: ...`` for one issue."""
    return f"column {issue.start + 1}: {issue.message}"

