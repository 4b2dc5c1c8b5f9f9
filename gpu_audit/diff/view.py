"""What the diff rules read: two scans of one machine, their GPUs paired, their processes keyed.

How a process is judged to have "belonged to the job" (the basis of a leak):

- it runs on a GPU both scans list (paired by UUID, else by NVML index), among the GPUs the
  documents were limited to (``--gpus job`` when they were taken);
- it is not in BEFORE: no process there has its PID on that GPU, with the same start time when
  both scans know it (a PID the kernel reused is another process);
- and, when the job's user is known (``diff --user NAME``; the Slurm epilog passes
  ``SLURM_JOB_USER``), its owner is that user, or unknown (a PID in another PID namespace). A
  process of another known user that appeared meanwhile belongs to someone else's job.

Without BEFORE (an epilog whose prolog left no record) the job's user decides alone: their
processes on the job's GPUs after the job ended are its leftovers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_audit.config.policy import Policy
from gpu_audit.gpu_identity import pair_gpus
from gpu_audit.model import Gpu, GpuProcess, Scan
from gpu_audit.units import GIB


def gpu_key(gpu: Gpu) -> str:
    return gpu.uuid or f"index:{gpu.index}"


def process_key(process: GpuProcess, gpus_by_index: dict[int, Gpu]) -> tuple[str, int]:
    gpu = gpus_by_index.get(process.gpu_index)
    where = process.gpu_uuid or (gpu_key(gpu) if gpu else f"index:{process.gpu_index}")
    return where, process.pid


@dataclass(frozen=True)
class DiffView:
    """BEFORE and AFTER of one machine, as the diff rules read them."""

    before: Scan | None  # None: no BEFORE (only the job's user can judge leftovers)
    after: Scan
    job_user: str | None = None
    pairs: list[tuple[Gpu, Gpu]] = field(default_factory=list)  # (before, after) per GPU
    missing: list[Gpu] = field(default_factory=list)  # in BEFORE, gone from AFTER
    # the policy's unreleased_vram_min_gib: growth of memory no process accounts for below this
    # is not a finding
    unreleased_min_bytes: int = int(Policy().unreleased_vram_min_gib * GIB)

    @classmethod
    def of(cls, before: Scan | None, after: Scan, job_user: str | None = None, *,
           unreleased_min_bytes: int | None = None) -> DiffView:
        pairs: list[tuple[Gpu, Gpu]] = []
        missing: list[Gpu] = []
        if before is not None:
            # By UUID, bus id, minor number, then index: a GPU lost after the job still pairs
            # with itself by the bus id the kernel driver keeps (gpu_audit.gpu_identity).
            pairs, missing = pair_gpus(before.gpus, after.gpus)
        if unreleased_min_bytes is None:
            return cls(before, after, job_user, pairs, missing)
        return cls(before, after, job_user, pairs, missing, unreleased_min_bytes)

    def appeared(self) -> list[GpuProcess]:
        """AFTER's processes that BEFORE did not have (all of them without BEFORE)."""
        if self.before is None:
            return list(self.after.processes)
        return self._unmatched(self.after, self.before, these_are_after=True)

    def left(self) -> list[GpuProcess]:
        """BEFORE's processes that AFTER no longer has."""
        if self.before is None:
            return []
        return self._unmatched(self.before, self.after, these_are_after=False)

    def _unmatched(self, these: Scan, other: Scan, *, these_are_after: bool) -> list[GpuProcess]:
        """The processes of ``these`` with no twin in ``other``, or whose twin is another
        process under the same pid (it restarted in between)."""
        keyed = self._keyed(other)
        by_index = {g.index: g for g in these.gpus}
        out = []
        for p in these.processes:
            twin = keyed.get(process_key(p, by_index))
            old, new = (twin, p) if these_are_after else (p, twin)
            if twin is None or _restarted(old, new):
                out.append(p)
        return out

    def job_processes(self) -> list[GpuProcess]:
        """AFTER's processes that belonged to the job (see the module's documentation)."""
        paired = {g.index for _, g in self.pairs} if self.before is not None else \
            {g.index for g in self.after.gpus}
        candidates = [p for p in self.appeared() if p.gpu_index in paired]
        if self.job_user is not None:
            candidates = [p for p in candidates if p.user is None or p.user == self.job_user]
        elif self.before is None:
            return []  # nothing to compare with and no user: nothing can be called the job's
        return candidates

    @staticmethod
    def _keyed(scan: Scan) -> dict[tuple[str, int], GpuProcess]:
        by_index = {g.index: g for g in scan.gpus}
        return {process_key(p, by_index): p for p in scan.processes}


def _restarted(old: GpuProcess, new: GpuProcess) -> bool:
    """Same PID, another process: both start times known and different."""
    return bool(old.start_time and new.start_time and old.start_time != new.start_time)
