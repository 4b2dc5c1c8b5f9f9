"""Rows of text shared by the terminal and markdown renderers, so both show the same facts."""

from __future__ import annotations

from gpu_audit.gpu_selection import instance_label, mig_label
from gpu_audit.knowledge.allocator.names import CUDA_VAR, NEW_VAR
from gpu_audit.model import Finding, Gpu, GpuProcess, Scan
from gpu_audit.redact import redact_settings
from gpu_audit.rules.cmdline import ELLIPSIS, short_command
from gpu_audit.rules.duplicates import annotate_duplicates, instance_port
from gpu_audit.units import fmt_bytes, fmt_mib, pct

NA = "n/a"

GPU_HEADERS = [
    "GPU",
    "Bus id",
    "Name",
    "Memory used / total",
    "Free",
    "Util",
    "Temp",
    "Power",
    "PCIe",
    "State",
]
PROCESS_HEADERS = [
    "GPU",
    "PID",
    "User",
    "Name",
    "VRAM",
    "Started (UTC)",
    "Port",
    "Dup",
    "Command",
]


def _num(value: float | int | None, unit: str, fmt: str = "{:g}") -> str:
    return NA if value is None else fmt.format(value) + unit


def gpu_state(gpu: Gpu) -> str:
    flags = []
    if gpu.lost:
        return "LOST"
    if gpu.performance_state is not None:
        flags.append(f"P{gpu.performance_state}")
    if gpu.persistence_mode is False:
        flags.append("persistence off")
    if gpu.mig_mode:
        flags.append("MIG")
    if gpu.ecc_mode is not None:
        flags.append("ECC on" if gpu.ecc_mode else "ECC off")
    active = [r for r in gpu.throttle_reasons or [] if r not in ("gpu_idle",)]
    if active:
        flags.append("throttle: " + ",".join(active))
    return " ".join(flags) or NA


def temperatures(gpu: Gpu) -> str:
    """``35 C``, with the memory's beside it where the GPU reports it: ``35 C (mem 38 C)``."""
    text = _num(gpu.temperature_c, " C")
    if gpu.memory_temperature_c is not None:
        text += f" (mem {gpu.memory_temperature_c} C)"
    return text


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def gpu_details(gpu: Gpu) -> str:
    """What the GPU table leaves out, in one line (``scan -v``): the power limit and the range it
    may be set in, clocks against their maxima, the memory temperature limit, and the ECC and MIG
    modes with the mode a reset would bring."""
    parts = []
    if gpu.power_limit_w is not None:
        extra = []
        if gpu.power_default_limit_w is not None:
            extra.append(f"default {gpu.power_default_limit_w:g} W")
        if gpu.power_min_limit_w is not None and gpu.power_max_limit_w is not None:
            extra.append(f"settable {gpu.power_min_limit_w:g}-{gpu.power_max_limit_w:g} W")
        parts.append(f"power limit {gpu.power_limit_w:g} W"
                     + (f" ({', '.join(extra)})" if extra else ""))
    clocks = [f"{name} {_num(now, '')}/{_num(top, '')}" for name, now, top in (
        ("SM", gpu.sm_clock_mhz, gpu.sm_clock_max_mhz),
        ("graphics", gpu.graphics_clock_mhz, gpu.graphics_clock_max_mhz),
        ("memory", gpu.memory_clock_mhz, gpu.memory_clock_max_mhz),
    ) if now is not None or top is not None]
    if clocks:
        parts.append("clocks " + ", ".join(clocks) + " MHz (now/max)")
    if gpu.memory_temperature_c is not None or gpu.memory_temperature_max_c is not None:
        parts.append(f"memory temperature {_num(gpu.memory_temperature_c, ' C')} (limit "
                     f"{_num(gpu.memory_temperature_max_c, ' C')})")
    for name, current, pending in (("ECC", gpu.ecc_mode, gpu.ecc_mode_pending),
                                   ("MIG", gpu.mig_mode, gpu.mig_mode_pending)):
        if current is None:
            continue
        changing = pending is not None and pending != current
        parts.append(f"{name} {_on_off(current)}"
                     + (f" ({_on_off(pending)} after a reset)" if changing else ""))
    return f"GPU {gpu.index}: " + ("; ".join(parts) or NA)


def bus_id(gpu: Gpu) -> str:
    """The PCI bus id as kernel logs print it (``3b:00.0``; the domain only when not zero)."""
    text = (gpu.pci_bus_id or "").strip().lower()
    if not text:
        return NA
    domain, sep, rest = text.partition(":")
    if sep and rest.count(":") == 1 and domain.strip("0") == "":
        return rest
    return text


def gpu_row(gpu: Gpu) -> list[str]:
    free_pct = pct(gpu.memory_free_bytes, gpu.memory_total_bytes)
    pcie = NA
    if gpu.pcie_gen_current is not None:
        pcie = (
            f"gen{gpu.pcie_gen_current}/{gpu.pcie_gen_max or '?'} "
            f"x{gpu.pcie_width_current or '?'}/{gpu.pcie_width_max or '?'}"
        )
    power = NA
    if gpu.power_draw_w is not None:
        power = f"{gpu.power_draw_w:.0f}" + (
            f"/{gpu.power_limit_w:.0f} W" if gpu.power_limit_w else " W"
        )
    return [
        str(gpu.index),
        bus_id(gpu),
        gpu.name or NA,
        f"{fmt_mib(gpu.memory_used_bytes)} / {fmt_mib(gpu.memory_total_bytes)}",
        f"{fmt_mib(gpu.memory_free_bytes)} ({free_pct:g}%)" if free_pct is not None else NA,
        _num(gpu.utilization_pct, "%"),
        temperatures(gpu),
        power,
        pcie,
        gpu_state(gpu),
    ]


