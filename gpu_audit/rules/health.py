"""Hardware health verdicts from NVML readings and the kernel log.

A reading the GPU does not support is ``None`` in the scan: the rules skip it, and
``health-unsupported`` says which checks could not be made, so "not supported" is never read as
"healthy" (:mod:`gpu_audit.rules.unsupported`). GPUs NVML reported as lost are left to the NVML
rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpu_audit.config import Policy
from gpu_audit.gpu_identity import bus_key
from gpu_audit.model import Finding, Gpu, Scan, Severity, XidEvent
from gpu_audit.rules import rule
from gpu_audit.units import fmt_pct, noun, parse_utc, plural

if TYPE_CHECKING:
    from gpu_audit.knowledge.xid import XidInfo


def _live(scan: Scan) -> list[Gpu]:
    return [g for g in scan.gpus if not g.lost]


def _label(gpu: Gpu) -> str:
    return f"GPU {gpu.index}" + (f" ({gpu.name})" if gpu.name else "")


def _reset_remedy(gpu: Gpu) -> str:
    return (f"Drain GPU {gpu.index}, then reset it: `sudo nvidia-smi -r -i {gpu.index}` with no "
            "process on it (or reboot); if it recurs, run `dcgmi diag -r 3` and contact your "
            "vendor")


@rule("ecc-uncorrectable")
def ecc_uncorrectable(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The GPU has had uncorrectable (double-bit) ECC memory errors.

    Volatile counts are since the driver last loaded: the memory is failing now (critical; the
    affected pages or rows are retired or remapped at the next GPU reset). Aggregate counts cover
    the card's lifetime: a history to watch (warning), unless the volatile count is also
    non-zero. Consumer GPUs without ECC report "not supported".

    Why it matters: an uncorrectable error corrupts data in flight and kills the process that
    touched it (Xid 48/94/95); any job on the GPU can crash or compute on corrupted data.

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): 2 uncorrectable ECC errors since the driver loaded`
    (evidence: `uncorrected_volatile`, `uncorrected_aggregate`, `corrected_aggregate`).

    Fix: for volatile errors, drain the GPU and reset it so the repairs apply; for a lifetime
    count, check the repairs took (`nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i N`) and
    replace the GPU if the count grows.
    """
    for gpu in _live(scan):
        volatile = gpu.ecc_errors_uncorrected_volatile
        aggregate = gpu.ecc_errors_uncorrected_aggregate
        evidence = {"uncorrected_volatile": volatile, "uncorrected_aggregate": aggregate,
                    "corrected_volatile": gpu.ecc_errors_corrected_volatile,
                    "corrected_aggregate": gpu.ecc_errors_corrected_aggregate}
        if volatile:
            yield Finding(
                subject=f"gpu:{gpu.index}",
                title=f"{_label(gpu)}: {plural(volatile, 'uncorrectable ECC error')} since the "
                      "driver loaded",
                detail=("Uncorrectable memory errors since the driver loaded: the memory is "
                        "failing now, and any job on this GPU can crash or compute on corrupted "
                        "data."),
                remedy=_reset_remedy(gpu),
                evidence=evidence,
            )
        elif aggregate:
            yield Finding(
                subject=f"gpu:{gpu.index}",
                title=(f"{_label(gpu)}: {plural(aggregate, 'uncorrectable ECC error')} in its "
                       "lifetime"),
                detail=("None since the driver loaded, so the bad memory has probably been "
                        "retired or remapped; watch for new ones."),
                remedy=(f"nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i {gpu.index}  "
                        "# check the repairs took; replace the GPU if the count grows"),
                evidence=evidence,
                severity=Severity.WARNING,
            )


