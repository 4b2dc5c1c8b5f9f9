"""The workload protocol: what ``--workload package.module:Attr`` must provide.

``Attr`` is a class (instantiated with no arguments), a function returning the workload object,
or the object itself. The object has::

    def setup(self, ctx: WorkloadContext) -> None          # optional: build models, load data
    def cycle(self, ctx: WorkloadContext) -> dict[str, float]   # required: one cycle, its metrics
    def state_dict(self) -> dict                          # optional: what a checkpoint saves
    def load_state_dict(self, state: dict) -> None        # optional: restore it on resume
    def teardown(self, ctx: WorkloadContext) -> None       # optional: release what setup took

``cycle`` returns numbers by name (``{"loss": 0.41, "phi": 0.37}``); ``--require "phi>0.3"``
gates on them. ``ctx`` says where to run (``ctx.device``, ``ctx.torch_device()``), the quantum
mode of the stage (``"off"``, ``"lite"``, ``"full"`` and ``ctx.max_qubits``), the batch scale
(``ctx.batch_scale``: 1.0, halved after each out-of-memory retry, so scale the batch by it), the
stage, the cycle index and a seed. Workloads without ``state_dict`` resume with a fresh set-up at
the checkpointed cycle.

Example::

    class MyLoop:
        def setup(self, ctx):
            self.model = build_model().to(ctx.torch_device())
            self.opt = torch.optim.AdamW(self.model.parameters())

        def cycle(self, ctx):
            batch = max(1, int(64 * ctx.batch_scale))
            loss = train_step(self.model, self.opt, batch, device=ctx.torch_device())
            return {"loss": loss}

        def state_dict(self):
            return {"model": self.model.state_dict(), "opt": self.opt.state_dict()}

        def load_state_dict(self, state):
            self.model.load_state_dict(state["model"])
            self.opt.load_state_dict(state["opt"])
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LITE_MAX_QUBITS = 16
FULL_MAX_QUBITS = 34
# A state vector of n qubits is 2**n complex64 amplitudes (8 bytes); gate application keeps about
# four such buffers alive, and the simulator may use a quarter of the memory budget.
_BYTES_PER_AMPLITUDE = 8
_LIVE_COPIES = 4
_BUDGET_SHARE = 0.25


class WorkloadError(Exception):
    """The workload does not follow the protocol (the message says how)."""


@dataclass
class WorkloadContext:
    device: str  # "cpu" or "cuda:N"
    quantum: str  # "off", "lite" or "full"
    stage: str
    cycles: int  # cycles planned in this stage
    seed: int
    variant: str = "default"
    cycle: int = 0  # index of the cycle being run (0-based)
    batch_scale: float = 1.0
    memory_budget_bytes: int | None = None  # memory the workload may plan for
    max_qubits: int | None = None  # simulator cap: 16 in lite mode, None when quantum is off
    scratch_dir: str | None = None  # a folder for the workload's own files

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def torch_device(self) -> Any:
        import torch

        return torch.device(self.device)

    def scaled(self, batch: int, minimum: int = 1) -> int:
        """``batch`` times the current batch scale, at least ``minimum``."""
        return max(minimum, math.floor(batch * self.batch_scale))


def qubit_cap(quantum: str, memory_budget_bytes: int | None) -> int | None:
    """The most qubits the simulator may use: 16 in lite mode; in full mode, what fits."""
    if quantum == "off":
        return None
    if quantum == "lite" or not memory_budget_bytes:
        return LITE_MAX_QUBITS
    usable = memory_budget_bytes * _BUDGET_SHARE / (_BYTES_PER_AMPLITUDE * _LIVE_COPIES)
    if usable < 2:
        return 1
    return max(1, min(FULL_MAX_QUBITS, math.floor(math.log2(usable))))


def load_workload(spec: str) -> Any:
    """Import ``module:Attr`` (or ``/path/file.py:Attr``) and return the workload object.

    Import errors propagate unchanged (the imports stage explains them); a wrong attribute or a
    missing ``cycle`` method raises :class:`WorkloadError`.
    """
    target, sep, attr = spec.rpartition(":")
    if not sep:
        raise WorkloadError(f"{spec!r}: expected module:Attr")
    module = _import_file(Path(target)) if target.endswith(".py") else \
        importlib.import_module(target)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise WorkloadError(f"{target} has no attribute {attr!r}") from None
    if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "cycle")):
        obj = obj()
    if not callable(getattr(obj, "cycle", None)):
        raise WorkloadError(
            f"{spec}: {type(obj).__name__} has no cycle(ctx) method; a workload needs "
            "cycle(ctx) -> dict of metrics, and may have setup(ctx), teardown(ctx), "
            "state_dict() and load_state_dict(state)"
        )
    return obj


def has_state(workload: Any) -> bool:
    return callable(getattr(workload, "state_dict", None)) and callable(
        getattr(workload, "load_state_dict", None))


def clean_metrics(value: Any) -> dict[str, float | int | bool | None]:
    """A cycle's return value as JSON-safe numbers; raises :class:`WorkloadError` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WorkloadError(f"cycle() must return a dict of metrics (or None), got "
                            f"{type(value).__name__}")
    metrics: dict[str, float | int | bool | None] = {}
    for key, item in value.items():
        if hasattr(item, "item") and callable(item.item):
            try:
                item = item.item()  # a 0-d tensor or numpy scalar
            except (ValueError, RuntimeError):
                raise WorkloadError(f"metric {key!r} is not a single number") from None
        if isinstance(item, bool) or item is None:
            metrics[str(key)] = item
        elif isinstance(item, (int, float)):
            metrics[str(key)] = item if math.isfinite(item) else None
        else:
            raise WorkloadError(f"metric {key!r} must be a number, got {type(item).__name__}")
    return metrics


def _import_file(path: Path) -> Any:
    name = f"gpu_audit_workload_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise WorkloadError(f"{path}: cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))  # its sibling modules import as they would when run
    spec.loader.exec_module(module)
    return module
