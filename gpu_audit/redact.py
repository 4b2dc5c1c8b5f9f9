"""Secrets out of command lines, environment values and free text, before anything is shown.

Command lines of ML jobs routinely carry ``--hf-token``, ``--api-key=…``, database URLs with a
password, or ``WANDB_API_KEY=…`` prefixes. Every output of gpu-audit goes through here.

The redactor is a table: :data:`NAME_RULES` say which option, variable or header names hold a
secret (and :data:`BENIGN_NAMES` which merely mention one, such as ``--max-new-tokens``),
:data:`PROGRAM_FLAGS` the short flags that carry a password for some programs only (``mysql
-pX``; never ``psql -p`` which is a port), and :data:`TEXT_RULES` the shapes that are secrets
wherever they appear (URL passwords, ``"api_key": "…"`` in JSON, known token formats). Each rule
carries an example that the tests check. Allocator configuration strings (``key:value,...``) have
their own entry point, :func:`redact_settings`, which keeps the settings that hold no secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from gpu_audit.lazy import regex as lazy

MASK = "***"


class Rule(msgspec.Struct, frozen=True):
    """One pattern of the redactor and an example command line whose ``secret`` it hides."""

    id: str
    pattern: Callable[[], re.Pattern[str]]
    example: tuple[str, ...]
    secret: str
    # Words (lower case) one of which is in every ASCII text (or name) the pattern matches: a
    # text with none of them is left as it is, its pattern neither compiled nor run.
    needs: tuple[str, ...] = ()


def _rule(id: str, pattern: str, example: tuple[str, ...], secret: str = "S3CR3T-v4lue",
          needs: tuple[str, ...] = ()) -> Rule:
    return Rule(id, lazy(pattern, re.I), example, secret, needs)


# Names (options without their dashes, variables, header names) whose value is a secret. The
# patterns are searched in the lower-cased name and compiled on first use.
NAME_RULES: tuple[Rule, ...] = (
    _rule("password", r"pass(?:word|wd|phrase)?s?(?![a-z])|pwd",
          ("app", "--db-password", "S3CR3T-v4lue"), needs=("pass", "pwd")),
    _rule("pw", r"(?:^|[-_.])pw(?:$|[-_.])", ("app", "--pw", "S3CR3T-v4lue"), needs=("pw",)),
    _rule("secret", r"secret", ("app", "--client_secret=S3CR3T-v4lue"), needs=("secret",)),
    _rule("token", r"token", ("app", "--hub_token", "S3CR3T-v4lue"), needs=("token",)),
    _rule("auth", r"auth(?!or(?!i[sz]))", ("app", "--authorization", "S3CR3T-v4lue"),
          needs=("auth",)),
    _rule("api-key", r"api[-_.]?key|access[-_.]?key|private[-_.]?key",
          ("app", "--apikey", "S3CR3T-v4lue"), needs=("key",)),
    _rule("key", r"(?:^|[-_.])keys?$", ("app", "--wandb-key", "S3CR3T-v4lue"), needs=("key",)),
    _rule("credential", r"cred(?:ential)?s?(?![a-z])", ("app", "--cred=S3CR3T-v4lue"),
          needs=("cred",)),
    _rule("bearer", r"bearer", ("app", "--bearer", "S3CR3T-v4lue"), needs=("bearer",)),
    _rule("cookie", r"cookie", ("curl", "--cookie", "S3CR3T-v4lue"), needs=("cookie",)),
    _rule("signature", r"signature", ("app", "--signature=S3CR3T-v4lue"), needs=("signature",)),
    _rule("session", r"session[-_.]?(?:key|id)", ("app", "--session-id", "S3CR3T-v4lue"),
          needs=("session",)),
)
# Every word a name rule needs: an ASCII name with none of them is no secret's name.
_NAME_WORDS = tuple(sorted({word for rule in NAME_RULES for word in rule.needs}))

# Names that contain a secret word but hold none (ML jobs are full of tokenizers and keys).
BENIGN_NAMES = lazy(
    r"tokeniz|tokens(?![a-z])|"
    r"token[-_.]?(?:len|length|count|limit|budget|type|ids?|size|dim|embed\w*|level|rate)"
    r"(?![a-z])|"
    r"(?:max|min|num|pad|bos|eos|unk|sep|cls|mask|special|start|end|new|per|total|vocab)"
    r"[-_.]?token(?![a-z])|"
    r"(?:sort|metric|image|text|label|caption|input|output|column|cache|dataset|data|feature|"
    r"audio|video|group|partition|join|sequence|monitor|eval|target|prompt|response|answer|"
    r"question|primary|foreign|hash|dict|map|lookup|field|index|shard|seed|random|split)"
    r"[-_.]?keys?$",
    re.I,
)

# Secret names that, on their own, also label plain words: their value is masked unless it is one
# short word of letters ("SIGNATURE=CUDA error: ..." in an error catalogue, "Signature: valid").
# A signature that is a secret (an HMAC, a presigned URL's) is hex or base64, with digits or
# symbols; names that merely contain the word (``X-Amz-Signature``) always mask their value.
WORD_LABELS = frozenset({"signature"})
_plain_word = lazy(r"^[A-Za-z]{1,15}$")

# NCCL's process tag, ``host:PID:TID [device] NCCL ...`` (``node01:4101:4188 [0] NCCL INFO``,
# ``node01:4101:4188 [0] include/shm.h:28 NCCL WARN``),
# maybe behind a launcher's ``[default0]:``: whatever the host is called (``user``, ``auth01``,
# an anonymised ``login``), the tag is no name with a secret value.
_process_tag = lazy(r"(?:^|[\]:])[A-Za-z0-9][\w.-]*:\d+:\d+$")
_device_tag = lazy(r"^\[\d+\]$")

# Names whose value is ``user:password``: the part after the colon is masked.
PAIR_NAMES = lazy(r"^(?:login|user|userpass|basic[-_.]?auth|proxy[-_.]?user)$", re.I)

# Short flags that carry a password only for some programs (``psql -p`` is the port: absent).
# Per program: (flags whose value is a secret, flags whose value is ``user:password``).
PROGRAM_FLAGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    **{name: (frozenset({"-p"}), frozenset())
       for name in ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlcheck",
                    "mysqlshow", "mariadb", "mariadb-dump", "mariadb-admin", "sshpass",
                    "mongo", "mongosh", "mongodump", "mongorestore")},
    "redis-cli": (frozenset({"-a"}), frozenset()),
    "curl": (frozenset(), frozenset({"-u", "-U"})),
    "wget": (frozenset(), frozenset()),
    # ``docker login -u bob -p X``, ``az login``, ``oc login``, ``podman login``, ``helm registry
    # login``: after the word ``login``, ``-p`` is the password.
    "login": (frozenset({"-p"}), frozenset({"-u"})),
    **{name: (frozenset(), frozenset({"-a"})) for name in ("http", "https", "xh", "xhs")},
}

# ``-u name:secret`` is a user and a password for most programs that take one (curl, wget's
# clones, HTTP clients, registry logins); elsewhere ``-u`` takes no ``:`` value (``python -u``,
# ``sort -u``, ``sudo -u bob``) or a ``uid:gid`` pair of digits (``docker run -u 1000:1000``),
# which is kept.
GENERIC_PAIR_FLAGS = frozenset({"-u"})
_ids_pair = lazy(r"^\d+:\d+$")

# After a secret option, a following word that reads like an option name (lower-case words,
# few digits: ``--use_auth_token --model x``, ``-v``) is the next option; anything else is the
# value, even when it starts with a dash (getopt, click and Go's flag package all take the next
# word as the value: ``--api-key --S3cr3t``).
_option_name = lazy(r"^--?[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)*$")
_OPTION_DIGITS = 3  # fp16, gpt2, local_rank1: option names carry few digits; random keys more

# Words after which the next word is the secret ("Authorization: Bearer X").
_SCHEME_WORDS = frozenset({"bearer", "basic", "digest", "token", "apikey"})

# Shapes that are secrets wherever they appear, applied to every string.
TEXT_RULES: tuple[Rule, ...] = (
    # scheme://user:password@host; the password may itself contain '@'. A scheme starts after a
    # character no scheme holds, so a long word is scanned once, not once per character.
    _rule("url-password",
          r"(?P<keep>(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?P<secret>[^/\s]+)(?=@)",
          ("app", "--db", "postgres://u:S3CR3T@v4lue@db:5432/x"), "S3CR3T@v4lue", ("://",)),
    # ?token=abc&x=1 (a parameter's name is short and holds no '?': bounded, linear)
    _rule("query", r"(?P<keep>[?&][^=&?\s]{0,64}(?:token|key|secret|password|sig)"
                   r"[^=&?\s]{0,64}=)(?P<secret>[^&\s]+)",
          ("app", "https://h/x?access_token=S3CR3T-v4lue&y=1"), needs=("?", "&")),
    # "api_key": "X" in JSON or a Python dict inside an argument (the name is checked).
    _rule("quoted-pair", r"(?P<keep>(?P<q>[\"'])(?P<name>[^\"'\s]{1,80})(?P=q)\s*[:=]\s*"
                         r"(?P<q2>[\"']))(?P<secret>(?:\\.|(?!(?P=q2)).)+)",
          ("app", '--config={"api_key": "S3CR3T-v4lue"}'), needs=('"', "'")),
    # Well-known token formats, whatever they are called, wherever they stand (alone, after
    # ``key=``, in a URL's query, inside quotes or JSON, after an ``_``). Stripe's secret and
    # restricted keys are masked in live and test mode alike (a test key still opens the
    # account's test data); its publishable ``pk_`` keys are public by design and kept.
    _rule("token-shape",
          r"(?P<keep>)(?<![A-Za-z0-9])(?P<secret>gh[pousr]_[A-Za-z0-9]{20,}|"
          r"github_pat_[A-Za-z0-9_]{20,}|"
          r"hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|"
          r"AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,}|"
          r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})",
          ("app", "--model", "x", "hf_a1B2c3D4e5F6g7H8i9J0k1"), "hf_a1B2c3D4e5F6g7H8i9J0k1",
          ("gh", "github_pat_", "hf_", "sk-", "xox", "akia", "glpat-", "eyj")),
    _rule("stripe-key",
          r"(?P<keep>)(?<![A-Za-z0-9])(?P<secret>[sr]k_(?:live|test)_[0-9A-Za-z]{10,})",
          ("app", "STRIPE=sk_live_4eC39HqLyjWDarjtT1zdp7dc"), "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
          ("k_live_", "k_test_")),
    # Google API keys: ``AIza`` and 35 more characters.
    _rule("google-api-key", r"(?P<keep>)(?<![A-Za-z0-9])(?P<secret>AIza[0-9A-Za-z_-]{35,})",
          ("app", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
          "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", ("aiza",)),
    # A PEM private key (PKCS#8, RSA, EC, OpenSSH, encrypted): the body up to its END line, or to
    # the end of the text when a log cut it off.
    _rule("pem-private-key",
          r"(?P<keep>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----\s*)"
          r"(?P<secret>(?:(?!-----END )[\s\S])+?)(?=\s*-----END |\s*\Z)",
          ("app", "--tls-pem", "-----BEGIN PRIVATE KEY-----\nS3CR3T-v4lue\n"
                               "-----END PRIVATE KEY-----"), needs=("-----begin ",)),
)

# dmesg names each module-signing certificate it loads by its subject and key id ("Loaded X.509
# cert 'Build time autogenerated kernel key: 3e7f...'"): that hex after "kernel key:" is a public
# fingerprint, kept; any other value after it is masked as after any "key:".
_KERNEL_KEY_WORD = "kernel"
_fingerprint = lazy(r"^[0-9a-f]{16,128}'?$")

# NAME=value or NAME:value inside one argument (env prefixes, key=value options, headers).
# (The value is what follows the match: ``pattern.match(word, pos)`` reads a chain in place.)
_assignment = lazy(r"(?P<dashes>-{0,2})(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>\s*[=:]\s*)")
_flag = lazy(r"^--?[A-Za-z]")
_space = lazy(r"(\s+)")


def _may_have_space(text: str) -> bool:
    """False where ``text`` surely holds no whitespace (no space, nothing unprintable: every
    other character ``\\s`` matches is unprintable), so that most words need no pattern."""
    return " " in text or not text.isprintable()


def is_secret_name(name: str) -> bool:
    """True when an option, variable or header called ``name`` holds a secret."""
    bare = name.lstrip("-").lower()
    if not bare or (bare.isascii() and not any(word in bare for word in _NAME_WORDS)):
        return False  # no rule can match (most option names): none is compiled
    if BENIGN_NAMES().search(bare):
        return False
    return any(rule.pattern().search(bare) for rule in NAME_RULES)


def _labels_words(name: str) -> bool:
    """True when ``name`` is one of :data:`WORD_LABELS` itself (``SIGNATURE``, ``--signature``;
    not ``X-Amz-Signature`` or ``WEBHOOK_SIGNATURE``, always secrets)."""
    return name.lstrip("-").lower() in WORD_LABELS


def _text_rules(text: str) -> str:
    # Most texts (paths, numbers, plain words) hold none of the words a rule needs. Outside ASCII
    # every rule runs: ignoring case, "ſ" matches "s" and "K" (Kelvin) matches "k".
    lowered = text.lower() if text.isascii() else None
    for rule in TEXT_RULES:
        if lowered is not None and rule.needs and not any(w in lowered for w in rule.needs):
            continue
        if rule.id == "quoted-pair":
            masked = rule.pattern().sub(
                lambda m: m["keep"] + MASK if is_secret_name(m["name"]) else m[0], text)
        else:
            masked = rule.pattern().sub(lambda m: m["keep"] + MASK, text)
        if lowered is not None and masked != text:
            lowered = masked.lower()
        text = masked
    return text


def _pair(value: str) -> str:
    user, colon, _ = value.partition(":")
    return f"{user}:{MASK}" if colon else value


def _option_like(word: str) -> bool:
    """Whether ``word``, after a secret option, is the next option rather than its value."""
    name = word.split("=", 1)[0]
    if len(name) == 2 and name[0] == "-" and name[1].isalpha():
        return True  # -v, -X
    return (_option_name().match(name) is not None
            and sum(ch.isdigit() for ch in name) <= _OPTION_DIGITS)


class _Walker:
    """Masks the words of one command line (or of one line of text) in order."""

    def __init__(self) -> None:
        self.mask_next = False
        self.pair_next = False
        self.words_kept = False  # the name before the next word labels plain words too
        self.fingerprint_kept = False  # "kernel key:": a key id in hex is no secret
        self.ids_kept = False  # "-u" of any program: a "uid:gid" pair of digits is no secret
        self.previous = ""
        self.program: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())

    def word(self, word: str) -> str:
        masked = self._word(word)
        self.previous = word
        return masked

    def _value(self, word: str) -> str | None:
        """The word after a secret option or a pair flag, masked; None when it is no value
        (the next option, or no ``user:password`` after ``-u``) and is read as itself."""
        pair, words_kept = self.pair_next, self.words_kept
        fingerprint_kept, ids_kept = self.fingerprint_kept, self.ids_kept
        self.mask_next = self.pair_next = self.words_kept = False
        self.fingerprint_kept = self.ids_kept = False
        if _flag().match(word) and _option_like(word):
            return None
        if pair:
            if ":" not in word or (ids_kept and _ids_pair().match(word)):
                return None
            return _pair(word)
        if word.lower().rstrip(":") in _SCHEME_WORDS:
            self.mask_next = True  # "Bearer X": X is the secret
            return word
        if words_kept and _plain_word().match(word):
            return word
        if fingerprint_kept and _fingerprint().match(word):
            return word
        return MASK

    def _word(self, word: str) -> str:
        if (self.mask_next or self.pair_next) and word in ("", "--"):
            # ``--token "" X`` and ``--api-key -- X``: an empty value hides nothing and ``--``
            # ends options, and either way the word after them is read as the value by some
            # program (and by a redactor of the line joined with spaces): it is masked.
            return word
        if self.mask_next or self.pair_next:
            masked = self._value(word)
            if masked is not None:
                return masked
        base = word.rsplit("/", 1)[-1]
        if base in PROGRAM_FLAGS:
            self.program = PROGRAM_FLAGS[base]
            return word
        secret_flags, pair_flags = self.program
        if word in secret_flags:
            self.mask_next = True
            return word
        if word in pair_flags:
            self.pair_next = True
            return word
        if word in GENERIC_PAIR_FLAGS:
            self.pair_next, self.ids_kept = True, True
            return word
        for flag in secret_flags:
            if word.startswith(flag) and len(word) > len(flag):
                return flag + MASK  # mysql -pSECRET
        if len(word) > 2 and word[:2] in pair_flags:
            return word[:2] + _pair(word[2:])  # curl -uuser:pass
        if len(word) > 2 and word[:2] in GENERIC_PAIR_FLAGS and not _ids_pair().match(word[2:]):
            return word[:2] + _pair(word[2:])  # -ubob:pass
        return self._one(word)

    def _one(self, word: str) -> str:
        """One word without its walker's context: ``NAME=X``, ``--name=X``, ``Header: X``, known
        shapes. An assignment whose value is one more assignment (``--env=NAME=X``, ``a:b:c``)
        is read in a loop over positions, so a long chain costs time linear in its length."""
        word = _text_rules(word)
        # Where the last URL, comma and space are: whether one follows a position, in O(1).
        last_scheme, last_comma = word.rfind("://"), word.rfind(",")
        last_space = max((m.end() - 1 for m in _space().finditer(word)),
                         default=-1) if _may_have_space(word) else -1
        pos = 0
        assigns = "=" in word or ":" in word  # every assignment holds one
        while assigns and (match := _assignment().match(word, pos)) is not None:
            at, name = match.end(), match["name"]
            if at == len(word):  # "Authorization:" or "--token=" then the value in the next word
                if pos == 0:
                    self._valueless(name, word)
                return word
            if is_secret_name(name):
                if _labels_words(name) and _plain_word().match(word[at:]):
                    return word
                return word[:at] + MASK
            if PAIR_NAMES().match(name):
                return word[:at] + _pair(word[at:])
            if last_scheme >= pos:  # a URL: its own rules
                return word[:pos] + _tail(word[pos:])
            if last_comma >= at or last_space >= at:
                return word[:at] + _listed(word[at:])  # --env=WANDB_API_KEY=X, lr:1,key:X
            pos = at
        return word[:pos] + self._bare(word[pos:], top=pos == 0)

    def _valueless(self, name: str, word: str) -> None:
        """``name`` ended its word without a value: the next word may be it."""
        if is_secret_name(name):
            self.mask_next, self.words_kept = True, _labels_words(name)
            self.fingerprint_kept = (word.lower() == "key:" and
                                     self.previous.lower() == _KERNEL_KEY_WORD)
        elif PAIR_NAMES().match(name):
            self.pair_next = True

    def _bare(self, word: str, *, top: bool) -> str:
        """A word (or the value at the end of a chain of assignments) that assigns nothing."""
        if word.startswith("-"):
            name = word.lstrip("-")
            if top and is_secret_name(name):
                self.mask_next, self.words_kept = True, _labels_words(name)
            elif top and PAIR_NAMES().match(name):
                self.pair_next = True
            return word
        if word.lower() == "bearer":
            self.mask_next = self.mask_next or top
            return word
        return _tail(word)


def _tail(word: str) -> str:
    """A word whose text rules have run: words inside it, or the pieces of a list."""
    if _may_have_space(word) and _space().search(word):
        return redact_text(word)
    return _listed(word) if "," in word else word


def _listed(value: str) -> str:
    """``value`` redacted piece by piece where it is a comma-separated list (``lr:0.1,api_key:X``,
    ``x,token=X``, allocator settings): each piece may be an assignment of its own."""
    entries = _top_level_entries(value)
    if len(entries) == 1:
        return redact_text(value) if "," not in value else _text_rules(value)
    return ",".join(redact_text(entry) for entry in entries)


def redact_text(text: str) -> str:
    """Mask secrets inside one free-form string: URL passwords, known token shapes, JSON pairs,
    query strings, and options or assignments with a secret name between its words."""
    text = _text_rules(text)
    parts = _space().split(text) if _may_have_space(text) else [text]
    if len(parts) == 1:  # no whitespace: one word
        return _Walker()._one(text)
    walker = _Walker()
    return "".join(part if i % 2 or _nccl_tag(parts, i) else walker.word(part)
                   for i, part in enumerate(parts))


def _nccl_tag(parts: list[str], i: int) -> bool:
    """Whether word ``parts[i]`` (words at even indexes) is NCCL's ``host:PID:TID`` tag: a
    ``[device]`` follows, then ``NCCL`` (after a source location in NCCL's warnings)."""
    return ("NCCL" in parts[i + 4:i + 7:2] and i + 2 < len(parts)
            and _device_tag().match(parts[i + 2]) is not None
            and _process_tag().search(parts[i]) is not None)


def redact_cmdline(args: Iterable[str]) -> list[str]:
    """A redacted copy of ``argv``: ``--token X``, ``--token=X``, ``KEY=X``, URL passwords,
    secrets in JSON arguments, ``mysql -pX``, and every rule of :func:`redact_text`."""
    walker = _Walker()
    return [walker.word(arg) for arg in args]


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment values with secrets masked (by variable name, then by value shape)."""
    return {k: (MASK if is_secret_name(k) else redact_text(v)) for k, v in env.items()}


def _top_level_entries(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (``roundup_power2_divisions:[256:1,512:2]``
    is one entry)."""
    entries, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0:
            entries.append(text[start:i])
            start = i + 1
    entries.append(text[start:])
    return entries


def _setting(entry: str) -> str:
    key, colon, value = entry.partition(":")
    if colon and value and is_secret_name(key.strip()):
        return f"{key}:{MASK}"
    return entry


def redact_settings(text: str) -> str:
    """An allocator configuration string (``key:value,key:value``, as in ``PYTORCH_ALLOC_CONF``
    or what a training process publishes) with its secrets masked entry by entry: the value of
    a key with a secret name and every known secret shape. The other settings are kept as
    written, so the string still reads, parses and pastes as itself."""
    text = _text_rules(text)
    return ",".join(_setting(entry) for entry in _top_level_entries(text))


def redact_data(value: Any) -> Any:
    """A JSON-like value (a finding's evidence, a check's) with every string in it redacted by
    :func:`redact_text`; keys, numbers and the shape are kept."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, (list, tuple)):
        return [redact_data(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    return value
