"""Does ``gpu-audit scan --json`` say what ``nvidia-smi -q -x`` says about the same GPUs?

    python3 bench/gpu/nvsmi_compare.py SMI_XML SCAN_JSON [--json-out FILE] [--quiet]

Reads the XML of ``nvidia-smi -q -x`` (the ``nvidia_smi_log`` document) and a
``gpu-audit.scan/1`` document taken moments apart on the same machine, pairs the GPUs by UUID
(else by PCI bus id) and compares every field gpu-audit shows that nvidia-smi also prints. Each
row ends in one status:

- ``agree``: equal within the field's tolerance;
- ``disagree``: they differ by more than that;
- ``moving``: a reading that changes by itself between two samples (current clocks, utilisation,
  performance state, clock-event reasons, the current PCIe link, the GPU and memory
  temperatures within 2 C) and differs; not a disagreement;
- ``only-gpu-audit`` / ``only-nvidia-smi``: one side has a value, the other prints N/A or lacks
  the element (for the fields gpu-audit does not collect at all, ``only-nvidia-smi`` marks a gap
  in gpu-audit, not an error);
- ``absent-both``: neither has it (not printed unless ``--all``).

Tolerances: memory sizes within 1 MiB (nvidia-smi prints whole MiB); temperature thresholds,
counters, modes, names and PCIe maxima exact; power draw within 5% or 2 W (each tool samples it
at its own moment); power limits (enforced, default, minimum, maximum) within 0.5 W (nvidia-smi
rounds to 0.01 W); a process's memory within 1 MiB; max clocks and pending ECC/MIG modes
exact. Processes are compared per GPU as sets of PIDs, then each common PID's memory and type.

Where the driver prints temperature thresholds relative to T.Limit (r580 on), the shutdown,
slowdown and max operating thresholds are derived from the same document (T.Limit = the GPU's
temperature + its T.Limit margin, minus each threshold's offset), compared exactly and marked
``derived`` in the note; the memory threshold has no printed memory T.Limit, so it is not derived
(``only-gpu-audit`` with a note saying so).

Exit status: 0 no disagreement, 1 at least one, 3 an input could not be read. The JSON written
by ``--json-out`` holds every row (schema ``nvsmi-compare/1``).

Runs with the standard library alone, so it works on a bare GPU machine.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MIB = 1024**2
SCHEMA = "nvsmi-compare/1"
# What nvidia-smi prints where a value is unavailable (with or without brackets).
UNAVAILABLE = {
    "n/a",
    "not supported",
    "unknown error",
    "insufficient permissions",
    "requested functionality has been deprecated",
    "not available",
    "gpu is lost",
    "none",
    "",
}
STATUSES = ("agree", "disagree", "moving", "only-gpu-audit", "only-nvidia-smi", "absent-both")


class InputError(Exception):
    """An input file that cannot be read as what it should be."""


# --------------------------------------------------------------------------- nvidia-smi values


class Missing:
    """Why nvidia-smi has no value: the element is absent, or it printed N/A (or the like)."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"<{self.why}>"


ABSENT = Missing("element absent")


def raw(gpu: ET.Element, *paths: str) -> str | Missing:
    """Text of the first of ``paths`` present under ``gpu``; N/A-like texts become Missing."""
    for path in paths:
        element = gpu.find(path)
        if element is None:
            continue
        text = (element.text or "").strip()
        if text.strip("[]").strip().lower() in UNAVAILABLE:
            return Missing(f"nvidia-smi: {text or 'empty'}")
        return text
    return ABSENT


def number(text: str | Missing) -> float | Missing:
    """``"81559 MiB"``, ``"71.50 W"``, ``"16x"``, ``"P0"``, ``"31 C"`` -> the number."""
    if isinstance(text, Missing):
        return text
    match = re.search(r"-?\d+(?:\.\d+)?", text)
    if match is None:
        return Missing(f"nvidia-smi: {text!r} (not a number)")
    return float(match.group())