@rule("memory-repair-pending")
def memory_repair_pending(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Retired pages or remapped rows are waiting for a GPU reset to take effect.

    After a memory error the driver marks the bad page (older GPUs: page retirement) or row
    (A100 and newer: row remapping) for repair, but the repair only applies when the GPU is
    reset.

    Why it matters: until then the faulty memory stays in use and the next job may hit it again.

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): row remapping pending a GPU reset`.

    Fix: drain the GPU and reset it with no process on it (`sudo nvidia-smi -r -i N`), or
    reboot.
    """
    for gpu in _live(scan):
        pending = []
        if gpu.retired_pages_pending:
            pending.append("page retirement")
        if gpu.remapped_rows_pending:
            pending.append("row remapping")
        if not pending:
            continue
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: {' and '.join(pending)} pending a GPU reset",
            detail=("The driver has marked faulty memory for repair, but it takes effect only "
                    "after a GPU reset; until then jobs keep using it."),
            remedy=_reset_remedy(gpu),
            evidence={"retired_pages_pending": gpu.retired_pages_pending,
                      "retired_pages_sbe": gpu.retired_pages_sbe,
                      "retired_pages_dbe": gpu.retired_pages_dbe,
                      "remapped_rows_pending": gpu.remapped_rows_pending,
                      "remapped_rows_correctable": gpu.remapped_rows_correctable,
                      "remapped_rows_uncorrectable": gpu.remapped_rows_uncorrectable},
        )


@rule("row-remap-failure")
def row_remap_failure(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """A memory row could not be remapped: the GPU has run out of spare rows.

    Row remapping (A100 and newer) replaces failing memory rows with spares. When it fails, the
    faulty memory can no longer be repaired in place.

    Why it matters: the error will recur on every job that touches that memory; NVIDIA's guidance
    is to take the GPU out of service and return it.

    Example: `GPU 2 (NVIDIA A100-SXM4-40GB): row remapping failed` (evidence:
    `remapped_rows_failure`, `remapped_rows_correctable`).

    Fix: take the GPU out of service (e.g. drain the node) and contact your vendor with
    `nvidia-bug-report.sh` output.
    """
    for gpu in _live(scan):
        if not gpu.remapped_rows_failure:
            continue
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: row remapping failed",
            detail=("The GPU could not remap a failing memory row; the error will recur and the "
                    "card needs replacing."),
            remedy=(f"Take GPU {gpu.index} out of service (e.g. drain the node) and contact your "
                    "vendor with `nvidia-bug-report.sh` output"),
            evidence={"remapped_rows_failure": True,
                      "remapped_rows_uncorrectable": gpu.remapped_rows_uncorrectable,
                      "remapped_rows_correctable": gpu.remapped_rows_correctable},
        )


_HW_SLOWDOWN = {
    "hw_slowdown": "hardware slowdown (the board's protection signal: power supply or "
                   "temperature)",
    "hw_thermal_slowdown": "hardware thermal slowdown (the GPU is too hot)",
    "hw_power_brake_slowdown": "power brake (the system asked the GPU to cut power)",
}


@rule("hw-slowdown")
def hw_slowdown(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The GPU's hardware protection is cutting its clocks right now.

    Hardware slowdown halves the clocks or worse when the board signals a problem: too hot
    (failed fan, blocked airflow, hot aisle), a power supply that cannot deliver, or an external
    power-brake signal.

    Why it matters: a run on this GPU is slow and, in multi-GPU jobs, drags every other rank down
    to its pace.

    Example: `GPU 0 (NVIDIA H100 80GB HBM3): hw_slowdown active` - ... Temperature 91 C, power
    312 W, SM clock 705 of 1980 MHz.

    Fix: check cooling and power (`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i N`); fix
    airflow or the PSU before a long run.
    """
    for gpu in _live(scan):
        active = [r for r in gpu.throttle_reasons or [] if r in _HW_SLOWDOWN]
        if not active:
            continue
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: {', '.join(active)} active",
            detail="; ".join(_HW_SLOWDOWN[r] for r in active) + (
                f". Temperature {gpu.temperature_c} C, power {gpu.power_draw_w} W, SM clock "
                f"{gpu.sm_clock_mhz} of {gpu.sm_clock_max_mhz} MHz."),
            remedy=(f"Check cooling and power: `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i "
                    f"{gpu.index}`; fix airflow or the PSU before a long run"),
            evidence={"throttle_reasons": gpu.throttle_reasons,
                      "throttle_reasons_mask": gpu.throttle_reasons_mask,
                      "temperature_c": gpu.temperature_c, "power_draw_w": gpu.power_draw_w,
                      "sm_clock_mhz": gpu.sm_clock_mhz, "sm_clock_max_mhz": gpu.sm_clock_max_mhz},
        )


