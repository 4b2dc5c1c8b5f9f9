"""Checks of the driver and the GPUs: present, the right model and size, free, cool, persistent.

``nvidia-driver`` views the scan's ``nvml-unavailable``, ``gpu-count`` its ``gpu-lost``,
``free-vram`` its ``low-free-vram`` and ``persistence-mode`` its ``persistence-mode-off``: the rule
decides, the check maps its finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpu_audit.check.registry import (
    FAIL,
    PASS,
    SKIP,
    UNKNOWN,
    WARN,
    CheckContext,
    check,
    each_gpu,
    gib_text,
    ignored_by_mode,
    ignored_by_policy,
    mode_status,
    not_configured,
    process_brief,
    process_label,
    result,
)
from gpu_audit.check.results import CheckResult
from gpu_audit.model import Gpu
from gpu_audit.units import fmt_bytes, fmt_pct, pct, plural, version_tuple


@check("nvidia-driver", "NVIDIA driver", views=("nvml-unavailable",), judges_more=True)
def nvidia_driver(ctx: CheckContext) -> Iterator[CheckResult]:
    """The NVIDIA driver answers through NVML and is as new as the policy asks.

    Fails when NVML cannot be used at all (no driver, kernel module not loaded, a library and
    module from different driver versions after an upgrade without a reboot, no permission, a
    hung driver; the scan's `nvml-unavailable` finding). With `min_gpus = 0` a missing driver is
    not required and the check is skipped. `min_driver_version` ("535.104.05") and
    `min_cuda_driver_version` ("12.4", the newest CUDA the driver supports, as `nvidia-smi` shows
    it) fail older drivers. Ignoring `nvml-unavailable` (a policy shared with CPU-only runners)
    skips the check where NVML cannot be used; where it can, the driver's versions are still
    judged.

    Why it matters: such a runner cannot run GPU work, and a driver older than the job's CUDA
    build fails at CUDA initialisation.

    Example: `FAIL nvidia-driver host driver 525.60.13 is older than 535.104.05 (driver
    525.60.13, CUDA 12.0)`.

    Fix: upgrade the NVIDIA driver on this runner (then reboot), or route the job to a runner with
    a newer driver; where NVML is unusable, the `nvml-unavailable` remedy.
    """
    scan, policy = ctx.scan, ctx.policy
    if not scan.nvml.available and "nvml-unavailable" in policy.ignore:
        yield ignored_by_policy("nvidia-driver", policy)
        return
    driver = scan.driver
    evidence = {
        "nvml_available": scan.nvml.available,
        "cause": scan.nvml.cause,
        "message": scan.nvml.message,
        "driver_version": driver.driver_version if driver else None,
        "cuda_driver_version": driver.cuda_driver_version if driver else None,
        "nvml_version": driver.nvml_version if driver else None,
        "nvidia_pci_devices": scan.host.nvidia_pci_devices,
    }
    found = ctx.finding_on("nvml-unavailable", "host")
    if found is not None:
        if policy.min_gpus == 0:
            yield result("nvidia-driver", "host", SKIP,
                         f"not required (min_gpus = 0); {found.title}", evidence=evidence)
            return
        yield result("nvidia-driver", "host", FAIL, found.title, evidence=evidence,
                     remedy=found.remedy, finding_id=found.id)
        return
    problems: list[str] = []
    unknown: list[str] = []
    for key, actual, label in (
        ("min_driver_version", evidence["driver_version"], "driver"),
        ("min_cuda_driver_version", evidence["cuda_driver_version"], "CUDA driver API"),
    ):
        wanted = getattr(policy, key)
        if wanted is None:
            continue
        evidence[key] = wanted
        have, need = version_tuple(actual or ""), version_tuple(wanted)
        if actual is None:
            unknown.append(f"{label} version not reported (policy needs >= {wanted})")
        elif have is None or need is None:  # the policy's is checked when read: the scan's
            unknown.append(f"{label} version {_shown(actual)} is not a version gpu-audit can "
                           f"compare (policy needs >= {wanted})")
        elif have < need:
            problems.append(f"{label} {actual} is older than {wanted}")
    described = (f"driver {evidence['driver_version'] or 'n/a'}, "
                 f"CUDA {evidence['cuda_driver_version'] or 'n/a'}")
    if problems:
        yield result("nvidia-driver", "host", FAIL, f"{'; '.join(problems)} ({described})",
                     evidence=evidence,
                     remedy="Upgrade the NVIDIA driver on this runner (then reboot), or route "
                             "the job to a runner with a newer driver.")
    elif unknown:
        yield result("nvidia-driver", "host", UNKNOWN, "; ".join(unknown), evidence=evidence,
                     remedy="Run `nvidia-smi` and compare its driver version by hand.")
    else:
        yield result("nvidia-driver", "host", PASS, described, evidence=evidence)


def _shown(version: str) -> str:
    """A version read from the scan as a title quotes it: whole when short, else its start."""
    return repr(version) if len(version) <= 40 else f"{version[:40]!r}…"


@check("gpu-count", "GPUs present", views=("gpu-lost",), judges_more=True)
def gpu_count(ctx: CheckContext) -> Iterator[CheckResult]:
    """At least `min_gpus` GPUs ({min_gpus} by default) are visible to the driver, and none is lost.

    A GPU that has fallen off the bus (the scan's `gpu-lost` finding: NVML answers "GPU is
    lost", usually with Xid 79 in the kernel log) fails the check even when enough others
    remain. Ignoring `gpu-lost` drops only that failure: a lost GPU is still not counted among
    those present. Outside containers, fewer GPUs through NVML than NVIDIA devices on the PCI bus
    is a warning (a device the driver did not bring up). NVML ignores `CUDA_VISIBLE_DEVICES`,
    so the count is the machine's, not the job's.

    Why it matters: a job sized for N GPUs fails to start, or a collective on a lost GPU hangs
    until the job's timeout.

    Example: `FAIL gpu-count host GPU 3 lost (fallen off the bus); 7 GPUs (NVIDIA H100 80GB HBM3)
    usable`.

    Fix: a lost GPU needs a reset or a reboot (the `gpu-lost` remedy); otherwise run the job on a
    runner with enough GPUs (runner labels or tags), or lower `min_gpus`.
    """
    scan, policy = ctx.scan, ctx.policy
    usable = [g for g in scan.gpus if not g.lost]
    lost = ctx.findings_for("gpu-lost")
    pci = scan.host.nvidia_pci_devices
    evidence = {"gpus": len(usable), "min_gpus": policy.min_gpus,
                "lost": [f.evidence["gpu_index"] for f in lost],
                "lost_pci_bus_ids": [f.evidence["pci_bus_id"] for f in lost],
                "nvidia_pci_devices": pci, "names": [g.name for g in usable]}
    names = ", ".join(sorted({g.name or "?" for g in usable}))
    found = plural(len(usable), "GPU") + (f" ({names})" if names else "")
    if lost:
        indexes = ", ".join(str(i) for i in evidence["lost"])
        yield result(
            "gpu-count", "host", FAIL, f"GPU {indexes} lost (fallen off the bus); {found} usable",
            evidence=evidence, remedy="\n".join(f.remedy for f in lost), finding_id="gpu-lost")
    elif len(usable) < policy.min_gpus:
        if not scan.nvml.available:
            remedy = "Fix the driver first (see the nvidia-driver check)."
        elif pci is not None and pci > len(scan.gpus):
            remedy = (f"{pci} NVIDIA devices are on the PCI bus but the driver shows "
                      f"{len(scan.gpus)}: check `sudo dmesg | grep -i nvrm` and, in a container, "
                      "that all GPUs are passed through (`--gpus all`).")
        else:
            remedy = (f"Run this job on a runner with at least {plural(policy.min_gpus, 'GPU')} "
                      "(use runner labels or tags), or lower `min_gpus`.")
        yield result("gpu-count", "host", FAIL,
                     f"{found}; the policy needs at least {policy.min_gpus}",
                     evidence=evidence, remedy=remedy)
    elif (scan.nvml.available and scan.host.container is None and pci is not None
          and pci > len(scan.gpus)):
        yield result(
            "gpu-count", "host", WARN,
            f"{found}, but {pci} NVIDIA devices are on the PCI bus", evidence=evidence,
            remedy="sudo dmesg | grep -i nvrm  # a device the driver did not initialise")
    elif policy.min_gpus == 0 and not usable:
        yield result("gpu-count", "host", PASS, "no GPU, and none required (min_gpus = 0)",
                     evidence=evidence)
    else:
        yield result("gpu-count", "host", PASS, f"{found}; needs at least {policy.min_gpus}",
                     evidence=evidence)


@check("gpu-name", "GPU model")
def gpu_name(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU's name matches the `gpu_name` regular expression (searched, case-sensitive).

    Use it to keep jobs that need a given model off other runners: `gpu_name = "H100|A100"`;
    prefix `(?i)` to ignore case. Skipped when `gpu_name` is not set.

    Why it matters: a job tuned for one model (memory size, bf16, FP8 kernels) fails or runs far
    slower on another.

    Example: `FAIL gpu-name gpu:0 Tesla T4 does not match /H100|A100/`.

    Fix: route the job to a runner with the GPU it needs (runner labels or tags), or correct
    `gpu_name`.
    """
    pattern = ctx.policy.gpu_name
    if pattern is None:
        yield not_configured("gpu-name", "gpu_name")
        return
    regex = re.compile(pattern)

    def judge(gpu: Gpu) -> CheckResult:
        evidence = {"name": gpu.name, "gpu_name": pattern}
        subject = f"gpu:{gpu.index}"
        if gpu.name is None:
            return result("gpu-name", subject, UNKNOWN, "the driver did not report a name",
                          evidence=evidence, remedy=f"nvidia-smi -L  # compare with /{pattern}/")
        if regex.search(gpu.name):
            return result("gpu-name", subject, PASS, f"{gpu.name} matches /{pattern}/",
                          evidence=evidence)
        return result("gpu-name", subject, FAIL, f"{gpu.name} does not match /{pattern}/",
                      evidence=evidence,
                      remedy="Route the job to a runner with the GPU it needs (runner labels or "
                              "tags), or correct `gpu_name`.")

    yield from each_gpu(ctx, "gpu-name", judge)


@check("gpu-memory", "GPU memory size")
def gpu_memory(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU has at least `min_gpu_memory_gib` of memory in total.

    The driver reports a little less than the size on the box (a "24 GB" card shows 23.99 GiB,
    a 16 GB T4 15 GiB): set the threshold from what `nvidia-smi --query-gpu=memory.total
    --format=csv` prints. Skipped when `min_gpu_memory_gib` is not set.

    Why it matters: a job sized for larger GPUs fails with `CUDA out of memory` once the model
    or the first batch is on the card.

    Example: `FAIL gpu-memory gpu:0 15.0 GiB total; the policy needs at least 40 GiB`.

    Fix: route the job to a runner with larger GPUs, or lower `min_gpu_memory_gib`.
    """
    minimum = ctx.policy.gib_bytes("min_gpu_memory_gib")
    if minimum is None:
        yield not_configured("gpu-memory", "min_gpu_memory_gib")
        return

    def judge(gpu: Gpu) -> CheckResult:
        total = gpu.memory_total_bytes
        evidence = {"memory_total_bytes": total, "min_bytes": minimum}
        subject = f"gpu:{gpu.index}"
        wanted = gib_text(ctx.policy.min_gpu_memory_gib)
        if total is None:
            return result("gpu-memory", subject, UNKNOWN, "memory size not reported",
                          evidence=evidence, remedy="nvidia-smi --query-gpu=memory.total "
                                                     "--format=csv")
        if total < minimum:
            return result("gpu-memory", subject, FAIL,
                          f"{fmt_bytes(total)} total; the policy needs at least {wanted}",
                          evidence=evidence,
                          remedy="Route the job to a runner with larger GPUs, or lower "
                                  "`min_gpu_memory_gib`.")
        return result("gpu-memory", subject, PASS, f"{fmt_bytes(total)} total (>= {wanted})",
                      evidence=evidence)

    yield from each_gpu(ctx, "gpu-memory", judge)


@check("free-vram", "GPU memory free", views=("low-free-vram",), judges_more=True)
def free_vram(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU has at least `min_free_vram_pct` of its size free, and `min_free_vram_gib` if set.

    The share is judged by the scan's `low-free-vram` rule, with the `min_free_vram_pct` of the
    one policy ({min_free_vram_pct}% by default; set it in `[tool.gpu-audit]`, or in the check
    table for check alone; 0 turns it off). `min_free_vram_gib` adds an absolute minimum. A GPU
    short of either fails (`free_vram = "warn"` or `"ignore"` relaxes that); the result lists
    what holds the memory. Ignoring `low-free-vram` drops the share: the check then judges
    `min_free_vram_gib` alone, and is skipped when that is not set.

    Why it matters: memory held before a job starts is memory the job cannot have: a leftover
    process, a duplicate server or a dead context turns into `CUDA out of memory` halfway
    through.

    Example: `FAIL free-vram gpu:0 1.5 GiB of 22.5 GiB free (6.7%); the policy needs >=
    {min_free_vram_pct}%`.

    Fix: the remedy names the holders (`ps -o pid,user,etime,args -p PIDS`): stop the ones left
    over from earlier jobs; with none listed, look with `sudo fuser -v /dev/nvidiaN`, and a dead
    context needs `sudo nvidia-smi --gpu-reset -i N` or a reboot. A policy that asks more
    than the card has in all (`min_free_vram_gib = 20` on a 4 GiB card) is met by lowering it or
    by a bigger GPU, never by stopping processes.
    """
    policy = ctx.policy
    if policy.free_vram == "ignore":
        yield ignored_by_mode("free-vram", "free_vram")
        return
    min_bytes = policy.gib_bytes("min_free_vram_gib")
    # the share is the low-free-vram rule's: ignoring that finding leaves the GiB minimum alone
    share_judged = "low-free-vram" not in policy.ignore
    if not share_judged and min_bytes is None:
        yield ignored_by_policy("free-vram", policy)
        return
    min_pct = policy.min_free_vram_pct if share_judged else None
    needs = " and ".join(part for part in (
        f">= {gib_text(policy.min_free_vram_gib)}" if min_bytes is not None else "",
        f">= {fmt_pct(min_pct)}" if share_judged else "") if part)

    def judge(gpu: Gpu) -> CheckResult:
        subject = f"gpu:{gpu.index}"
        free, total = gpu.memory_free_bytes, gpu.memory_total_bytes
        free_pct = pct(free, total)
        holders = sorted((p for p in ctx.scan.processes if p.gpu_index == gpu.index),
                         key=lambda p: -(p.used_memory_bytes or 0))
        evidence = {"memory_free_bytes": free, "memory_total_bytes": total, "free_pct": free_pct,
                    "min_free_bytes": min_bytes, "min_free_pct": min_pct,
                    "holders": [process_brief(p) for p in holders]}
        if free is None or (min_pct and free_pct is None):
            return result("free-vram", subject, UNKNOWN, "free memory not reported",
                          evidence=evidence, remedy=f"nvidia-smi -i {gpu.index}")
        shown = f"{fmt_bytes(free)} of {fmt_bytes(total)} free" + (
            f" ({fmt_pct(free_pct)})" if free_pct is not None else "")
        low = ctx.finding_on("low-free-vram", subject)
        if low is None and (min_bytes is None or free >= min_bytes):
            return result("free-vram", subject, PASS, f"{shown}; needs {needs}", evidence=evidence)
        if min_bytes is not None and total is not None and min_bytes > total:
            # No process to stop can free more than the card has: the policy or the GPU must change.
            remedy = (f"GPU {gpu.index} has {fmt_bytes(total)} in all, less than the "
                      f"{gib_text(policy.min_free_vram_gib)} the policy asks free: stopping "
                      "processes cannot get there. Lower `min_free_vram_gib` in the policy to "
                      f"what the job needs (below {fmt_bytes(total)}), or run the job on a GPU "
                      "with more memory.")
        elif holders:
            listing = ", ".join(process_label(p) for p in holders[:5])
            remedy = (f"Held by {listing}. Check them with `ps -o pid,user,etime,args -p "
                      f"{' '.join(str(p.pid) for p in holders[:5])}` and stop the ones left over "
                      "from earlier jobs.")
        else:
            remedy = (f"No process is listed on GPU {gpu.index}: look for holders with `sudo fuser "
                      f"-v /dev/nvidia{gpu.index}` or containers sharing it; a dead context needs "
                      f"`sudo nvidia-smi --gpu-reset -i {gpu.index}` or a reboot.")
        return result("free-vram", subject, mode_status(policy.free_vram),
                      f"{shown}; the policy needs {needs}", evidence=evidence, remedy=remedy,
                      finding_id=low.id if low is not None else None)

    yield from each_gpu(ctx, "free-vram", judge)


@check("gpu-temperature", "GPU temperature")
def gpu_temperature(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU is no hotter than `max_gpu_temperature_c` before the job starts.

    The temperature is the one NVML reports as check runs, before the job's load; the evidence
    adds utilisation and fan speed. Skipped when `max_gpu_temperature_c` is not set.

    Why it matters: an idle GPU that is already hot has poor cooling (a failed fan, blocked
    airflow, a hot rack) and will throttle its clocks under load.

    Example: `FAIL gpu-temperature gpu:2 78 C; the policy allows at most 70 C`.

    Fix: inspect it with `nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i N`, then check fans and
    airflow before running on this GPU.
    """
    limit = ctx.policy.max_gpu_temperature_c
    if limit is None:
        yield not_configured("gpu-temperature", "max_gpu_temperature_c")
        return

    def judge(gpu: Gpu) -> CheckResult:
        subject = f"gpu:{gpu.index}"
        temp = gpu.temperature_c
        evidence = {"temperature_c": temp, "max_temperature_c": limit,
                    "temperature_slowdown_c": gpu.temperature_slowdown_c,
                    "utilization_pct": gpu.utilization_pct, "fan_speed_pct": gpu.fan_speed_pct}
        if temp is None:
            return result("gpu-temperature", subject, UNKNOWN, "temperature not reported",
                          evidence=evidence,
                          remedy=f"nvidia-smi -q -d TEMPERATURE -i {gpu.index}")
        if temp > limit:
            return result("gpu-temperature", subject, FAIL, f"{temp} C; the policy allows at "
                          f"most {limit:g} C", evidence=evidence,
                          remedy=f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {gpu.index}  "
                                  "# then check fans and airflow before running on this GPU")
        return result("gpu-temperature", subject, PASS, f"{temp} C (<= {limit:g} C)",
                      evidence=evidence)

    yield from each_gpu(ctx, "gpu-temperature", judge)


@check("persistence-mode", "Persistence mode", views=("persistence-mode-off",))
def persistence_mode(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU has persistence mode on, when `require_persistence_mode = true`.

    Datacenter runners normally run `nvidia-persistenced`. Judged by the scan's
    `persistence-mode-off` rule, which applies to Linux only: elsewhere a GPU with persistence
    off is skipped.

    Why it matters: without it the driver tears the GPU down whenever no process uses it and
    initialises it again for the next one: seconds of start-up per job, and clocks and settings
    that do not stick.

    Example: `FAIL persistence-mode gpu:0 persistence mode is off`.

    Fix: `sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`), the
    `persistence-mode-off` remedy.
    """
    if not ctx.policy.require_persistence_mode:
        yield not_configured("persistence-mode", "require_persistence_mode = true")
        return
    off = {index: f for f in ctx.findings_for("persistence-mode-off")
           for index in f.evidence.get("gpus", [])}

    def judge(gpu: Gpu) -> CheckResult:
        subject = f"gpu:{gpu.index}"
        mode = gpu.persistence_mode
        evidence = {"persistence_mode": mode}
        if mode is None:
            return result("persistence-mode", subject, UNKNOWN,
                          "persistence mode not reported (not supported on this platform?)",
                          evidence=evidence, remedy=f"nvidia-smi -q -i {gpu.index} | grep -i "
                                                    "persistence")
        if gpu.index in off:
            return result("persistence-mode", subject, FAIL, "persistence mode is off",
                          evidence=evidence, remedy=off[gpu.index].remedy,
                          finding_id=off[gpu.index].id)
        if not mode:
            return result("persistence-mode", subject, SKIP,
                          f"persistence mode is off, which only matters on Linux "
                          f"(this is {ctx.scan.host.os})", evidence=evidence)
        return result("persistence-mode", subject, PASS, "persistence mode is on",
                      evidence=evidence)

    yield from each_gpu(ctx, "persistence-mode", judge)