def mib(text: str | Missing) -> float | Missing:
    """A size as MiB (nvidia-smi prints MiB; KiB and GiB are converted)."""
    value = number(text)
    if isinstance(value, Missing) or isinstance(text, Missing):
        return value
    unit = text.split()[-1].lower() if text.split() else "mib"
    return value * {"kib": 1 / 1024, "gib": 1024, "b": 1 / MIB}.get(unit, 1)


def integer(text: str | Missing) -> int | Missing:
    value = number(text)
    return value if isinstance(value, Missing) else int(value)


def flag(text: str | Missing) -> bool | Missing:
    """Enabled/Disabled, Yes/No, Active/Not Active, On/Off."""
    if isinstance(text, Missing):
        return text
    word = text.strip().lower()
    if word in ("enabled", "yes", "active", "on", "true"):
        return True
    if word in ("disabled", "no", "not active", "off", "false"):
        return False
    return Missing(f"nvidia-smi: {text!r} (not a yes/no)")


def word(text: str | Missing) -> str | Missing:
    """A name as gpu-audit spells it: lower case, underscores (``Exclusive_Process``)."""
    if isinstance(text, Missing):
        return text
    return re.sub(r"[\s-]+", "_", text.strip().lower())


def first_word(text: str | Missing) -> str | Missing:
    """``"Ada Lovelace"`` -> ``"ada"`` (gpu-audit names architectures by their first word)."""
    value = word(text)
    return value if isinstance(value, Missing) else value.split("_")[0]


def bus_id(text: str | Missing | None) -> str | None:
    """PCI bus id as ``DDDDDDDD:BB:DD.F`` in upper case (domain padded to 8 digits)."""
    if text is None or isinstance(text, Missing):
        return None
    parts = text.strip().upper().split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-8:].rjust(8, "0")
    return ":".join(parts)


def ecc_total(gpu: ET.Element, scope: str, corrected: bool) -> int | Missing:
    """A volatile/aggregate ECC count as NVML totals it.

    Old drivers print ``single_bit``/``double_bit`` with a ``total``; newer ones print
    ``sram_correctable``, ``sram_uncorrectable[_parity|_secded]``, ``dram_correctable`` and
    ``dram_uncorrectable``, whose sum is NVML's total.
    """
    node = gpu.find(f"ecc_errors/{scope}")
    if node is None:
        return ABSENT
    legacy = node.find(("single_bit" if corrected else "double_bit") + "/total")
    if legacy is not None:
        return integer(raw(node, ("single_bit" if corrected else "double_bit") + "/total"))
    tags = [child.tag for child in node]
    if corrected:
        wanted = [t for t in tags if t.endswith("_correctable") and "uncorrectable" not in t]
    else:
        wanted = [t for t in tags if "_uncorrectable" in t]
        # Some drivers print an SRAM total beside its parity/SEC-DED split: count it once.
        if "sram_uncorrectable" in wanted:
            wanted = [t for t in wanted if not t.startswith("sram_uncorrectable_")]
    if not wanted:
        return ABSENT
    total = 0
    for tag in wanted:
        value = integer(raw(node, tag))
        if isinstance(value, Missing):
            return value
        total += value
    return total


def power_draw(gpu: ET.Element) -> float | Missing:
    """The draw gpu-audit reports is NVML's 1-second average where the driver has it."""
    return number(raw(gpu, "gpu_power_readings/average_power_draw",
                      "gpu_power_readings/power_draw", "power_readings/average_power_draw",
                      "power_readings/power_draw", "gpu_power_readings/instant_power_draw",
                      "power_readings/instant_power_draw"))


def clock_event_reasons(gpu: ET.Element) -> list[str] | Missing:
    """Active clock-event ("throttle") reasons, named as gpu-audit names them."""
    for block, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                          ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        node = gpu.find(block)
        if node is None:
            continue
        names = []
        for child in node:
            state = flag(raw(node, child.tag))
            if state is True:
                name = child.tag.removeprefix(prefix)
                names.append({"display_clocks_setting": "display_clock_setting"}.get(name, name))
        return sorted(names)
    return ABSENT


