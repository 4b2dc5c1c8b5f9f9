"""Tiny workloads for the validate tests: each cycle takes milliseconds and imports no torch
unless it must raise one of torch's errors. Each is named after the situation it rehearses."""

from __future__ import annotations

import os
import time
from typing import Any


class Counter:
    """A healthy stateful loop: its state counts the cycles it has run, so a resumed run that
    lost or repeated a cycle shows it in ``value``."""

    delay_s = float(os.environ.get("TINY_DELAY_S", "0"))

    def setup(self, ctx: Any) -> None:
        self.count = 0
        self.device = ctx.device

    def cycle(self, ctx: Any) -> dict[str, float]:
        if self.delay_s:
            time.sleep(self.delay_s)
        self.count += 1
        return {"value": self.count, "phi": 0.5, "cycle_seen": ctx.cycle}

    def state_dict(self) -> dict[str, int]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.count = state["count"]


class SlowCounter(Counter):
    """Slow enough (20 ms a cycle) for a test to kill it mid-stage."""

    delay_s = 0.02


TORCH_OOM_MESSAGE = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                     "capacity of 3.81 GiB of which 1.20 GiB is free. Of the allocated memory "
                     "2.10 GiB is allocated by PyTorch, and 300.00 MiB is reserved by PyTorch "
                     "but unallocated.")


def _torch_oom(message: str = TORCH_OOM_MESSAGE) -> BaseException:
    import torch

    return torch.OutOfMemoryError(message)


class OomAtFullBatch(Counter):
    """Fits only at half the batch from cycle 2 on: recovers by halving once. Raises the
    RuntimeError form of the message (torch before 1.13 had no OutOfMemoryError class)."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        if ctx.cycle >= 2 and ctx.batch_scale > 0.5:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 3.81 GiB "
                               "total capacity; 2.10 GiB already allocated; 1.20 GiB free; "
                               "2.40 GiB reserved in total by PyTorch)")
        return super().cycle(ctx)


class OomAlways(Counter):
    """Never fits from cycle 1 on, whatever the batch: a persistent OOM, in torch 2.1's wording
    (which spelled "capacty")."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        if ctx.cycle >= 1:
            raise _torch_oom(TORCH_OOM_MESSAGE.replace("capacity", "capacty"))
        return super().cycle(ctx)


class MaskedOom(Counter):
    """The NVML assert PyTorch raises when its OOM report fails: an OOM in disguise."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        if ctx.cycle == 1 and ctx.batch_scale == 1.0:
            raise RuntimeError('NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL '
                               'ASSERT FAILED at "/pytorch/c10/cuda/CUDACachingAllocator.cpp":'
                               '1090, please report a bug to PyTorch.')
        return super().cycle(ctx)


class HangsAtCycle5(Counter):
    """Cycle 5 never returns (a data loader waiting forever)."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        if ctx.cycle == 5:
            time.sleep(3600)
        time.sleep(0.005)
        return super().cycle(ctx)


class RaisesAtCycle2(Counter):
    """A bug in the user's loop."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        if ctx.cycle == 2:
            raise ValueError("shapes (3, 4) and (5, 6) do not match")
        return super().cycle(ctx)


class LowPhi(Counter):
    """Runs fine but its metric misses the user's threshold."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        result = super().cycle(ctx)
        result["phi"] = 0.1
        return result


class LeaksHostMemory(Counter):
    """Keeps 4 MiB more every cycle."""

    def setup(self, ctx: Any) -> None:
        super().setup(ctx)
        self.kept: list[bytearray] = []

    def cycle(self, ctx: Any) -> dict[str, float]:
        self.kept.append(bytearray(4 * 1024 * 1024))
        return super().cycle(ctx)


class Stateless:
    """No state_dict: resumes with a fresh set-up at the checkpointed cycle."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        return {"cycle_seen": ctx.cycle}


class NoCycle:
    """Not a workload at all."""

    def run(self) -> None:
        pass


class ReturnsText(Counter):
    def cycle(self, ctx: Any) -> Any:
        super().cycle(ctx)
        return {"loss": "low"}


class Segfaults(Counter):
    """Dies in native code at cycle 1."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        if ctx.cycle == 1:
            import ctypes

            ctypes.string_at(0)
        return super().cycle(ctx)


class GpuHog(Counter):
    """Allocates 1.5 GiB times the batch scale on the device each cycle: under a 1 GiB cap it
    fits only at half the batch (a real CUDA out-of-memory, for the gpu-marked tests)."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        import torch

        block = torch.empty(int(1.5 * 1024**3 * ctx.batch_scale), dtype=torch.uint8,
                            device=ctx.device)
        block.fill_(1)
        del block
        return super().cycle(ctx)


class AbortsAfterOom(Counter):
    """C++ code that logs a CUDA OOM and aborts (``terminate called after throwing ...``)."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        if ctx.cycle == 1:
            import sys

            print("terminate called after throwing an instance of 'c10::OutOfMemoryError'\n"
                  "  what():  CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                  "capacity of 3.81 GiB of which 1.20 GiB is free. Of the allocated memory "
                  "2.10 GiB is allocated by PyTorch, and 300.00 MiB is reserved by PyTorch but "
                  "unallocated.", file=sys.stderr, flush=True)
            os.abort()
        return super().cycle(ctx)
