"""Health readings the GPUs cannot give, listed so that "not supported" is never "healthy"."""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.knowledge.gpu_kinds import CONSUMER, DATA_CENTER, gpu_kind
from gpu_audit.model import Finding, Gpu, Scan
from gpu_audit.rules import rule
from gpu_audit.rules.health import _live


@rule("health-unsupported")
def health_unsupported(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Health checks these GPUs cannot answer ("not supported"), so they were not made.

    Consumer and older GPUs do not report every reading: GeForce cards have no ECC, only data
    center parts retire pages or remap rows, and some boards hide clock-event reasons or
    temperature thresholds. The other checks skip what is missing. GPUs of one model missing the
    same readings share one finding: its subject is `gpu:N` for a single GPU and `host` for
    several, and `evidence.gpus` lists their indexes.

    Why it matters: this finding lists what was skipped, so that a missing reading is never
    mistaken for a healthy one.

    Example: `GPU 0,1 (NVIDIA GeForce RTX 4090): not supported: ECC error counts, memory repair
    (page retirement, row remapping)`.

    Fix: the remedy depends on the kind of GPU (by its name and NVML brand): nothing to do on a
    consumer card, while a data-center GPU should report these readings, so their absence points
    at the driver, a VM or vGPU that hides them.
    """
    if not scan.nvml.available:
        return
    groups: dict[tuple[str | None, tuple[str, ...]], list[Gpu]] = {}
    for gpu in _live(scan):
        missing = []
        if gpu.ecc_mode is None and gpu.ecc_errors_uncorrected_volatile is None:
            missing.append("ECC error counts")
        if gpu.retired_pages_pending is None and gpu.remapped_rows_pending is None:
            missing.append("memory repair (page retirement, row remapping)")
        if gpu.throttle_reasons is None:
            missing.append("clock-event (throttle) reasons")
        if gpu.temperature_c is None or gpu.temperature_slowdown_c is None:
            missing.append("temperature against its slowdown threshold")
        if gpu.pcie_gen_current is None or gpu.pcie_width_current is None:
            missing.append("PCIe link state")
        if missing:
            groups.setdefault((gpu.name, tuple(missing)), []).append(gpu)
    for (name, missing), gpus in groups.items():
        indexes = [g.index for g in gpus]
        kind = gpu_kind(name, gpus[0].brand)
        label = f"GPU {_index_list(indexes)}" + (f" ({name})" if name else "")
        yield Finding(
            subject=f"gpu:{indexes[0]}" if len(gpus) == 1 else "host",
            title=f"{label}: not supported: {', '.join(missing)}",
            detail=(f"{'This GPU does' if len(gpus) == 1 else 'These GPUs do'} not report these "
                    "readings (the GPU or its driver), so their checks were not made."),
            remedy=_unsupported_remedy(kind, indexes),
            evidence={"not_supported": list(missing), "gpus": indexes, "gpu_kind": kind},
        )


def _index_list(indexes: list[int]) -> str:
    """``[0, 1, 2, 3, 5]`` -> ``"0-3,5"``."""
    runs: list[list[int]] = []
    for index in indexes:
        if runs and runs[-1][1] == index - 1:
            runs[-1][1] = index
        else:
            runs.append([index, index])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _unsupported_remedy(kind: str | None, indexes: list[int]) -> str:
    query = (f"nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT,PERFORMANCE,TEMPERATURE "
             f"-i {','.join(map(str, indexes))}")
    if kind == CONSUMER:
        return "Nothing to fix: consumer (GeForce, TITAN) GPUs do not have these readings"
    if kind == DATA_CENTER:
        return (f"{query}  # a data-center GPU reports these: if they read N/A here too, update "
                "the driver; under vGPU or in a VM the host may hide them (ask its operator)")
    return f"{query}  # N/A there means this model or its driver does not report them"
