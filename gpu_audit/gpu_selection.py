"""Which GPUs a run judges: ``--gpus SPEC`` and the scheduler's view of a job's GPUs.

A spec is ``all`` (every GPU; the default), ``job`` (the GPUs the scheduler gave this job), or a
comma list whose entries are any of:

- NVML indices, as ``nvidia-smi`` numbers them: ``0,2`` (ranges too: ``0-3``);
- GPU UUIDs, ``GPU-6f3a9c1e-...``, whole or a prefix that names one GPU (as CUDA accepts them);
- MIG instances: ``MIG-<uuid>`` (as ``nvidia-smi -L`` lists them) or the older
  ``MIG-GPU-<gpu uuid>/<gi>/<ci>`` form (see below);
- PCI bus ids in NVML's form ``00000000:3B:00.0``, the kernel's ``0000:3b:00.0`` or the short
  ``3b:00.0`` (case does not matter; the function may be left out).

``job`` reads, in order, ``SLURM_STEP_GPUS``, ``SLURM_JOB_GPUS`` and ``CUDA_VISIBLE_DEVICES``
(the first one set). Their indices count GPUs in Slurm's gres order, the device minor order
(``gpu_audit/gpu_identity.py`` joins each GPU's names, a lost GPU's included); UUID and
``MIG-`` entries are matched as above. An empty value, ``NoDevFiles`` or ``-1`` means the job
has no GPU: the selection is then empty and only host findings remain. When the scheduler
confines the job's devices (Slurm's ``ConstrainDevices=yes``), NVML lists only the job's GPUs while
``SLURM_JOB_GPUS`` keeps the node's numbering: a list as long as NVML's with an index beyond it
then selects every GPU NVML lists, and the reason says so.

A MIG entry selects that instance: its GPU is in ``indices`` and the instance's UUID in
``mig_uuids``; applied, the GPU keeps only its chosen instances and their processes. ``MIG-<uuid>``
is matched against the MIG devices the scan lists (one it does not list is refused with a
message naming the other forms). ``MIG-GPU-<gpu uuid>/<gi>/<ci>`` names the instance by its GPU
instance and compute instance ids (``/<ci>`` left out: every compute instance of that GPU
instance); where the scan lists no MIG device of that GPU (a scan saved before instances were
read), it selects the whole GPU, as it always did. A GPU also named whole (by index, UUID or bus
id) is chosen whole.

Pure: reads only the GPUs and the environment mapping it is given.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

import msgspec

from gpu_audit.bounds import MAX_GPUS, MAX_INT_DIGITS, MAX_MIG_PER_GPU, bounded_int
from gpu_audit.errors import InputError, UsageError
from gpu_audit.gpu_identity import Slot, bus_key, describe, pci_key, slurm_order
from gpu_audit.lazy import regex
from gpu_audit.model import Finding, Gpu, GpuProcess, KernelGpu, KernelLog, MigDevice, Scan
from gpu_audit.units import noun, plural

JOB_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
NO_GPU_VALUES = frozenset({"", "-1", "nodevfiles", "none"})
# Entries one spec may hold: every GPU and every MIG instance of the largest node, one by one.
# Counted on the text (its commas) before it is split, so a hostile value costs nothing.
MAX_ENTRIES = MAX_GPUS * (1 + MAX_MIG_PER_GPU)
# An index or a range: ``\d`` takes any Unicode digit so that bounded_int can name it.
_SPAN = regex(r"(\d+)(?:-(\d+))?")  # compiled when a spec is read (--gpus, a job's GPUs)
_SHOWN = 120  # characters of a variable's value quoted back in a message


class MissingGpu(msgspec.Struct, frozen=True):
    """A GPU the job was given that NVML does not list: one only the kernel driver or ``/dev``
    knows (vanished from NVML), or one nothing on the node knows. Its identity is what any
    source knows of it (``None``: no source does)."""

    entry: str  # as the job's variable names it: "4", "GPU-6f3a...", "0000:3b:00.0"
    why: str  # one phrase: "/dev/nvidia4 (PCI 0000:db:00.0, which NVML does not list)"
    position: int | None = None  # its place in Slurm's gres order, for an index
    minor_number: int | None = None
    pci_bus_id: str | None = None
    uuid: str | None = None

    @property
    def subject(self) -> str:
        """How a finding names it: ``gpu:/dev/nvidia4``, else ``gpu:<bus id>``, ``gpu:<uuid>``,
        or the job's entry (``gpu:job-4``)."""
        if self.minor_number is not None:
            return f"gpu:/dev/nvidia{self.minor_number}"
        return f"gpu:{self.pci_bus_id or self.uuid or 'job-' + self.entry}"

    def to_dict(self) -> dict[str, object]:
        return {"entry": self.entry, "why": self.why, "position": self.position,
                "minor_number": self.minor_number, "pci_bus_id": self.pci_bus_id,
                "uuid": self.uuid}


