"""What ``gpu-audit diag`` measured and decided: plain data, for the judge and the renderers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpu_audit.gpu_selection import GpuSelection
from gpu_audit.knowledge.gpu_models import GpuModelSpec
from gpu_audit.model import Finding, Severity


class WorkerOutcome(msgspec.Struct):
    """How one worker process ended."""

    status: str = "not-run"  # "done", "hung", "died", "fatal" (torch or CUDA unusable), "not-run"
    # (kind "mig": left untested, MIG mode is on and no instance could be listed)
    test: str | None = None  # the test running when it hung or died
    limit_s: float | None = None
    reason: str | None = None
    # For "fatal": "torch-missing", "torch" (does not import), "torch-build" (built without
    # CUDA), "cuda" (a CUDA build that cannot use the GPU); and what the worker said beside it.
    kind: str | None = None
    facts: dict[str, Any] = msgspec.field(default_factory=dict)
    returncode: int | None = None
    log_tail: str | None = None
    ready: dict[str, Any] = msgspec.field(default_factory=dict)  # the worker's "ready" event


@dataclass
class GpuRun:
    """One GPU's identity and link state (from NVML), and every record its tests produced."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    power_limit_w: float | None = None
    memory_free_bytes: int | None = None
    mig_mode: bool | None = None  # MIG on: its instances are tested, each a run of its own
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker: WorkerOutcome = field(default_factory=WorkerOutcome)
    ticks: list[float] = field(default_factory=list)  # sustained load: TFLOPS per second
    tick_times_s: list[float] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)  # NVML, every second (level 3)
    sustain_worker: WorkerOutcome | None = None
    new_xids: list[dict[str, Any]] | None = None  # None: the kernel log was not read
    # A MIG instance of GPU ``index`` (``gpu_audit.diag.mig``): uuid, instance ("gi/ci"),
    # profile, SM count and shares; None: a whole GPU.
    mig: dict[str, Any] | None = None

    @property
    def subject(self) -> str:
        if self.mig is not None:
            return f"gpu:{self.index}/mig:{self.mig['instance']}"
        return f"gpu:{self.index}"

    @property
    def key(self) -> int | str:
        """The run's key in the plans: its index, or its subject for a MIG instance."""
        return self.subject if self.mig is not None else self.index

    @property
    def label(self) -> str:
        """``GPU 0 (NVIDIA H100 ...)``, ``GPU 0 MIG 7/0 (1g.10gb)`` for an instance."""
        if self.mig is not None:
            profile = f" ({self.mig['profile']})" if self.mig.get("profile") else ""
            return f"GPU {self.index} MIG {self.mig['instance']}{profile}"
        return f"GPU {self.index}" + (f" ({self.name})" if self.name else "")

    @property
    def peer_group(self) -> str:
        """What its figures may be compared with: the same model (and MIG profile)."""
        if self.mig is not None:
            return f"{self.name or '?'} MIG {self.mig.get('profile') or '?'}"
        return self.name or "?"


@dataclass
class PeerRun:
    """The tests between GPUs: peer access, NVLink as NVML reports it, copies, all-reduce."""

    indices: list[int]  # NVML indices, in the order the worker numbered them (cuda:0, ...)
    matrix: list[list[bool | None]] | None = None
    nvlink: dict[int, dict[str, Any] | None] = field(default_factory=dict)
    tests: dict[str, dict[str, Any]] = field(default_factory=dict)
    worker: WorkerOutcome = field(default_factory=WorkerOutcome)


class Figure(msgspec.Struct, frozen=True):
    """One measured figure beside its expectation."""

    subject: str  # "gpu:0", "gpu:0->gpu:1", "node"
    metric: str  # "memory-bandwidth", "h2d-bandwidth", "matmul-bf16", ...
    unit: str  # "GB/s", "TFLOPS"
    measured: float | None
    expected: float | None = None
    ratio: float | None = None  # measured / expected
    basis: str | None = None  # "table", "link", "peers", or None (nothing to compare with)
    peak: float | None = None  # the datasheet or link figure before the method's efficiency
    efficiency: float | None = None
    source: str | None = None
    low: bool = False


@dataclass
class DiagJudgement:
    figures: list[Figure] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # why some part could not be judged
    sustained: dict[int, dict[str, Any]] = field(default_factory=dict)  # level 3, per GPU
    # The installed torch cannot use a GPU (missing, or built without CUDA): no verdict. Keys:
    # problem, torch_version, torch_cuda, python, detail, remedy.
    torch_unusable: dict[str, Any] | None = None

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings if f.severity), default=None)

    @property
    def exit_code(self) -> int:
        """2 for an error or worse, else 3 when something could not be judged, 1 for a
        warning, 0 (the order check uses: a failure outranks an unknown)."""
        top = self.worst()
        if top is not None and top >= Severity.ERROR:
            return 2
        if self.unknown:
            return 3
        return 1 if top is not None and top >= Severity.WARNING else 0


@dataclass
class DiagOptions:
    level: int = 1
    gpus: str | None = None
    timeout_s: float = 120.0  # the longest one test may run before its worker counts as hung
    force: bool = False
    device: str = "cuda"  # "cpu": the test mode
    duration_s: float = 120.0  # level 3's sustained load
    memory_share: float = 0.90  # of the free memory the level-2 memory test covers
    plant: tuple[int, int] | None = None  # test mode: flip (byte offset, bit) in the memtest
    nvml_timeout_s: float = 5.0
    checklist: bool = True  # level 1 includes what `check` judges (not when check runs diag)
    table: tuple[GpuModelSpec, ...] | None = None  # None: the built-in table (cuda), none (cpu)


@dataclass
class DiagResult:
    options: DiagOptions
    generated_at: str
    hostname: str
    selection: GpuSelection | None
    gpus: list[GpuRun]
    peers: PeerRun | None
    judgement: DiagJudgement
    plans: dict[int | str, dict[str, Any]]  # by GpuRun.key
    estimate: dict[str, Any]
    checklist: list[dict[str, Any]] = field(default_factory=list)
    checklist_exit: int = 0
    duration_s: float | None = None
    driver_version: str | None = None
    torch_version: str | None = None

    @property
    def exit_code(self) -> int:
        return combine_exit_codes(self.judgement.exit_code, self.checklist_exit)


def combine_exit_codes(*codes: int) -> int:
    """The worst of several exit codes in the monitoring order: 2 > 3 > 1 > 0."""
    order = {2: 3, 3: 2, 1: 1, 0: 0}
    return max(codes, key=lambda c: order.get(c, 2))
