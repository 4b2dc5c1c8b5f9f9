"""What a GPU model should do: dense peak throughput per dtype, memory bandwidth, NVLink, and what
a PCIe link of a given generation and width carries. ``gpu-audit diag`` judges its measurements
against these.

Every figure is NVIDIA's own, from the datasheet or architecture whitepaper named in the row's
``source``. Throughput is **dense** (NVIDIA's datasheets print tensor-core figures "with sparsity",
which is twice the dense figure: the table halves those), in TFLOPS (10^12 per second);
half-precision tensor figures are with FP32 accumulation, which is what PyTorch's matmul uses.
Bandwidths are in GB/s (10^9 bytes per second): memory bandwidth counts reads plus writes, as the
datasheets do; ``nvlink_gbs`` is the datasheet's per-GPU total over both directions.

A measurement never reaches the datasheet peak. :data:`METHOD_EFFICIENCY` says what share of
the peak a healthy GPU reaches with the method ``diag`` uses; a measurement is low when it falls
below :data:`LOW_FRACTION` of that share (so a healthy GPU passes with a wide margin, and a GPU
at half its speed does not).

An unknown model has no row: ``diag`` then judges it against its own first seconds and the
node's other GPUs of the same name, never against a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8")

_HOPPER_DATASHEET = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200_DATASHEET = "https://www.nvidia.com/en-us/data-center/h200/"
_A100_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                   "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_V100_DATASHEET = ("https://images.nvidia.com/content/technologies/volta/pdf/"
                   "volta-v100-datasheet-update-us-1165301-r5.pdf")
_T4_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/"
                 "t4-tensor-core-datasheet-951643.pdf")
_A10_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/"
                  "datasheet-new/nvidia-a10-datasheet.pdf")
_L4_DATASHEET = "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
_L40S_DATASHEET = "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_ADA_WHITEPAPER = ("https://images.nvidia.com/aem-dam/Solutions/geforce/ada/"
                   "nvidia-ada-gpu-architecture.pdf")
_AMPERE_GA102_WHITEPAPER = ("https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-"
                            "architecture-whitepaper-v2.pdf")


@dataclass(frozen=True)
class GpuModelSpec:
    """One GPU model's datasheet figures (dense peaks; ``None``: the model has no such path)."""

    key: str  # stable id: "h100-sxm"
    label: str  # "H100 SXM5 80GB"
    pattern: str  # regex on the NVML name
    peak_tflops: dict[str, float | None] = field(default_factory=dict)  # dtype -> dense TFLOPS
    memory_bandwidth_gbs: float | None = None
    nvlink_generation: int | None = None
    nvlink_gbs: float | None = None  # per GPU, both directions together
    source: str = ""
    note: str = ""

    def peak(self, dtype: str) -> float | None:
        return self.peak_tflops.get(dtype)


def _peaks(fp32: float, tf32: float | None, fp16: float | None, bf16: float | None,
           fp8: float | None) -> dict[str, float | None]:
    return {"fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": bf16, "fp8": fp8}


