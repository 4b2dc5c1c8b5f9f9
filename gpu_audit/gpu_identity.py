"""One identity per GPU, joined from every source that knows it.

A GPU is known by several names, each from its own source:

- NVML: its index, UUID, PCI bus id and device minor number. A lost GPU (NVML answers
  ``NVML_ERROR_GPU_IS_LOST``) gives none of them but its index; a GPU that vanished from NVML is
  not listed at all.
- The kernel driver, ``/proc/driver/nvidia/gpus/<bus id>/information``: ``Device Minor``,
  ``Bus Location`` and ``GPU UUID``, kept while NVML cannot reach the GPU.
- ``/dev/nvidiaN``: the character device of minor N, which Slurm's ``gres.conf``
  (``File=/dev/nvidia[0-7]``, or ``AutoDetect=nvml``) hands to jobs.
- Slurm: ``SLURM_JOB_GPUS`` counts the node's GPUs in gres order, which is the order of their
  device minor numbers.

:func:`join` (pure; the collector reads the files) gives each NVML GPU what the other sources
know of it and returns the GPUs only the kernel driver or ``/dev`` lists. A lost GPU is placed
by the minor numbers of its NVML neighbours: NVML, the driver and ``/dev`` all number GPUs in PCI
enumeration order. :func:`slurm_order` lays the node's GPUs out as Slurm numbers them.
The rule in full: ``docs/gpu-identity.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from gpu_audit.bounds import MAX_GPUS, bounded_int
from gpu_audit.errors import InputError
from gpu_audit.model import Gpu, KernelGpu

# The lines of the driver's information file that name the GPU.
_INFO_LINE = re.compile(r"^(Model|GPU UUID|Bus Location|Device Minor)\s*:\s*(.*?)\s*$", re.M)
_UUID = re.compile(r"GPU-[0-9A-Fa-f-]{8,64}")
_BUS = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
# /dev/nvidiaN: nvidiactl (255) and nvidia-modeset (254) share the major number, not the name.
DEV_NAME = re.compile(r"nvidia([0-9]{1,4})")

Slot = Gpu | KernelGpu  # a GPU of the node: NVML's, or one only the driver or /dev lists


def pci_key(bus_id: str | None) -> tuple[int, int, int, int] | None:
    """(domain, bus, device, function) from ``00000000:3B:00.0``, ``0000:3b:00.0``, ``3b:00.0``
    or ``3b:00`` (the kernel log's form); ``None`` when it is not a PCI bus id."""
    match = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})"
                         r"(?:\.([0-7]))?", (bus_id or "").strip())
    if match is None:
        return None
    return (int(match[1] or "0", 16), int(match[2], 16), int(match[3], 16),
            int(match[4] or "0"))


