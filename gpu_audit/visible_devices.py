"""How CUDA reads ``CUDA_VISIBLE_DEVICES``: one reading for scan's rule and for explain.

scan judges the variable against the GPUs NVML lists; explain, which sees only a log, asks
whether a value the log shows would hide every GPU of a machine that has one.
"""

from __future__ import annotations

import re

import msgspec

from gpu_audit.model import Gpu
from gpu_audit.units import plural


class Visible(msgspec.Struct, frozen=True):
    """How CUDA reads ``CUDA_VISIBLE_DEVICES`` against the GPUs present."""

    visible: list[int]  # indices (NVML numbering for UUIDs, CUDA's for integers)
    dropped: list[str]  # entries CUDA will not use, from the first bad one on
    reason: str | None  # why the list stops early, or is empty
    by_uuid: bool
    checkable: bool = True


def interpret_visible_devices(value: str, gpus: list[Gpu], count: int) -> Visible:
    """CUDA's reading of the variable: the list stops at the first entry that names no device.

    Integers are read like C's ``strtoul`` (``1gpu`` is 1); a negative number or a non-number
    ends the list; an index at or above the device count ends it too; a repeated device empties
    it. ``GPU-`` entries may be unique prefixes of a UUID. MIG UUIDs cannot be checked here.
    """
    entries = [e.strip() for e in value.split(",")]
    if value.strip() == "":
        return Visible([], [], "the variable is empty, which hides every GPU", False)
    if entries[0].startswith("MIG-"):
        return Visible([], [], None, True, checkable=False)
    by_uuid = entries[0].startswith("GPU-")
    visible: list[int] = []
    uuids = [g.uuid or "" for g in gpus]
    for position, entry in enumerate(entries):
        if by_uuid:
            matches = [i for i, u in enumerate(uuids) if entry.startswith("GPU-") and
                       u.lower().startswith(entry.lower())]
            index = matches[0] if len(matches) == 1 else None
            problem = ("names no GPU on this host" if not matches else
                       "matches more than one GPU") if index is None else None
        else:
            index = _entry_index(entry)
            problem = None
            if index is None:
                problem = "is not a device index"
            elif index < 0:
                problem, index = "is negative, which hides every GPU from there on", None
            elif index >= count:
                problem, index = f"is beyond the {plural(count, 'GPU')} present", None
        if index is None:
            return Visible(visible, entries[position:], f"{entry!r} {problem}", by_uuid)
        if index in visible:
            return Visible([], entries, f"{entry!r} is listed twice, which makes CUDA see no GPU "
                           "at all", by_uuid)
        visible.append(index)
    return Visible(visible, [], None, by_uuid)


MAX_GPUS = 1024  # more than any machine has: an index past it is no machine's GPU


def _entry_index(entry: str) -> int | None:
    """An entry's index as CUDA reads it (strtoul's way: "1gpu" is 1), or None."""
    match = _INDEX.match(entry.strip())
    return int(match[0]) if match else None


_INDEX = re.compile(r"[+-]?[0-9]{1,20}(?![0-9])")


def hides_every_gpu(value: str) -> str | None:
    """Why ``value`` leaves CUDA no GPU even on a machine that has one, or None where it may
    not: a list that starts with 0 (the first GPU of any machine), or with UUIDs, which only
    the machine's own GPUs can judge."""
    seen = interpret_visible_devices(value, [], 1)
    if seen.visible or seen.by_uuid or not seen.checkable:
        return None
    index = _entry_index(value.split(",", 1)[0])
    if index is not None and index > MAX_GPUS:
        return f"it starts at index {index}, beyond the GPUs any machine has"
    if index is not None and index > 0:  # beyond a one-GPU machine's only index
        return (f"it starts at index {index}, and CUDA numbers the GPUs a job is given from 0: "
                f"a job given {plural(index, 'GPU')} or fewer sees none")
    return seen.reason or "it names no GPU"
