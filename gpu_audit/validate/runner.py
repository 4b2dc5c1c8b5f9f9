"""The runner (parent process): runs each stage in a worker, watches it, judges it, resumes.

The runner never imports torch. Per stage it starts ``python -m gpu_audit.validate.worker`` in a
session of its own (a Ctrl-C at the terminal reaches the runner only, which then asks the worker
to stop at the next cycle boundary and checkpoint), reads the worker's events for progress and
for the hang watchdog, and afterwards has :mod:`.verdict` judge the stage from the per-cycle log
(gates, summary). How the worker process is started and stopped is in :mod:`.spawn`.

Hang watchdog: until the first cycle completes the limit is ``startup_timeout_s`` (imports, CUDA
start-up and the workload's set-up are slow and vary); afterwards each cycle must finish within
``hang_factor`` times the slowest cycle seen so far, bounded by ``hang_min_s`` and
``hang_max_s``. A command's first cycle, which includes its start-up, is not one of those
times: the limit is measured from its first counted cycle (``hang_min_s`` until a second one).
A worker past its limit gets SIGUSR1 (its Python stacks go to the stage log, to say where it
hung) and is then killed with its whole process group; a command's supervisor is asked to stop
instead (it ends every process of the command, in whatever session, then exits) and is killed
only if it has not within :data:`HUNG_STOP_S`.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_audit.redact import redact_text
from gpu_audit.units import KIB, utc_now
from gpu_audit.validate.plan import Plan, leg_key, split_leg
from gpu_audit.validate.progress import Progress, make_progress
from gpu_audit.validate.spawn import EOF, kill_group, read_events, worker_command, worker_env
from gpu_audit.validate.state import (
    FINAL_FAILURES,
    LegState,
    RunDir,
    RunLock,
    RunState,
    completed_cycles,
    load_records,
)
from gpu_audit.validate.verdict import WorkerRun, judge, signal_name

EXIT_OK, EXIT_FAILED, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 2, 3, 130
NOT_ON_CPU = "not run: allocator settings do not apply on the CPU (the variants are one run)"
STDERR_TAIL_BYTES = 64 * KIB
STDERR_TAIL_LINES = 40
HUNG_STOP_S = 20.0  # a hung command's supervisor ends its processes (SIGTERM, grace, SIGKILL)


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
        for variant in self._variants():
            blocked: str | None = None
            for stage in self.plan.stages:
                key = leg_key(variant.label, stage.name)
                leg = self.state.legs.setdefault(key, LegState())
                if leg.status == "passed":
                    continue
                if leg.status == "failed" and self._cycles_complete(key, leg):
                    if leg.failure in FINAL_FAILURES:
                        blocked = f"stage {stage.name} failed"  # judged; nothing to resume
                        continue
                    if not blocked and not self.interrupts:
                        self._finish_logged_leg(key, leg)
                        if leg.status != "passed":
                            blocked = f"stage {stage.name} failed"
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
        failed = any(leg.status != "passed" and leg.reason != NOT_ON_CPU
                     for leg in self.state.legs.values())
        failures = {leg.failure for leg in self.state.legs.values() if leg.status == "failed"}
        if failures == {"disk-full"}:
            return self._finish(EXIT_UNKNOWN, "failed")  # not judged: the disk filled up
        return self._finish(EXIT_FAILED if failed else EXIT_OK, "failed" if failed else "passed")

    def _variants(self) -> list[Any]:
        """The allocator variants to run: on the CPU, where their settings do not apply, only
        the first (the others would repeat it), said before anything runs."""
        variants = list(self.plan.variants)
        if len(variants) < 2 or (self.state.device.resolved or "cpu") != "cpu":
            return variants
        self.note(f"warning: the run is on the CPU, where allocator settings do not apply: "
                  f"the {len(variants)} variants would be one run, so only "
                  f"{variants[0].label} runs, and no variant can be recommended")
        for variant in variants[1:]:
            for stage in self.plan.stages:
                leg = self.state.legs.setdefault(leg_key(variant.label, stage.name), LegState())
                leg.status, leg.reason = "skipped", NOT_ON_CPU
        self.run.write_state(self.state)
        return variants[:1]

    def _finish_logged_leg(self, key: str, leg: LegState) -> None:
        """A stage whose every cycle is logged but whose worker did not finish cleanly (killed
        in teardown, the disk full at the last checkpoint): judged from its log, not re-run."""
        before = leg.reason
        leg.attempts += 1
        outcome = WorkerRun(done={"status": "passed", "warnings": [
            f"every cycle was logged before the worker ended ({before}); the stage was "
            "judged from its log on resume"]})
        records = load_records(self.run.cycles_path).get(key, [])
        leg.failure, leg.failure_detail, leg.explanation = None, {}, []
        leg.signal = leg.exit_code = None
        judge(self.plan, key, leg, outcome, records, "")
        leg.finished_at = utc_now()
        self.run.write_state(self.state)
        self.progress.stage_finished(key, leg.status, leg.reason)

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
        leg.load_avg = {"start": host_load(), "end": None}
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
            outcome = self._watch_worker(key, device, leg, log, [
                r["cycle_s"] for r in prior
                if "cycle_s" in r and not r.get("first_includes_startup")])
        leg.duration_s = round((leg.duration_s or 0.0) + time.monotonic() - began, 3)
        leg.finished_at = utc_now()
        leg.load_avg["end"] = host_load()
        leg.exit_code = outcome.returncode
        if outcome.returncode is not None and outcome.returncode < 0:
            leg.signal = signal_name(-outcome.returncode)
        if outcome.ready:
            leg.ready = outcome.ready
        self._judge(key, leg, outcome, log_path, offset)
        self.run.write_state(self.state)
        self.progress.stage_finished(key, leg.status, leg.reason)

    def _watch_worker(self, key: str, device: str, leg: LegState, log: Any,
                      prior_times: list[float]) -> WorkerRun:
        variant = self.plan.variant(split_leg(key)[0])
        result = WorkerRun(cycle_times=list(prior_times))
        command = worker_command(self.run.path, key, device, leg.attempts)
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
        threading.Thread(target=read_events, args=(proc.stdout, events), daemon=True).start()

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
            if event is EOF:
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
            elif result.hung and now > result.stop_asked_at + HUNG_STOP_S:
                kill_group(proc)  # the supervisor did not end the command in time
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            kill_group(proc)
            proc.wait()
        kill_group(proc)  # children it left behind (data-loader workers, ...)
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
            slowest = event.get("slowest_s")
            result.cycle_times.append(float(slowest if slowest is not None
                                            else event.get("cycle_s") or 0))
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
        if kind == "stacks":
            result.stacks = [e for e in event.get("processes") or [] if isinstance(e, dict)]
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
        if self.plan.script is None:
            kill_group(proc)
            return
        # A command's processes may have left the worker's group (torchrun's ranks run in
        # sessions of their own): its supervisor ends them all, then exits.
        result.stop_asked_at = time.monotonic()
        with contextlib.suppress(OSError, ValueError):
            proc.stdin.write(b"stop\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]

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
            kill_group(proc)

    def _judge(self, key: str, leg: LegState, outcome: WorkerRun, log_path: Path,
               offset: int) -> None:
        records = load_records(self.run.cycles_path).get(key, [])
        judge(self.plan, key, leg, outcome, records, _read_tail(log_path, offset))
        if leg.status == "failed":
            leg.failure_detail["stage_log"] = str(log_path)  # the report points at it

    # -- signals ------------------------------------------------------------------------------

    def _install_signal_handlers(self) -> dict[int, Any]:
        previous: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return previous

        def handler(signum: int, frame: Any) -> None:
            self.interrupts += 1

        # A closed terminal or SSH session (SIGHUP) stops the run as SIGTERM does: state saved.
        for signum in (signal.SIGINT, getattr(signal, "SIGTERM", None),
                       getattr(signal, "SIGHUP", None)):
            if signum is not None:
                previous[signum] = signal.signal(signum, handler)
        return previous

    def _restore_signal_handlers(self, previous: dict[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def host_load() -> list[float] | None:
    """The host's load average over 1, 5 and 15 minutes (``None`` where there is none)."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return None


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
    # A line is kept to its first 4 KiB: the tail is for people, and redaction's cost must not
    # follow the length of one enormous output line.
    lines = [line[:4096] for line in text.splitlines()[-STDERR_TAIL_LINES * 4:]]
    return redact_text("\n".join(lines))
