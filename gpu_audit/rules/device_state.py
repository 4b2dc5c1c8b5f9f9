"""Memory temperature, and ECC/MIG mode changes waiting for a GPU reset."""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.config import Policy
from gpu_audit.model import Finding, Scan, Severity
from gpu_audit.rules import rule
from gpu_audit.rules.health import _label, _live


@rule("memory-temperature-near-limit")
def memory_temperature_near_limit(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """GPU memory within `temperature_margin_c` ({temperature_margin_c} C by default) of its limit.

    HBM and GDDR memory have a temperature limit of their own, apart from the GPU's: above it
    the hardware slows the GPU down to protect the memory, however cool the GPU core reads. At or
    above the limit the finding is an error. GPUs that do not report a memory temperature (most
    consumer cards) are skipped.

    Why it matters: memory-bound work (large-batch training, inference) heats the memory hard, so
    a GPU starting this close to the limit will cross it under load and slow the whole run.

    Example: `GPU 0 (NVIDIA H100 80GB HBM3): memory at 88 C, close to its limit (95 C)` - 7 C of
    margin left.

    Fix: improve cooling before a long run (airflow, fans, rack inlet temperature); watch it with
    `nvidia-smi -q -d TEMPERATURE -i N`.
    """
    for gpu in _live(scan):
        temp, limit = gpu.memory_temperature_c, gpu.memory_temperature_max_c
        if temp is None or limit is None or temp < limit - policy.temperature_margin_c:
            continue
        over = temp >= limit
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=(f"{_label(gpu)}: memory at {temp} C, " + ("at or above" if over else
                   "close to") + f" its limit ({limit} C)"),
            detail=(("The hardware slows the GPU down at this memory temperature."
                     if over else f"{limit - temp} C of margin left (policy: "
                     f"{policy.temperature_margin_c:g} C).")
                    + (f" The GPU itself reads {gpu.temperature_c} C."
                       if gpu.temperature_c is not None else "")),
            remedy=("Improve cooling before a long run (airflow, fans, rack inlet temperature); "
                    f"watch it with `nvidia-smi -q -d TEMPERATURE -i {gpu.index}`"),
            evidence={"memory_temperature_c": temp, "memory_temperature_max_c": limit,
                      "margin_c": limit - temp, "temperature_c": gpu.temperature_c,
                      "temperature_margin_c": policy.temperature_margin_c},
            severity=Severity.ERROR if over else None,
        )


def _on_off(enabled: bool) -> str:
    return "on" if enabled else "off"


@rule("gpu-mode-change-pending")
def gpu_mode_change_pending(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """An ECC or MIG mode change is pending: it takes effect at the next GPU reset or reboot.

    `nvidia-smi -e` (ECC) and `nvidia-smi -mig` (MIG) set a pending mode; the GPU keeps the
    current one until it is reset or the machine reboots. Until then the GPU is not in the
    state someone asked for.

    Why it matters: the reset will change the mode under the next job: turning ECC on or off
    changes the usable memory, turning MIG on splits the GPU into instances.

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): mode change pending until a reset (ECC off -> on)`.

    Fix: apply the change before a run starts: drain the GPU, then `sudo nvidia-smi -r -i N` (or
    reboot); or undo it with the `nvidia-smi -e`/`-mig` command the remedy gives.
    """
    for gpu in _live(scan):
        changes = {}
        for name, current, pending in (("ECC", gpu.ecc_mode, gpu.ecc_mode_pending),
                                       ("MIG", gpu.mig_mode, gpu.mig_mode_pending)):
            if current is not None and pending is not None and current != pending:
                changes[name] = (current, pending)
        if not changes:
            continue
        said = ", ".join(f"{name} {_on_off(now)} -> {_on_off(then)}"
                         for name, (now, then) in changes.items())
        undo = " && ".join(
            f"sudo nvidia-smi -i {gpu.index} " + ("-e " if name == "ECC" else "-mig ")
            + ("1" if now else "0") for name, (now, _) in changes.items())
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: mode change pending until a reset ({said})",
            detail=("The GPU runs in its current mode until it is reset or the machine "
                    "reboots; the pending mode then takes effect under whatever job runs next."),
            remedy=(f"Drain GPU {gpu.index}, then `sudo nvidia-smi -r -i {gpu.index}` (or "
                    f"reboot) to apply it; to cancel it instead: `{undo}`"),
            evidence={"ecc_mode": gpu.ecc_mode, "ecc_mode_pending": gpu.ecc_mode_pending,
                      "mig_mode": gpu.mig_mode, "mig_mode_pending": gpu.mig_mode_pending},
        )