@rule("thermal-slowdown")
def thermal_slowdown(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The driver is lowering the GPU's clocks because it is running hot.

    Software thermal slowdown keeps the GPU below its temperature target by lowering clocks. It
    is not a fault.

    Why it matters: throughput drops for as long as it lasts; over a long run it usually means
    poor airflow or a high ambient temperature.

    Example: `GPU 1 (NVIDIA A100-PCIE-40GB): thermal slowdown at 87 C` - slowdown threshold
    90 C; SM clock 1110 of 1410 MHz.

    Fix: improve airflow (fans, case, rack blanking) or lower the room temperature.
    """
    for gpu in _live(scan):
        if "sw_thermal_slowdown" not in (gpu.throttle_reasons or []):
            continue
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: thermal slowdown at {gpu.temperature_c} C",
            detail=(f"The driver is reducing clocks to hold the temperature down "
                    f"({gpu.temperature_c} C; slowdown threshold {gpu.temperature_slowdown_c} C; "
                    f"SM clock {gpu.sm_clock_mhz} of {gpu.sm_clock_max_mhz} MHz)."),
            remedy="Improve airflow (fans, case, rack blanking) or lower the room temperature",
            evidence={"throttle_reasons": gpu.throttle_reasons,
                      "temperature_c": gpu.temperature_c,
                      "temperature_slowdown_c": gpu.temperature_slowdown_c,
                      "sm_clock_mhz": gpu.sm_clock_mhz, "sm_clock_max_mhz": gpu.sm_clock_max_mhz},
        )


@rule("power-capped")
def power_capped(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The GPU is holding its clocks down to stay within its power limit.

    Normal under heavy load: a busy GPU runs at its power limit. Worth knowing when the limit has
    been lowered below the board's default (`nvidia-smi -pl`).

    Why it matters: a lowered limit costs throughput for the whole run.

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): running at its power limit (250 W)` - drawing
    249.1 W against a limit of 250 W, lowered from the default 400 W.

    Fix: restore the default limit (`sudo nvidia-smi -i N -pl DEFAULT_W`) when it was lowered;
    otherwise nothing to do unless throughput matters more than power draw.
    """
    for gpu in _live(scan):
        if "sw_power_cap" not in (gpu.throttle_reasons or []):
            continue
        lowered = (gpu.power_limit_w is not None and gpu.power_default_limit_w is not None
                   and gpu.power_limit_w < gpu.power_default_limit_w)
        limit = (f"{gpu.power_limit_w:g} W" if gpu.power_limit_w is not None
                 else "not supported")
        detail = (f"Drawing {gpu.power_draw_w} W against a limit of {limit}"
                  + (f", lowered from the default {gpu.power_default_limit_w:g} W." if lowered
                     else "."))
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: running at its power limit ({limit})",
            detail=detail,
            remedy=(f"sudo nvidia-smi -i {gpu.index} -pl {gpu.power_default_limit_w:g}  "
                    "# restore the default limit" if lowered
                    else "Nothing to do unless throughput matters more than power draw"),
            evidence={"power_draw_w": gpu.power_draw_w, "power_limit_w": gpu.power_limit_w,
                      "power_default_limit_w": gpu.power_default_limit_w,
                      "throttle_reasons": gpu.throttle_reasons},
        )