class GpuSelection(msgspec.Struct, frozen=True):
    """The GPUs a run judges: the spec as given, their NVML indices, and why (one sentence).

    ``mig_uuids``: the MIG instances chosen (their GPUs are in ``indices``); a GPU none of whose
    instances is named here is chosen whole. Empty: whole GPUs only.
    """

    spec: str
    indices: tuple[int, ...]
    reason: str
    mig_uuids: tuple[str, ...] = ()
    missing: tuple[MissingGpu, ...] = ()  # the job's GPUs this node cannot show (see below)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"spec": self.spec, "indices": list(self.indices),
                                  "reason": self.reason}
        if self.mig_uuids:  # an optional key: absent for whole GPUs
            out["mig_uuids"] = list(self.mig_uuids)
        if self.missing:  # likewise: absent when every GPU of the job is listed
            out["missing"] = [m.to_dict() for m in self.missing]
        return out

    def instances_of(self, gpu: Gpu) -> list[MigDevice] | None:
        """The chosen MIG instances of ``gpu``; ``None`` when it is chosen whole."""
        chosen = {u.lower() for u in self.mig_uuids}
        picked = [m for m in gpu.mig_devices if m.uuid and m.uuid.lower() in chosen]
        return picked or None


def mig_label(gpu_instance_id: int | None, compute_instance_id: int | None) -> str:
    """A MIG instance as ``GPU instance/compute instance`` ids (``2/0``; ``?`` where unknown),
    as subjects, tables and ``nvidia-smi`` name it."""
    gi = "?" if gpu_instance_id is None else gpu_instance_id
    ci = "?" if compute_instance_id is None else compute_instance_id
    return f"{gi}/{ci}"


def instance_label(mig: MigDevice) -> str:
    """:func:`mig_label` of a MIG device."""
    return mig_label(mig.gpu_instance_id, mig.compute_instance_id)


def resolve_gpus(spec: str | None, gpus: Sequence[Gpu], environ: Mapping[str, str], *,
                 unlisted: Sequence[KernelGpu] = (),
                 missing_ok: bool = False) -> GpuSelection | None:
    """The selection ``spec`` names among ``gpus``; ``None`` for every GPU (no spec, ``all``).

    ``unlisted``: the GPUs only the kernel driver or ``/dev`` lists (``Scan.unlisted_gpus``),
    which take their places in Slurm's numbering (:func:`gpu_audit.gpu_identity.slurm_order`).
    ``missing_ok`` (the Slurm hooks): a job's GPU that NVML does not list is returned in
    ``missing`` (a node problem for the hook to report) instead of refused; the guess that
    devices are confined to the job is then never made (a hook runs outside the job's cgroup).

    Raises :class:`UsageError` (exit 3, one line) for a malformed spec or an entry that names
    no GPU.
    """
    if spec is None or spec.strip().lower() in ("", "all"):
        return None
    text = spec.strip()
    if text.lower() == "job":
        return _job_selection(gpus, environ, unlisted, missing_ok)
    indices, migs = _resolve_entries(_entries(text, "--gpus"), gpus, by_index=_nvml_index(gpus),
                                     where="--gpus")
    chosen = f"{noun(len(indices), 'GPU')} {_listed(indices, migs, gpus)}"
    shown = text if len(text) <= _SHOWN else f"{text[:_SHOWN]}…"
    return GpuSelection(text, indices, f"--gpus {shown}: {chosen} chosen on the command line",
                        migs)