def bus_key(bus_id: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device): the kernel log leaves the function out."""
    key = pci_key(bus_id)
    return key[:3] if key else None


def nvml_bus_id(bus_id: str | None) -> str | None:
    """A bus id in NVML's form, ``00000000:3B:00.0`` (as DCGM's ``pci_bus_id`` label writes
    it), from any form :func:`pci_key` reads; ``None`` when it is not one."""
    key = pci_key(bus_id)
    return None if key is None else "{:08X}:{:02X}:{:02X}.{:X}".format(*key)


def parse_information(text: str, folder: str) -> KernelGpu | None:
    """The GPU a driver ``information`` file names (``folder``: its folder's name, the bus id);
    ``None`` when it names none. Values that are not what the driver writes are left out."""
    fields = {m[1]: m[2] for m in _INFO_LINE.finditer(text[:16_384])}
    minor = None
    if "Device Minor" in fields:
        try:
            minor = bounded_int(fields["Device Minor"], "Device Minor", high=MAX_GPUS - 1)
        except InputError:
            minor = None
    bus = fields.get("Bus Location") or folder
    uuid = fields.get("GPU UUID")
    name = fields.get("Model")
    found = KernelGpu("proc", minor_number=minor,
                      pci_bus_id=bus if _BUS.fullmatch(bus) else None,
                      uuid=uuid if uuid and _UUID.fullmatch(uuid) else None,
                      name=name[:96] if name and name.isprintable() else None)
    return found if found.minor_number is not None or found.pci_bus_id else None


def kernel_gpus(proc: Iterable[KernelGpu], dev_minors: Iterable[int]) -> list[KernelGpu]:
    """The driver's GPUs, and a ``dev`` entry for each ``/dev/nvidiaN`` the driver does not
    list, by minor number."""
    found = list(proc)
    known = {g.minor_number for g in found}
    found += [KernelGpu("dev", minor_number=m) for m in sorted(set(dev_minors) - known)]
    return found


def _same(gpu: Gpu, kernel: KernelGpu) -> bool:
    """Whether an NVML GPU and a kernel entry are one GPU: by bus id, UUID, or minor number."""
    key = pci_key(gpu.pci_bus_id)
    if key is not None and key == pci_key(kernel.pci_bus_id):
        return True
    if gpu.uuid and kernel.uuid and gpu.uuid.lower() == kernel.uuid.lower():
        return True
    return gpu.minor_number is not None and gpu.minor_number == kernel.minor_number


def join(gpus: Sequence[Gpu], kernel: Sequence[KernelGpu]) -> tuple[list[Gpu], list[KernelGpu]]:
    """NVML's GPUs completed from the kernel's view, and the GPUs only the kernel lists.

    An NVML GPU matched to a kernel entry (bus id, UUID or minor number) takes the minor number,
    and the bus id and UUID it lacks, from it (``identity_source`` says which source gave what
    NVML did not). NVML GPUs that name nothing (lost GPUs) take the unmatched kernel entries
    between the minor numbers of their named NVML neighbours, where those are as many as they
    (:func:`_placed`).
    """
    matched: dict[int, KernelGpu] = {}  # NVML index -> its kernel entry
    index = _Index(kernel, lambda k: (pci_key(k.pci_bus_id), _lower(k.uuid), k.minor_number))
    taken: set[int] = set()  # positions in ``kernel`` already matched
    for gpu in gpus:
        at = next((i for i in index.candidates(pci_key(gpu.pci_bus_id), _lower(gpu.uuid),
                                                gpu.minor_number)
                   if i not in taken and _same(gpu, kernel[i])), None)
        if at is not None:
            matched[gpu.index] = kernel[at]
            taken.add(at)
    free = [k for i, k in enumerate(kernel) if i not in taken]
    for gpu, twin in _placed(sorted(gpus, key=lambda g: g.index), matched, free):
        matched[gpu.index] = twin
        free.remove(twin)
    completed = [_completed(g, matched.get(g.index)) for g in gpus]
    return completed, sorted(free, key=_kernel_order)


def _lower(text: str | None) -> str | None:
    return text.lower() if text else None


class _Index:
    """Items by each of their keys (bus key, UUID, minor number, ...), so that finding a GPU's
    twin costs lookups, not a pass over every GPU (a saved document may list 1024)."""

    def __init__(self, items: Sequence[object], keys: Callable[[Any], tuple[object, ...]]) -> None:
        self.by: list[dict[object, list[int]]] = []
        for at, item in enumerate(items):
            for field, key in enumerate(keys(item)):
                while len(self.by) <= field:
                    self.by.append({})
                if key is not None:
                    self.by[field].setdefault(key, []).append(at)

    def candidates(self, *keys: object) -> list[int]:
        """Positions of the items sharing any of ``keys`` (in the order of the keys)."""
        found: list[int] = []
        for field, key in enumerate(keys):
            if key is not None and field < len(self.by):
                found += self.by[field].get(key, ())
        return list(dict.fromkeys(found))


def _names_itself(gpu: Gpu) -> bool:
    return bool(gpu.uuid or gpu.pci_bus_id or gpu.minor_number is not None)


def _placed(ordered: list[Gpu], matched: dict[int, KernelGpu],
            free: list[KernelGpu]) -> list[tuple[Gpu, KernelGpu]]:
    """The NVML GPUs that name nothing, each paired with a free kernel entry by position.

    Such GPUs between two NVML GPUs of known minor numbers (or an end of the list) form a gap;
    where a gap holds as many free kernel entries as unnamed GPUs, they pair in order (NVML and
    the driver count GPUs alike). Otherwise the gap stays unpaired: a guess would name the
    wrong GPU.
    """
    gaps: dict[tuple[int, int], list[Gpu]] = {}
    below, waiting = -1, []
    for gpu in [*ordered, None]:
        minor = None if gpu is None else _minor(gpu, matched)
        if gpu is not None and minor is None:
            if not _names_itself(gpu):
                waiting.append(gpu)
            continue
        above = MAX_GPUS if minor is None else minor
        if waiting:
            gaps[(below, above)] = waiting
        below, waiting = above, []
    pairs = []
    for (low, high), unnamed in gaps.items():
        inside = sorted((k for k in free if k.minor_number is not None
                         and low < k.minor_number < high), key=_kernel_order)
        if len(inside) == len(unnamed):
            pairs += list(zip(unnamed, inside, strict=True))
    return pairs


def _minor(gpu: Gpu, matched: dict[int, KernelGpu]) -> int | None:
    twin = matched.get(gpu.index)
    return gpu.minor_number if gpu.minor_number is not None else (
        twin.minor_number if twin is not None else None)


def _completed(gpu: Gpu, twin: KernelGpu | None) -> Gpu:
    if twin is None:
        return gpu
    taken = {}
    if gpu.minor_number is None and twin.minor_number is not None:
        taken["minor_number"] = twin.minor_number
    if not gpu.pci_bus_id and twin.pci_bus_id:
        taken["pci_bus_id"] = nvml_bus_id(twin.pci_bus_id)
    if not gpu.uuid and twin.uuid:
        taken["uuid"] = twin.uuid
    if not gpu.name and twin.name:
        taken["name"] = twin.name
    if not taken:
        return gpu
    # A minor number alone is the driver's too; only a name NVML gave no word of is sourced.
    source = twin.source if set(taken) - {"minor_number"} or gpu.lost else None
    return msgspec.structs.replace(gpu, **taken, identity_source=source or gpu.identity_source)


def _kernel_order(gpu: KernelGpu) -> tuple[int, tuple[int, int, int, int]]:
    return (MAX_GPUS if gpu.minor_number is None else gpu.minor_number,
            pci_key(gpu.pci_bus_id) or (0, 0, 0, 0))


def slurm_order(gpus: Sequence[Gpu], unlisted: Sequence[KernelGpu] = ()) -> list[Slot]:
    """The node's GPUs as Slurm's gres numbers them (``SLURM_JOB_GPUS``): by device minor number
    when every GPU has one; otherwise NVML's GPUs in PCI bus order (NVML's index order when one
    has no bus id, so that a lost GPU keeps its place), then the GPUs only the kernel lists."""
    if gpus and all(g.minor_number is not None for g in gpus) and \
            all(k.minor_number is not None for k in unlisted):
        return sorted([*gpus, *unlisted], key=lambda s: s.minor_number or 0)
    if all(pci_key(g.pci_bus_id) is not None for g in gpus):
        listed: list[Slot] = sorted(gpus, key=lambda g: (pci_key(g.pci_bus_id), g.index))
    else:
        listed = sorted(gpus, key=lambda g: g.index)
    return [*listed, *sorted(unlisted, key=_kernel_order)]


def describe(slot: Slot) -> str:
    """A GPU as a sentence names it: ``GPU 3 (PCI 0000:3b:00.0)`` or ``/dev/nvidia4 (PCI ...,
    which NVML does not list)``."""
    bus = f"PCI {slot.pci_bus_id}" if slot.pci_bus_id else None
    if isinstance(slot, Gpu):
        return f"GPU {slot.index}" + (f" ({bus})" if bus else "")
    where = f"/dev/nvidia{slot.minor_number}" if slot.minor_number is not None else "a GPU"
    extra = ", ".join(filter(None, [bus, slot.uuid]))
    return f"{where} ({extra + ', ' if extra else ''}which NVML does not list)"


def pair_gpus(before: Sequence[Gpu], after: Sequence[Gpu]) -> tuple[list[tuple[Gpu, Gpu]],
                                                                      list[Gpu]]:
    """``(before, after)`` pairs of the same GPU, and the GPUs of ``before`` not in ``after``:
    paired by UUID, then bus id, then minor number, then (where neither scan names the GPU
    otherwise) NVML index, each GPU of ``after`` at most once."""
    pairs: list[tuple[Gpu, Gpu]] = []
    missing = []
    index = _Index(after, _gpu_keys)
    taken: set[int] = set()
    for old in before:
        at = next((i for i in index.candidates(*_gpu_keys(old))
                   if i not in taken and _same_gpu(old, after[i])), None)
        if at is None:
            missing.append(old)
        else:
            pairs.append((old, after[at]))
            taken.add(at)
    return pairs, missing


def _gpu_keys(gpu: Gpu) -> tuple[object, ...]:
    return (_lower(gpu.uuid), pci_key(gpu.pci_bus_id), gpu.minor_number, gpu.index)


def _same_gpu(a: Gpu, b: Gpu) -> bool:
    if a.uuid and b.uuid:
        return a.uuid.lower() == b.uuid.lower()
    key_a, key_b = pci_key(a.pci_bus_id), pci_key(b.pci_bus_id)
    if key_a is not None and key_b is not None:
        return key_a == key_b
    if a.minor_number is not None and b.minor_number is not None:
        return a.minor_number == b.minor_number
    return a.index == b.index
