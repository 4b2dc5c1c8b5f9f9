"""The runner (parent process): runs each stage in a worker, watches it, judges it, resumes.

The runner never imports torch. Per stage it starts ``python -m gpu_audit.validate.worker`` in a
session of its own (a Ctrl-C at the terminal reaches the runner only, which then asks the worker
to stop at the next cycle boundary and checkpoint), reads the worker's events for progress and
for the hang watchdog, and afterwards judges the stage from the per-cycle log (gates, summary).

Hang watchdog: until the first cycle completes the limit is ``startup_timeout_s`` (imports, CUDA
start-up and the workload's set-up are slow and vary); afterwards each cycle must finish within
``hang_factor`` times the slowest cycle seen so far, bounded by ``hang_min_s`` and
``hang_max_s``. A worker past its limit gets SIGUSR1 (its Python stacks go to the stage log, to
say where it hung) and is then killed with its whole process group.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_audit.redact import redact_text
from gpu_audit.units import utc_now
from gpu_audit.validate.findings import leg_gates
from gpu_audit.validate.plan import Plan, leg_key, split_leg
from gpu_audit.validate.progress import Progress, make_progress
from gpu_audit.validate.state import (
    DeviceChoice,
    LegState,
    RunDir,
    RunLock,
    RunState,
    completed_cycles,
    load_records,
    new_run_id,
)

EXIT_OK, EXIT_FAILED, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 2, 3, 130
PROBE_TIMEOUT_S = 180.0
STDERR_TAIL_BYTES = 64 * 1024
STDERR_TAIL_LINES = 40
_EOF = object()


@dataclass
class WorkerRun:
    """What one worker process did, as the runner saw it."""

    done: dict[str, Any] | None = None
    ready: dict[str, Any] | None = None
    returncode: int | None = None
    hung: bool = False
    hang_limit_s: float | None = None
    slowest_cycle_s: float | None = None
    hung_cycle: int | None = None
    stopped_by_user: bool = False
    killed_by_user: bool = False
    cycle_times: list[float] = field(default_factory=list)


def worker_command(run: RunDir, key: str, device: str, attempt: int) -> list[str]:
    return [sys.executable, "-m", "gpu_audit.validate.worker", "run", "--run-dir", str(run.path),
            "--leg", key, "--device", device, "--attempt", str(attempt)]


def worker_env(alloc_conf: str | None, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        if alloc_conf:
            env[name] = alloc_conf
        else:
            env.pop(name, None)
    # The worker must import this same gpu_audit, also when it runs from a source tree.
    package_root = str(Path(__file__).resolve().parents[2])
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if package_root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([*paths, package_root])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def resolve_device(requested: str, *, probe: Callable[[], dict[str, Any]] | None = None
                   ) -> DeviceChoice:
    """``auto``/``cuda``: the CUDA device with the most free memory (asked in a subprocess)."""
    if requested == "cpu" or requested.startswith("cuda:"):
        return DeviceChoice(requested=requested, resolved=requested)
    found = (probe or probe_devices)()
    devices = sorted(found.get("devices") or [], key=lambda d: (-d["free_bytes"], d["index"]))
    if devices:
        best = devices[0]
        return DeviceChoice(requested=requested, resolved=f"cuda:{best['index']}",
                            name=best.get("name"), total_memory_bytes=best.get("total_bytes"),
                            free_memory_bytes=best.get("free_bytes"), candidates=devices)
    reason = found.get("reason") or "no CUDA device found"
    if requested == "cuda":
        # The worker fails the first stage with the full explanation.
        return DeviceChoice(requested=requested, resolved="cuda", fallback_reason=reason)
    return DeviceChoice(requested=requested, resolved="cpu", fallback_reason=reason)


def probe_devices() -> dict[str, Any]:
    command = [sys.executable, "-m", "gpu_audit.validate.worker", "probe-devices"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              env=worker_env(None), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"devices": [], "reason": f"the CUDA device query hung for {PROBE_TIMEOUT_S:.0f} s"}
    except OSError as exc:
        return {"devices": [], "reason": f"cannot start the CUDA device query: {exc}"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"devices": [], "reason": f"the CUDA device query failed ({tail[0]})"}


def new_state(run_id: str, plan: Plan, device: DeviceChoice) -> RunState:
    import socket

    return RunState(run_id=run_id, status="running", started_at=utc_now(), device=device,
                    legs={key: LegState() for key in plan.leg_keys()},
                    hostname=socket.gethostname())


class Runner:
    def __init__(self, run: RunDir, plan: Plan, state: RunState, *,
                 progress: Progress | None = None, note: Callable[[str], None] | None = None,
                 lock: RunLock | None = None) -> None:
        self.run = run
        self.plan = plan
        self.state = state
        self.progress = progress or make_progress("plain")
        self.note = note or self.progress.note
        self.interrupts = 0
        # The caller holds the run's lock; the worker inherits its descriptor (see RunLock).
        self.lock = lock or RunLock(run.lock_path)

    # -- the whole run ---------------------------------------------------------------------

    def execute(self) -> int:
        owns_lock = self.lock.fd is None
        if owns_lock:
            self.lock.acquire()
        previous = self._install_signal_handlers()
        try:
            return self._execute()
        finally:
            self._restore_signal_handlers(previous)
            self.progress.close()
            if owns_lock:
                self.lock.release()

    def _execute(self) -> int:
        self.state.status = "running"
        self.state.finished_at = None
        self.run.write_state(self.state)
        for variant in self.plan.variants:
            blocked: str | None = None
            for stage in self.plan.stages:
                key = leg_key(variant.label, stage.name)
                leg = self.state.legs.setdefault(key, LegState())
                if leg.status == "passed":
                    continue
                if leg.status == "failed" and self._cycles_complete(key, leg):
                    blocked = f"stage {stage.name} failed"  # judged already; nothing to resume
                    continue
                if blocked:
                    leg.status, leg.reason = "skipped", f"not run: {blocked}"
                    self.run.write_state(self.state)
                    continue
                if self.interrupts:
                    return self._finish(EXIT_INTERRUPTED, "interrupted")
                self.run_leg(key)
                if leg.status == "interrupted" or self.interrupts:
                    return self._finish(EXIT_INTERRUPTED, "interrupted")
                if leg.status != "passed":
                    blocked = f"stage {stage.name} failed"
        failed = any(leg.status != "passed" for leg in self.state.legs.values())
        return self._finish(EXIT_FAILED if failed else EXIT_OK, "failed" if failed else "passed")

    def _finish(self, code: int, status: str) -> int:
        self.state.status = status
        self.state.exit_code = code
        self.state.finished_at = utc_now()
        self.run.write_state(self.state)
        return code

    def _cycles_complete(self, key: str, leg: LegState) -> bool:
        planned = self.plan.stage(split_leg(key)[1]).cycles
        return planned > 0 and leg.cycles_done >= planned

    # -- one stage ---------------------------------------------------------------------------

    def run_leg(self, key: str) -> None:
        stage = self.plan.stage(split_leg(key)[1])
        leg = self.state.legs[key]
        leg.attempts += 1
        leg.status, leg.reason, leg.failure = "running", None, None
        leg.exit_code = leg.signal = leg.stderr_tail = None
        leg.failure_detail, leg.explanation = {}, []
        leg.started_at, leg.finished_at = utc_now(), None
        self.run.write_state(self.state)
        device = self.state.device.resolved or "cpu"
        prior = completed_cycles(load_records(self.run.cycles_path).get(key, []))
        self.progress.stage_started(key, stage.description, stage.cycles, 0)

        began = time.monotonic()
        log_path = self.run.log_path(key)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            log.write(f"\n=== {utc_now()} attempt {leg.attempts} of stage {key} on {device} "
                      f"===\n".encode())
            log.flush()
            offset = log.tell()
            outcome = self._watch_worker(key, device, leg, log, [r["cycle_s"] for r in prior
                                                                 if "cycle_s" in r])
        leg.duration_s = round((leg.duration_s or 0.0) + time.monotonic() - began, 3)
        leg.finished_at = utc_now()
        leg.exit_code = outcome.returncode
        if outcome.returncode is not None and outcome.returncode < 0:
            leg.signal = _signal_name(-outcome.returncode)
        if outcome.ready:
            leg.ready = outcome.ready
        self._judge(key, leg, outcome, log_path, offset)
        self.run.write_state(self.state)
        self.progress.stage_finished(key, leg.status, leg.reason)

    def _watch_worker(self, key: str, device: str, leg: LegState, log: Any,
                      prior_times: list[float]) -> WorkerRun:
        variant = self.plan.variant(split_leg(key)[0])
        result = WorkerRun(cycle_times=list(prior_times))
        command = worker_command(self.run, key, device, leg.attempts)
        popen_args: dict[str, Any] = {}
        if os.name == "posix":
            popen_args["start_new_session"] = True
            if self.lock.fd is not None:
                popen_args["pass_fds"] = (self.lock.fd,)
        cwd = self.plan.workload_paths[0] if self.plan.workload_paths and \
            Path(self.plan.workload_paths[0]).is_dir() else None
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, env=worker_env(variant.alloc_conf), cwd=cwd,
                                **popen_args)
        leg.worker_pid = proc.pid
        self.run.write_state(self.state)
        events: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=_read_events, args=(proc.stdout, events), daemon=True).start()

        deadline = time.monotonic() + self.plan.startup_timeout_s
        limit = self.plan.startup_timeout_s
        exited_at: float | None = None
        while True:
            self._forward_interrupts(proc, result)
            try:
                event = events.get(timeout=0.2)
            except queue.Empty:
                event = None
            now = time.monotonic()
            if event is _EOF:
                break
            if isinstance(event, dict):
                limit = self._handle_event(key, event, result, limit)
                deadline = now + limit
            if proc.poll() is not None:
                # Gone, but its stdout may be held open by a child it left behind.
                exited_at = exited_at or now
                if now - exited_at > 2.0:
                    break
            elif now > deadline and not result.hung:
                self._stop_hung_worker(proc, result, limit)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            _kill_group(proc)
            proc.wait()
        _kill_group(proc)  # children it left behind (data-loader workers, ...)
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        result.returncode = proc.returncode
        return result

    def _handle_event(self, key: str, event: dict[str, Any], result: WorkerRun,
                      limit: float) -> float:
        kind = event.get("ev")
        if kind == "ready":
            result.ready = {k: v for k, v in event.items() if k != "ev"}
            self.state.legs[key].ready = result.ready
            self.run.write_state(self.state)
            return limit
        if kind == "started":
            start = int(event.get("from_cycle", 0))
            if start:
                self.progress.resumed(key, start)
            self.state.legs[key].cycles_done = start
            return self.plan.startup_timeout_s
        if kind == "cycle":
            # Events come at most every EVENT_INTERVAL_S; each carries the slowest cycle since
            # the one before, which is what the hang limit needs.
            result.cycle_times.append(float(event.get("slowest_s") or event.get("cycle_s") or 0))
            self.state.legs[key].cycles_done = int(event.get("cycle", 0)) + 1
            self.progress.cycle(key, event)
            return self.cycle_limit(result.cycle_times)
        if kind == "retry":
            delay = self.plan.retry_backoff_s * 2 ** max(0, int(event.get("attempt", 1)) - 1)
            return self.cycle_limit(result.cycle_times) + delay
        if kind == "phase" and event.get("phase") in ("setup", "teardown", "import-torch",
                                                      "import-workload", "init-device"):
            return self.plan.startup_timeout_s
        if kind == "done":
            result.done = event
        return limit if kind != "checkpoint" else max(limit, self.cycle_limit(result.cycle_times))

    def cycle_limit(self, times: list[float]) -> float:
        """How long the next cycle may take before the worker counts as hung."""
        if not times:
            return self.plan.startup_timeout_s
        slowest = max(times[-200:])
        return min(self.plan.hang_max_s, max(self.plan.hang_min_s,
                                             self.plan.hang_factor * slowest))

    def _stop_hung_worker(self, proc: subprocess.Popen[bytes], result: WorkerRun,
                          limit: float) -> None:
        result.hung = True
        result.hang_limit_s = limit
        result.slowest_cycle_s = max(result.cycle_times[-200:]) if result.cycle_times else None
        if hasattr(signal, "SIGUSR1"):
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGUSR1)  # faulthandler writes every thread's stack
            time.sleep(1.0)
        _kill_group(proc)

    def _forward_interrupts(self, proc: subprocess.Popen[bytes], result: WorkerRun) -> None:
        if self.interrupts >= 1 and not result.stopped_by_user:
            result.stopped_by_user = True
            self.note("interrupted: stopping after the current cycle and saving a checkpoint "
                      "(press Ctrl-C again to stop at once)")
            with contextlib.suppress(OSError, ValueError):
                proc.stdin.write(b"stop\n")  # type: ignore[union-attr]
                proc.stdin.flush()  # type: ignore[union-attr]
        if self.interrupts >= 2 and not result.killed_by_user:
            result.killed_by_user = True
            self.note("stopping now; the stage resumes from its last checkpoint")
            _kill_group(proc)

    # -- judging ------------------------------------------------------------------------------

    def _judge(self, key: str, leg: LegState, outcome: WorkerRun, log_path: Path,
               offset: int) -> None:
        stage = self.plan.stage(split_leg(key)[1])
        records = load_records(self.run.cycles_path).get(key, [])
        done_records = completed_cycles(records)
        leg.cycles_done = len(done_records)
        done = outcome.done or {}
        tail = _read_tail(log_path, offset)
        leg.stderr_tail = tail or None
        if done.get("warnings"):
            leg.ready.setdefault("warnings", [])
            for warning in done["warnings"]:
                if warning not in leg.ready["warnings"]:
                    leg.ready["warnings"].append(warning)

        if outcome.stopped_by_user and (done.get("status") == "interrupted"
                                        or outcome.killed_by_user or not done):
            leg.status, leg.reason = "interrupted", "interrupted by the user; resume with --resume"
            return
        if outcome.hung:
            where = _stage_location(tail)
            cycle = leg.cycles_done
            slowest = outcome.slowest_cycle_s
            basis = (f"{self.plan.hang_factor:g} x the slowest cycle so far ({slowest:.3g} s), "
                     f"bounded to {self.plan.hang_min_s:g}-{self.plan.hang_max_s:g} s"
                     if slowest is not None else "the start-up limit")
            self._fail(leg, "hang", f"cycle {cycle} did not finish within "
                       f"{outcome.hang_limit_s:.3g} s ({basis}); the worker was stopped"
                       + (f"; it was at {where}" if where else ""), {"cycle": cycle,
                                                                     "limit_s":
                                                                         outcome.hang_limit_s,
                                                                     "where": where})
            return
        if not done:
            where = _stage_location(tail)
            self._fail(leg, "crash", _death_reason(outcome.returncode, leg.cycles_done)
                       + (f"; it was at {where}" if where else ""),
                       {"returncode": outcome.returncode, "where": where})
            leg.explanation = explain_text(tail, fallback=True)
            return
        if done.get("status") != "passed":
            detail = dict(done.get("detail") or {})
            trace = detail.pop("traceback", None)
            if trace:
                detail["traceback_tail"] = redact_text("\n".join(trace.splitlines()[-25:]))
            self._fail(leg, done.get("failure") or "error", done.get("reason") or "failed",
                       detail)
            leg.explanation = explain_text((trace or "") + "\n" + tail, fallback=False)
            return
        if stage.cycles and leg.cycles_done < stage.cycles:
            self._fail(leg, "crash", f"the worker finished after {leg.cycles_done} of "
                       f"{stage.cycles} cycles")
            return
        if outcome.returncode not in (0, None):
            how = f"signal {leg.signal}" if leg.signal else f"exit code {outcome.returncode}"
            leg.ready.setdefault("warnings", []).append(
                f"the worker finished the stage but then ended with {how}")
        failed = [g for g in leg_gates(self.plan, key, done_records, completed=True)
                  if g.passed is False]
        if failed:
            self._fail(leg, "gate", "; ".join(f"{g.name}: {g.detail}" for g in failed))
            return
        leg.status, leg.reason = "passed", None

    def _fail(self, leg: LegState, failure: str, reason: str,
              detail: dict[str, Any] | None = None) -> None:
        leg.status, leg.failure, leg.reason = "failed", failure, redact_text(reason)
        leg.failure_detail = detail or {}

    # -- signals ------------------------------------------------------------------------------

    def _install_signal_handlers(self) -> dict[int, Any]:
        previous: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return previous

        def handler(signum: int, frame: Any) -> None:
            self.interrupts += 1

        for signum in (signal.SIGINT, getattr(signal, "SIGTERM", None)):
            if signum is not None:
                previous[signum] = signal.signal(signum, handler)
        return previous

    def _restore_signal_handlers(self, previous: dict[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def start_run(plan: Plan, out_dir: Path, run_id: str | None = None) -> tuple[RunDir, RunState]:
    """A new run folder under ``out_dir/runs/`` with its plan and a fresh state."""
    from gpu_audit.errors import UsageError

    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", run_id):
        raise UsageError(f"--run-id {run_id!r}: use letters, digits, '.', '_' and '-' only "
                         "(it names a folder)")
    run = RunDir(out_dir / "runs" / (run_id or new_run_id()))
    if run.plan_path.exists():
        raise UsageError(f"run {run.run_id} already exists in {run.path.parent}; resume it with "
                         f"--resume {run.run_id}")
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_plan(plan)
    state = new_state(run.run_id, plan, DeviceChoice(requested=plan.device))
    run.write_state(state)
    return run, state


def explain_text(text: str, *, fallback: bool = True) -> list[dict[str, Any]]:
    """Why a stage died, from ``gpu_audit.explain`` when it is installed; without it, and if
    ``fallback``, at least an out-of-memory error in the log is named."""
    if not text.strip():
        return []
    try:
        from gpu_audit.explain import classify_text
    except ImportError:
        classify_text = None
    if classify_text is not None:
        try:
            incidents = classify_text(text)
        except Exception as exc:
            return [{"cls": "explain-failed", "title": "the log could not be classified",
                     "explanation": f"{type(exc).__name__}: {exc}", "remedy": None,
                     "numbers": {}}]
        return [_incident_dict(incident) for incident in incidents[:3]]
    if not fallback:
        return []
    from gpu_audit.oom import oom_kind_of_text, oom_numbers

    kind = oom_kind_of_text(text)
    if kind is None:
        return []
    return [{"cls": f"oom-{kind}", "title": "out of memory",
             "explanation": "the stage's log shows an out-of-memory error",
             "remedy": "lower the batch size, or run with --emulate-memory to find what fits",
             "numbers": oom_numbers(text)}]


def _incident_dict(incident: Any) -> dict[str, Any]:
    fields = ("cls", "title", "role", "explanation", "diagnosis", "remedy", "numbers")
    data = {name: getattr(incident, name, None) for name in fields}
    severity = getattr(incident, "severity", None)
    data["severity"] = getattr(severity, "value", severity)
    data["numbers"] = data["numbers"] or {}
    for name in ("title", "explanation", "diagnosis", "remedy"):
        if isinstance(data[name], str):
            data[name] = redact_text(data[name])
    return json.loads(json.dumps(data, default=str))


def _read_events(stream: Any, events: queue.Queue[Any]) -> None:
    try:
        for line in stream:
            try:
                events.put(json.loads(line))
            except ValueError:
                continue
    except (OSError, ValueError):
        pass
    finally:
        events.put(_EOF)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The worker and anything it started: it leads a session of its own."""
    if os.name == "posix":
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    else:  # pragma: no cover - Windows
        with contextlib.suppress(OSError):
            proc.kill()


