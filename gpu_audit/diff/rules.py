"""Before and after a job (``gpu-audit diff``)"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from gpu_audit.diff.view import DiffView
from gpu_audit.gpu_identity import bus_key, describe
from gpu_audit.gpu_selection import MissingGpu
from gpu_audit.knowledge.findings import DIFF, severity_of
from gpu_audit.knowledge.xid import MACHINE_ORIGINS, recovery_action, xid_info, xid_severity
from gpu_audit.model import Finding, Gpu, KernelGpu, Severity, XidEvent
from gpu_audit.redact import redact_text
from gpu_audit.rules.registry import Registry, Rule
from gpu_audit.units import MIB, fmt_mib, plural

DIFF_RULE_MODULES = ("gpu_audit.diff.rules",)
DIFF_RULES = Registry("diff rule", DIFF, DIFF_RULE_MODULES)

DiffRuleFunc = Callable[[DiffView], Iterator[Finding]]


def diff_rule(rule_id: str) -> Callable[[DiffRuleFunc], DiffRuleFunc]:
    return DIFF_RULES.rule(rule_id)


def all_diff_rules() -> dict[str, Rule]:
    return DIFF_RULES.all()


def evaluate_diff(view: DiffView, ignore: frozenset[str] = frozenset()) -> list[Finding]:
    """Every finding of the diff rules, worst first."""
    return DIFF_RULES.evaluate(view, ignore=ignore)


def _label(gpu: Gpu) -> str:
    return f"GPU {gpu.index}" + (f" ({gpu.pci_bus_id})" if gpu.pci_bus_id else "")


def _rise(before: int | None, after: int | None) -> int:
    """How much a counter went up; 0 when either reading is unknown (a driver reload resets
    volatile counters: a fall is no rise)."""
    if before is None or after is None:
        return 0
    return max(0, after - before)


@diff_rule("job-vram-leak")
def job_vram_leak(view: DiffView) -> Iterator[Finding]:
    """A process of the finished job still holds GPU memory after the job.

    The job ended, but a process it started (a stray DataLoader worker, a detached server, a
    zombie whose parent did not reap it) is still on its GPU. Which processes count as the job's
    is explained under `gpu-audit diff --help`: absent from BEFORE, on the job's GPUs, and of the
    job's user when that is known.

    Why it matters: the memory it holds is lost to the next job on the node, which then fails
    with `CUDA out of memory`.

    Example: `pid 48211 (alice) still holds 18432 MiB on GPU 0 after the job` (evidence: `pid`,
    `user`, `gpu_index`, `used_memory_mib`, `status`).

    Fix: `ps -o pid,user,etime,stat,args -p PID`, then, as its owner or root, `kill PID`; drain
    the node until the process is gone and `nvidia-smi` shows the memory free.
    """
    for p in view.job_processes():
        mib = round(p.used_memory_bytes / MIB) if p.used_memory_bytes is not None else None
        who = p.user or "unknown user"
        yield Finding(
            subject=f"pid:{p.pid}",
            title=(f"pid {p.pid} ({who}) still holds {fmt_mib(p.used_memory_bytes)} on GPU "
                   f"{p.gpu_index} after the job"),
            detail=(f"{redact_text(p.name or 'a process')} (pid {p.pid}, {who}, status "
                    f"{p.status or 'unknown'}) appeared during the job and is still on GPU "
                    f"{p.gpu_index}" + ("" if p.visible else "; its PID is not visible here "
                                        "(another PID namespace, or it has exited)") + "."),
            remedy=(f"ps -o pid,user,etime,stat,args -p {p.pid}   # then, as its owner or root: "
                    f"kill {p.pid}; drain the node until `nvidia-smi` shows the memory free"),
            evidence={"pid": p.pid, "user": p.user, "gpu_index": p.gpu_index,
                      "used_memory_mib": mib, "status": p.status,
                      "name": redact_text(p.name) if p.name else None,
                      "visible": p.visible},
        )


@diff_rule("vram-unreleased")
def vram_unreleased(view: DiffView) -> Iterator[Finding]:
    """GPU memory in use grew during the job and no process accounts for it afterwards.

    After the job, the GPU holds more memory than before (at least `unreleased_vram_min_gib`,
    {unreleased_vram_min_gib} GiB by default) that no listed process explains: a context left by a
    process that died without the driver reclaiming it, or a process in another container.

    Why it matters: the next job on that GPU starts with that much less memory, and nothing on the
    node can be stopped to free it.

    Example: `GPU 1 (NVIDIA A100-SXM4-80GB): 20480 MiB more in use that no process accounts for` -
    memory used went from 4 MiB to 20484 MiB; listed processes hold 0 MiB after the job.

    Fix: check `nvidia-smi -i N` that no process is left; then, with the node drained,
    `sudo nvidia-smi -r -i N` (or reboot): only a GPU reset returns the memory.
    """
    if view.before is None:
        return
    held: dict[int, int] = {}
    for scan in (view.before, view.after):
        for p in scan.processes:
            key = id(scan), p.gpu_index
            held[key] = held.get(key, 0) + (p.used_memory_bytes or 0)
    for old, new in view.pairs:
        if old.memory_used_bytes is None or new.memory_used_bytes is None:
            continue
        loose_before = old.memory_used_bytes - held.get((id(view.before), old.index), 0)
        loose_after = new.memory_used_bytes - held.get((id(view.after), new.index), 0)
        grown = loose_after - max(0, loose_before)
        if grown < view.unreleased_min_bytes:
            continue
        yield Finding(
            subject=f"gpu:{new.index}",
            title=f"{_label(new)}: {fmt_mib(grown)} more in use that no process accounts for",
            detail=(f"Memory used went from {fmt_mib(old.memory_used_bytes)} to "
                    f"{fmt_mib(new.memory_used_bytes)}; listed processes hold "
                    f"{fmt_mib(held.get((id(view.after), new.index), 0))} after the job."),
            remedy=(f"nvidia-smi -i {new.index}   # no process left? then, with the node "
                    f"drained: sudo nvidia-smi -r -i {new.index} (or reboot)"),
            evidence={"gpu_index": new.index, "unreleased_mib": round(grown / MIB),
                      "used_before_mib": round(old.memory_used_bytes / MIB),
                      "used_after_mib": round(new.memory_used_bytes / MIB)},
        )


_ECC = (("ecc_errors_uncorrected_volatile", True), ("ecc_errors_uncorrected_aggregate", True),
        ("ecc_errors_corrected_volatile", False), ("ecc_errors_corrected_aggregate", False))


@diff_rule("ecc-errors-increased")
def ecc_errors_increased(view: DiffView) -> Iterator[Finding]:
    """ECC error counters went up during the job.

    Uncorrectable (double-bit) errors that appear while a job runs are critical. Corrected
    (single-bit) errors alone are repaired on the fly; a rise is a warning worth watching.

    Why it matters: uncorrectable errors mean the memory is failing: the job may have computed on
    corrupted data, and the next one may crash; corrected ones often precede uncorrectable ones.

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): 2 uncorrectable ECC error(s) during the job`
    (evidence: `uncorrected_increase`, ...).

    Fix: for uncorrectable errors, drain the node, reset the GPU with no process on it
    (`sudo nvidia-smi -r -i N`), then run `dcgmi diag -r 3`; if the errors recur, contact the
    vendor. For corrected ones, watch the count (`nvidia-smi -q -d ECC -i N`) and drain if it keeps
    rising.
    """
    for old, new in view.pairs:
        rises = {name: _rise(getattr(old, name), getattr(new, name)) for name, _ in _ECC}
        uncorrected = max(rises[n] for n, bad in _ECC if bad)
        corrected = max(rises[n] for n, bad in _ECC if not bad)
        if not uncorrected and not corrected:
            continue
        what = (f"{uncorrected} uncorrectable" if uncorrected else f"{corrected} corrected")
        yield Finding(
            subject=f"gpu:{new.index}",
            title=f"{_label(new)}: {what} ECC error(s) during the job",
            detail="; ".join(f"{n}: {getattr(old, n)} to {getattr(new, n)}"
                             for n, _ in _ECC if rises[n]),
            remedy=(f"Drain the node; with no process on it: sudo nvidia-smi -r -i {new.index}, "
                    "then `dcgmi diag -r 3`; if the errors recur, contact the vendor"
                    if uncorrected else
                    f"nvidia-smi -q -d ECC -i {new.index}   # watch the count; drain if it "
                    "keeps rising"),
            evidence={"gpu_index": new.index, "uncorrected_increase": uncorrected,
                      "corrected_increase": corrected,
                      **{n: getattr(new, n) for n, _ in _ECC}},
            severity=Severity.CRITICAL if uncorrected else Severity.WARNING,
        )


@diff_rule("retired-pages-increased")
def retired_pages_increased(view: DiffView) -> Iterator[Finding]:
    """The GPU retired memory pages during the job.

    Page retirement (GPUs before Ampere) takes memory with repeated errors out of use; a page
    retired for a double-bit error (DBE) is critical.

    Why it matters: a DBE retirement means data was lost during the job; and the retirement only
    takes effect after a GPU reset, so until then jobs keep using the bad page.

    Example: `GPU 2 (Tesla V100-SXM2-32GB): 1 page(s) retired during the job (1 for double-bit
    errors)`.

    Fix: drain the node, then reset the GPU with no process on it: `sudo nvidia-smi -r -i N`.
    """
    for old, new in view.pairs:
        sbe = _rise(old.retired_pages_sbe, new.retired_pages_sbe)
        dbe = _rise(old.retired_pages_dbe, new.retired_pages_dbe)
        if not sbe and not dbe:
            continue
        yield Finding(
            subject=f"gpu:{new.index}",
            title=f"{_label(new)}: {sbe + dbe} page(s) retired during the job ({dbe} for "
                  "double-bit errors)",
            detail=(f"retired pages, single-bit: {old.retired_pages_sbe} to "
                    f"{new.retired_pages_sbe}; double-bit: {old.retired_pages_dbe} to "
                    f"{new.retired_pages_dbe}; pending: {new.retired_pages_pending}"),
            remedy=f"Drain the node; with no process on it: sudo nvidia-smi -r -i {new.index}",
            evidence={"gpu_index": new.index, "sbe_increase": sbe, "dbe_increase": dbe,
                      "retired_pages_sbe": new.retired_pages_sbe,
                      "retired_pages_dbe": new.retired_pages_dbe},
            severity=Severity.CRITICAL if dbe else Severity.ERROR,
        )


@diff_rule("remapped-rows-increased")
def remapped_rows_increased(view: DiffView) -> Iterator[Finding]:
    """The GPU remapped memory rows during the job.

    Row remapping (Ampere and later) replaces failing memory rows with spares after a GPU reset.
    Rows remapped for correctable errors alone are routine repair (warning).

    Why it matters: a row remapped for an uncorrectable error means data was lost during the job
    (error), and the faulty row stays in use until the GPU is reset.

    Example: `GPU 0 (NVIDIA A100-SXM4-80GB): 1 row(s) remapped during the job (1 for uncorrectable
    errors)`.

    Fix: drain the node, then reset the GPU with no process on it: `sudo nvidia-smi -r -i N`.
    """
    for old, new in view.pairs:
        bad = _rise(old.remapped_rows_uncorrectable, new.remapped_rows_uncorrectable)
        fine = _rise(old.remapped_rows_correctable, new.remapped_rows_correctable)
        if not bad and not fine:
            continue
        yield Finding(
            subject=f"gpu:{new.index}",
            title=f"{_label(new)}: {bad + fine} row(s) remapped during the job ({bad} for "
                  "uncorrectable errors)",
            detail=(f"remapped rows, uncorrectable: {old.remapped_rows_uncorrectable} to "
                    f"{new.remapped_rows_uncorrectable}; correctable: "
                    f"{old.remapped_rows_correctable} to {new.remapped_rows_correctable}; "
                    f"pending: {new.remapped_rows_pending}"),
            remedy=f"Drain the node; with no process on it: sudo nvidia-smi -r -i {new.index}",
            evidence={"gpu_index": new.index, "uncorrectable_increase": bad,
                      "correctable_increase": fine,
                      "remapped_rows_uncorrectable": new.remapped_rows_uncorrectable,
                      "remapped_rows_correctable": new.remapped_rows_correctable},
            severity=Severity.ERROR if bad else Severity.WARNING,
        )


def _event_key(event: XidEvent) -> tuple:
    return (event.xid, event.pci_bus_id, event.uptime_s, event.message)


@diff_rule("xid-new")
def xid_new(view: DiffView) -> Iterator[Finding]:
    """The NVIDIA driver logged Xid errors between BEFORE and AFTER.

    Each new code is reported with its meaning and origin: codes a program causes (13, 31, 43:
    an illegal memory access in a kernel) are the job's own fault and keep their lower severity;
    hardware and driver codes (48, 79, 94/95, 119, ...) are the node's. A scan whose kernel log
    was unreadable cannot be compared (run the scans as root, or with read access to the log).

    Why it matters: a hardware or driver Xid during the job means the node may fail the next job
    the same way, and the job that saw it may have stopped or computed wrong.

    Example: `Xid 79 x1 during the job at 00000000:41:00.0: GPU has fallen off the bus`
    (evidence: `xid`, `count`, `origin`, `machine_fault`).

    Fix: the remedy is the code's action: fix the program for the codes a program causes; drain,
    reset or service the node for hardware and driver codes.
    """
    after = view.after.kernel_log
    if view.before is None or after is None or not after.readable:
        return
    before = view.before.kernel_log
    known = {_event_key(e) for e in before.xid_events} if before is not None else set()
    if before is not None and not before.readable:
        return
    new = [e for e in after.xid_events if _event_key(e) not in known]
    by_code: dict[tuple[int, str | None], list[XidEvent]] = {}
    for event in new:
        by_code.setdefault((event.xid, event.pci_bus_id), []).append(event)
    gpus = {bus_key(g.pci_bus_id): g for g in view.after.gpus if bus_key(g.pci_bus_id)}
    for (xid, bus), events in by_code.items():
        info = xid_info(xid)
        severity = max(xid_severity(e.xid, recovery_action(e.message)) for e in events)
        gpu = gpus.get(bus_key(bus))
        subject = f"gpu:{gpu.index}" if gpu else "host"
        yield Finding(
            subject=subject,
            title=f"Xid {xid} x{len(events)} during the job" + (f" at {bus}" if bus else "")
                  + f": {info.meaning}",
            detail=f"{info.mnemonic} ({info.origin}). Last: {redact_text(events[-1].message)}",
            remedy=info.action,
            evidence={"xid": xid, "count": len(events), "pci_bus_id": bus,
                      "origin": info.origin, "machine_fault": info.origin in MACHINE_ORIGINS,
                      "last_message": redact_text(events[-1].message)},
            severity=severity,
        )


_THROTTLE = {
    "hw_slowdown": Severity.ERROR,
    "hw_thermal_slowdown": Severity.ERROR,
    "hw_power_brake_slowdown": Severity.ERROR,
    "sw_thermal_slowdown": Severity.WARNING,
    "sw_power_cap": Severity.INFO,
}


@diff_rule("throttle-started")
def throttle_started(view: DiffView) -> Iterator[Finding]:
    """Clock-limiting reasons that were not active before the job are active after it.

    Hardware slowdown, hardware thermal slowdown and the power brake are the board protecting
    itself (error); software thermal slowdown means the GPU runs hot (warning); the software
    power cap is ordinary under load (info). Idle, application-clock and sync-boost reasons are
    not reported.

    Why it matters: the next job on the GPU runs at reduced clocks, and in a multi-GPU job the
    slow GPU holds every rank back.

    Example: `GPU 3 (NVIDIA H100 80GB HBM3): clocks now limited by hw_slowdown` - active before:
    none; after: hw_slowdown; temperature 41 to 88 C.

    Fix: check the cooling and the power supply: `nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER
    -i N`.
    """
    for old, new in view.pairs:
        started = [r for r in new.throttle_reasons or []
                   if r in _THROTTLE and r not in (old.throttle_reasons or [])]
        if not started or old.throttle_reasons is None:
            continue
        worst = max(_THROTTLE[r] for r in started)
        yield Finding(
            subject=f"gpu:{new.index}",
            title=f"{_label(new)}: clocks now limited by {', '.join(started)}",
            detail=(f"active before: {', '.join(old.throttle_reasons) or 'none'}; after: "
                    f"{', '.join(new.throttle_reasons or []) or 'none'}; temperature "
                    f"{old.temperature_c} to {new.temperature_c} C"),
            remedy=(f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {new.index}   # check "
                    "the cooling and the power supply"),
            evidence={"gpu_index": new.index, "started": started,
                      "temperature_c": new.temperature_c, "power_draw_w": new.power_draw_w},
            severity=worst,
        )


@diff_rule("gpu-missing")
def gpu_missing(view: DiffView) -> Iterator[Finding]:
    """A GPU BEFORE listed is missing from AFTER or now lost, or NVML does not list a GPU.

    The driver no longer sees the card, or answers "GPU is lost" (fallen off the bus, usually
    with Xid 79). The Slurm hooks (`check --slurm`) report it too: the prolog and epilog when a
    GPU Slurm gave the job is one NVML does not list (only the kernel driver or `/dev/nvidiaN`
    knows it, or nothing on the node does), the health check when NVML lists fewer GPUs than
    the node should have (`min_gpus` above {min_gpus}, else the count Slurm configured). GPUs
    are matched as `docs/gpu-identity.md` describes.

    Why it matters: jobs placed on the GPU fail, and multi-GPU jobs on the node hang waiting for
    it.

    Example: `GPU 5 (NVIDIA H100 80GB HBM3) lost (fallen off the bus) after the job` (evidence:
    `gpu_index`, `uuid`, `pci_bus_id`); from a prolog, `gpu-audit: gpu-missing on
    gpu:/dev/nvidia4: slurm_index=4 minor_number=4 nvml_gpus=4`.

    Fix: drain the node; `nvidia-smi -r` or a reboot, then check `dmesg | grep Xid`.
    """
    gone = [(g, "no longer listed") for g in view.missing]
    gone += [(new, "lost (fallen off the bus)") for old, new in view.pairs
             if new.lost and not old.lost]
    for gpu, how in gone:
        yield Finding(
            subject=f"gpu:{gpu.index}",
            title=f"{_label(gpu)} {how} after the job",
            detail=f"{gpu.name or 'the GPU'} ({gpu.uuid or 'no UUID'}) was present before.",
            remedy="Drain the node; `nvidia-smi -r` or a reboot, then check `dmesg | grep Xid`",
            evidence={"gpu_index": gpu.index, "uuid": gpu.uuid, "pci_bus_id": gpu.pci_bus_id},
        )


_MISSING_REMEDY = ("Drain the node; compare `nvidia-smi -L` with `ls /proc/driver/nvidia/gpus` "
                   "and gres.conf, then `nvidia-smi -r` or a reboot, and check "
                   "`dmesg | grep -i xid`")


def job_gpus_missing(missing: Sequence[MissingGpu], listed: int) -> list[Finding]:
    """``gpu-missing`` for each GPU a job was given that NVML does not list (``listed``: how
    many GPUs it lists): the Slurm hooks' finding, named by what any source knows of it."""
    return [Finding(
        subject=m.subject,
        title=f"The job's GPU {m.entry} is not listed by NVML: {m.why}",
        detail=(f"Slurm gave the job GPU {m.entry}; NVML lists {plural(listed, 'GPU')} and "
                "none of them is that GPU, so the job cannot use it."),
        remedy=_MISSING_REMEDY,
        evidence={"slurm_index": m.position, "minor_number": m.minor_number,
                  "nvml_gpus": listed, "pci_bus_id": m.pci_bus_id, "uuid": m.uuid},
        id="gpu-missing", severity=severity_of("gpu-missing"),
    ) for m in missing]


def gpus_short(listed: int, expected: int, source: str,
               unlisted: Sequence[KernelGpu]) -> Finding:
    """``gpu-missing`` for a node whose NVML lists fewer GPUs than ``expected`` (``source``:
    ``min_gpus`` or ``slurm``), naming the first GPU only the kernel driver or /dev knows."""
    named = [describe(k) for k in unlisted]
    first = unlisted[0] if unlisted else None
    subject = f"gpu:/dev/nvidia{first.minor_number}" if first is not None \
        and first.minor_number is not None else "host"
    whence = "Slurm configures" if source == "slurm" else "min_gpus asks for"
    return Finding(
        subject=subject,
        title=f"NVML lists {plural(listed, 'GPU')}; {whence} {expected}",
        detail=("Not listed by NVML: " + "; ".join(named[:8]) if named else
                "Neither the kernel driver nor /dev names the missing GPUs."),
        remedy=_MISSING_REMEDY,
        evidence={"expected_gpus": expected, "nvml_gpus": listed,
                  "missing_gpus": expected - listed, "expected_from": source},
        id="gpu-missing", severity=severity_of("gpu-missing"),
    )
