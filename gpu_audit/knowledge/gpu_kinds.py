"""What kind of GPU a model is (data-center, workstation or consumer), from the name and brand
NVML reports: which health readings a GPU should have depends on it (consumer cards have no ECC,
data-center parts report everything).
"""

from __future__ import annotations

import re

DATA_CENTER, WORKSTATION, CONSUMER = "data-center", "workstation", "consumer"

# NVML brands (names as gpu_audit.collect.nvml.codes.BRANDS gives them).
_CONSUMER_BRANDS = frozenset({"geforce", "geforce_rtx", "titan", "titan_rtx"})
_WORKSTATION_BRANDS = frozenset({"quadro", "quadro_rtx", "nvidia_rtx", "nvs"})
_DATA_CENTER_BRANDS = frozenset({"tesla"})
_CONSUMER_NAME = re.compile(r"GeForce|TITAN", re.IGNORECASE)
_WORKSTATION_NAME = re.compile(r"Quadro|\bRTX A\d|\bRTX \d+ Ada|\bRTX PRO\b|\bT\d{3,4}\b")
# Tesla-class model numbers: K80, P100, V100, T4, A100, A10G, A30, L4, L40S, H100, H200, B200,
# GB200, GH200, and the "Tesla" prefix of older parts.
_DATA_CENTER_NAME = re.compile(
    r"\bTesla\b|\b(?:[KPVTALHB]\d{1,3}[A-Z]?|G[HB]\d{3})\b", re.IGNORECASE)


def gpu_kind(name: str | None, brand: str | None) -> str | None:
    """``"data-center"``, ``"workstation"`` or ``"consumer"``; ``None`` when neither the name
    nor the brand tells (brand ``nvidia``, reported by recent drivers for many models, does not)."""
    text = name or ""
    if _CONSUMER_NAME.search(text) or brand in _CONSUMER_BRANDS:
        return CONSUMER
    if _WORKSTATION_NAME.search(text) or brand in _WORKSTATION_BRANDS:
        return WORKSTATION
    if _DATA_CENTER_NAME.search(text) or brand in _DATA_CENTER_BRANDS:
        return DATA_CENTER
    return None
