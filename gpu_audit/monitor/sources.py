"""Where the monitor's allocator figures come from: the live torch, or recorded readings.

:class:`TorchAllocatorSource` reads the process's own allocator. It never imports torch (it
looks for the module the program already imported), never initialises CUDA (it reads nothing
until the program has), and reports only devices the program has allocated on.

:class:`RecordedAllocatorSource` is the seam for tests and demonstrations: it replays
:class:`AllocatorReading` objects built from recorded ``torch.cuda.memory_stats()`` dictionaries,
so the whole publication path runs on a machine without a GPU.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpu_audit.knowledge.allocator.names import CUDA_VAR


@dataclass(frozen=True)
class DeviceReading:
    """One CUDA device as the process sees it, with its flat ``memory_stats()`` dictionary."""

    index: int  # the ordinal inside the process
    stats: Mapping[str, Any]
    uuid: str | None = None
    pci_bus_id: str | None = None  # "00000000:3B:00.0", NVML's spelling
    name: str | None = None
    total_memory_bytes: int | None = None


@dataclass(frozen=True)
class AllocatorReading:
    torch_version: str | None = None
    cuda_version: str | None = None  # the CUDA runtime torch was built with
    cuda_available: bool | None = None
    cuda_initialized: bool = False
    backend: str | None = None  # "native" or "cudaMallocAsync"
    settings: str | None = None  # the allocator configuration string torch parsed last
    devices: list[DeviceReading] = field(default_factory=list)


class AllocatorSource(Protocol):
    def read(self) -> AllocatorReading: ...


class RecordedAllocatorSource:
    """Replays readings in order, then keeps returning the last one. Thread-safe."""

    def __init__(self, readings: Sequence[AllocatorReading]) -> None:
        if not readings:
            raise ValueError("RecordedAllocatorSource needs at least one reading")
        self._readings = list(readings)
        self._next = 0
        self._lock = threading.Lock()

    def read(self) -> AllocatorReading:
        with self._lock:
            reading = self._readings[min(self._next, len(self._readings) - 1)]
            self._next += 1
            return reading


def format_pci_bus_id(domain: int, bus: int, device: int) -> str:
    return f"{domain:08X}:{bus:02X}:{device:02X}.0"


class TorchAllocatorSource:
    """The allocator of the torch this process imported; nothing at all before that."""

    def __init__(self) -> None:
        self._device_info: dict[int, dict[str, Any]] = {}

    def read(self) -> AllocatorReading:
        torch = sys.modules.get("torch")
        version = getattr(torch, "__version__", None) if torch is not None else None
        cuda = getattr(torch, "cuda", None) if version else None
        if cuda is None or not hasattr(cuda, "is_initialized"):
            # Not imported yet, or still importing on another thread: try again next time.
            return AllocatorReading(torch_version=None if version is None else str(version))
        torch_version = str(version)
        cuda_version = getattr(getattr(torch, "version", None), "cuda", None)
        settings = self._settings(torch)
        if not cuda.is_initialized():
            # Reading devices now would initialise CUDA inside the program: wait for it to.
            available = None if cuda_version else False  # a CPU build has no CUDA at all
            return AllocatorReading(torch_version, cuda_version, available, False, None, settings)
        backend = None
        get_backend = getattr(getattr(cuda, "memory", None), "get_allocator_backend", None)
        if get_backend is not None:
            backend = get_backend()
        devices = []
        for index in range(cuda.device_count()):
            stats = cuda.memory_stats(index)
            if not stats.get("reserved_bytes.all.peak") and not stats.get("allocation.all.peak"):
                continue  # the program has not allocated on this device
            devices.append(DeviceReading(index=index, stats=stats, **self._info(cuda, index)))
        return AllocatorReading(torch_version, cuda_version, True, True, backend, settings,
                                devices)

    def _info(self, cuda: Any, index: int) -> dict[str, Any]:
        if index not in self._device_info:
            props = cuda.get_device_properties(index)
            uuid = getattr(props, "uuid", None)
            pci = None
            if all(hasattr(props, n) for n in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
                pci = format_pci_bus_id(props.pci_domain_id, props.pci_bus_id,
                                        props.pci_device_id)
            self._device_info[index] = {
                "uuid": str(uuid) if uuid is not None else None,
                "pci_bus_id": pci,
                "name": getattr(props, "name", None),
                "total_memory_bytes": getattr(props, "total_memory", None),
            }
        return self._device_info[index]

    @staticmethod
    def _settings(torch: Any) -> str | None:
        getter = getattr(getattr(torch, "_C", None), "_accelerator_getAllocatorSettings", None)
        if getter is not None:
            try:
                return str(getter())
            except Exception:  # an older or partial build: fall back to the environment
                pass
        # Releases without the getter (<= 2.9) read only this variable for CUDA.
        return os.environ.get(CUDA_VAR)