def _listed(indices: Sequence[int], migs: Sequence[str], gpus: Sequence[Gpu]) -> str:
    """``0,1 (MIG 7/0)``: the GPUs, each with its chosen instances."""
    selection = GpuSelection("", tuple(indices), "", tuple(migs))
    parts = []
    for index in indices:
        gpu = next((g for g in gpus if g.index == index), None)
        picked = selection.instances_of(gpu) if gpu is not None else None
        labels = f" (MIG {', '.join(instance_label(m) for m in picked)})" if picked else ""
        parts.append(f"{index}{labels}")
    return ",".join(parts)


def _entries(text: str, where: str) -> list[str]:
    if text.count(",") >= MAX_ENTRIES:
        raise UsageError(f"{where}: {text.count(',') + 1} entries; a spec names at most "
                         f"{MAX_ENTRIES} (every GPU and MIG instance of a node)")
    entries = [e.strip() for e in text.split(",")]
    if any(not e for e in entries):
        raise UsageError(f"{where}: empty entry in {_quoted(text)} (expected e.g. 0,2 or "
                         "GPU-<uuid> or 0000:3b:00.0, or all, or job)")
    return entries


def _nvml_index(gpus: Sequence[Gpu]) -> dict[int, int]:
    return {g.index: g.index for g in gpus}


def _gres_order(slots: Sequence[Slot]) -> dict[int, int]:
    """Position in Slurm's gres order -> NVML index, for the GPUs NVML lists."""
    return {position: slot.index for position, slot in enumerate(slots) if isinstance(slot, Gpu)}


class _Node:
    """The node's GPUs as a spec looks them up, indexed once per spec so that each entry costs
    a lookup, not a pass over every GPU (a saved document may list many)."""

    def __init__(self, gpus: Sequence[Gpu], by_index: dict[int, int]) -> None:
        self.count = len(gpus)
        self.by_index = by_index
        self.positions = sorted(by_index)  # the numbers the GPUs answer to
        self.gpus = {g.index: g for g in gpus}
        self.uuids = sorted((g.uuid.lower(), g.index) for g in gpus if g.uuid)
        self.buses: dict[tuple[int, int, int, int], list[int]] = {}
        self.migs: dict[str, list[tuple[int, str | None]]] = {}  # MIG uuid (lower) -> owners
        for g in gpus:
            if (key := pci_key(g.pci_bus_id)) is not None:
                self.buses.setdefault(key, []).append(g.index)
            for m in g.mig_devices:
                if m.uuid:
                    self.migs.setdefault(m.uuid.lower(), []).append((g.index, m.uuid))

    def available(self) -> str:
        return f"this node has {plural(self.count, 'GPU')}" if self.count \
            else "NVML lists no GPU on this node"

    def has(self, position: int) -> bool:
        at = bisect.bisect_left(self.positions, position)
        return at < len(self.positions) and self.positions[at] == position

    def with_uuid_prefix(self, prefix: str) -> list[int]:
        """The GPUs whose UUID starts with ``prefix`` (sorted UUIDs: one contiguous run)."""
        low = bisect.bisect_left(self.uuids, (prefix,))
        high = bisect.bisect_left(self.uuids, (prefix + "\U0010ffff",))
        return [index for _, index in self.uuids[low:high]]