def _read_tail(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            start = max(offset, size - STDERR_TAIL_BYTES)
            handle.seek(start)
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = text.splitlines()[-STDERR_TAIL_LINES * 4:]
    return redact_text("\n".join(lines))


def _stage_location(tail: str) -> str | None:
    """Where the worker's main thread was, from faulthandler's last dump in the log.

    The innermost frame, and the innermost frame of the user's own code when that is further
    out (a hang inside ``time.sleep`` or a crash inside a library is best read with both).
    """
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in tail.splitlines():
        if "(most recent call first)" in line:
            current = []
            blocks.append(current)
        elif current is not None and line.startswith("  File "):
            current.append(line.strip())
        else:
            current = None
    # Any thread may take the signal, so find the stack that runs the stage, not "Current".
    for frames in reversed(blocks):
        if frames and any(marker in frame for frame in frames
                          for marker in ("in run_cycles", "in run_stage")):
            innermost = frames[0]
            own = next((f for f in frames if not _library_frame(f)), None)
            if own is not None and own != innermost:
                return f"{innermost}, called from {own}"
            return innermost
    return None


def _library_frame(frame: str) -> bool:
    """A frame in Python's own library, site-packages, or gpu-audit itself."""
    match = re.match(r'File "([^"]+)"', frame)
    path = match[1] if match else ""
    package = str(Path(__file__).resolve().parents[1])
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return (path.startswith(package) or "site-packages" in path or path.startswith("<")
            or any(path.startswith(p + os.sep + "lib") for p in prefixes))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _death_reason(returncode: int | None, cycles_done: int) -> str:
    if returncode is None:
        return "the worker vanished"
    if returncode < 0:
        name = _signal_name(-returncode)
        why = {
            "SIGKILL": " (the kernel's out-of-memory killer sends this when host memory runs "
                       "out; check `dmesg` or `journalctl -k` for 'Killed process')",
            "SIGSEGV": " (a crash in native code: a CUDA library, a driver, or an extension)",
            "SIGABRT": " (an abort in native code, often a failed CUDA or NCCL assertion)",
            "SIGBUS": " (a bus error: often shared memory (/dev/shm) too small for data-loader "
                      "workers)",
        }.get(name, "")
        return f"the worker was killed by {name} after {cycles_done} cycles{why}"
    return f"the worker exited with code {returncode} after {cycles_done} cycles without a result"
