"""Secrets out of command lines and environment values, before anything is shown or saved.

Command lines of ML jobs routinely carry ``--hf-token``, ``--api-key=…``, database URLs with a
password, or ``WANDB_API_KEY=…`` prefixes. Every output of gpu-audit goes through here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from gpu_audit.lazy import regex as lazy

MASK = "***"

# The patterns are compiled on first use (about 2 ms together): a scan of a machine without GPU
# processes often has nothing to redact.
# Option or variable names whose value is a secret.
_secret_name = lazy(
    r"(pass(word|wd|phrase)?|secret|token|api[-_]?key|access[-_]?key|private[-_]?key|"
    r"auth|credential|session[-_]?key|client[-_]?secret|signature|cookie|pwd)",
    re.I,
)

# Values that are secrets whatever they are called.
_secret_value = lazy(
    r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|"
    r"sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
    r"glpat-[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)

# scheme://user:password@host -> scheme://user:***@host
_url_credentials = lazy(
    r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@", re.I
)

# NAME=value inside one argument (env prefixes, key=value options).
_assignment = lazy(
    r"^(?P<dashes>-{0,2})(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>[=:])(?P<value>.+)$"
)

# Query-string secrets: ?token=abc&x=1
_query_secret = lazy(r"([?&][^=&\s]*(?:token|key|secret|password|sig)[^=&\s]*=)[^&\s]+", re.I)

# Names that contain a secret word but hold none (ML jobs are full of tokenizers).
_benign_name = lazy(
    r"(tokeniz|tokens\b|[-_]tokens|max[-_]?(new[-_]?)?token|num[-_]?token|"
    r"token[-_]?(len|length|count|limit|budget|type|ids?)\b|author)",
    re.I,
)


def is_secret_name(name: str) -> bool:
    return bool(_secret_name().search(name)) and not _benign_name().search(name)


def redact_text(text: str) -> str:
    """Mask secrets inside one free-form string (URLs, known token shapes, query strings)."""
    text = _url_credentials().sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = _query_secret().sub(lambda m: m.group(1) + MASK, text)
    return _secret_value().sub(MASK, text)


def redact_cmdline(args: Iterable[str]) -> list[str]:
    """A redacted copy of ``argv``: ``--token X``, ``--token=X``, ``KEY=X`` and URL passwords."""
    out: list[str] = []
    mask_next = False
    for arg in args:
        if mask_next:
            out.append(MASK)
            mask_next = False
            continue
        match = _assignment().match(arg)
        if match and is_secret_name(match["name"]):
            out.append(f"{match['dashes']}{match['name']}{match['sep']}{MASK}")
            continue
        if arg.startswith("-") and "=" not in arg and is_secret_name(arg.lstrip("-")):
            out.append(arg)
            mask_next = True
            continue
        out.append(redact_text(arg))
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment values with secrets masked (by variable name, then by value shape)."""
    return {k: (MASK if is_secret_name(k) else redact_text(v)) for k, v in env.items()}
