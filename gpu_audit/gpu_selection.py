"""Which GPUs a run judges: ``--gpus SPEC`` and the scheduler's view of a job's GPUs.

A spec is ``all`` (every GPU; the default), ``job`` (the GPUs the scheduler gave this job), or a
comma list whose entries are any of:

- NVML indices, as ``nvidia-smi`` numbers them: ``0,2`` (ranges too: ``0-3``);
- GPU UUIDs, ``GPU-6f3a9c1e-...``, whole or a prefix that names one GPU (as CUDA accepts them);
- MIG instance UUIDs in the ``MIG-GPU-<gpu uuid>/<gi>/<ci>`` form, which select their GPU;
- PCI bus ids in NVML's form ``00000000:3B:00.0``, the kernel's ``0000:3b:00.0`` or the short
  ``3b:00.0`` (case does not matter; the function may be left out).

``job`` reads, in order, ``SLURM_STEP_GPUS``, ``SLURM_JOB_GPUS`` and ``CUDA_VISIBLE_DEVICES``
(the first one set). Their indices count GPUs in PCI bus order, which is how Slurm's ``gres``
numbers GPUs and how ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` numbers them; UUID and ``MIG-GPU-`` entries
are matched as above. An empty value, ``NoDevFiles`` or ``-1`` means the job has no GPU: the
selection is then empty and only host findings remain. When the scheduler confines the job's
devices (Slurm's ``ConstrainDevices=yes``), NVML lists only the job's GPUs while
``SLURM_JOB_GPUS`` keeps the node's numbering: a list as long as NVML's with an index beyond it
then selects every GPU NVML lists, and the reason says so.

New-style MIG UUIDs (``MIG-<uuid>`` without the GPU's UUID inside) select the GPU whose MIG
devices the scan lists with that UUID (the selection is of whole GPUs: its other instances come
with it); one the scan does not list is refused with a message naming the other forms.

Pure: reads only the GPUs and the environment mapping it is given.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpu_audit.errors import UsageError
from gpu_audit.model import Finding, Gpu, KernelLog, Scan
from gpu_audit.units import noun, plural

JOB_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
NO_GPU_VALUES = frozenset({"", "-1", "nodevfiles", "none"})
# The forms a spec takes, as every command's --gpus help names them.
SPEC_FORMS = ("indices (0,2), GPU-<uuid>, MIG-GPU-<uuid>/.., PCI bus ids (0000:3b:00.0), or job "
              "(SLURM_STEP_GPUS, SLURM_JOB_GPUS or CUDA_VISIBLE_DEVICES)")


@dataclass(frozen=True)
class GpuSelection:
    """The GPUs a run judges: the spec as given, their NVML indices, and why (one sentence)."""

    spec: str
    indices: tuple[int, ...]
    reason: str

    def to_dict(self) -> dict[str, object]:
        return {"spec": self.spec, "indices": list(self.indices), "reason": self.reason}


def pci_key(bus_id: str | None) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) from ``00000000:3B:00.0``, ``0000:3b:00.0``, ``3b:00.0``
    or ``3b:00`` (the kernel log's form); ``None`` when it is not a PCI bus id."""
    match = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})"
                         r"(?:\.([0-7]))?", (bus_id or "").strip())
    if match is None:
        return None
    return (int(match[1] or "0", 16), int(match[2], 16), int(match[3], 16),
            int(match[4] or "0"))


def resolve_gpus(spec: str | None, gpus: Sequence[Gpu],
                 environ: Mapping[str, str]) -> GpuSelection | None:
    """The selection ``spec`` names among ``gpus``; ``None`` for every GPU (no spec, ``all``).

    Raises :class:`UsageError` (exit 3, one line) for a malformed spec or an entry that names
    no GPU.
    """
    if spec is None or spec.strip().lower() in ("", "all"):
        return None
    text = spec.strip()
    if text.lower() == "job":
        return _job_selection(gpus, environ)
    indices = _resolve_entries(_entries(text, "--gpus"), gpus, by_index=_nvml_index(gpus),
                               where="--gpus")
    listed = ",".join(str(i) for i in indices)
    chosen = f"{noun(len(indices), 'GPU')} {listed}"
    return GpuSelection(text, indices, f"--gpus {text}: {chosen} chosen on the command line")