@rule("temperature-near-slowdown")
def temperature_near_slowdown(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """GPU within `temperature_margin_c` ({temperature_margin_c} C by default) of its slowdown.

    Above the slowdown threshold the hardware cuts clocks sharply. At or above the threshold the
    finding is an error.

    Why it matters: a GPU this close before the run starts will cross it under load, and the run
    slows for as long as it stays there.

    Example: `GPU 0 (NVIDIA A100-PCIE-40GB): 84 C, close to its slowdown temperature (90 C)` -
    6 C of margin left.

    Fix: improve cooling before a long run; check fans with `nvidia-smi -q -d TEMPERATURE -i N`.
    """
    for gpu in _live(scan):
        temp, limit = gpu.temperature_c, gpu.temperature_slowdown_c
        if temp is None or limit is None or temp < limit - policy.temperature_margin_c:
            continue
        over = temp >= limit
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=(f"{_label(gpu)}: {temp} C, " + ("at or above" if over else "close to")
                   + f" its slowdown temperature ({limit} C)"),
            detail=(f"{limit - temp} C of margin left (policy: {policy.temperature_margin_c:g} "
                    "C)." if not over else "The hardware slows the GPU down at this "
                    "temperature."),
            remedy="Improve cooling before a long run; check fans with `nvidia-smi -q -d "
                   f"TEMPERATURE -i {gpu.index}`",
            evidence={"temperature_c": temp, "temperature_slowdown_c": limit,
                      "margin_c": limit - temp,
                      "temperature_margin_c": policy.temperature_margin_c},
            severity=Severity.ERROR if over else None,
        )


@rule("pcie-link-degraded")
def pcie_link_degraded(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """A busy GPU's PCIe link runs below its maximum generation or width.

    An idle GPU lowers its link speed on purpose to save power, so the check applies only while
    the GPU is at least `busy_utilization_pct` ({busy_utilization_pct}% by default) busy. A busy
    GPU on a slower or narrower link than it supports points at a riser, a slot wired for fewer
    lanes, a BIOS setting, or a link that trained down on a bad connection.

    Why it matters: host-to-device copies (data loading, offload) and multi-GPU traffic slow
    accordingly.

    Example: `GPU 3 (NVIDIA A100-PCIE-40GB): PCIe link at Gen4 x8, capable of Gen4 x16, while 97%
    busy`.

    Fix: reseat the card or riser, check the slot's lanes and BIOS PCIe settings;
    `nvidia-smi -q -d PCIE -i N` shows the link and its replay counter.
    """
    for gpu in _live(scan):
        util = gpu.utilization_pct
        if util is None or util < policy.busy_utilization_pct:
            continue
        gen_low = (gpu.pcie_gen_current is not None and gpu.pcie_gen_max is not None
                   and gpu.pcie_gen_current < gpu.pcie_gen_max)
        width_low = (gpu.pcie_width_current is not None and gpu.pcie_width_max is not None
                     and gpu.pcie_width_current < gpu.pcie_width_max)
        if not (gen_low or width_low):
            continue
        now = f"Gen{gpu.pcie_gen_current} x{gpu.pcie_width_current}"
        best = f"Gen{gpu.pcie_gen_max} x{gpu.pcie_width_max}"
        busy = fmt_pct(util)
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: PCIe link at {now}, capable of {best}, while {busy} busy",
            detail=("The link runs below its maximum "
                    + ("generation and width" if gen_low and width_low
                       else "generation" if gen_low else "width")
                    + f" although the GPU is {busy} busy, so it is not a power-saving state."),
            remedy=(f"Reseat the card or riser, check the slot's lanes and BIOS PCIe settings; "
                    f"`nvidia-smi -q -d PCIE -i {gpu.index}` shows the link and its replay "
                    "counter"),
            evidence={"pcie_gen_current": gpu.pcie_gen_current, "pcie_gen_max": gpu.pcie_gen_max,
                      "pcie_width_current": gpu.pcie_width_current,
                      "pcie_width_max": gpu.pcie_width_max, "utilization_pct": util,
                      "busy_utilization_pct": policy.busy_utilization_pct},
        )