@dataclass(frozen=True)
class Derived:
    """A value nvidia-smi does not print as such but that follows from what it prints."""

    value: Any
    how: str


def temperature_threshold(gpu: ET.Element, kind: str) -> int | Derived | Missing:
    """A threshold in absolute C (``kind``: ``max``, ``slow``, ``max_gpu`` or ``max_mem``).

    Older drivers print ``gpu_temp_<kind>_threshold`` in C. Drivers from r580 on may print
    ``gpu_temp_<kind>_tlimit_threshold`` instead: the threshold's distance below T.Limit, with
    ``gpu_temp_tlimit`` the current temperature's margin below it. So T.Limit is
    ``gpu_temp + gpu_temp_tlimit`` and the threshold T.Limit minus its own figure; both readings
    come from one document, so the temperature moving between samples cancels out. The memory
    threshold is relative to a memory T.Limit whose margin nvidia-smi does not print: no value.
    """
    node = gpu.find("temperature")
    if node is None:
        return ABSENT
    absolute = raw(node, f"gpu_temp_{kind}_threshold")
    relative = raw(node, f"gpu_temp_{kind}_tlimit_threshold")
    if not isinstance(absolute, Missing) or relative is ABSENT:
        return integer(absolute)
    if isinstance(relative, Missing):
        return relative
    offset = number(relative)
    if isinstance(offset, Missing):
        return offset
    if kind == "max_mem":
        return Missing("nvidia-smi prints it relative to the memory T.Limit, whose margin it "
                       "does not print: not derivable")
    temp, margin = number(raw(node, "gpu_temp")), number(raw(node, "gpu_temp_tlimit"))
    if isinstance(temp, Missing) or isinstance(margin, Missing):
        return Missing("nvidia-smi prints it relative to T.Limit, and the current temperature "
                       "or its T.Limit margin is N/A: not derivable")
    tlimit = temp + margin
    return Derived(int(tlimit - offset), f"derived: T.Limit {tlimit:g} (= gpu_temp {temp:g} + "
                                         f"margin {margin:g}) minus {offset:g}")


def process_type(text: str | Missing) -> str | Missing:
    if isinstance(text, Missing):
        return text
    kinds = {"C": "compute", "G": "graphics", "C+G": "compute+graphics", "M": "compute",
             "M+C": "compute"}
    return kinds.get(text.strip().upper(), text.strip().lower())


# ------------------------------------------------------------------------------ the fields


def exact(a: Any, b: Any) -> str:
    return "agree" if a == b else "disagree"


def within_mib(tolerance: float = 1.0) -> Callable[[Any, Any], str]:
    def compare(scan_bytes: Any, smi_mib: Any) -> str:
        return "agree" if abs(scan_bytes / MIB - smi_mib) <= tolerance + 1e-9 else "disagree"
    compare.tolerance = f"{tolerance:g} MiB"  # type: ignore[attr-defined]
    return compare


def within_watts(relative: float, absolute: float) -> Callable[[Any, Any], str]:
    def compare(a: Any, b: Any) -> str:
        limit = max(absolute, relative * max(abs(a), abs(b)))
        return "agree" if abs(a - b) <= limit + 1e-9 else "disagree"
    compare.tolerance = (  # type: ignore[attr-defined]
        f"{relative:.0%} or {absolute:g} W" if relative else f"{absolute:g} W")
    return compare


def moving(tolerance: float | None = None) -> Callable[[Any, Any], str]:
    """Differs by itself between samples: a difference is 'moving' (beyond ``tolerance``, when
    one is given, a disagreement)."""
    def compare(a: Any, b: Any) -> str:
        if a == b:
            return "agree"
        if tolerance is not None and abs(a - b) > tolerance:
            return "disagree"
        return "moving"
    compare.tolerance = (  # type: ignore[attr-defined]
        "moves" if tolerance is None else f"moves within {tolerance:g}")
    return compare