def _entries(text: str, where: str) -> list[str]:
    entries = [e.strip() for e in text.split(",")]
    if any(not e for e in entries):
        raise UsageError(f"{where}: empty entry in {text!r} (expected e.g. 0,2 or GPU-<uuid> "
                         "or 0000:3b:00.0, or all, or job)")
    return entries


def _nvml_index(gpus: Sequence[Gpu]) -> dict[int, int]:
    return {g.index: g.index for g in gpus}


def _pci_order(gpus: Sequence[Gpu]) -> dict[int, int]:
    """Position in PCI bus order -> NVML index (NVML's order where a bus id is unknown)."""
    ordered = sorted(gpus, key=lambda g: (pci_key(g.pci_bus_id) is None,
                                          pci_key(g.pci_bus_id) or (0, 0, 0, 0), g.index))
    return {position: g.index for position, g in enumerate(ordered)}


def _resolve_entries(entries: Iterable[str], gpus: Sequence[Gpu], *, by_index: dict[int, int],
                     where: str) -> tuple[int, ...]:
    chosen: list[int] = []
    for entry in entries:
        for index in _resolve_entry(entry, gpus, by_index, where):
            if index not in chosen:
                chosen.append(index)
    return tuple(sorted(chosen))


def _resolve_entry(entry: str, gpus: Sequence[Gpu], by_index: dict[int, int],
                   where: str) -> list[int]:
    count = len(gpus)
    available = (f"this node has {plural(count, 'GPU')}" if count
                 else "NVML lists no GPU on this node")
    span = re.fullmatch(r"(\d+)(?:-(\d+))?", entry)
    if span:
        first, last = int(span[1]), int(span[2] or span[1])
        if last < first:
            raise UsageError(f"{where}: range {entry!r} runs backwards")
        missing = [i for i in range(first, last + 1) if i not in by_index]
        if missing:
            raise UsageError(f"{where}: GPU {missing[0]} does not exist ({available})")
        return [by_index[i] for i in range(first, last + 1)]
    lowered = entry.lower()
    if lowered.startswith("mig-gpu-"):
        parent = re.split(r"[/:]", entry[len("MIG-"):], maxsplit=1)[0]
        return [_by_uuid(parent, gpus, where, entry)]
    if lowered.startswith("mig-"):
        owners = sorted({g.index for g in gpus for m in g.mig_devices
                         if m.uuid and m.uuid.lower() == lowered})
        if owners:
            return owners
        raise UsageError(f"{where}: MIG instance {entry!r} cannot be tied to its GPU: no GPU"
                         " lists it as a MIG device; name the GPU by index, GPU-<uuid> or PCI bus"
                         " id instead")
    if lowered.startswith("gpu-"):
        return [_by_uuid(entry, gpus, where, entry)]
    key = pci_key(entry)
    if key is not None and ":" in entry:
        exact = [g.index for g in gpus if pci_key(g.pci_bus_id) == key]
        if not exact:
            raise UsageError(f"{where}: no GPU at PCI bus id {entry!r} ({available})")
        return exact
    raise UsageError(f"{where}: {entry!r} is not a GPU index, GPU-<uuid>, MIG-GPU-<uuid>/.. or "
                     "PCI bus id (or all, or job)")


