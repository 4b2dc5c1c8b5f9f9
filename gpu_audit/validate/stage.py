"""One stage inside the worker process: import, start the device, run the cycles, checkpoint.

The allocator variables are set (:func:`~gpu_audit.validate.spawn.apply_alloc_conf`) before
anything imports torch. Each cycle runs under the OOM retrier of :mod:`gpu_audit.oom`; its
record (timing, :mod:`.telemetry`, the workload's metrics, any OOM retries) is appended to the
run's ``cycles.jsonl``, and a checkpoint is written every ``checkpoint_every_pct`` of the stage.
A cycle that still runs out of memory is logged with the numbers of the OOM message, read by
:mod:`gpu_audit.knowledge.oom`, and the state as the retries left it is checkpointed.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from gpu_audit.knowledge.allocator import NO_CACHING_VAR
from gpu_audit.knowledge.oom import oom_kind, oom_numbers
from gpu_audit.oom import OomPolicy, OomRetrier, release_memory
from gpu_audit.units import utc_now
from gpu_audit.validate.channels import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    Control,
    CycleEvents,
    Events,
    StageFailed,
    StageInterrupted,
    one_line,
)
from gpu_audit.validate.checkpoints import (
    Checkpoint,
    CheckpointWriter,
    capture_rng,
    detached_state,
    load_checkpoint,
    restore_rng,
)
from gpu_audit.validate.device import device_info
from gpu_audit.validate.leg import StageLeg
from gpu_audit.validate.plan import checkpoint_interval
from gpu_audit.validate.protocol import (
    WorkloadContext,
    WorkloadError,
    clean_metrics,
    has_state,
    load_workload,
    qubit_cap,
)
from gpu_audit.validate.spawn import apply_alloc_conf
from gpu_audit.validate.state import DISK_FULL_ERRNOS, CycleLog, disk_full_reason
from gpu_audit.validate.telemetry import Telemetry


class StageWorker(StageLeg):
    def __init__(self, run_dir: Path, leg: str, device: str, attempt: int, events: Events,
                 control: Control) -> None:
        super().__init__(run_dir, leg, device, attempt, events, control)
        self.torch: Any = None
        self.ctx: Any = None
        self.warnings: list[str] = []
        apply_alloc_conf(self.variant.alloc_conf)  # before anything can import torch
        if NO_CACHING_VAR in os.environ:
            self.warnings.append(f"{NO_CACHING_VAR} is set (any value, 0 included, turns the "
                                 "caching allocator off): allocator figures and settings do not "
                                 "mean what they usually do")
        self.cycles_done = 0
        self.log: Any = None
        self.writer: Any = None

    # -- phases ------------------------------------------------------------------------------

    def run_stage(self) -> int:
        try:
            workload = self.import_everything()
            ready = self.init_device()
            self.events.send({"ev": "ready", **ready})
            if self.stage.cycles == 0:
                return self.finish("passed")
            self.run_cycles(workload, ready)
            self.teardown(workload)
            return self.finish("passed")
        except StageInterrupted:
            return self.finish("interrupted")
        except StageFailed as failed:
            return self.finish("failed", failed.failure, failed.reason, failed.detail)
        except OSError as exc:
            if exc.errno not in DISK_FULL_ERRNOS:
                raise
            return self.finish("failed", "disk-full", disk_full_reason("write the cycle log", exc))
        finally:
            if self.writer is not None:
                with contextlib.suppress(OSError):
                    self.writer.wait()  # a checkpoint in flight lands before the worker leaves
            if self.log is not None:
                self.log.close()

    def import_everything(self) -> Any:
        if "torch" in sys.modules:
            self.warnings.append("torch was imported before the allocator settings were set; "
                                 "they may not apply")
        for folder in reversed(self.plan.workload_paths):
            if folder not in sys.path:
                sys.path.insert(0, folder)
        needs_torch = self.stage.name == "imports" or self.device.startswith("cuda")
        if needs_torch:
            self.phase("import-torch")
            try:
                import torch
            except BaseException as exc:
                raise StageFailed("import", f"torch does not import: {one_line(exc)}",
                                  {"traceback": traceback.format_exc()}) from None
            self.torch = torch
        self.phase("import-workload")
        try:
            workload = load_workload(self.plan.workload)
        except WorkloadError as exc:
            raise StageFailed("workload", str(exc)) from None
        except BaseException as exc:
            raise StageFailed("import", f"the workload {self.plan.workload} does not import: "
                              f"{one_line(exc)}", {"traceback": traceback.format_exc()}) from None
        self.torch = sys.modules.get("torch")  # the workload may have imported it
        return workload

    def init_device(self) -> dict[str, Any]:
        self.phase("init-device")
        info = device_info(self.torch, self.device, self.plan.emulate_memory_bytes, self.warnings)
        self.device = info["device"]
        return info

    def run_cycles(self, workload: Any, ready: dict[str, Any]) -> None:
        planned = self.stage.cycles
        checkpoint = load_checkpoint(self.run.checkpoint_path(self.leg),
                                     map_location=self.device if self.torch else None)
        start = min(checkpoint.next_cycle, planned) if checkpoint else 0
        scale = checkpoint.batch_scale if checkpoint else 1.0
        self.log = CycleLog(self.run.cycles_path)
        self.writer = CheckpointWriter(self.log)
        self.log.supersede(self.leg, {"type": "stage-start", "leg": self.leg,
                                      "from_cycle": start, "attempt": self.attempt,
                                      "at": utc_now()})
        budget = ready.get("memory_budget_bytes")
        scratch = self.run.scratch_dir(self.leg)
        scratch.mkdir(parents=True, exist_ok=True)
        ctx = WorkloadContext(device=self.device, quantum=self.stage.quantum,
                              stage=self.stage.name, cycles=planned,
                              seed=self.plan.seed, variant=self.variant_label,
                              batch_scale=scale, memory_budget_bytes=budget,
                              max_qubits=qubit_cap(self.stage.quantum, budget),
                              scratch_dir=str(scratch), cycle=start)
        self.ctx = ctx
        self.phase("setup")
        self._call_workload(getattr(workload, "setup", None), ctx, "setup")
        stateful = has_state(workload)
        if checkpoint is not None:
            if checkpoint.has_workload_state and stateful:
                self._call_workload(workload.load_state_dict, checkpoint.workload_state,
                                    "load_state_dict")
            elif checkpoint.has_workload_state:
                self.warnings.append("the checkpoint holds workload state but the workload has "
                                     "no load_state_dict(); resuming from a fresh set-up")
            restore_rng(checkpoint.rng)
        self.cycles_done = start
        self.events.send({"ev": "started", "from_cycle": start, "planned": planned,
                          "batch_scale": scale})

        def set_scale(new_scale: float) -> None:
            ctx.batch_scale = new_scale

        def on_retry(retry: Any) -> None:
            self.events.send({"ev": "retry", "cycle": ctx.cycle, "attempt": retry.attempt,
                              "kind": retry.kind, "batch_scale": retry.batch_scale,
                              "gave_up": retry.gave_up})

        retrier = OomRetrier(OomPolicy(max_retries=self.plan.max_retries,
                                       backoff_s=self.plan.retry_backoff_s),
                             shrink=set_scale, on_retry=on_retry, scale=scale,
                             name=f"{self.stage.name} cycle")
        telemetry = Telemetry(self.device, self.torch if self.device.startswith("cuda") else None)
        every = checkpoint_interval(planned, self.plan.checkpoint_every_pct)
        base = {"type": "cycle", "leg": self.leg, "variant": self.variant_label,
                "stage": self.stage.name, "attempt": self.attempt}
        progress = CycleEvents(self.events)
        self.phase("cycles")
        for index in range(start, planned):
            if self.control.stop.is_set():
                self.save_checkpoint(workload, stateful, index, ctx.batch_scale)
                raise StageInterrupted()
            ctx.cycle = index
            seen = len(retrier.history)
            telemetry.start_cycle()
            began = time.perf_counter()
            failure: StageFailed | None = None
            try:
                result = retrier.call(workload.cycle, ctx)
                telemetry.finish_cycle()
            except BaseException as exc:
                failure = self._cycle_failure(exc, index, time.perf_counter() - began,
                                              retrier.history[seen:], base, ctx, telemetry)
            if failure is not None:
                # Outside the except block the failed attempt's frames (and tensors) are gone.
                if failure.failure == "oom":
                    release_memory()
                    # The state as the retries left it is the state a retry would have used.
                    self.save_checkpoint(workload, stateful, index, ctx.batch_scale)
                raise failure
            elapsed = time.perf_counter() - began
            try:
                metrics = clean_metrics(result)
            except WorkloadError as exc:
                raise StageFailed("workload", f"cycle {index}: {exc}") from None
            record = {**base, "cycle": index, "ended_at": utc_now(precise=True),
                      "cycle_s": round(elapsed, 6), "batch_scale": ctx.batch_scale,
                      "oom_retries": [_retry_record(r) for r in retrier.history[seen:]],
                      **telemetry.sample(), "metrics": metrics}
            self.log.append(record)
            self.cycles_done = index + 1
            progress.cycle_done(record, elapsed, last=index + 1 == planned)
            if (index + 1) % every == 0 or index + 1 == planned:
                self.save_checkpoint(workload, stateful, index + 1, ctx.batch_scale,
                                     wait=index + 1 == planned)

    def _cycle_failure(self, exc: BaseException, index: int, elapsed: float, retries: list[Any],
                       base: dict[str, Any], ctx: Any, telemetry: Any) -> StageFailed:
        """Log a cycle that raised, and say how the stage fails."""

        kind = oom_kind(exc)
        message = one_line(exc)
        trace = "".join(traceback.format_exception(exc))
        records = [_retry_record(r) for r in retries]
        self.log.append({**base, "type": "cycle-failed", "cycle": index,
                         "ended_at": utc_now(precise=True), "cycle_s": round(elapsed, 6),
                         "batch_scale": ctx.batch_scale, "oom_retries": records,
                         "error": message, **_safe_sample(telemetry), "metrics": {}})
        if kind is None:
            return StageFailed("error", f"cycle {index} raised {message}",
                               {"traceback": trace, "cycle": index})
        # The allocator's counters when the last retry gave up, completed by what the message
        # states; both use the key names of gpu_audit.knowledge.oom.OOM_KEYS.
        memory = dict(retries[-1].memory) if retries else {}
        memory.update({k: v for k, v in oom_numbers(trace).items() if k not in memory})
        count = len(records) - 1  # the last record is the attempt that gave up
        return StageFailed("oom", f"cycle {index} ran out of memory after {count} "
                           f"retr{'y' if count == 1 else 'ies'} (batch scale "
                           f"{ctx.batch_scale:g}): {message}",
                           {"traceback": trace, "cycle": index, "kind": kind, "memory": memory,
                            "retries": records})

    def save_checkpoint(self, workload: Any, stateful: bool, next_cycle: int,
                        batch_scale: float, *, wait: bool = True) -> None:
        """Checkpoint "resume at ``next_cycle``"; ``wait=False`` leaves the writing to the
        background writer (periodic checkpoints), the others return once it is on disk."""

        checkpoint = Checkpoint(leg=self.leg, next_cycle=next_cycle, batch_scale=batch_scale,
                                has_workload_state=stateful, rng=capture_rng())
        if stateful:  # held by the checkpoint alone, so the writer can let it go
            checkpoint.workload_state = detached_state(self._call_workload(
                workload.state_dict, None, "state_dict", pass_arg=False))
        try:
            self.writer.submit(self.run.checkpoint_path(self.leg), checkpoint)
            if wait:
                self.writer.wait()
        except OSError as exc:
            if exc.errno in DISK_FULL_ERRNOS:
                raise StageFailed("disk-full", disk_full_reason("write the checkpoint", exc)) \
                    from None
            raise StageFailed("error", f"cannot write the checkpoint: {exc}") from None
        self.events.send({"ev": "checkpoint", "next_cycle": next_cycle})

    def teardown(self, workload: Any) -> None:
        method = getattr(workload, "teardown", None)
        if callable(method):
            self.phase("teardown")
            try:
                method(self.ctx)
            except Exception as exc:
                self.warnings.append(f"teardown() raised {one_line(exc)}")

    # -- helpers -----------------------------------------------------------------------------

    def _call_workload(self, method: Any, arg: Any, name: str, pass_arg: bool = True) -> Any:
        if not callable(method):
            return None

        try:
            return method(arg) if pass_arg else method()
        except BaseException as exc:
            failure = "oom" if oom_kind(exc) else "error"
            raise StageFailed(failure, f"{name}() raised {one_line(exc)}",
                              {"traceback": traceback.format_exc()}) from None

    def phase(self, name: str) -> None:
        self.events.send({"ev": "phase", "phase": name})

    def finish(self, status: str, failure: str | None = None, reason: str | None = None,
               detail: dict[str, Any] | None = None) -> int:
        self.events.send({"ev": "done", "status": status, "failure": failure, "reason": reason,
                          "detail": detail or {}, "cycles_done": self.cycles_done,
                          "warnings": self.warnings})
        if reason:
            print(f"gpu-audit worker: stage {self.leg} {status}: {reason}", file=sys.stderr)
        return {"passed": EXIT_PASSED, "interrupted": EXIT_INTERRUPTED}.get(status, EXIT_FAILED)


def _retry_record(retry: Any) -> dict[str, Any]:
    return {"attempt": retry.attempt, "kind": retry.kind, "message": retry.message,
            "batch_scale": retry.batch_scale, "delay_s": retry.delay_s,
            "memory": retry.memory, "gave_up": retry.gave_up}


def _safe_sample(telemetry: Any) -> dict[str, Any]:
    try:
        return telemetry.sample()
    except Exception:
        return {}