@dataclass(frozen=True)
class Field:
    name: str
    read: Callable[[ET.Element], Any]  # nvidia-smi's value, in gpu-audit's unit
    compare: Callable[[Any, Any], str] = exact
    scan_key: str | None = None  # the scan JSON's key; None: gpu-audit does not collect it


def field(name: str, read: Callable[[ET.Element], Any], compare: Callable[[Any, Any], str] = exact,
          collected: bool = True) -> Field:
    return Field(name, read, compare, name if collected else None)


GPU_FIELDS: list[Field] = [
    field("name", lambda g: raw(g, "product_name")),
    field("uuid", lambda g: raw(g, "uuid")),
    field("serial", lambda g: raw(g, "serial")),
    field("pci_bus_id", lambda g: bus_id(raw(g, "pci/pci_bus_id")) or ABSENT,
          lambda a, b: exact(bus_id(a), b)),
    field("brand", lambda g: word(raw(g, "product_brand"))),
    field("architecture", lambda g: first_word(raw(g, "product_architecture"))),
    # memory
    field("memory_total_bytes", lambda g: mib(raw(g, "fb_memory_usage/total")), within_mib()),
    field("memory_reserved_bytes", lambda g: mib(raw(g, "fb_memory_usage/reserved")),
          within_mib()),
    field("memory_used_bytes", lambda g: mib(raw(g, "fb_memory_usage/used")), within_mib()),
    field("memory_free_bytes", lambda g: mib(raw(g, "fb_memory_usage/free")), within_mib()),
    field("bar1_total_bytes", lambda g: mib(raw(g, "bar1_memory_usage/total")), within_mib()),
    field("bar1_used_bytes", lambda g: mib(raw(g, "bar1_memory_usage/used")), within_mib()),
    # activity
    field("utilization_pct", lambda g: integer(raw(g, "utilization/gpu_util")), moving()),
    field("memory_utilization_pct", lambda g: integer(raw(g, "utilization/memory_util")),
          moving()),
    field("fan_speed_pct", lambda g: integer(raw(g, "fan_speed")), moving()),
    field("performance_state", lambda g: integer(raw(g, "performance_state")), moving()),
    field("throttle_reasons", clock_event_reasons, lambda a, b: moving()(sorted(a), b)),
    # temperatures
    field("temperature_c", lambda g: integer(raw(g, "temperature/gpu_temp")), moving(2)),
    field("temperature_shutdown_c", lambda g: temperature_threshold(g, "max")),
    field("temperature_slowdown_c", lambda g: temperature_threshold(g, "slow")),
    field("temperature_max_operating_c", lambda g: temperature_threshold(g, "max_gpu")),
    field("memory_temperature_c", lambda g: integer(raw(g, "temperature/memory_temp")),
          moving(2)),
    field("memory_temperature_max_c", lambda g: temperature_threshold(g, "max_mem")),
    # power
    field("power_draw_w", power_draw, within_watts(0.05, 2.0)),
    field("power_limit_w", lambda g: number(raw(
        g, "gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit",
        "power_readings/power_limit")), within_watts(0, 0.5)),
    field("power_default_limit_w", lambda g: number(raw(
        g, "gpu_power_readings/default_power_limit", "power_readings/default_power_limit")),
        within_watts(0, 0.5)),
    field("power_min_limit_w", lambda g: number(raw(
        g, "gpu_power_readings/min_power_limit", "power_readings/min_power_limit")),
        within_watts(0, 0.5)),
    field("power_max_limit_w", lambda g: number(raw(
        g, "gpu_power_readings/max_power_limit", "power_readings/max_power_limit")),
        within_watts(0, 0.5)),
    # clocks
    field("sm_clock_mhz", lambda g: integer(raw(g, "clocks/sm_clock")), moving()),
    field("memory_clock_mhz", lambda g: integer(raw(g, "clocks/mem_clock")), moving()),
    field("sm_clock_max_mhz", lambda g: integer(raw(g, "max_clocks/sm_clock"))),
    field("memory_clock_max_mhz", lambda g: integer(raw(g, "max_clocks/mem_clock"))),
    field("graphics_clock_mhz", lambda g: integer(raw(g, "clocks/graphics_clock")), moving()),
    field("graphics_clock_max_mhz", lambda g: integer(raw(g, "max_clocks/graphics_clock"))),
    # modes
    field("persistence_mode", lambda g: flag(raw(g, "persistence_mode"))),
    field("compute_mode", lambda g: word(raw(g, "compute_mode"))),
    field("mig_mode", lambda g: flag(raw(g, "mig_mode/current_mig"))),
    field("mig_mode_pending", lambda g: flag(raw(g, "mig_mode/pending_mig"))),
    field("display_active", lambda g: flag(raw(g, "display_active"))),
    # ECC, retired pages, remapped rows
    field("ecc_mode", lambda g: flag(raw(g, "ecc_mode/current_ecc"))),
    field("ecc_mode_pending", lambda g: flag(raw(g, "ecc_mode/pending_ecc"))),
    field("ecc_errors_corrected_volatile", lambda g: ecc_total(g, "volatile", True)),
    field("ecc_errors_uncorrected_volatile", lambda g: ecc_total(g, "volatile", False)),
    field("ecc_errors_corrected_aggregate", lambda g: ecc_total(g, "aggregate", True)),
    field("ecc_errors_uncorrected_aggregate", lambda g: ecc_total(g, "aggregate", False)),
    field("retired_pages_sbe", lambda g: integer(
        raw(g, "retired_pages/multiple_single_bit_retirement/retired_count"))),
    field("retired_pages_dbe", lambda g: integer(
        raw(g, "retired_pages/double_bit_retirement/retired_count"))),
    field("retired_pages_pending", lambda g: flag(
        raw(g, "retired_pages/pending_retirement", "retired_pages/pending_blacklist"))),
    field("remapped_rows_correctable",
          lambda g: integer(raw(g, "remapped_rows/remapped_row_corr"))),
    field("remapped_rows_uncorrectable",
          lambda g: integer(raw(g, "remapped_rows/remapped_row_unc"))),
    field("remapped_rows_pending", lambda g: flag(raw(g, "remapped_rows/remapped_row_pending"))),
    field("remapped_rows_failure", lambda g: flag(raw(g, "remapped_rows/remapped_row_failure"))),
    # PCIe
    field("pcie_gen_current", lambda g: integer(
        raw(g, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")), moving()),
    field("pcie_gen_max", lambda g: integer(raw(g, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"))),
    field("pcie_width_current", lambda g: integer(
        raw(g, "pci/pci_gpu_link_info/link_widths/current_link_width")), moving()),
    field("pcie_width_max", lambda g: integer(
        raw(g, "pci/pci_gpu_link_info/link_widths/max_link_width"))),
]


# ------------------------------------------------------------------------------ comparing


@dataclass
class Row:
    gpu: str  # "0 GPU-..." or "driver"
    field: str
    gpu_audit: Any
    nvidia_smi: Any
    status: str
    tolerance: str = "exact"
    note: str = ""


def _shown(value: Any) -> Any:
    return None if isinstance(value, Missing) else value


def judge(gpu: str, name: str, ours: Any, theirs: Any, compare: Callable[[Any, Any], str],
          collected: bool = True) -> Row:
    tolerance = getattr(compare, "tolerance", "exact")
    if isinstance(theirs, Derived):  # compared as the value, the note says how it was derived
        row = judge(gpu, name, ours, theirs.value, compare, collected)
        row.note = "; ".join(filter(None, [theirs.how, row.note]))
        return row
    theirs_missing = isinstance(theirs, Missing)
    if not collected:
        status = "absent-both" if theirs_missing else "only-nvidia-smi"
        note = "gpu-audit does not collect it"
        return Row(gpu, name, None, _shown(theirs), status, tolerance, note)
    if ours is None and theirs_missing:
        return Row(gpu, name, None, None, "absent-both", tolerance, theirs.why)
    if ours is None:
        return Row(gpu, name, None, theirs, "only-nvidia-smi", tolerance)
    if theirs_missing:
        return Row(gpu, name, ours, None, "only-gpu-audit", tolerance, theirs.why)
    try:
        status = compare(ours, theirs)
    except (TypeError, ValueError) as exc:
        status, tolerance = "disagree", f"{tolerance} (incomparable: {exc})"
    return Row(gpu, name, ours, theirs, status, tolerance)


def _load_xml(path: Path) -> ET.Element:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    start = text.find("<?xml")  # a lost GPU makes nvidia-smi print a line before the document
    text = text[start:] if start > 0 else text
    text = re.sub(r"<!DOCTYPE[^>]*>", "", text, count=1)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InputError(f"{path}: not XML ({exc})") from None
    if root.tag != "nvidia_smi_log":
        raise InputError(f"{path}: not an nvidia-smi -q -x document (root <{root.tag}>)")
    return root


def _load_scan(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, dict) or not str(document.get("schema", "")).startswith(
            "gpu-audit.scan/"):
        raise InputError(f"{path}: not a gpu-audit.scan document")
    return document


def _pair(smi_gpus: list[ET.Element], scan_gpus: list[dict[str, Any]]
          ) -> tuple[list[tuple[ET.Element, dict[str, Any]]], list[Row]]:
    pairs, rows, used = [], [], set()
    for element in smi_gpus:
        uuid = raw(element, "uuid")
        bus = bus_id(element.get("id")) or bus_id(raw(element, "pci/pci_bus_id"))
        match = next((g for g in scan_gpus if isinstance(uuid, str) and g.get("uuid") == uuid),
                     None) or next((g for g in scan_gpus if bus and bus_id(g.get("pci_bus_id"))
                                    == bus), None)
        if match is None or id(match) in used:
            rows.append(Row(f"? {_shown(uuid) or bus}", "gpu", None, "present", "only-nvidia-smi",
                            note="no GPU of the scan has this UUID or bus id"))
            continue
        used.add(id(match))
        pairs.append((element, match))
    for gpu in scan_gpus:
        if id(gpu) not in used:
            rows.append(Row(f"{gpu.get('index')} {gpu.get('uuid')}", "gpu", "present", None,
                            "only-gpu-audit", note="nvidia-smi does not list this GPU"))
    return pairs, rows


def _processes(label: str, element: ET.Element, gpu: dict[str, Any],
               scan_processes: list[dict[str, Any]]) -> list[Row]:
    theirs: dict[int, dict[str, Any]] = {}
    for info in element.findall("processes/process_info"):
        pid = integer(raw(info, "pid"))
        if isinstance(pid, Missing):
            continue
        memory = mib(raw(info, "used_memory"))
        kind = process_type(raw(info, "type"))
        entry = theirs.setdefault(pid, {"memory": memory, "type": kind})
        if entry is not None and entry["type"] != kind and not isinstance(kind, Missing):
            entry["type"] = "compute+graphics"
    ours = {
        p["pid"]: p for p in scan_processes
        if (p.get("gpu_uuid") and p.get("gpu_uuid") == gpu.get("uuid"))
        or (not p.get("gpu_uuid") and p.get("gpu_index") == gpu.get("index"))
    }
    rows = [Row(label, "process_pids", sorted(ours), sorted(theirs),
                "agree" if set(ours) == set(theirs) else "disagree", "same set")]
    for pid in sorted(set(ours) | set(theirs)):
        if pid not in theirs:
            rows.append(Row(label, f"process[{pid}]", "present", None, "disagree",
                            note="nvidia-smi does not list it"))
            continue
        if pid not in ours:
            rows.append(Row(label, f"process[{pid}]", None, "present", "disagree",
                            note="gpu-audit does not list it"))
            continue
        rows.append(judge(label, f"process[{pid}].used_memory_bytes",
                          ours[pid].get("used_memory_bytes"), theirs[pid]["memory"],
                          within_mib()))
        rows.append(judge(label, f"process[{pid}].type", ours[pid].get("type"),
                          theirs[pid]["type"], exact))
    return rows


def compare(smi_root: ET.Element, scan: dict[str, Any]) -> list[Row]:
    """Every row of the comparison of one nvidia-smi document with one scan document."""
    rows: list[Row] = []
    driver = scan.get("driver") or {}
    rows.append(judge("driver", "driver_version", driver.get("driver_version"),
                      raw(smi_root, "driver_version"), exact))
    rows.append(judge("driver", "cuda_driver_version", driver.get("cuda_driver_version"),
                      raw(smi_root, "cuda_version"), exact))
    pairs, presence = _pair(smi_root.findall("gpu"), list(scan.get("gpus") or []))
    rows.extend(presence)
    for element, gpu in pairs:
        label = f"{gpu.get('index')} {gpu.get('uuid')}"
        for spec in GPU_FIELDS:
            ours = gpu.get(spec.scan_key) if spec.scan_key else None
            rows.append(judge(label, spec.name, ours, spec.read(element), spec.compare,
                              collected=spec.scan_key is not None))
        rows.extend(_processes(label, element, gpu, list(scan.get("processes") or [])))
    return rows


# -------------------------------------------------------------------------------- output


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}" if math.isfinite(value) else str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 10 * MIB:
        return f"{value} ({value / MIB:g} MiB)"
    text = json.dumps(value) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= 48 else text[:45] + "..."


def table(rows: list[Row], show_all: bool = False, quiet: bool = False) -> str:
    shown = [r for r in rows if show_all or r.status != "absent-both"]
    if quiet:
        shown = [r for r in shown if r.status not in ("agree", "absent-both")]
    header = ("GPU", "FIELD", "GPU-AUDIT", "NVIDIA-SMI", "STATUS", "TOLERANCE / NOTE")
    lines = [[r.gpu.split(" ")[0], r.field, _cell(r.gpu_audit), _cell(r.nvidia_smi), r.status,
              "; ".join(filter(None, [r.tolerance if r.tolerance != "exact" else "", r.note]))]
             for r in shown]
    widths = [max(len(str(c)) for c in column) for column in zip(header, *lines, strict=True)]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
           for line in [header, *lines]]
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    out.append("")
    out.append("  ".join(f"{s}: {n}" for s, n in counts.items()))
    return "\n".join(out)


def document(rows: list[Row], smi_path: Path, scan_path: Path) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "nvidia_smi": str(smi_path),
        "scan": str(scan_path),
        "counts": {s: sum(r.status == s for r in rows) for s in STATUSES},
        "disagreements": [asdict(r) for r in rows if r.status == "disagree"],
        "rows": [asdict(r) for r in rows],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("smi_xml", type=Path, help="output of nvidia-smi -q -x")
    parser.add_argument("scan_json", type=Path, help="output of gpu-audit scan --json")
    parser.add_argument("--json-out", type=Path, help="write every row here as JSON")
    parser.add_argument("--quiet", action="store_true", help="print only rows that do not agree")
    parser.add_argument("--all", action="store_true", help="also print absent-both rows")
    args = parser.parse_args(argv)
    try:
        rows = compare(_load_xml(args.smi_xml), _load_scan(args.scan_json))
    except InputError as exc:
        print(f"nvsmi_compare: {exc}", file=sys.stderr)
        return 3
    print(table(rows, show_all=args.all, quiet=args.quiet))
    if args.json_out:
        args.json_out.write_text(json.dumps(document(rows, args.smi_xml, args.scan_json),
                                            indent=1, default=str) + "\n", encoding="utf-8")
    return 1 if any(r.status == "disagree" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
