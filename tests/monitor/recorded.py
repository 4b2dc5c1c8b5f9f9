"""Recorded ``torch.cuda.memory_stats()`` dictionaries, with the key names of the reference (§4.1).

A real dictionary is flat, dotted and sorted: every array family has ``.all``, ``.large_pool``
and ``.small_pool``, each with ``.current``, ``.peak``, ``.allocated`` and ``.freed``; plus the
single stats ``oversize_*`` and the plain counters. :func:`memory_stats` builds one from the
figures a situation cares about, filling the rest the way the allocator would.
"""

from __future__ import annotations

from gpu_audit.monitor.sources import AllocatorReading, DeviceReading

MIB = 1024**2
GIB = 1024**3

ARRAY_FAMILIES = ("allocation", "allocated_bytes", "requested_bytes", "active", "active_bytes",
                  "segment", "reserved_bytes", "inactive_split", "inactive_split_bytes")
POOLS = ("all", "large_pool", "small_pool")
PARTS = ("current", "peak", "allocated", "freed")
COUNTERS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc",
            "num_device_free")


def memory_stats(*, allocated: int, reserved: int, inactive_split: int = 0,
                 requested: int | None = None, active: int | None = None,
                 allocated_peak: int | None = None, reserved_peak: int | None = None,
                 segments: int = 1, allocations: int = 1, retries: int = 0, ooms: int = 0,
                 max_split_size: int = -1) -> dict[str, int]:
    """A flat ``memory_stats()`` dictionary; everything sits in the large pool."""
    current = {
        "allocation": allocations,
        "allocated_bytes": allocated,
        "requested_bytes": allocated if requested is None else requested,
        "active": allocations,
        "active_bytes": allocated if active is None else active,
        "segment": segments,
        "reserved_bytes": reserved,
        "inactive_split": 1 if inactive_split else 0,
        "inactive_split_bytes": inactive_split,
    }
    peaks = {"allocated_bytes": allocated_peak or allocated, "reserved_bytes": reserved_peak
             or reserved}
    stats: dict[str, int] = {}
    for family in ARRAY_FAMILIES:
        now = current[family]
        peak = max(peaks.get(family, now), now)
        for pool in POOLS:
            value, top = (0, 0) if pool == "small_pool" else (now, peak)
            stats[f"{family}.{pool}.current"] = value
            stats[f"{family}.{pool}.peak"] = top
            stats[f"{family}.{pool}.allocated"] = top
            stats[f"{family}.{pool}.freed"] = top - value
    for single in ("oversize_allocations", "oversize_segments"):
        for part in PARTS:
            stats[f"{single}.{part}"] = 0
    stats.update(dict.fromkeys(COUNTERS, 0))
    stats["num_alloc_retries"] = retries
    stats["num_ooms"] = ooms
    stats["num_device_alloc"] = segments
    stats["max_split_size"] = max_split_size
    return dict(sorted(stats.items()))


H100_UUID = "GPU-5f6e8a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
H100_PCI = "00000000:3B:00.0"


def h100_reading(stats: dict[str, int], *, settings: str = "", torch_version: str =
                 "2.5.1+cu124", index: int = 0, uuid: str | None = H100_UUID,
                 pci_bus_id: str | None = H100_PCI) -> AllocatorReading:
    """One H100 in use by a training process, as TorchAllocatorSource would report it."""
    device = DeviceReading(index=index, stats=stats, uuid=uuid, pci_bus_id=pci_bus_id,
                           name="NVIDIA H100 80GB HBM3", total_memory_bytes=80 * GIB)
    return AllocatorReading(torch_version=torch_version, cuda_version="12.4",
                            cuda_available=True, cuda_initialized=True, backend="native",
                            settings=settings, devices=[device])


def fragmented_training_stats(retries: int = 0, ooms: int = 0) -> dict[str, int]:
    """70 GiB reserved, 45 GiB allocated, 20 GiB of the 25 GiB slack trapped in split segments."""
    return memory_stats(allocated=45 * GIB, reserved=70 * GIB, inactive_split=20 * GIB,
                        requested=45 * GIB - 300 * MIB, allocated_peak=62 * GIB,
                        reserved_peak=72 * GIB, segments=180, allocations=2400,
                        retries=retries, ooms=ooms)