def _resolve_entries(entries: Iterable[str], gpus: Sequence[Gpu], *, by_index: dict[int, int],
                     where: str, missing: list[MissingGpu] | None = None,
                     slots: Sequence[Slot] = ()) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The GPUs chosen and the MIG instances chosen (of GPUs not also chosen whole).

    Indices and ranges are checked against the node one by one without being expanded; the
    positions they cover are expanded once, merged, at the end, so no entry costs more than
    a lookup however it is written. With ``missing`` (a list), an entry NVML lists no GPU for
    is added to it (named from ``slots``, the node in gres order) instead of refused.
    """
    node = _Node(gpus, by_index)
    whole: set[int] = set()
    spans: list[tuple[int, int]] = []
    instances: dict[str, int] = {}  # MIG uuid -> its GPU, in the order given
    for entry in dict.fromkeys(entries):  # a repeated entry chooses nothing more
        span = _span(entry, where)
        if span is not None:
            if missing is None:
                _check_span(span, node, where, slots)
            elif span[1] >= MAX_GPUS:
                raise UsageError(f"{where}: GPU {span[1]} is beyond the {MAX_GPUS} GPUs "
                                 "gpu-audit accepts on one node")
            spans.append(span)
            continue
        try:
            chosen = _resolve_entry(entry, node, where)
        except _NotOnNode:
            if missing is None:
                raise
            missing.append(_missing_entry(entry, slots))
            if len(missing) > MAX_GPUS:
                raise UsageError(f"{where}: more than {MAX_GPUS} GPUs this node does not list; "
                                 "no node holds that many") from None
            continue
        for index, uuid in chosen:
            if uuid is None:
                whole.add(index)
            else:
                instances.setdefault(uuid, index)
    for position in _covered(spans):
        if position in by_index:
            whole.add(by_index[position])
        elif missing is not None:
            missing.append(_missing_position(position, slots, node))
    indices = tuple(sorted(whole | set(instances.values())))
    return indices, tuple(u for u, index in instances.items() if index not in whole)


class _NotOnNode(UsageError):
    """A well-formed entry that names no GPU NVML lists."""


def _missing_position(position: int, slots: Sequence[Slot], node: _Node) -> MissingGpu:
    """The job's GPU at ``position`` of the gres order, which NVML does not list."""
    slot = slots[position] if position < len(slots) else None
    if isinstance(slot, KernelGpu):
        return MissingGpu(str(position), describe(slot), position, slot.minor_number,
                          slot.pci_bus_id, slot.uuid)
    return MissingGpu(str(position), f"GPU {position} of the job is beyond the "
                                     f"{plural(len(slots), 'GPU')} this node lists "
                                     f"({node.available()})", position)


def _missing_entry(entry: str, slots: Sequence[Slot]) -> MissingGpu:
    """The job's GPU named by UUID or bus id, which NVML does not list."""
    lowered, key = entry.lower(), pci_key(entry)
    for slot in slots:
        if isinstance(slot, KernelGpu) and (
                (slot.uuid and slot.uuid.lower().startswith(lowered))
                or (key is not None and key == pci_key(slot.pci_bus_id))):
            return MissingGpu(entry, describe(slot), None, slot.minor_number, slot.pci_bus_id,
                              slot.uuid)
    uuid = entry if lowered.startswith("gpu-") else None
    bus = entry if uuid is None and key is not None else None
    return MissingGpu(entry, f"{_quoted(entry)} names no GPU this node lists", None, None, bus,
                      uuid)


def _span(entry: str, where: str) -> tuple[int, int] | None:
    """(first, last) of an index (``2``) or a range (``0-3``); ``None`` for any other entry."""
    match = _SPAN().fullmatch(entry)
    if match is None:
        return None
    first = _number(match[1], f"{where}: GPU index")
    last = first if match[2] is None else _number(match[2], f"{where}: GPU index")
    if last < first:
        raise UsageError(f"{where}: range {_quoted(entry)} runs backwards")
    return first, last


def _number(text: str, where: str) -> int:
    """A number of a spec: ASCII digits, at most MAX_INT_DIGITS of them (checked before it is
    converted), as a :class:`UsageError` like every other mistake in a spec."""
    try:
        return bounded_int(text, where)
    except InputError as exc:
        raise UsageError(str(exc)) from None


