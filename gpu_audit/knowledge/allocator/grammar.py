"""The syntax of PyTorch's allocator configuration strings: tokens, entries, parse results.

``PYTORCH_ALLOC_CONF`` / ``PYTORCH_CUDA_ALLOC_CONF`` hold ``key:value`` pairs separated by commas;
list values sit in brackets (``roundup_power2_divisions:[256:1,512:2,>:4]``); booleans are exactly
``True``/``False``. torch splits the string at ``,`` ``:`` ``[`` ``]`` and drops whitespace
everywhere, even inside a word, and so does :func:`tokenize`, so every position reported here is
an offset into the user's own string.

This module reads and writes the syntax without judging it: :class:`Parser` records syntax
problems and the entries it found; what each value means, and whether torch takes it, is
:mod:`.checks`'s job. :func:`split_alloc_conf`, :func:`raw_settings` and :func:`with_setting` work
on a string a running torch has already accepted: they keep every entry as written, including
keys newer than the table in :mod:`.keys`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.errors import InputError

SEPARATORS = ",:[]"


# ------------------------------------------------------------------------------------- issues


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


def describe(issue: ConfIssue) -> str:
    """``column 19: ...`` for one issue."""
    return f"column {issue.start + 1}: {issue.message}"


class AllocConfError(InputError):
    """A configuration string torch would refuse or misread; names the position and the fix."""

    def __init__(self, text: str, issue: ConfIssue, variable: str | None = None) -> None:
        self.text = text
        self.issue = issue
        self.variable = variable
        where = f"{variable}={text!r}" if variable else repr(text)
        super().__init__(f"{where}: column {issue.start + 1}: {issue.message}")


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


def normalised(text: str | None) -> str | None:
    """``text`` as torch sees it (whitespace gone), for comparing two variables."""
    return None if text is None else "".join(t.text for t in tokenize(text))


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
    """A judged configuration string: settings in order, and every issue found."""

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

Value = Token | list[tuple[Token, Token]]  # a single word, or a bracketed list of pairs


class Parser:
    """Recursive-descent parse of the token list; records issues and recovers at commas.

    After :meth:`parse`, ``entries`` holds (key token, value, offset after the value) for each
    entry whose syntax is sound, and ``issues`` the syntax problems.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.entries: list[tuple[Token, Value, int]] = []
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


def render_value(value: Value) -> str:
    """A parsed value written back: the word, or ``[k:v,...]`` for a list."""
    if isinstance(value, Token):
        return value.text
    return "[" + ",".join(f"{k.text}:{v.text}" for k, v in value) + "]"


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


# ------------------------------------------------------- strings a running torch has accepted


def split_alloc_conf(text: str) -> list[str]:
    """``a:1,b:[x:1,y:2]`` -> ``["a:1", "b:[x:1,y:2]"]``: commas inside brackets stay.

    Whitespace is dropped as torch drops it; empty entries are left out.
    """
    entries: list[str] = []
    current: list[str] = []
    depth = 0
    for token in tokenize(text):
        if token.text == "[":
            depth += 1
        elif token.text == "]":
            depth = max(depth - 1, 0)
        if token.text == "," and depth == 0:
            entries.append("".join(current))
            current = []
        else:
            current.append(token.text)
    entries.append("".join(current))
    return [entry for entry in entries if entry]


def raw_settings(text: str | None) -> dict[str, str]:
    """``{key: value as written}`` for every entry, known key or not (a repeated key: the last)."""
    settings: dict[str, str] = {}
    for entry in split_alloc_conf(text or ""):
        key, _, value = entry.partition(":")
        settings[key] = value
    return settings


def with_setting(settings: str | None, key: str, value: str) -> str:
    """``settings`` with ``key`` set to ``value`` at the end, every other entry kept as written."""
    entries = [e for e in split_alloc_conf(settings or "") if e.partition(":")[0] != key]
    return ",".join([*entries, f"{key}:{value}"])
