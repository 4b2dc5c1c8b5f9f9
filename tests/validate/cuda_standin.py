"""A stand-in for the ``torch.cuda`` calls the validate script hook makes, for machines without a
GPU: a caching allocator's counters with PyTorch's semantics (``*.peak`` is the highest value
since the last ``reset_peak_memory_stats()``; ``num_ooms`` and ``num_alloc_retries`` only grow),
and a count of ``memory_stats()`` reads. Used by the hook's tests and by
bench/bench_validate_script.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

GIB = 1024**3


class StandInCuda:
    def __init__(self, total: int = 80 * GIB) -> None:
        self.total = total
        self.allocated = self.allocated_peak = 0
        self.reserved = self.reserved_peak = 0
        self.ooms = self.retries = 0
        self.reads = 0
        self.memory = SimpleNamespace(_snapshot=lambda: {"allocator_settings": ""},
                                      get_allocator_backend=lambda: "native")

    # -- what a test does to it ----------------------------------------------------------------

    def malloc(self, size: int) -> None:
        self.allocated += size
        self.reserved = max(self.reserved, self.allocated)
        self.allocated_peak = max(self.allocated_peak, self.allocated)
        self.reserved_peak = max(self.reserved_peak, self.reserved)

    def free(self, size: int) -> None:
        self.allocated -= size

    def out_of_memory(self) -> None:
        self.ooms += 1

    # -- the torch.cuda calls the hook makes ---------------------------------------------------

    def is_initialized(self) -> bool:
        return True

    def current_device(self) -> int:
        return 0

    def memory_stats(self, device: Any = None) -> dict[str, int]:
        self.reads += 1
        return {"allocated_bytes.all.current": self.allocated,
                "allocated_bytes.all.peak": self.allocated_peak,
                "reserved_bytes.all.current": self.reserved,
                "reserved_bytes.all.peak": self.reserved_peak,
                "active_bytes.all.current": self.allocated,
                "active_bytes.all.peak": self.allocated_peak,
                "inactive_split_bytes.all.current": 0, "inactive_split_bytes.all.peak": 0,
                "num_alloc_retries": self.retries, "num_ooms": self.ooms}

    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        return self.total - self.reserved, self.total

    def reset_peak_memory_stats(self, device: Any = None) -> None:
        self.allocated_peak, self.reserved_peak = self.allocated, self.reserved

    def get_device_properties(self, index: int) -> Any:
        return SimpleNamespace(name="Stand-in GPU", total_memory=self.total)


def standin_torch() -> Any:
    """A ``torch`` module as far as the hook's CUDA reads go."""
    return SimpleNamespace(__version__="2.13.0+standin", cuda=StandInCuda(),
                           version=SimpleNamespace(cuda="12.8"), nn=None)
