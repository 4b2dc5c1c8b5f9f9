"""The expectations table: which row a name finds, what a PCIe link carries, sources cited."""

from __future__ import annotations

import pytest

from gpu_audit.knowledge.gpu_models import DTYPES, MODELS, find_model, pcie_gbs


@pytest.mark.parametrize(("name", "key"), [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-40gb"),
    ("Tesla V100-SXM2-16GB", "v100-sxm2"),
    ("Tesla T4", "t4"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
])
def test_names_find_their_row(name: str, key: str) -> None:
    spec = find_model(name)
    assert spec is not None and spec.key == key


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce GTX 1650", "NVIDIA L40",
                                  "NVIDIA GeForce RTX 3090 Ti", None, ""])
def test_unknown_models_have_no_row(name) -> None:
    assert find_model(name) is None


def test_every_row_cites_nvidia_and_is_dense() -> None:
    for spec in MODELS:
        assert spec.source.startswith("https://") and "nvidia" in spec.source.lower()
        assert set(spec.peak_tflops) == set(DTYPES)
        assert spec.memory_bandwidth_gbs and spec.memory_bandwidth_gbs > 100
        half = spec.peak("fp16")
        # Dense tensor figures: fp16 is at most 16x fp32 on these parts (sparse would be 32x).
        assert half is None or spec.peak("fp32") <= half <= 16 * spec.peak("fp32")
    h100 = find_model("NVIDIA H100 80GB HBM3")
    assert h100.peak("bf16") == pytest.approx(1979 / 2, rel=0.01)  # datasheet: 1979 sparse


def test_pcie_link_capacity() -> None:
    assert pcie_gbs(5, 16) == pytest.approx(63.0, rel=0.01)
    assert pcie_gbs(4, 16) == pytest.approx(31.5, rel=0.01)
    assert pcie_gbs(5, 8) == pytest.approx(pcie_gbs(5, 16) / 2, rel=0.01)
    assert pcie_gbs(None, 16) is None and pcie_gbs(4, None) is None and pcie_gbs(9, 16) is None
