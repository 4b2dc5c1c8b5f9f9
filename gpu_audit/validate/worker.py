"""The stage worker: one child process per stage, started by the runner.

``python -m gpu_audit.validate.worker run --run-dir DIR --leg VARIANT/STAGE --device DEV``

Why a process per stage: the allocator settings must be in the environment before torch is
imported (the allocator reads them once, at load time), each stage should start from a clean
allocator, and a crash, an abort in a CUDA library or a hang must not take the runner down.

The worker sets ``PYTORCH_CUDA_ALLOC_CONF`` and ``PYTORCH_ALLOC_CONF`` to the same string (which
one torch reads depends on its version) before anything imports torch, then imports torch and
the workload, initialises the device, runs the cycles (each under the OOM retrier from
:mod:`gpu_audit.oom`), appends one record per cycle to the run's ``cycles.jsonl`` and writes a
checkpoint every ``checkpoint_every_pct`` of the stage.

Channels: events for the runner go, one JSON object per line, to the file descriptor that was
stdout at start; stdout is then pointed at stderr (so a workload's ``print`` lands in the log,
not in the event stream). stderr is the stage's log file. stdin carries ``stop`` requests; its
end means the runner is gone, and the worker then stops at the next cycle boundary (a
checkpoint is written) or, failing that, exits after a grace period.

``python -m gpu_audit.validate.worker probe-devices`` prints the CUDA devices with their free
memory as JSON (for ``--device auto``), in a process of its own so the runner never imports
torch and no CUDA context outlives the probe.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from gpu_audit.validate.plan import split_leg

ALLOC_ENV_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
EXIT_PASSED, EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 130
ORPHAN_GRACE_S = 10.0
# Cycle events to the runner at most this often: each one wakes the runner, and on a machine
# whose cores the workload keeps busy that wake-up is taken from the workload's threads.
EVENT_INTERVAL_S = 0.25
ROUND_TRIP_ELEMENTS = 1 << 20


def apply_alloc_conf(conf: str | None, environ: Any = os.environ) -> None:
    """Both variable names, one string, before torch is imported (see DESIGN)."""
    for name in ALLOC_ENV_VARS:
        if conf:
            environ[name] = conf
        else:
            environ.pop(name, None)


class Events:
    """One JSON object per line to the runner; a vanished runner is noted, not fatal."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._lock = threading.Lock()
        self.broken = False

    def send(self, event: dict[str, Any]) -> None:
        if self.broken:
            return
        line = json.dumps(event, separators=(",", ":"), default=str).encode("utf-8") + b"\n"
        with self._lock:
            try:
                self._file.write(line)
            except (BrokenPipeError, OSError):
                self.broken = True


class Control:
    """Reads ``stop`` requests from stdin; end of input means the runner died."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.orphaned = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._read, name="control", daemon=True).start()

    def _read(self) -> None:
        # Raw reads on fd 0: a thread blocked inside sys.stdin's buffered reader holds its lock,
        # and the interpreter aborts at exit when it finds that lock taken.
        pending = b""
        while True:
            try:
                chunk = os.read(0, 4096)
            except InterruptedError:
                continue
            except OSError:
                break
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if any(line.strip() == b"stop" for line in lines):
                self.stop.set()
        # End of input: the runner is gone. Stop at the next cycle boundary; if a cycle runs
        # on past the grace period, leave without it so the run folder is not held.
        self.orphaned.set()
        self.stop.set()
        timer = threading.Timer(ORPHAN_GRACE_S, os._exit, args=(EXIT_INTERRUPTED,))
        timer.daemon = True
        timer.start()


class CycleEvents:
    """Cycle events to the runner, at most every ``EVENT_INTERVAL_S`` (and always the last one,
    and any cycle that needed an OOM retry); each carries the slowest cycle since the previous
    event, which is what the runner's hang limit is computed from."""

    def __init__(self, events: Events) -> None:
        self.events = events
        self.sent_at = 0.0
        self.slowest = 0.0

    def cycle_done(self, record: dict[str, Any], elapsed: float, last: bool) -> None:
        self.slowest = max(self.slowest, elapsed)
        now = time.monotonic()
        if not (last or record["oom_retries"] or now - self.sent_at >= EVENT_INTERVAL_S):
            return
        self.events.send({"ev": "cycle", "cycle": record["cycle"], "cycle_s": record["cycle_s"],
                          "slowest_s": round(self.slowest, 6),
                          "reserved_bytes": record["reserved_bytes"],
                          "fragmentation_pct": record["fragmentation_pct"],
                          "rss_bytes": record["rss_bytes"],
                          "oom_retries": len(record["oom_retries"])})
        self.sent_at, self.slowest = now, 0.0


