"""A GPU's kind read from its name as text gives what the name patterns give, for every ASCII
name: the patterns are the specification, the text reading what a scan runs."""

from __future__ import annotations

import random

import pytest

from gpu_audit.knowledge import gpu_kinds
from gpu_audit.knowledge.gpu_kinds import (
    CONSUMER,
    DATA_CENTER,
    WORKSTATION,
    consumer_name,
    data_center_name,
    gpu_kind,
    workstation_name,
)

NAMES = [
    'NVIDIA H100 80GB HBM3', 'NVIDIA H200', 'NVIDIA A100-SXM4-80GB', 'NVIDIA A10G',
    'Tesla V100-SXM2-16GB', 'Tesla K80', 'Tesla T4', 'NVIDIA L4', 'NVIDIA L40S', 'NVIDIA B200',
    'NVIDIA GB200', 'NVIDIA GH200 480GB', 'NVIDIA GeForce RTX 4090', 'NVIDIA TITAN RTX',
    'TITAN Xp', 'NVIDIA RTX A6000', 'NVIDIA RTX 6000 Ada Generation',
    'NVIDIA RTX PRO 6000 Blackwell', 'Quadro RTX 8000', 'NVIDIA T1000', 'NVIDIA T400 4GB',
    'NVIDIA A2', 'NVIDIA A800 80GB PCIe', 'NVIDIA H800', 'NVIDIA A30', '',
    'NVIDIA Graphics Device', 'Tesla', 'tesla p40', 'nvidia h100', 'NVIDIA RTX PROfessional',
    'XRTX A5000', 'RTX A', 'RTX 4000 Adaxyz', 'RTX 4000  Ada', 'GH20', 'GB2000', 'A1_', 'H100X',
    'H100XY', 'T_100', 'RTX PRO_', '_Tesla_', 'K80-2', 'NVIDIA DGX Spark', 'NVIDIA H100 NVL',
    'NVIDIA GeForce GTX 1080 Ti', 'geforce', 'Titanium',
]
# Non-ASCII names take the patterns themselves (Unicode digits and case rules).
UNICODE_NAMES = ["NVIDIA H１００", "Tesla\u212a80", "RTX A\u0661", "\u212a80", "Tıtan", "GeForce ſ"]

PIECES = ["RTX", "RTX ", " Ada", "Ada", "PRO", "A", "T", "K", "G", "H", "B", "GH", "GB", "Tesla",
          "tesla", "Quadro", "GeForce", "TITAN", "titan", "0", "1", "12", "123", "1234", "12345",
          " ", "-", "_", "/", ".", "X", "x", "s", "(", "v"]


def _pattern(matcher_name: str):
    patterns = {"consumer_name": gpu_kinds.CONSUMER_NAME,
                "workstation_name": gpu_kinds.WORKSTATION_NAME,
                "data_center_name": gpu_kinds.DATA_CENTER_NAME}
    return patterns[matcher_name]()


def _generated(count: int) -> list[str]:
    rng = random.Random(20261127)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 7))) for _ in range(count)]


@pytest.mark.parametrize("matcher", [consumer_name, workstation_name, data_center_name],
                         ids=lambda m: m.__name__)
def test_the_text_reading_agrees_with_the_pattern(matcher):
    pattern = _pattern(matcher.__name__)
    for name in [*NAMES, *UNICODE_NAMES, *_generated(20_000)]:
        assert matcher(name) == (pattern.search(name) is not None), name


@pytest.mark.parametrize(("name", "brand", "kind"), [
    ("NVIDIA H100 80GB HBM3", "nvidia", DATA_CENTER),
    ("NVIDIA GeForce RTX 4090", "nvidia", CONSUMER),
    ("NVIDIA RTX 6000 Ada Generation", "nvidia", WORKSTATION),
    ("NVIDIA T1000", "nvidia", WORKSTATION),
    ("Tesla T4", "tesla", DATA_CENTER),
    ("NVIDIA Graphics Device", "nvidia", None),
    (None, "geforce_rtx", CONSUMER),
])
def test_kinds_of_known_models(name, brand, kind):
    assert gpu_kind(name, brand) == kind
