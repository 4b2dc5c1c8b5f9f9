"""The stage worker for ``validate -- COMMAND``: runs the user's command for one stage.

Started by the runner exactly as the protocol worker is (same events, same stop requests, same
hang watchdog, same per-cycle log), it:

- for ``imports``: checks that the program exists and, for a Python program (``python``, or a
  script whose ``#!`` names a Python, such as ``torchrun``), that torch imports in it under the
  stage's environment (and that CUDA answers, on a GPU);
- for the other stages: expands the placeholders (:mod:`.spec`), starts the command in this
  process group with the allocator settings in both variables, ``CUDA_VISIBLE_DEVICES`` for the
  chosen device, ``PYTHONUNBUFFERED=1`` and the hook's ``sitecustomize`` first on
  ``PYTHONPATH``; copies its output into the stage log; turns its per-rank streams and output
  into cycle records (:mod:`.streams`); samples memory from outside (:mod:`.outside`);
- ends it cleanly after the stage's cycles when the command has no ``{cycles}``: the hook
  exits the script after its last step; with cycles from ``--cycle-pattern`` the command's
  processes get SIGTERM after the last matching line (then SIGKILL after a grace period);
- on a stop request (Ctrl-C at the runner, or the runner gone), stops the command the same way.
  Scripts resume at stage granularity: the stage runs again from its start (``{resume}``).

Nothing the command controls can make it wait: the streams folder is made private and opened
before the command starts, and only the regular files in it are read, without blocking
(:class:`~.streams.StreamReader`: a FIFO, a device or a link is skipped and said in the
report); its output is read in chunks by a thread, lines of any length in linear time, into a
stage log capped at :data:`~.output.LOG_MAX_BYTES` (head and tail kept, what was left out
said in the log and the report); output lines, stream records and the end of the output each
get bounded time per poll, so a stop request is acted on within a poll or two, and the stage
ends :data:`OUTPUT_GRACE_S` after the command even if a process it left behind holds its
output.

The OOM retry of protocol workloads does not apply: half a step of someone else's loop cannot be
re-run. An out-of-memory fails the stage, with the allocator's numbers from the message.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from gpu_audit.knowledge.allocator import BOTH_VARS
from gpu_audit.knowledge.oom import oom_kind_of_text, oom_numbers
from gpu_audit.redact import redact_text
from gpu_audit.units import plural, utc_now
from gpu_audit.validate.channels import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    CycleEvents,
    StageFailed,
    StageInterrupted,
)
from gpu_audit.validate.leg import StageLeg
from gpu_audit.validate.script.hook import (
    ENV_EMULATE,
    ENV_PIPE,
    ENV_RESUMED,
    ENV_STAGE_CYCLES,
    ENV_STOP_AFTER,
    ENV_STREAMS,
)
from gpu_audit.validate.script.launch import (
    IMPORT_CHECK,
    INJECT_DIR,
    NOT_PYTHON,
    command_module,
    cuda_visible_devices,
    missing_in_command,
    python_of,
    resolve_program,
    signal_name,
)
from gpu_audit.validate.script.output import (
    ENV_LOG_MAX,
    OutputLines,
    StageLog,
    log_limit,
    run_capped,
)
from gpu_audit.validate.script.outside import OutsideSampler
from gpu_audit.validate.script.processes import (
    CommandProcesses,
    become_subreaper,
    ended_sentence,
    snapshot,
)
from gpu_audit.validate.script.spec import expand
from gpu_audit.validate.script.stacks import describe, order, waiting_line
from gpu_audit.validate.script.streams import (
    SOURCES,
    Cycles,
    StreamFolderError,
    StreamReader,
    open_streams_folder,
)
from gpu_audit.validate.spawn import apply_alloc_conf
from gpu_audit.validate.state import CycleLog, cycles_reached, leg_file, load_records

STOP_GRACE_S = 5.0  # SIGTERM to SIGKILL; within the worker's own grace when orphaned
# Once the command's main process has ended, its output gets this long to end too; then what
# the command left running (a daemon holding the output) is ended with the stage.
LEFTOVER_WAIT_S = 0.5
# How long the output may stay open after that (a process out of gpu-audit's reach holds it):
# then the stage ends without the rest.
OUTPUT_GRACE_S = 5.0
STACKS_WAIT_S = 0.3  # after SIGUSR1 is forwarded: the dumps are written by then
POLL_S = 0.1
LINES_S = 0.25  # output lines handled per poll at most this long (stop requests come first)
QUEUED_LINES = 2048  # lines read and not yet handled; past it the command waits to print
READ_BYTES = 64 * 1024  # the output is read this much at a time, whatever its lines
ALIVE_EVENT_S = 1.0  # output keeps the hang watchdog quiet, told at most this often
TAIL_LINES = 400
TAIL_LINE_CHARS = 4096  # of each line kept for the OOM diagnosis (its messages are shorter)



class ScriptStage(StageLeg):
    def __init__(self, run_dir: Path, leg: str, device: str, attempt: int, events: Any,
                 control: Any) -> None:
        super().__init__(run_dir, leg, device, attempt, events, control)
        self.spec = self.plan.script
        self.warnings: list[str] = []
        self.cycles_done = 0
        self.log: Any = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.output_fd: int | None = None
        self.output_abandoned = False  # the stage ended with the output still open
        self.split = OutputLines()
        self.spill_due = False  # the runner asked for stacks: the log's tail goes out now
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        limit, note = log_limit(os.environ.get(ENV_LOG_MAX))
        if note:
            self.warnings.append(note)
        # The command's output goes to the stage log (this process's stderr) through this.
        self.stage_log = StageLog(sys.stderr.fileno(), limit)
        self.stopping: str | None = None  # why gpu-audit ended the command, if it did
        self.start_marker: dict[str, Any] | None = None  # the stage-start not yet logged
        self.earlier = 0  # how far the stage's earlier attempts got
        self.stop_deadline = float("inf")
        self.processes: CommandProcesses | None = None
        self.sampler: OutsideSampler | None = None
        self.ended: dict[int, dict[str, Any]] = {}  # processes gpu-audit had to end, by pid
        self.usr1_due = False  # the runner asked for stacks: forward SIGUSR1 at the next poll
        self.stacks_at: tuple[float, dict[int, int]] | None = None  # when to read the dumps
        apply_alloc_conf(self.variant.alloc_conf)
        if hasattr(signal, "SIGUSR1"):
            # The runner's "where are you stuck" goes to the command (its Pythons dump their
            # stacks through the hook), not to this supervisor, whose stack says nothing.
            import faulthandler

            faulthandler.unregister(signal.SIGUSR1)
            signal.signal(signal.SIGUSR1, self._forward_usr1)

    # -- the stage ---------------------------------------------------------------------------

    def run_stage(self) -> int:
        try:
            if self.stage.cycles == 0:
                self.events.send({"ev": "ready", **self.ready_info()})
                self.check_imports()
                return self.finish("passed")
            return self.run_command()
        except StageInterrupted:
            return self.finish("interrupted")
        except StageFailed as failed:
            return self.finish("failed", failed.failure, failed.reason, failed.detail)
        finally:
            if self.log is not None:
                self.log.close()
            self.stage_log.close()

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        apply_alloc_conf(self.variant.alloc_conf, env)
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != INJECT_DIR]
        env["PYTHONPATH"] = os.pathsep.join([INJECT_DIR, *paths])
        env["PYTHONUNBUFFERED"] = "1"
        visible = cuda_visible_devices(self.device, env.get("CUDA_VISIBLE_DEVICES"))
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        return env

    def ready_info(self, env: dict[str, str] | None = None) -> dict[str, Any]:
        env = env or self.environment()
        return {"pid": None, "python": sys.version.split()[0], "device": self.device,
                "alloc_env": {name: env.get(name) for name in BOTH_VARS},
                "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
                "memory_budget_bytes": self.plan.emulate_memory_bytes,
                "memory_fraction": None, "allocator_settings": None, "torch_version": None,
                "script": True, "warnings": self.warnings}

    def check_imports(self) -> None:
        env = self.environment()
        argv = self.command()
        program = resolve_program(argv[0], env, self.plan.workload_paths[0])
        if program is None:
            raise StageFailed("import", f"the command's program {argv[0]!r} was not found (not "
                              "on PATH, or not executable)")
        missing = missing_in_command(self.spec.command, env, self.plan.workload_paths[0])
        if missing is not None:
            raise StageFailed("import", f"the command cannot run: {missing}")
        python = python_of(program)
        if python is None:
            self.warnings.append(f"{argv[0]} {NOT_PYTHON}: the imports stage checked "
                                 "that it exists; telemetry comes from outside it (NVML, RSS, "
                                 "swap) and from its output")
            return
        self.phase("import-torch")
        kind = "cuda" if self.device.startswith("cuda") else "cpu"
        try:
            module = command_module(self.spec.command, program)
            done = run_capped([python, "-c", IMPORT_CHECK, kind, *filter(None, [module])],
                              env=env, timeout=self.plan.startup_timeout_s,
                              cwd=self.plan.workload_paths[0])
        except subprocess.TimeoutExpired:
            raise StageFailed("import", f"importing torch in {python} took longer than "
                              f"{self.plan.startup_timeout_s:g} s") from None
        except OSError as exc:
            raise StageFailed("import", f"cannot run {python}: {exc}") from None
        sys.stderr.write(done.stdout + done.stderr)
        line = next((ln for ln in done.stdout.splitlines()
                     if ln.startswith("GPU-AUDIT-IMPORTS ")), None)
        if done.returncode != 0 or line is None:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            failure = "cuda" if kind == "cuda" and "import torch" not in done.stderr \
                and "ModuleNotFoundError" not in done.stderr else "import"
            what = "torch does not import" + (" or CUDA does not work" if kind == "cuda" else "")
            raise StageFailed(failure, f"{what} in {python} (the command's Python): "
                              f"{redact_text(last)}", {"traceback": done.stderr[-4000:]})
        import json

        info = json.loads(line.split(" ", 1)[1])
        if info.pop("module_found", True) is False:
            raise StageFailed("import", f"the command cannot run: the module {module!r} it runs "
                              f"with -m was not found by {python} (in "
                              f"{self.plan.workload_paths[0]})")
        self.events.send({"ev": "ready", **self.ready_info(env), **info})

    def command(self, batch: int | None = None) -> list[str]:
        scratch = self.run.scratch_dir(self.leg)
        scratch.mkdir(parents=True, exist_ok=True)
        return expand(self.spec, stage=self.stage.name, cycles=self.stage.cycles,
                      quantum=self.stage.quantum, run_dir=str(scratch.resolve()),
                      resumed=self.attempt > 1, batch=batch)

    # -- a stage with cycles -----------------------------------------------------------------

    def run_command(self) -> int:
        """The stage; with a ``{batch}`` placeholder, again at half the batch after an
        out-of-memory (up to ``--max-retries`` times), each time from the stage's start."""
        batch = self.spec.batch
        retries: list[dict[str, Any]] = []
        while True:
            try:
                return self.run_once(batch, retries)
            except StageFailed as failed:
                if failed.failure != "oom" or batch is None:
                    raise
                entry = {"attempt": len(retries) + 1, "kind": failed.detail.get("kind"),
                         "message": failed.reason, "batch": batch,
                         "batch_scale": batch / (self.spec.batch or batch), "delay_s": 0.0,
                         "memory": failed.detail.get("memory") or {}, "gave_up": False}
                if batch <= 1 or len(retries) >= self.plan.max_retries:
                    entry["gave_up"] = True
                    failed.detail["retries"] = [*retries, entry]
                    failed.reason += (f", at batch {batch} after {len(retries)} halving(s) of "
                                      f"{{batch}} from {self.spec.batch}")
                    raise
                retries.append(entry)
                batch = max(1, batch // 2)
                self.warnings.append(f"the command ran out of memory at batch {entry['batch']}; "
                                     f"the stage ran again from its start at batch {batch}")
                if self.log is not None:
                    self.log.close()
                self.proc, self.stopping, self.cycles_done = None, None, 0
                self.tail.clear()

    def run_once(self, batch: int | None, retries: list[dict[str, Any]]) -> int:
        env = self.environment()
        argv = self.command(batch)
        folder = f"attempt-{self.attempt}" + (f"-retry-{len(retries)}" if retries else "")
        streams = self.run.path / "streams" / leg_file(self.leg) / folder
        streams.parent.mkdir(parents=True, exist_ok=True)
        reader = StreamReader(self.open_streams(streams))
        env[ENV_STREAMS] = str(streams)
        stop_after = None if self.spec.counts_its_cycles else self.stage.cycles
        if stop_after is not None:
            env[ENV_STOP_AFTER] = str(stop_after)
        env[ENV_STAGE_CYCLES] = str(self.stage.cycles)
        if self.attempt > 1:
            env[ENV_RESUMED] = "1"
        if self.plan.emulate_memory_bytes and self.device.startswith("cuda"):
            env[ENV_EMULATE] = str(self.plan.emulate_memory_bytes)
        elif self.plan.emulate_memory_bytes:
            self.warnings.append("--emulate-memory applies to GPUs only; the CPU run is not "
                                 "capped")
        self.log = CycleLog(self.run.cycles_path)
        self.earlier = cycles_reached(load_records(self.run.cycles_path).get(self.leg, []))
        # Logged with the first cycle, which says where the command started (a script that
        # resumes itself starts past 0), or as the command ends without one.
        self.start_marker = {"type": "stage-start", "leg": self.leg, "from_cycle": 0,
                             "attempt": self.attempt, "at": utc_now(),
                             "command": redact_text(" ".join(argv))}
        print(f"gpu-audit: running {redact_text(' '.join(argv))}", file=sys.stderr, flush=True)
        output, writer = os.pipe()  # its identity tells the hook where markers may go
        info = os.fstat(writer)
        env[ENV_PIPE] = f"{info.st_dev}:{info.st_ino}"
        subreaper = become_subreaper()  # what the command orphans stays in reach
        existing = snapshot()  # never the command's, whatever a registration says
        try:
            self.proc = subprocess.Popen(argv, env=env, cwd=self.plan.workload_paths[0],
                                         stdin=subprocess.DEVNULL, stdout=writer,
                                         stderr=writer)
        except OSError as exc:
            os.close(output)
            reader.close()
            raise StageFailed("error", f"cannot start the command {argv[0]!r}: "
                              f"{exc.strerror or exc}") from None
        finally:
            os.close(writer)
        self.output_fd = output
        self.output_abandoned = False
        self.split = OutputLines()
        began = time.monotonic()
        ready = self.ready_info(env) | {"pid": self.proc.pid,
                                        "command": redact_text(" ".join(argv))}
        self.events.send({"ev": "ready", **ready})
        self.events.send({"ev": "started", "from_cycle": 0, "planned": self.stage.cycles})
        self.phase("cycles")
        self.processes = CommandProcesses(self.proc.pid, reader.fd, subreaper, existing)
        program = resolve_program(argv[0], env, self.plan.workload_paths[0])
        python = program is not None and python_of(program) is not None
        sampler = OutsideSampler(self.proc.pid, nvml=self.device.startswith("cuda"),
                                 processes=self.processes, code_started=not python).start()
        self.sampler = sampler
        scale = batch / self.spec.batch if batch and self.spec.batch else 1.0
        base = {"type": "cycle", "leg": self.leg, "variant": self.variant_label,
                "stage": self.stage.name, "attempt": self.attempt, "batch_scale": scale,
                "oom_retries": []}
        progress = CycleEvents(self.events)
        unlogged = list(retries)  # the first record of a re-run carries the OOMs before it

        def emit(record: dict[str, Any]) -> None:
            if stop_after is not None and record["cycle"] >= stop_after:
                return  # printed before the SIGTERM landed: past the stage's cycles
            if record.get("whole_stage") and self.proc.returncode != 0:  # type: ignore[union-attr]
                return  # a command that failed before its first cycle did no cycle
            self.open_stage(cycles.resumed)
            record = {**record, "ended_at": utc_now(precise=True)}
            if unlogged:
                record["oom_retries"] = list(unlogged)
                unlogged.clear()
            self.log.append(record)
            self.cycles_done = max(self.cycles_done, record["cycle"] + 1)
            # The hang limit follows the cycles' own times: a first cycle that includes the
            # command's start-up (imports, data loading) does not count.
            elapsed = 0.0 if record.get("first_includes_startup") else record.get("cycle_s")
            progress.cycle_done(record, elapsed or 0.0,
                                last=self.cycles_done == self.stage.cycles)
            if stop_after is not None and cycles.source == "pattern" \
                    and cycles.written + 1 >= stop_after and not self.stopping:
                self.stopping = f"stopped by gpu-audit after {stop_after} cycles (SIGTERM " \
                                "after the last matching output line)"
                self.terminate()

        def restart(reason: str) -> None:
            self.open_stage(None)
            self.log.supersede(self.leg, {"type": "stage-start", "leg": self.leg,
                                          "from_cycle": 0, "attempt": self.attempt,
                                          "at": utc_now(), "reason": reason})
            self.cycles_done = 0

        cycles = Cycles(base, cycle_pattern=self.spec.cycle_pattern, metrics=self.spec.metrics,
                        emit=emit, restart=restart, outside=sampler.current, started=time.time())
        try:
            self.watch(cycles, reader, ready)
        finally:
            sampler.stop()
            self.stop_command()
            # The highest of the Pythons' own peaks: not their sum, which processes that ran
            # one after the other (a data loader's workers, epoch after epoch) would inflate.
            sampler.take_peak("rss_bytes", max(self.processes.rss_peaks().values(), default=0))
            reader.close()
        self.warnings.extend(reader.notes())
        if (long_lines := self.split.note()) is not None:
            self.warnings.append(long_lines)
        duration = time.monotonic() - began
        whole = cycles.finish(duration, sampler.peaks)
        self.open_stage(None)  # the command ended without a cycle
        if sampler.nvml_note:
            self.warnings.append(sampler.nvml_note)
        return self.outcome(cycles, whole, stop_after)

    def open_stage(self, resumed: tuple[int, str] | None) -> None:
        """Log the stage's start once: from the cycle a script that resumed itself started at
        (the earlier attempt's records before it stay, those from it on go), else from 0."""
        if self.start_marker is None:
            return
        marker, self.start_marker = self.start_marker, None
        if resumed is not None:
            at, how = resumed
            marker.update(from_cycle=at, resumed_from=how)
            self.cycles_done = at
            self.warnings.append(f"the command resumed itself at cycle {at} (from {how}): the "
                                 f"{plural(at, 'cycle')} before it count as done, and the stage "
                                 f"passes when it reaches cycle {self.stage.cycles}")
            self.events.send({"ev": "started", "from_cycle": at, "planned": self.stage.cycles})
        self.log.supersede(self.leg, marker)

    def infer_resume(self) -> None:
        """A command told the stage's length (``{cycles}``) and resumed by ``{resume}`` that
        ended cleanly short of it, where the hook read no start (an optimizer without a step
        count, no counter loaded): it resumed at the length less the cycles it ran, if the
        stage had got that far before. Its cycles are numbered from there."""
        start = self.stage.cycles - self.cycles_done
        if not (self.attempt > 1 and self.spec.counts_its_cycles and self.cycles_done
                and any("{resume}" in word for word in self.spec.command)
                and 0 < start <= self.earlier):
            return
        self.log.renumber(self.leg, self.attempt, start)
        self.cycles_done = self.stage.cycles
        self.warnings.append(
            f"the command resumed itself at cycle {start} (inferred: given {{cycles}} = "
            f"{self.stage.cycles}, it ran {plural(self.stage.cycles - start, 'cycle')} and "
            f"exited 0, and an earlier attempt had reached cycle {self.earlier}; its optimizer "
            "holds no step count and it loaded no step counter): the cycles before it count "
            "as done")

    def open_streams(self, path: Path) -> int | None:
        """The streams folder's descriptor (see :func:`open_streams_folder`); ``None``, with a
        warning, when it is not a folder gpu-audit may read from."""
        try:
            return open_streams_folder(path)
        except StreamFolderError as exc:
            self.warnings.append(f"the telemetry streams folder {path} was not read ({exc}): "
                                 "cycles come from the output only")
            return None

    def watch(self, cycles: Cycles, reader: StreamReader, ready: dict[str, Any]) -> None:
        """Until the command has ended and its output with it. Never waits on the command:
        its output is read by a thread, its streams without blocking, a stop request is seen
        within a poll however much it prints."""
        lines: queue.Queue[tuple[float, str] | None] = queue.Queue(maxsize=QUEUED_LINES)
        threading.Thread(target=self._read_output, args=(lines,), daemon=True).start()
        told_device = False
        output_done = False
        leftovers_ended = False
        ended_at: float | None = None
        while True:
            if self.control.stop.is_set() and not self.stopping:
                self.stopping = "interrupted"
                self.terminate()
            if self.stopping and time.monotonic() > self.stop_deadline:
                self.kill_tree()  # it did not stop within the grace period
            if self.spill_due:
                self.spill_due = False
                self.stage_log.spill()
            if self.usr1_due:
                self.usr1_due = False
                self._forward_stacks_request()
            if self.stacks_at is not None and time.monotonic() >= self.stacks_at[0]:
                self._report_stacks(self.stacks_at[1])
                self.stacks_at = None
            if self.processes and self.processes.read_registrations() and self.sampler:
                self.sampler.code_started()
            # One wake-up per POLL_S, however fast the command prints: the supervisor shares
            # the machine with the script it measures.
            time.sleep(POLL_S)
            self.stage_log.flush()
            output_done = self._take_lines(lines, cycles, output_done)
            for stem, record in reader.records():
                cycles.stream(stem, record, time.monotonic())
            cycles.flush(time.monotonic())
            if cycles.device and not told_device:
                told_device = True
                self.events.send({"ev": "ready", **self._device_ready(ready, cycles)})
            if self.proc.poll() is None:
                continue
            ended_at = ended_at or time.monotonic()
            if not output_done and time.monotonic() - ended_at > LEFTOVER_WAIT_S \
                    and not leftovers_ended:
                # The main process has ended; a process it left holds the output open.
                leftovers_ended = True
                self._note_ended(self.processes.end(STOP_GRACE_S))
                ended_at = time.monotonic()
            if output_done or time.monotonic() - ended_at > OUTPUT_GRACE_S:
                if not output_done:
                    self.output_abandoned = True
                    self.warnings.append(
                        f"the command's output was still open {OUTPUT_GRACE_S:g} s after it "
                        "ended (a process it started holds it): the stage ended without the "
                        "rest")
                for stem, record in reader.records(final=True):
                    cycles.stream(stem, record, time.monotonic())
                return

    def _take_lines(self, lines: queue.Queue[tuple[float, str] | None], cycles: Cycles,
                    done: bool) -> bool:
        """The output lines read so far, for at most :data:`LINES_S`; whether the output has
        ended (all its lines taken)."""
        until = time.monotonic() + LINES_S
        while not done and time.monotonic() < until:
            try:
                item = lines.get_nowait()
            except queue.Empty:
                break
            if item is None:
                done = True
            else:
                cycles.line(item[1], item[0])
        return done

    def _read_output(self, lines: queue.Queue[tuple[float, str] | None]) -> None:
        """The command's output, a chunk at a time: into the stage log (capped), its lines
        (their first bytes: see :mod:`.output`) to the main loop and to the tail kept for the
        diagnosis."""
        fd = self.output_fd
        assert fd is not None
        split = self.split
        alive_at = 0.0
        try:
            while True:
                try:
                    data = os.read(fd, READ_BYTES)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not data:
                    break
                now = time.monotonic()
                if self._pass_on(*split.feed(data), lines) and now - alive_at >= ALIVE_EVENT_S:
                    alive_at = now
                    self.events.send({"ev": "output"})  # keeps the hang watchdog waiting
            self._pass_on(*split.finish(), lines)
        finally:
            self._put(lines, None)
            with contextlib.suppress(OSError):
                os.close(fd)

    def _pass_on(self, log: bytes, found: list[tuple[str, bool]],
                 lines: queue.Queue[tuple[float, str] | None]) -> bool:
        """Whether the command printed something (not only markers)."""
        self.stage_log.write(log)
        read_at = time.time()  # the hook's clock: lines are placed between cycles by it
        for text, is_marker in found:
            if not is_marker:
                self.tail.append(text[:TAIL_LINE_CHARS])
            self._put(lines, (read_at, text))
        return bool(log)

    def _put(self, lines: queue.Queue[tuple[float, str] | None],
             item: tuple[float, str] | None) -> None:
        """Onto the queue, waiting while it is full (the command then waits to print), unless
        the stage has ended."""
        while not self.output_abandoned:
            try:
                lines.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def _device_ready(self, ready: dict[str, Any], cycles: Cycles) -> dict[str, Any]:
        device = cycles.device or {}
        hello = next(iter(cycles.hello.values()), {})
        return {**ready, "torch_version": hello.get("torch_version"),
                "torch_cuda": hello.get("torch_cuda"), "device_name": device.get("name"),
                "total_memory_bytes": device.get("total_memory_bytes"),
                "allocator_settings": device.get("allocator_settings"),
                "allocator_backend": device.get("allocator_backend"),
                "memory_fraction": device.get("memory_fraction")}

    # -- how it ended ------------------------------------------------------------------------

    def outcome(self, cycles: Cycles, whole: dict[str, Any] | None,
                stop_after: int | None) -> int:

        code = self.proc.returncode  # type: ignore[union-attr]
        source = cycles.source
        ranks = cycles.ranks_seen
        if len(ranks) > 1:
            self.warnings.append(f"{len(ranks)} processes reported cycles ({', '.join(ranks)}); "
                                 f"the cycle records follow {cycles.primary}, the others' "
                                 "figures are under 'ranks'")
        if source is not None:
            self.warnings.append(f"cycles counted from {SOURCES[source]}")
        if self.stopping == "interrupted":
            raise StageInterrupted()
        tail = "\n".join(self.tail)
        stopped = self.stopping is not None or cycles.stopped_by_hook
        if stopped and stop_after is not None:
            self.warnings.append(f"the command has no {{cycles}} placeholder: gpu-audit ended "
                                 f"it after the stage's {stop_after} cycles, between two steps")
        ended_by_us = self.stopping is not None and self.cycles_done >= self.stage.cycles
        if code != 0 and not ended_by_us:
            kind = oom_kind_of_text(tail)
            how = (f"was killed by signal {signal_name(-code)}" if code < 0
                   else f"exited with code {code}")
            detail: dict[str, Any] = {"returncode": code, "cycles_done": self.cycles_done}
            done = f"{self.cycles_done} cycle{'' if self.cycles_done == 1 else 's'}"
            if kind is not None:
                detail.update({"kind": kind, "memory": oom_numbers(tail), "script": True})
                raise StageFailed("oom", f"the command ran out of memory ({kind}) after {done} "
                                  f"and {how}", detail)
            raise StageFailed("crash" if code < 0 else "error",
                              f"the command {how} after {done}", detail)
        if whole is not None:
            self.warnings.append("no cycle was seen (no gpu_audit.monitor.step(), no optimizer "
                                 "step, no line matching --cycle-pattern): the stage was "
                                 "judged as a whole, on its exit code, its output and the "
                                 "memory sampled from outside")
            return self.finish("passed", whole_stage=True)
        if self.cycles_done < self.stage.cycles and cycles.resumed is None:
            self.infer_resume()
        if self.cycles_done < self.stage.cycles:
            raise StageFailed("error", f"the command ended (exit code {code}) after "
                              f"{self.cycles_done} of {self.stage.cycles} cycles, counted from "
                              f"{SOURCES[source or 'pattern']}; if one cycle of your script is "
                              "not one optimizer step, call gpu_audit.monitor.step() once per "
                              "cycle or pass --cycle-pattern REGEX",
                              {"returncode": code, "cycles_done": self.cycles_done})
        return self.finish("passed")

    def terminate(self) -> None:
        """SIGTERM to every process of the command (see :mod:`.processes`): its tree, the
        Pythons it started wherever they are now, the sessions it created."""
        if self.processes is not None:
            main = self.proc.pid if self.proc is not None else None
            ended = self.processes.terminate(exclude=main)
            if self.stopping == "interrupted":
                # Stopped whole (a hang, Ctrl-C): what else of the command ran is listed; the
                # stop after a stage's cycles is the command's planned end, not listed.
                self._note_ended(ended)
        self.stop_deadline = time.monotonic() + STOP_GRACE_S

    def _forward_usr1(self, signum: int, frame: Any) -> None:
        # Only flags: the handler may interrupt the main loop anywhere (inside a lock too).
        self.spill_due = True  # the stacks that follow must reach the log file
        self.usr1_due = True

    def _forward_stacks_request(self) -> None:
        """SIGUSR1 to every process of the command: each Python the hook runs in writes its
        stacks into its registration file, read :data:`STACKS_WAIT_S` later."""
        if self.processes is None:
            return
        offsets = self.processes.stack_offsets()
        self.processes.send(signal.SIGUSR1)
        self.stacks_at = (time.monotonic() + STACKS_WAIT_S, offsets)

    def _report_stacks(self, offsets: dict[int, int]) -> None:
        """The dumps into the stage log, by rank; each main thread's waiting line to the runner
        (a ``stacks`` event: the hang finding names them)."""
        assert self.processes is not None
        dumps = self.processes.stacks_since(offsets)
        lines = []
        for dump in dumps:
            who = f"rank {dump['rank']}" if dump["rank"] is not None else "process"
            self.stage_log.write(f"\n--- gpu-audit: stacks of {who} (pid {dump['pid']}) ---\n"
                                 f"{dump['text']}\n".encode("utf-8", "replace"))
            line = waiting_line(dump["text"])
            if line["where"]:
                lines.append({"pid": dump["pid"], "rank": dump["rank"], **line})
        self.stage_log.flush()
        lines = order(lines)
        if lines:
            print("gpu-audit: the command's main threads wait at: "
                  + "; ".join(describe(entry) for entry in lines), file=sys.stderr, flush=True)
        self.events.send({"ev": "stacks", "processes": lines[:64]})

    def kill_tree(self) -> None:
        """SIGKILL to every process of the command still there after the grace period."""
        if self.processes is not None:
            self._note_ended(self.processes.kill(exclude=self.proc.pid if self.proc else None))
            if self.proc is not None:
                with contextlib.suppress(OSError):
                    self.proc.kill()

    def stop_command(self) -> None:
        """The command and whatever it left behind are gone when the stage ends: its main
        process is stopped (if still running), then every process of it still there gets
        SIGTERM, then SIGKILL; those are listed in the report."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if not self.stopping:
                self.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=STOP_GRACE_S)
            if self.proc.poll() is None:
                self.kill_tree()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=STOP_GRACE_S)
        if self.processes is not None:
            self._note_ended(self.processes.end(STOP_GRACE_S))
        if self.ended:
            ended = sorted(self.ended.values(), key=lambda e: e["pid"])
            self.warnings.append(ended_sentence(ended))

    def _note_ended(self, entries: list[dict[str, Any]]) -> None:
        for entry in entries:
            self.ended[entry["pid"]] = entry

    # -- helpers -----------------------------------------------------------------------------

    def phase(self, name: str) -> None:
        self.events.send({"ev": "phase", "phase": name})

    def finish(self, status: str, failure: str | None = None, reason: str | None = None,
               detail: dict[str, Any] | None = None, whole_stage: bool = False) -> int:
        self.stage_log.settle()
        if (capped := self.stage_log.note()) is not None:
            self.warnings.append(capped)
        self.events.send({"ev": "done", "status": status, "failure": failure, "reason": reason,
                          "detail": detail or {}, "cycles_done": self.cycles_done,
                          "warnings": self.warnings, "whole_stage": whole_stage,
                          "script": True, "ended_processes": sorted(
                              self.ended.values(), key=lambda e: e["pid"])})
        if reason:
            print(f"gpu-audit worker: stage {self.leg} {status}: {reason}", file=sys.stderr)
        return {"passed": EXIT_PASSED, "interrupted": EXIT_INTERRUPTED}.get(status, EXIT_FAILED)