class StageFailed(Exception):
    def __init__(self, failure: str, reason: str, detail: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.failure = failure
        self.reason = reason
        self.detail = detail or {}


class StageInterrupted(Exception):
    pass


class StageWorker:
    def __init__(self, run_dir: Path, leg: str, device: str, attempt: int, events: Events,
                 control: Control) -> None:
        from gpu_audit.validate.state import RunDir

        self.run = RunDir(run_dir)
        self.plan = self.run.read_plan()
        self.leg = leg
        self.variant_label, self.stage_name = split_leg(leg)
        self.variant = self.plan.variant(self.variant_label)
        self.stage = self.plan.stage(self.stage_name)
        self.device = device
        self.attempt = attempt
        self.events = events
        self.control = control
        self.torch: Any = None
        self.ctx: Any = None
        self.warnings: list[str] = []
        apply_alloc_conf(self.variant.alloc_conf)  # before anything can import torch
        if "PYTORCH_NO_CUDA_MEMORY_CACHING" in os.environ:
            self.warnings.append("PYTORCH_NO_CUDA_MEMORY_CACHING is set (any value, 0 included, "
                                 "turns the caching allocator off): allocator figures and "
                                 "settings do not mean what they usually do")
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
        finally:
            if self.writer is not None:
                with contextlib.suppress(OSError):
                    self.writer.wait()  # a checkpoint in flight lands before the worker leaves
            if self.log is not None:
                self.log.close()

    def import_everything(self) -> Any:
        from gpu_audit.validate.protocol import WorkloadError, load_workload

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
                raise StageFailed("import", f"torch does not import: {_one_line(exc)}",
                                  {"traceback": traceback.format_exc()}) from None
            self.torch = torch
        self.phase("import-workload")
        try:
            workload = load_workload(self.plan.workload)
        except WorkloadError as exc:
            raise StageFailed("workload", str(exc)) from None
        except BaseException as exc:
            raise StageFailed("import", f"the workload {self.plan.workload} does not import: "
                              f"{_one_line(exc)}", {"traceback": traceback.format_exc()}) from None
        self.torch = sys.modules.get("torch")  # the workload may have imported it
        return workload

    def init_device(self) -> dict[str, Any]:
        self.phase("init-device")
        torch = self.torch
        info: dict[str, Any] = {
            "pid": os.getpid(),
            "python": sys.version.split()[0],
            "torch_version": getattr(torch, "__version__", None) if torch else None,
            "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None) if torch else None,
            "device": self.device,
            "alloc_env": {name: os.environ.get(name) for name in ALLOC_ENV_VARS},
            "allocator_settings": None,
            "allocator_backend": None,
            "device_name": None,
            "total_memory_bytes": None,
            "free_memory_bytes": None,
            "memory_budget_bytes": None,
            "memory_fraction": None,
            "warnings": self.warnings,
        }
        if self.device.startswith("cuda"):
            info.update(self._init_cuda())
        else:
            from gpu_audit.validate.telemetry import host_memory_available

            if torch is not None:
                self._round_trip(torch.device("cpu"))
            if self.plan.emulate_memory_bytes:
                self.warnings.append("--emulate-memory applies to GPUs only; the CPU run is "
                                     "not capped")
            info["memory_budget_bytes"] = host_memory_available()
        return info

    def _init_cuda(self) -> dict[str, Any]:
        torch = self.torch
        try:
            available = torch.cuda.is_available()
        except Exception as exc:
            raise StageFailed("cuda", f"CUDA cannot initialise: {_one_line(exc)}",
                              {"traceback": traceback.format_exc()}) from None
        if not available:
            raise StageFailed("cuda", _no_cuda_reason(torch))
        count = torch.cuda.device_count()
        if ":" in self.device:
            index = int(self.device.split(":")[1])
        else:
            index = torch.cuda.current_device()
        if index >= count:
            raise StageFailed("cuda", f"{self.device} does not exist: {count} CUDA device"
                              f"{'s' if count != 1 else ''} visible (cuda:0..cuda:{count - 1}; "
                              f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
        self.device = f"cuda:{index}"
        try:
            torch.cuda.set_device(index)
            self._round_trip(torch.device(self.device))
            props = torch.cuda.get_device_properties(index)
            free, total = torch.cuda.mem_get_info(index)
        except StageFailed:
            raise
        except Exception as exc:
            raise StageFailed("cuda", f"CUDA initialisation on {self.device} failed: "
                              f"{_one_line(exc)}", {"traceback": traceback.format_exc()}) from None
        info: dict[str, Any] = {"device": self.device, "device_name": props.name,
                                "total_memory_bytes": total, "free_memory_bytes": free}
        budget = free
        cap = self.plan.emulate_memory_bytes
        if cap:
            if cap >= total:
                self.warnings.append(f"--emulate-memory {cap} bytes is not below the device's "
                                     f"{total} bytes; nothing to cap")
            else:
                fraction = cap / total
                torch.cuda.set_per_process_memory_fraction(fraction, index)
                info["memory_fraction"] = fraction
                budget = min(free, cap)
        info["memory_budget_bytes"] = budget
        info["allocator_settings"] = _allocator_settings(torch)
        with contextlib.suppress(Exception):
            info["allocator_backend"] = torch.cuda.memory.get_allocator_backend()
        return info

    def _round_trip(self, device: Any) -> None:
        torch = self.torch
        try:
            values = torch.arange(ROUND_TRIP_ELEMENTS, dtype=torch.float32, device=device)
            total = float(values.sum().item())
            back = values[-4:].cpu().tolist()
        except Exception as exc:
            raise StageFailed("cuda" if device.type == "cuda" else "error",
                              f"a small allocation round trip on {device} failed: "
                              f"{_one_line(exc)}", {"traceback": traceback.format_exc()}) from None
        expected = ROUND_TRIP_ELEMENTS * (ROUND_TRIP_ELEMENTS - 1) / 2
        if abs(total - expected) > expected * 1e-4 or back[-1] != ROUND_TRIP_ELEMENTS - 1:
            raise StageFailed("cuda", f"a small allocation round trip on {device} returned "
                              f"wrong values (sum {total}, expected {expected})")
        del values

    def run_cycles(self, workload: Any, ready: dict[str, Any]) -> None:
        from gpu_audit.oom import OomPolicy, OomRetrier, release_memory
        from gpu_audit.units import utc_now
        from gpu_audit.validate.plan import checkpoint_interval
        from gpu_audit.validate.protocol import (
            WorkloadContext,
            WorkloadError,
            clean_metrics,
            has_state,
            qubit_cap,
        )
        from gpu_audit.validate.state import (
            CheckpointWriter,
            CycleLog,
            load_checkpoint,
            restore_rng,
        )
        from gpu_audit.validate.telemetry import Telemetry

        planned = self.stage.cycles
        checkpoint = load_checkpoint(self.run.checkpoint_path(self.leg),
                                     map_location=self.device if self.torch else None)
        start = min(checkpoint.next_cycle, planned) if checkpoint else 0
        scale = checkpoint.batch_scale if checkpoint else 1.0
        self.log = CycleLog(self.run.cycles_path)
        self.writer = CheckpointWriter(self.log)
        self.log.append({"type": "stage-start", "leg": self.leg, "from_cycle": start,
                         "attempt": self.attempt, "at": utc_now()})
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
        from gpu_audit.oom import oom_kind, oom_numbers
        from gpu_audit.units import utc_now

        kind = oom_kind(exc)
        message = _one_line(exc)
        trace = "".join(traceback.format_exception(exc))
        records = [_retry_record(r) for r in retries]
        self.log.append({**base, "type": "cycle-failed", "cycle": index,
                         "ended_at": utc_now(precise=True), "cycle_s": round(elapsed, 6),
                         "batch_scale": ctx.batch_scale, "oom_retries": records,
                         "error": message, **_safe_sample(telemetry), "metrics": {}})
        if kind is None:
            return StageFailed("error", f"cycle {index} raised {message}",
                               {"traceback": trace, "cycle": index})
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
        from gpu_audit.validate.state import Checkpoint, capture_rng, checkpoint_bytes

        state = None
        if stateful:
            state = self._call_workload(workload.state_dict, None, "state_dict", pass_arg=False)
        data = checkpoint_bytes(Checkpoint(leg=self.leg, next_cycle=next_cycle,
                                           batch_scale=batch_scale, workload_state=state,
                                           has_workload_state=stateful, rng=capture_rng()))
        try:
            self.writer.submit(self.run.checkpoint_path(self.leg), data)
            if wait:
                self.writer.wait()
        except OSError as exc:
            raise StageFailed("error", f"cannot write the checkpoint: {exc}") from None
        self.events.send({"ev": "checkpoint", "next_cycle": next_cycle})

    def teardown(self, workload: Any) -> None:
        method = getattr(workload, "teardown", None)
        if callable(method):
            self.phase("teardown")
            try:
                method(self.ctx)
            except Exception as exc:
                self.warnings.append(f"teardown() raised {_one_line(exc)}")

    # -- helpers -----------------------------------------------------------------------------

    def _call_workload(self, method: Any, arg: Any, name: str, pass_arg: bool = True) -> Any:
        if not callable(method):
            return None
        from gpu_audit.oom import oom_kind

        try:
            return method(arg) if pass_arg else method()
        except BaseException as exc:
            failure = "oom" if oom_kind(exc) else "error"
            raise StageFailed(failure, f"{name}() raised {_one_line(exc)}",
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


def probe_devices() -> dict[str, Any]:
    """CUDA devices as torch numbers them, with free memory, for ``--device auto``."""
    try:
        import torch
    except BaseException as exc:
        return {"torch": None, "cuda": False, "reason": f"torch does not import: {_one_line(exc)}",
                "devices": []}
    result: dict[str, Any] = {"torch": torch.__version__, "cuda": False, "devices": []}
    try:
        if not torch.cuda.is_available():
            result["reason"] = _no_cuda_reason(torch)
            return result
        for index in range(torch.cuda.device_count()):
            free, total = torch.cuda.mem_get_info(index)
            result["devices"].append({"index": index, "name": torch.cuda.get_device_name(index),
                                      "free_bytes": free, "total_bytes": total})
        result["cuda"] = True
    except Exception as exc:
        result["reason"] = f"CUDA cannot initialise: {_one_line(exc)}"
    return result


def _no_cuda_reason(torch: Any) -> str:
    version = getattr(torch, "__version__", "?")
    if getattr(torch.version, "cuda", None) is None:
        return (f"torch {version} is a CPU-only build (no CUDA support); install a CUDA build "
                "(https://pytorch.org/get-started/locally/)")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hint = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
    return (f"torch {version} (CUDA {torch.version.cuda}) finds no usable CUDA device{hint}: no "
            "NVIDIA GPU, no driver loaded, or a driver older than this CUDA build; run "
            "`gpu-audit scan` to see which")


def _allocator_settings(torch: Any) -> dict[str, Any] | None:
    try:
        settings = torch.cuda.memory._snapshot().get("allocator_settings")
    except Exception:
        return None
    return json.loads(json.dumps(settings, default=str)) if settings is not None else None


def _retry_record(retry: Any) -> dict[str, Any]:
    return {"attempt": retry.attempt, "kind": retry.kind, "message": retry.message,
            "batch_scale": retry.batch_scale, "delay_s": retry.delay_s,
            "memory": retry.memory, "gave_up": retry.gave_up}


def _safe_sample(telemetry: Any) -> dict[str, Any]:
    try:
        return telemetry.sample()
    except Exception:
        return {}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:600] if first else type(exc).__name__


def _setup_process() -> tuple[Events, Control]:
    events = Events(os.dup(1))
    os.dup2(2, 1)  # the workload's prints (and C-level output) go to the stage log
    faulthandler.enable(file=sys.stderr, all_threads=True)
    if hasattr(signal, "SIGUSR1"):
        # The runner sends SIGUSR1 before stopping a hung worker: the stacks land in the log.
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    control = Control()
    control.start()
    return events, control


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_audit.validate.worker")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one stage of a validation run")
    run.add_argument("--run-dir", required=True, type=Path)
    run.add_argument("--leg", required=True)
    run.add_argument("--device", required=True)
    run.add_argument("--attempt", type=int, default=1)
    sub.add_parser("probe-devices", help="print CUDA devices and their free memory as JSON")
    args = parser.parse_args(argv)

    if args.command == "probe-devices":
        print(json.dumps(probe_devices()))
        return 0

    events, control = _setup_process()
    try:
        worker = StageWorker(args.run_dir, args.leg, args.device, args.attempt, events, control)
        return worker.run_stage()
    except Exception as exc:
        events.send({"ev": "done", "status": "failed", "failure": "internal",
                     "reason": f"the stage worker failed: {_one_line(exc)}",
                     "detail": {"traceback": traceback.format_exc()}, "cycles_done": 0,
                     "warnings": []})
        traceback.print_exc()
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