# Most specific first: the first pattern that matches the NVML name wins.
MODELS: tuple[GpuModelSpec, ...] = (
    GpuModelSpec("h100-nvl", "H100 NVL 94GB", r"\bH100 NVL\b",
                 _peaks(60, 417.5, 835.5, 835.5, 1670.5), 3900, 4, 600, _HOPPER_DATASHEET,
                 "datasheet tensor figures with sparsity halved"),
    GpuModelSpec("h100-pcie", "H100 PCIe 80GB", r"\bH100\b.*\bPCIe\b",
                 _peaks(51, 378, 756, 756, 1513), 2000, 4, 600, _HOPPER_DATASHEET,
                 "datasheet tensor figures with sparsity halved; NVLink through a bridge"),
    GpuModelSpec("h100-sxm", "H100 SXM5 80GB", r"\bH100\b",
                 _peaks(67, 494.5, 989.5, 989.5, 1979), 3350, 4, 900, _HOPPER_DATASHEET,
                 "datasheet tensor figures with sparsity halved"),
    GpuModelSpec("h200", "H200 SXM 141GB", r"\bH200\b",
                 _peaks(67, 494.5, 989.5, 989.5, 1979), 4800, 4, 900, _H200_DATASHEET,
                 "datasheet tensor figures with sparsity halved"),
    GpuModelSpec("a100-sxm-80gb", "A100 SXM4 80GB", r"\bA100\b.*SXM.*80GB",
                 _peaks(19.5, 156, 312, 312, None), 2039, 3, 600, _A100_DATASHEET),
    GpuModelSpec("a100-pcie-80gb", "A100 PCIe 80GB", r"\bA100\b.*80GB",
                 _peaks(19.5, 156, 312, 312, None), 1935, 3, 600, _A100_DATASHEET,
                 "NVLink through a bridge"),
    GpuModelSpec("a100-40gb", "A100 40GB", r"\bA100\b",
                 _peaks(19.5, 156, 312, 312, None), 1555, 3, 600, _A100_DATASHEET),
    GpuModelSpec("v100-sxm2", "V100 SXM2", r"\bV100\b.*SXM",
                 _peaks(15.7, None, 125, None, None), 900, 2, 300, _V100_DATASHEET,
                 "fp16 is the tensor-core figure; no TF32 or BF16 path"),
    GpuModelSpec("v100-pcie", "V100 PCIe", r"\bV100\b",
                 _peaks(14, None, 112, None, None), 900, None, None, _V100_DATASHEET,
                 "fp16 is the tensor-core figure; no TF32 or BF16 path"),
    GpuModelSpec("t4", "T4", r"\bT4\b",
                 _peaks(8.1, None, 65, None, None), 320, None, None, _T4_DATASHEET,
                 "fp16 is the mixed-precision tensor-core figure"),
    GpuModelSpec("a10", "A10", r"\bA10\b(?!G)",
                 _peaks(31.2, 62.5, 125, 125, None), 600, None, None, _A10_DATASHEET,
                 "datasheet tensor figures with sparsity halved"),
    GpuModelSpec("l40s", "L40S", r"\bL40S\b",
                 _peaks(91.6, 183, 362, 362, 733), 864, None, None, _L40S_DATASHEET,
                 "datasheet tensor figures with sparsity halved"),
    GpuModelSpec("l4", "L4", r"\bL4\b",
                 _peaks(30.3, 60, 121, 121, 242.5), 300, None, None, _L4_DATASHEET,
                 "datasheet tensor figures with sparsity halved"),
    GpuModelSpec("rtx-4090", "GeForce RTX 4090", r"\bRTX 4090\b",
                 _peaks(82.6, 82.6, 165.2, 165.2, 330.3), 1008, None, None, _ADA_WHITEPAPER,
                 "whitepaper dense figures with FP32 accumulation (GeForce runs those at half "
                 "the FP16-accumulate rate)"),
    GpuModelSpec("rtx-3090", "GeForce RTX 3090", r"\bRTX 3090\b(?! Ti)",
                 _peaks(35.6, 35.6, 71, 71, None), 936, 3, 112.5, _AMPERE_GA102_WHITEPAPER,
                 "whitepaper dense figures with FP32 accumulation; NVLink through a bridge"),
)


def find_model(name: str | None, table: tuple[GpuModelSpec, ...] = MODELS) -> GpuModelSpec | None:
    """The row for an NVML name (``"NVIDIA H100 80GB HBM3"``), or ``None`` for an unknown model."""
    if not name:
        return None
    return next((m for m in table if re.search(m.pattern, name, re.IGNORECASE)), None)


# PCIe: GB/s per lane and direction, after line encoding (8b/10b to Gen2, 128b/130b from Gen3,
# FLIT from Gen6), from the PCI-SIG's transfer rates (2.5, 5, 8, 16, 32, 64 GT/s).
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def pcie_gbs(generation: int | None, width: int | None) -> float | None:
    """What a PCIe link of this generation and width carries in one direction, in GB/s."""
    if generation is None or width is None or generation not in PCIE_LANE_GBS or width <= 0:
        return None
    return round(PCIE_LANE_GBS[generation] * width, 2)


# The share of the datasheet peak a healthy GPU reaches with diag's method: a large
# device-to-device copy (memory), pinned host copies of 256 MiB (PCIe: headers and flow control
# cost some 15-20%), a square matmul of 8192 (throughput), a peer copy of 256 MiB (NVLink, per
# direction), NCCL's all-reduce bus bandwidth.
METHOD_EFFICIENCY = {
    "memory_bandwidth": 0.80,
    "pcie": 0.80,
    "matmul": 0.65,
    "p2p": 0.75,
    "allreduce": 0.70,
}
# Below this share of the expected figure (peak x method efficiency) a measurement is low.
LOW_FRACTION = 0.70
# Below this share of the median of the node's other GPUs of the same model a GPU is an outlier.
PEER_FRACTION = 0.85