def _check_span(span: tuple[int, int], node: _Node, where: str,
                slots: Sequence[Slot] = ()) -> None:
    """Refuse a range that reaches past the node's GPUs (naming the first missing one, and what
    the kernel driver or /dev knows of it) or past MAX_GPUS, without expanding it."""
    first, last = span
    positions = node.positions
    present = bisect.bisect_right(positions, last) - bisect.bisect_left(positions, first)
    if present != last - first + 1:
        # At most len(positions) + 1 steps: the range is never expanded into a list.
        missing = next(i for i in range(first, last + 1) if not node.has(i))
        slot = slots[missing] if missing < len(slots) else None
        known = f": it is {describe(slot)}" if isinstance(slot, KernelGpu) else ""
        raise UsageError(f"{where}: GPU {missing} does not exist ({node.available()}){known}")
    if last >= MAX_GPUS:  # only a document listing more GPUs than any node holds gets here
        raise UsageError(f"{where}: GPU {last} is beyond the {MAX_GPUS} GPUs gpu-audit accepts "
                         "on one node")


def _covered(spans: list[tuple[int, int]]) -> Iterator[int]:
    """Every position the ranges cover, each once (overlapping ranges merged first)."""
    end = -1
    for first, last in sorted(spans):
        yield from range(max(first, end + 1), last + 1)
        end = max(end, last)


def _resolve_entry(entry: str, node: _Node, where: str) -> list[tuple[int, str | None]]:
    """(GPU index, MIG uuid or ``None`` for the whole GPU) for each thing ``entry`` names."""
    lowered = entry.lower()
    if lowered.startswith("mig-gpu-"):
        return _old_mig_form(entry, node, where)
    if lowered.startswith("mig-"):
        if lowered in node.migs:
            return node.migs[lowered]
        raise UsageError(f"{where}: MIG instance {_quoted(entry)} cannot be tied to its GPU: no "
                         "GPU lists it as a MIG device; name the GPU by index, GPU-<uuid> or PCI "
                         "bus id instead")
    return [(index, None) for index in _whole_gpus(entry, node, where)]


def _old_mig_form(entry: str, node: _Node, where: str) -> list[tuple[int, str | None]]:
    """``MIG-GPU-<gpu uuid>/<gi>/<ci>``: the instance(s) with those ids, or the whole GPU where
    no id is given or the scan lists none of its MIG devices."""
    match = re.fullmatch(r"(GPU-[^/:]*)(?:[/:](\d+)(?:[/:](\d+))?)?", entry[len("MIG-"):],
                         re.IGNORECASE)
    if match is None:
        raise UsageError(f"{where}: {_quoted(entry)} is not a MIG-GPU-<uuid>/<gi>/<ci> MIG "
                         "instance")
    index = _by_uuid(match[1], node, where, entry)
    gpu = node.gpus[index]
    if match[2] is None or not gpu.mig_devices:
        return [(index, None)]
    gi = _number(match[2], f"{where}: {_quoted(entry)}: GPU instance id")
    ci = None if match[3] is None else \
        _number(match[3], f"{where}: {_quoted(entry)}: compute instance id")
    found = [m for m in gpu.mig_devices
             if m.gpu_instance_id == gi and (ci is None or m.compute_instance_id == ci)]
    listed = ", ".join(instance_label(m) for m in gpu.mig_devices)
    if not found:
        raise UsageError(f"{where}: {_quoted(entry)} names no MIG instance of GPU {index} (it "
                         f"lists {listed})")
    if any(not m.uuid for m in found):
        raise UsageError(f"{where}: MIG instance {_quoted(entry)} of GPU {index} has no UUID "
                         "NVML reports; name the GPU by index instead")
    return [(index, m.uuid) for m in found]


def _whole_gpus(entry: str, node: _Node, where: str) -> list[int]:
    """The GPU a UUID or a PCI bus id names (indices and ranges are :func:`_span`'s)."""
    if entry.lower().startswith("gpu-"):
        return [_by_uuid(entry, node, where, entry)]
    key = pci_key(entry)
    if key is not None and ":" in entry:
        if key not in node.buses:
            raise _NotOnNode(f"{where}: no GPU at PCI bus id {_quoted(entry)} "
                             f"({node.available()})")
        return node.buses[key]
    raise UsageError(f"{where}: {_quoted(entry)} is not a GPU index, GPU-<uuid>, MIG-<uuid> or "
                     "PCI bus id (or all, or job)")