def mig_rows(gpu: Gpu) -> list[list[str]]:
    """One indented row per MIG instance of ``gpu``, under its row, in the GPU table's columns:
    the instance's ids, profile and memory (the instance has no bus, power or PCIe of its own)."""
    rows = []
    for mig in gpu.mig_devices:
        free = None
        if mig.memory_total_bytes is not None and mig.memory_used_bytes is not None:
            free = max(mig.memory_total_bytes - mig.memory_used_bytes, 0)
        free_pct = pct(free, mig.memory_total_bytes)
        rows.append([
            f"  {instance_label(mig)}",
            "",
            f"  MIG {mig.profile or NA}" + (f", {mig.sm_count} SMs" if mig.sm_count else ""),
            f"{fmt_mib(mig.memory_used_bytes)} / {fmt_mib(mig.memory_total_bytes)}",
            f"{fmt_mib(free)} ({free_pct:g}%)" if free_pct is not None else NA,
            "", "", "", "", "",
        ])
    return rows


def gpu_rows(gpus: list[Gpu]) -> list[list[str]]:
    """The GPU table's rows: each GPU, then its MIG instances."""
    return [row for gpu in gpus for row in (gpu_row(gpu), *mig_rows(gpu))]


def process_command(p: GpuProcess, width: int) -> str:
    """The process's command line (or name) and note in ``width`` characters, cut between whole
    arguments so the script, module, ``--port`` and ``--local-rank`` stay visible."""
    argv = list(p.cmdline) if p.cmdline else ([p.name] if p.name else [])
    note = f"[{p.note}]" if p.note else ""
    if not argv:
        return note if len(note) <= width else note[: max(width - 1, 0)] + ELLIPSIS
    if note:
        return f"{short_command(argv, max(width - len(note) - 1, 12))} {note}"
    return short_command(argv, width)


def process_row(p: GpuProcess, width: int = 80) -> list[str]:
    port = instance_port(p)
    gpu = str(p.gpu_index)
    if p.mig_gpu_instance_id is not None:  # MIG: the instance, as GPU/gi/ci
        gpu += "/" + mig_label(p.mig_gpu_instance_id, p.mig_compute_instance_id)
    return [
        gpu,
        str(p.pid),
        p.user or NA,
        p.name or NA,
        fmt_mib(p.used_memory_bytes),
        (p.start_time or NA).replace("T", " ").replace("Z", ""),
        str(port) if port is not None else "",
        f"#{p.duplicate_group}" if p.duplicate_group else "",
        process_command(p, width),
    ]


def process_rows(scan: Scan, width: int = 80) -> list[tuple[GpuProcess, list[str]]]:
    """Each process with its table row; copies of one server share a ``#n`` group mark."""
    processes = annotate_duplicates(scan.processes)
    return [(p, process_row(p, width)) for p in processes]


def host_lines(scan: Scan) -> list[tuple[str, str]]:
    h = scan.host
    where = [h.os, h.kernel or ""]
    if h.wsl:
        where.append("(WSL2)")
    if h.container:
        where.append(f"(container: {h.container})")
    lines = [
        ("Host", f"{h.hostname}: {' '.join(w for w in where if w)}"),
        ("CPUs", str(h.cpu_count) if h.cpu_count else NA),
        (
            "RAM",
            f"{fmt_bytes(h.memory_available_bytes)} available of {fmt_bytes(h.memory_total_bytes)}",
        ),
        ("Swap", f"{fmt_bytes(h.swap_used_bytes)} used of {fmt_bytes(h.swap_total_bytes)}"),
    ]
    if scan.driver:
        d = scan.driver
        lines.append(
            (
                "Driver",
                f"{d.driver_version or NA} (NVML {d.nvml_version or NA}, "
                f"CUDA {d.cuda_driver_version or NA})",
            )
        )
    elif not scan.nvml.available:
        lines.append(("Driver", f"NVML unavailable: {scan.nvml.cause or 'unknown'}"))
    selected = scan.gpu_selection
    if selected is not None:
        lines.append(("GPUs judged", str(selected.get("reason") or selected.get("spec"))))
    a = scan.allocator
    if a:
        torch = a.torch_version or "not installed"
        lines.append(("torch", torch))
        for name, value in (
            (CUDA_VAR, a.pytorch_cuda_alloc_conf),
            (NEW_VAR, a.pytorch_alloc_conf),
        ):
            if value is not None:
                lines.append((name, repr(redact_settings(value))))
    return lines


def finding_counts(findings: list[Finding]) -> str:
    if not findings:
        return "no findings"
    counts: dict[str, int] = {}
    for f in findings:
        key = f.severity.value if f.severity else "info"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}{'s' if n > 1 and k in _COUNTABLE else ''}"
                     for k, n in counts.items())


_COUNTABLE = ("error", "warning")  # "2 errors", "2 warnings"; "2 critical", "2 info"
