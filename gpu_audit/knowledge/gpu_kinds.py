"""What kind of GPU a model is (data-center, workstation or consumer), from the name and brand
NVML reports: which health readings a GPU should have depends on it (consumer cards have no ECC,
data-center parts report everything).

The name patterns below say what a name must hold. An ASCII name (every name NVML reports) is
read against them as text, word by word, which is exact for ASCII and costs a scan none of the
patterns' compilation (some millions of instructions each); any other name goes to the patterns.
"""

from __future__ import annotations

import re
import string

from gpu_audit.lazy import regex

DATA_CENTER, WORKSTATION, CONSUMER = "data-center", "workstation", "consumer"

# NVML brands (names as gpu_audit.collect.nvml.codes.BRANDS gives them).
_CONSUMER_BRANDS = frozenset({"geforce", "geforce_rtx", "titan", "titan_rtx"})
_WORKSTATION_BRANDS = frozenset({"quadro", "quadro_rtx", "nvidia_rtx", "nvs"})
_DATA_CENTER_BRANDS = frozenset({"tesla"})
CONSUMER_NAME = regex(r"GeForce|TITAN", re.IGNORECASE)
WORKSTATION_NAME = regex(r"Quadro|\bRTX A\d|\bRTX \d+ Ada|\bRTX PRO\b|\bT\d{3,4}\b")
# Tesla-class model numbers: K80, P100, V100, T4, A100, A10G, A30, L4, L40S, H100, H200, B200,
# GB200, GH200, and the "Tesla" prefix of older parts.
DATA_CENTER_NAME = regex(
    r"\bTesla\b|\b(?:[KPVTALHB]\d{1,3}[A-Z]?|G[HB]\d{3})\b", re.IGNORECASE)

_WORD_CHARACTERS = frozenset(string.ascii_letters + string.digits + "_")  # \w, in ASCII
# Every other ASCII character becomes a space: what is left between spaces are \b-bounded words.
_WORDS_ONLY = {code: " " for code in range(128) if chr(code) not in _WORD_CHARACTERS}


def gpu_kind(name: str | None, brand: str | None) -> str | None:
    """``"data-center"``, ``"workstation"`` or ``"consumer"``; ``None`` when neither the name
    nor the brand tells (brand ``nvidia``, reported by recent drivers for many models, does not)."""
    text = name or ""
    if consumer_name(text) or brand in _CONSUMER_BRANDS:
        return CONSUMER
    if workstation_name(text) or brand in _WORKSTATION_BRANDS:
        return WORKSTATION
    if data_center_name(text) or brand in _DATA_CENTER_BRANDS:
        return DATA_CENTER
    return None


def consumer_name(text: str) -> bool:
    """:data:`CONSUMER_NAME` found in ``text``."""
    if not text.isascii():
        return CONSUMER_NAME().search(text) is not None
    lower = text.lower()
    return "geforce" in lower or "titan" in lower


def workstation_name(text: str) -> bool:
    """:data:`WORKSTATION_NAME` found in ``text``."""
    if not text.isascii():
        return WORKSTATION_NAME().search(text) is not None
    if "Quadro" in text:
        return True
    if any(word[0] == "T" and 4 <= len(word) <= 5 and word[1:].isdigit()
           for word in text.translate(_WORDS_ONLY).split()):
        return True
    at = text.find("RTX ")
    while at >= 0:
        if at == 0 or text[at - 1] not in _WORD_CHARACTERS:
            rest = text[at + 4:]
            digits = len(rest) - len(rest.lstrip(string.digits))
            if ((rest[:1] == "A" and rest[1:2].isdigit())
                    or (rest.startswith("PRO") and rest[3:4] not in _WORD_CHARACTERS)
                    or (digits and rest.startswith(" Ada", digits))):
                return True
        at = text.find("RTX ", at + 1)
    return False


def data_center_name(text: str) -> bool:
    """:data:`DATA_CENTER_NAME` found in ``text``."""
    if not text.isascii():
        return DATA_CENTER_NAME().search(text) is not None
    return any(_data_center_word(word.upper()) for word in text.translate(_WORDS_ONLY).split())


def _data_center_word(word: str) -> bool:
    if word == "TESLA":
        return True
    if len(word) == 5 and word[0] == "G" and word[1] in "HB" and word[2:].isdigit():
        return True
    if word[0] not in "KPVTALHB":
        return False
    number = word[1:-1] if word[-1].isalpha() else word[1:]
    return 1 <= len(number) <= 3 and number.isdigit()