@rule("persistence-mode-off")
def persistence_mode_off(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """Persistence mode is off (Linux): each job start pays for the driver to initialise the GPU.

    Without persistence the driver tears the GPU state down whenever no process holds it.
    NVIDIA recommends the persistence daemon on compute servers.

    Why it matters: every new CUDA process (each job, each `nvidia-smi`) waits seconds for
    re-initialisation, and settings such as application clocks are lost in between.

    Example: `persistence mode is off on GPU 0,1,2,3` (evidence: `gpus`).

    Fix: `sudo systemctl enable --now nvidia-persistenced` (or `sudo nvidia-smi -pm 1`).
    """
    if scan.host.os != "Linux":
        return
    off = [g for g in _live(scan) if g.persistence_mode is False]
    if not off:
        return
    indices = ",".join(str(g.index) for g in off)
    yield Finding(
        subject="host" if len(off) > 1 else f"gpu:{off[0].index}",
        title=f"persistence mode is off on GPU {indices}",
        detail=("Each CUDA start re-initialises these GPUs, adding seconds to every job and "
                "every nvidia-smi call."),
        remedy="sudo systemctl enable --now nvidia-persistenced  # or: sudo nvidia-smi -pm 1",
        evidence={"gpus": [g.index for g in off]},
    )


@rule("compute-mode-restricted")
def compute_mode_restricted(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The GPU's compute mode stops a second process from using it, or any process at all.

    In "exclusive process" mode only one process may hold a CUDA context; that is an error when a
    compute process already holds the GPU. "Prohibited" mode admits no process at all (error).

    Why it matters: a second process (a DataLoader worker touching CUDA, an evaluation script, a
    second rank, gpu-audit's own validation) fails with "all CUDA-capable devices are busy or
    unavailable".

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): compute mode exclusive process` - in this mode
    process 7781 already holds it, so a new job cannot start there.

    Fix: `sudo nvidia-smi -i N -c DEFAULT` if exclusive use is not wanted.
    """
    for gpu in _live(scan):
        mode = gpu.compute_mode
        if mode not in ("exclusive_process", "exclusive_thread", "prohibited"):
            continue
        holders = [p.pid for p in scan.processes
                   if p.gpu_index == gpu.index and "compute" in p.type]
        if mode == "prohibited":
            severity, why = Severity.ERROR, "no process can create a CUDA context on it"
        elif holders:
            severity = Severity.ERROR
            named = f"{noun(len(holders), 'process', 'processes')} {', '.join(map(str, holders))}"
            verb = "holds" if len(holders) == 1 else "hold"
            why = f"{named} already {verb} it, so a new job cannot start there"
        else:
            severity, why = None, "only one process at a time can use it"
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: compute mode {mode.replace('_', ' ')}",
            detail=f"In this mode {why}.",
            remedy=f"sudo nvidia-smi -i {gpu.index} -c DEFAULT  # if exclusive use is not wanted",
            evidence={"compute_mode": mode, "compute_processes": holders},
            severity=severity,
        )


@rule("mig-enabled")
def mig_enabled(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """MIG is enabled: jobs get a slice of the GPU, not the whole card.

    With Multi-Instance GPU on, a process sees one MIG instance (its memory and compute slice)
    and cannot spread over several. Fine when intended.

    Why it matters: a run sized for the full GPU runs out of memory, and per-process memory
    readings from NVML are restricted, one known cause of PyTorch's NVML assert on
    out-of-memory.

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): MIG mode is enabled`.

    Fix: size the run for one instance and address it by its MIG UUID (`nvidia-smi -L`); if the
    full GPU is wanted, turn MIG off with the command the remedy gives.
    """
    for gpu in _live(scan):
        if gpu.mig_mode is not True:
            continue
        from gpu_audit.knowledge.mig import MIG_OFF_NEEDS, mig_off_command  # MIG GPUs only

        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)}: MIG mode is enabled",
            detail=("Processes get MIG instances, not the full GPU; size the run for one "
                    "instance and address it by its MIG UUID (`nvidia-smi -L`)."),
            remedy=(f"{mig_off_command(gpu.index)}  # if the full GPU is wanted "
                    f"({MIG_OFF_NEEDS})"),
            evidence={"mig_mode": True},
        )


def _machine_first(info: XidInfo, than: XidInfo) -> bool:
    """Between Xids of equal severity the machine's fault names the remedy, not the program's."""
    from gpu_audit.knowledge.xid import MACHINE_ORIGINS

    return info.origin in MACHINE_ORIGINS and than.origin not in MACHINE_ORIGINS


def _age_h(event: XidEvent, now: str) -> float | None:
    if event.time is None:
        return None
    seen, scanned = parse_utc(event.time), parse_utc(now)
    if seen is None or scanned is None:
        return None
    return (scanned - seen).total_seconds() / 3600


@rule("xid-events")
def xid_events(scan: Scan, policy: Policy) -> Iterator[Finding]:
    """The NVIDIA driver logged Xid errors for a GPU since boot.

    Xid codes are the driver's record of GPU faults, from application bugs (13, 31, 43: an illegal
    memory access in a kernel) to failing hardware (48 and 94/95 memory errors, 79 "fallen off
    the bus", 64 failed memory repair, 74 NVLink). The finding groups a GPU's events, gives each
    code's meaning, and takes its severity from the worst code; application-caused codes older
    than `xid_recent_hours` ({xid_recent_hours} by default) are only noted. The kernel log must
    be readable (root, the adm or systemd-journal group, or `kernel.dmesg_restrict=0`);
    otherwise the scan records that the check was not made.

    Why it matters: hardware codes mean the next job on that GPU can crash or hang the same way;
    a run started there inherits the fault.

    Example: `GPU 1 (NVIDIA A100-SXM4-80GB): 3 Xid events since boot: 13, 79` (evidence:
    `counts`, `last_time`, `last_message`, `pci_bus_id`).

    Fix: the remedy is the worst code's action: fix the program for application codes; drain,
    reset or return the GPU for hardware ones.
    """
    log = scan.kernel_log
    if log is None or not log.xid_events:
        return
    # The Xid table is read only for a log that names Xids (most scans have none).
    from gpu_audit.knowledge.xid import APP_ORIGINS, recovery_action, xid_info, xid_severity

    # Group by device: a GPU NVML lists, or (fallen off the bus, NVML down) its PCI address.
    groups: dict[tuple[str, str], list[XidEvent]] = {}
    keys = {bus_key(g.pci_bus_id): g for g in scan.gpus}
    for event in log.xid_events:
        gpu = keys.get(bus_key(event.pci_bus_id))
        if gpu is not None:
            group = (f"gpu:{gpu.index}", _label(gpu))
        else:
            group = ("host", f"GPU at PCI {event.pci_bus_id}")
        groups.setdefault(group, []).append(event)
    for (subject, label), events in groups.items():
        worst, worst_info = Severity.INFO, xid_info(events[0].xid)
        counts: dict[int, int] = {}
        for event in events:
            info = xid_info(event.xid)
            severity = xid_severity(event.xid, recovery_action(event.message))
            age = _age_h(event, scan.generated_at)
            if info.origin in APP_ORIGINS and age is not None and age > policy.xid_recent_hours:
                severity = Severity.INFO
            if severity > worst or (severity == worst and _machine_first(info, worst_info)):
                worst, worst_info = severity, info
            counts[event.xid] = counts.get(event.xid, 0) + 1
        meanings = "; ".join(f"Xid {xid} x{n}: {xid_info(xid).meaning}"
                             for xid, n in sorted(counts.items()))
        last = events[-1]
        yield Finding(
            subject=subject,
            title=f"{label}: {plural(len(events), 'Xid event')} since boot: "
                  + ", ".join(str(x) for x in sorted(counts)),
            detail=(f"{meanings}. Last: Xid {last.xid}"
                    + (f" at {last.time}" if last.time else "")
                    + (f" (pid {last.pid}, {last.process_name})" if last.pid else "")
                    + f": {last.message}"),
            remedy=worst_info.action,
            evidence={"pci_bus_id": last.pci_bus_id,
                      "counts": {str(k): v for k, v in sorted(counts.items())},
                      "last_time": last.time, "last_message": last.message,
                      "source": log.source, "truncated": log.truncated,
                      "xid_recent_hours": policy.xid_recent_hours},
            severity=worst,
        )