def _by_uuid(prefix: str, node: _Node, where: str, entry: str) -> int:
    matches = node.with_uuid_prefix(prefix.lower())
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise _NotOnNode(f"{where}: {_quoted(entry)} names no GPU on this node")
    raise UsageError(f"{where}: {_quoted(entry)} matches {len(matches)} GPUs; give more of the "
                     "UUID")


def _quoted(text: str) -> str:
    """``text`` as a message quotes it: escaped, and cut short when it is long."""
    return repr(text) if len(text) <= _SHOWN else f"{text[:_SHOWN]!r}…"


def _job_selection(gpus: Sequence[Gpu], environ: Mapping[str, str],
                   unlisted: Sequence[KernelGpu] = (), missing_ok: bool = False) -> GpuSelection:
    name = next((v for v in JOB_VARIABLES if v in environ), None)
    if name is None:
        raise UsageError("--gpus job: none of " + ", ".join(JOB_VARIABLES) + " is set (run it "
                         "inside the job, its prolog or epilog, or name the GPUs)")
    value = environ[name].strip()
    shown = f"{name}={value}" if len(value) <= _SHOWN else f"{name}={value[:_SHOWN]}…"
    if value.lower() in NO_GPU_VALUES:
        return GpuSelection("job", (), f"{shown}: the job has no GPU; only host findings apply")
    entries = _entries(value, f"--gpus job ({name})")
    spans = [span for e in entries if (span := _span(e, f"--gpus job ({name})")) is not None]
    slots = slurm_order(gpus, unlisted)
    if spans and len(entries) == len(gpus) and gpus and not missing_ok:
        highest = max(last for _, last in spans)
        if highest >= len(slots) and all(first == last for first, last in spans):
            every = tuple(sorted(g.index for g in gpus))
            return GpuSelection("job", every, f"{shown}: the job's GPUs; NVML lists only those "
                                              f"{len(gpus)} (devices confined to the job)")
    missing: list[MissingGpu] | None = [] if missing_ok else None
    indices, migs = _resolve_entries(entries, gpus, by_index=_gres_order(slots),
                                     where=f"--gpus job ({shown})", missing=missing,
                                     slots=slots)
    listed = _listed(indices, migs, gpus)
    gone = f"; not listed by NVML: {', '.join(m.entry for m in missing)}" if missing else ""
    return GpuSelection("job", indices, f"{shown}: the job's GPUs (NVML index {listed or '-'}, "
                                        f"in Slurm's gres order){gone}", migs,
                        tuple(missing or ()))


# ------------------------------------------------------------------------- applying a selection


def _other_gpus_buses(scan: Scan, wanted: set[int]) -> set[tuple[int, int, int]]:
    """The PCI addresses of the GPUs left out (none of them shared with a selected GPU)."""
    chosen = {bus_key(g.pci_bus_id) for g in scan.gpus if g.index in wanted}
    others = {bus_key(g.pci_bus_id) for g in scan.gpus if g.index not in wanted}
    return {key for key in others - chosen if key is not None}