def _by_uuid(prefix: str, gpus: Sequence[Gpu], where: str, entry: str) -> int:
    matches = [g.index for g in gpus if g.uuid and g.uuid.lower().startswith(prefix.lower())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageError(f"{where}: {entry!r} names no GPU on this node")
    raise UsageError(f"{where}: {entry!r} matches {len(matches)} GPUs; give more of the UUID")


def _job_selection(gpus: Sequence[Gpu], environ: Mapping[str, str]) -> GpuSelection:
    name = next((v for v in JOB_VARIABLES if v in environ), None)
    if name is None:
        raise UsageError("--gpus job: none of " + ", ".join(JOB_VARIABLES) + " is set (run it "
                         "inside the job, its prolog or epilog, or name the GPUs)")
    value = environ[name].strip()
    shown = f"{name}={value}"
    if value.lower() in NO_GPU_VALUES:
        return GpuSelection("job", (), f"{shown}: the job has no GPU; only host findings apply")
    entries = _entries(value, f"--gpus job ({name})")
    numbers = [e for e in entries if re.fullmatch(r"\d+(?:-\d+)?", e)]
    if numbers and len(entries) == len(gpus) and gpus:
        highest = max(int(n.split("-")[-1]) for n in numbers)
        if highest >= len(gpus) and all("-" not in n for n in numbers):
            every = tuple(sorted(g.index for g in gpus))
            return GpuSelection("job", every, f"{shown}: the job's GPUs; NVML lists only those "
                                              f"{len(gpus)} (devices confined to the job)")
    indices = _resolve_entries(entries, gpus, by_index=_pci_order(gpus),
                               where=f"--gpus job ({shown})")
    listed = ",".join(str(i) for i in indices)
    return GpuSelection("job", indices, f"{shown}: the job's GPUs (NVML index {listed}, by PCI "
                                        "bus order)")


# ------------------------------------------------------------------------- applying a selection


def bus_key(bus_id: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device): the kernel log leaves the function out."""
    key = pci_key(bus_id)
    return key[:3] if key else None


def _other_gpus_buses(scan: Scan, wanted: set[int]) -> set[tuple[int, int, int]]:
    """The PCI addresses of the GPUs left out (none of them shared with a selected GPU)."""
    chosen = {bus_key(g.pci_bus_id) for g in scan.gpus if g.index in wanted}
    others = {bus_key(g.pci_bus_id) for g in scan.gpus if g.index not in wanted}
    return {key for key in others - chosen if key is not None}


def apply_selection(scan: Scan, selection: GpuSelection | None) -> Scan:
    """``scan`` limited to the selected GPUs: their GPUs, their processes, their probe errors
    and their Xid events (events of a GPU NVML does not list stay: they are the node's). The
    number of NVIDIA devices on the PCI bus becomes unknown (it counts the machine's GPUs, which
    a selection is not). The selection is recorded in ``Scan.gpu_selection`` (the document's
    top-level ``gpu_selection``) so a saved document says what it shows.
    """
    if selection is None:
        return scan
    wanted = set(selection.indices)
    kernel_log = scan.kernel_log
    if kernel_log is not None:
        others = _other_gpus_buses(scan, wanted)
        kept = [e for e in kernel_log.xid_events if bus_key(e.pci_bus_id) not in others]
        kernel_log = KernelLog(kernel_log.source, kernel_log.readable, kept,
                               kernel_log.truncated)
    host = scan.host
    if len(wanted) < len(scan.gpus):  # the bus's count describes the machine, not a selection
        host = dataclasses.replace(host, nvidia_pci_devices=None)
    return dataclasses.replace(
        scan,
        host=host,
        gpus=[g for g in scan.gpus if g.index in wanted],
        processes=[p for p in scan.processes if p.gpu_index in wanted],
        probe_errors=[e for e in scan.probe_errors if _keep_subject(e.subject, scan, wanted)],
        kernel_log=kernel_log,
        gpu_selection=selection.to_dict(),
    )


def _keep_subject(subject: str, scan: Scan, wanted: set[int]) -> bool:
    kind, _, number = subject.partition(":")
    if not number.isdigit():
        return True
    if kind == "gpu":
        return int(number) in wanted
    if kind == "pid":
        gpus = {p.gpu_index for p in scan.processes if p.pid == int(number)}
        return not gpus or bool(gpus & wanted)
    return True


def keeps_subject(subject: str, scan: Scan, selection: GpuSelection | None) -> bool:
    """Whether a finding or check result about ``subject`` concerns the selection: host and env
    subjects always do; ``gpu:N`` when N is selected; ``pid:N`` when that process uses a
    selected GPU (or is not a GPU process of ``scan``, the whole machine's scan)."""
    return selection is None or _keep_subject(subject, scan, set(selection.indices))


def select_findings(findings: Sequence[Finding], scan: Scan,
                    selection: GpuSelection | None) -> list[Finding]:
    """The findings about the selection, from findings judged on the whole machine's ``scan``
    (so counts that compare the machine with itself, such as NVML's GPUs against the PCI bus,
    are judged on the machine)."""
    return [f for f in findings if keeps_subject(f.subject, scan, selection)]


def selection_of(scan: Scan) -> dict[str, object] | None:
    """The selection a (possibly saved) scan recorded, as JSON data; ``None`` for every GPU."""
    return scan.gpu_selection