def apply_selection(scan: Scan, selection: GpuSelection | None) -> Scan:
    """``scan`` limited to the selected GPUs: their GPUs, their processes, their probe errors
    and their Xid events (events of a GPU NVML does not list stay: they are the node's). The
    number of NVIDIA devices on the PCI bus becomes unknown (it counts the machine's GPUs, which
    a selection is not), and of the GPUs NVML does not list only the selection's missing ones
    stay. The selection is recorded in ``Scan.gpu_selection`` (the document's
    top-level ``gpu_selection``) so a saved document says what it shows. A GPU chosen by some of
    its MIG instances keeps only those instances and their processes.
    """
    if selection is None:
        return scan
    wanted = set(selection.indices)
    chosen = _chosen_instances(scan, selection)
    kernel_log = scan.kernel_log
    if kernel_log is not None:
        others = _other_gpus_buses(scan, wanted)
        kept = [e for e in kernel_log.xid_events if bus_key(e.pci_bus_id) not in others]
        kernel_log = KernelLog(kernel_log.source, kernel_log.readable, kept,
                               kernel_log.truncated)
    host = scan.host
    if len(wanted) < len(scan.gpus):  # the bus's count describes the machine, not a selection
        host = msgspec.structs.replace(host, nvidia_pci_devices=None)
    # Of the GPUs NVML does not list, only those the selection names missing stay.
    named = {(m.minor_number, m.pci_bus_id) for m in selection.missing}
    return msgspec.structs.replace(
        scan,
        host=host,
        unlisted_gpus=[k for k in scan.unlisted_gpus if (k.minor_number, k.pci_bus_id) in named],
        gpus=[msgspec.structs.replace(g, mig_devices=chosen[g.index]) if g.index in chosen else g
              for g in scan.gpus if g.index in wanted],
        processes=[p for p in scan.processes if p.gpu_index in wanted and _in_chosen(p, chosen)],
        probe_errors=[e for e in scan.probe_errors
                      if _keep_subject(e.subject, scan, wanted, chosen)],
        kernel_log=kernel_log,
        gpu_selection=selection.to_dict(),
    )


def _chosen_instances(scan: Scan, selection: GpuSelection) -> dict[int, list[MigDevice]]:
    """GPU index -> its chosen MIG instances, for each GPU chosen by some of its instances."""
    if not selection.mig_uuids:
        return {}
    wanted = set(selection.indices)
    return {g.index: picked for g in scan.gpus
            if g.index in wanted and (picked := selection.instances_of(g)) is not None}


def _in_chosen(process: GpuProcess, chosen: dict[int, list[MigDevice]]) -> bool:
    """Whether ``process`` runs in a chosen instance of its GPU (or its GPU is chosen whole)."""
    devices = chosen.get(process.gpu_index)
    if devices is None:
        return True
    if process.mig_uuid:
        return any(m.uuid and m.uuid.lower() == process.mig_uuid.lower() for m in devices)
    if process.mig_gpu_instance_id is not None:
        return any(m.gpu_instance_id == process.mig_gpu_instance_id
                   and process.mig_compute_instance_id in (None, m.compute_instance_id)
                   for m in devices)
    # NVML did not say which instance it runs in (no instance ids for it): it may be in a chosen
    # one, so it stays with its GPU rather than being hidden from the selection.
    return True


def _keep_subject(subject: str, scan: Scan, wanted: set[int],
                  chosen: dict[int, list[MigDevice]]) -> bool:
    kind, _, rest = subject.partition(":")
    text, _, instance = rest.partition("/mig:")
    # Subjects may come from a saved document: only a plain number names a GPU or a process.
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_INT_DIGITS):
        return True
    number = int(text)
    if kind == "gpu":
        devices = chosen.get(number)
        return number in wanted and (
            devices is None or not instance or instance in {instance_label(m) for m in devices})
    if kind == "pid":
        mine = [p for p in scan.processes if p.pid == number]
        return not mine or any(p.gpu_index in wanted and _in_chosen(p, chosen) for p in mine)
    return True


def keeps_subject(subject: str, scan: Scan, selection: GpuSelection | None) -> bool:
    """Whether a finding or check result about ``subject`` concerns the selection: host and env
    subjects always do; ``gpu:N`` when N is selected (``gpu:N/mig:GI/CI`` when that instance
    is, or its GPU is chosen whole); ``pid:N`` when that process uses a selected GPU or instance
    (or is not a GPU process of ``scan``, the whole machine's scan)."""
    return selection is None or _keep_subject(subject, scan, set(selection.indices),
                                              _chosen_instances(scan, selection))


def select_findings(findings: Sequence[Finding], scan: Scan,
                    selection: GpuSelection | None) -> list[Finding]:
    """The findings about the selection, from findings judged on the whole machine's ``scan``
    (so counts that compare the machine with itself, such as NVML's GPUs against the PCI bus,
    are judged on the machine)."""
    return [f for f in findings if keeps_subject(f.subject, scan, selection)]

