"""Inside the user's script: count its cycles, measure each, stop it when the stage is done.

``gpu-audit validate -- COMMAND`` puts a ``sitecustomize`` on ``PYTHONPATH``
(:mod:`gpu_audit.validate.script.inject`) that calls :func:`install` when any Python of the
command starts: the script itself, ``torchrun``'s or ``accelerate``'s workers, and
``multiprocessing`` children, since they inherit the environment. Nothing happens until one of
two modules is imported (a watcher on ``sys.meta_path`` waits for them):

- ``torch``: a global optimizer step post-hook is registered (torch >= 2.0) and, with
  ``--emulate-memory``, the per-process memory fraction is queued to apply as CUDA initialises,
  so before the script's first allocation;
- ``gpu_audit.monitor.api``: ``monitor.step()`` calls reach :meth:`Hook.on_monitor_step`.

A cycle is a ``monitor.step()`` when the script calls it, else a step of the first optimizer
that steps (a second optimizer, as in a GAN, does not count twice). Each cycle appends one JSON
line to this process's stream, ``<streams>/rank-<RANK>.jsonl`` (``pid-<pid>.jsonl`` without a
rank), which the script supervisor reads: the cycle's wall time, host RSS and, once CUDA is
initialised, the allocator's figures. Those are read at most once per :data:`CUDA_SAMPLE_S`
(``GPU_AUDIT_SCRIPT_CUDA_SAMPLE_MS``), and always on the first cycle, on the last one of a stop
count and, for the cycles since the last read, as the process exits (an uncaught exception or
out-of-memory included): each read resets the allocator's peak counters, so a read's peaks are
the highest since the one before, and its retry and OOM counts all those since then; no peak
falls between two reads. A cycle without a read carries no CUDA figures.

With a stop count, the hook ends the process cleanly (``SystemExit(0)``) once that many cycles
are done: in the last ``monitor.step()``, or as the next counted optimizer step starts (its
pre-hook), so the whole last step has run (an LBFGS step's closure evaluations included) and so
has the script's code after it until the next step (its evaluation, its prints, the files it
writes); no collective is in flight and no further update happens: between two steps, never
inside one.

A script that resumes itself (from its own checkpoint) starts at the step it saved: on the first
optimizer step the hook reads where that is, and numbers its cycles from there, so that the
cycles it skips because it already did them count (``docs/validate-scripts.md``). In order:
the optimizer's own step count (``optimizer.state[p]["step"]`` of Adam-like optimizers, as
``load_state_dict`` restored it), then, on a later attempt of the stage only, a step counter
in a dictionary the script loaded with ``torch.load`` (``iter_num``, ``global_step``, ...,
or its LR scheduler's ``last_epoch``). A start at or past the stage's length is not one.

Each Python of the command registers itself as it starts: ``<streams>/proc-<pid>.txt`` gets one
JSON line (pid, parent, process group, session, rank, start time), so the supervisor can end
every process the command started with the stage, wherever it moved (a torchrun rank in a
session of its own, a daemon whose parent is gone). SIGUSR1 dumps every thread's stack into that
same file (unless the script handles SIGUSR1 itself): the supervisor copies the dumps into the
stage log by rank and names the line each rank's main thread waits on. As the process exits, a
last JSON line gives its peak resident memory (``ru_maxrss``), so a run too short for the
sampling from outside still reports its true peak.

Cheap and harmless by design: standard library only until a cycle needs torch's figures, no
thread, one ``write`` per cycle (two with the output marker), and for very fast steps a CUDA
read only every few of them. Any failure is reported once on
stderr, then the hook stays quiet and the script runs on.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

ENV_STREAMS = "GPU_AUDIT_SCRIPT_STREAMS"  # folder for the per-rank streams; unset: no hook
ENV_STOP_AFTER = "GPU_AUDIT_SCRIPT_STOP_AFTER"  # cycles after which to end the process
ENV_EMULATE = "GPU_AUDIT_SCRIPT_EMULATE_BYTES"  # --emulate-memory, in bytes
ENV_PIPE = "GPU_AUDIT_SCRIPT_PIPE"  # "<st_dev>:<st_ino>" of the supervisor's output pipe
ENV_SAMPLE_MS = "GPU_AUDIT_SCRIPT_CUDA_SAMPLE_MS"  # at most one CUDA read per this many ms
ENV_STAGE_CYCLES = "GPU_AUDIT_SCRIPT_STAGE_CYCLES"  # the stage's length (a resume starts below)
ENV_RESUMED = "GPU_AUDIT_SCRIPT_RESUMED"  # "1" on a later attempt of the stage
# The step counters a checkpoint dictionary may hold, as training scripts name them: the index
# of the next step (or of the last one done: a cycle's difference either way).
COUNTER_KEYS = ("iter_num", "global_step", "step", "iteration", "iter", "num_steps", "steps")
SCHEDULER_KEYS = ("scheduler", "lr_scheduler", "sched")
CUDA_SAMPLE_S = 0.05  # the default: slower steps are all read, faster ones every ~50 ms
MARKER = "\x1egpu-audit-cycle "  # a cycle's end in the output (the supervisor strips it)
PREFIX = "gpu-audit validate hook"
PROC_PREFIX = "proc-"  # <streams>/proc-<pid>.txt: a Python's registration and stack dumps
PROC_SUFFIX = ".txt"

_hook: Hook | None = None


class Hook:
    def __init__(self, folder: str, stop_after: int | None, emulate_bytes: int | None,
                 sample_s: float = CUDA_SAMPLE_S, stage_cycles: int | None = None,
                 resumed: bool = False) -> None:
        self.folder = folder
        self.stage_cycles = stage_cycles
        self.resumed = resumed
        self.loaded: tuple[int, str] | None = None  # a step counter the script loaded
        self.sample_s = sample_s
        self.clock = time.perf_counter
        self.stop_after = stop_after
        self.emulate_bytes = emulate_bytes
        self.disabled = False
        self.memory_fraction: float | None = None
        self.torch: Any = None
        self.stopped = False
        self.cuda_sample: Any = None
        self.dumps: Any = None
        self._reset(time.perf_counter())

    def _reset(self, began: float) -> None:
        self.pid = os.getpid()
        self.fd: int | None = None
        self.name = ""
        self.marks: str | None = None
        self.source: str | None = None
        self.count = 0
        self.first = True  # the next cycle is this process's first
        self.resume_note = ""  # what said where the script resumed (with count > 0)
        self.stop_pending = False  # (a forked child must not inherit a pending stop)
        self.optimizer: int | None = None
        self.last = began
        self.retries_seen = self.ooms_seen = 0
        self.cuda_seen = False
        self.sampled_at: float | None = None  # the last CUDA read (self.clock)
        self.unread: int | None = None  # the last cycle whose CUDA figures no read has taken
        self.statm: int | None = None
        self.page_size = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

    # -- what the script's steps call --------------------------------------------------------

    def on_optimizer_step(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        if self.disabled or self.source == "monitor":
            return
        if os.getpid() != self.pid:  # a forked child trains on its own: a stream of its own
            self._reset(time.perf_counter())
        if self.optimizer is None:
            self.optimizer = id(optimizer)
        elif id(optimizer) != self.optimizer:
            return
        if self.source is None:
            self._resume_at(optimizer)
        self.source = "optimizer"
        self._cycle(1)

    def _resume_at(self, optimizer: Any) -> None:
        """Number the cycles from where the script resumed itself (see the module's
        docstring); the first record says where and from what."""
        try:
            found = _resumed_from(optimizer, self.loaded if self.resumed else None)
        except Exception:
            return
        if found is not None and 0 < found[0] < (self.stage_cycles or 2**62):
            self.count, self.resume_note = found

    def on_monitor_step(self, n: int = 1) -> None:
        if self.disabled:
            return
        if os.getpid() != self.pid:
            self._reset(time.perf_counter())
        if self.source != "monitor":
            # monitor.step() outranks optimizer steps: count again from the first cycle.
            self.source, self.count = "monitor", 0
        self._cycle(n)

    # -- a cycle ------------------------------------------------------------------------------

    def _cycle(self, n: int) -> None:
        try:
            now = time.perf_counter()
            record = {"n": self.count, "src": self.source, "t": time.time(),
                      "cycle_s": round(now - self.last, 6), "rss_bytes": self._rss()}
            if self.first:
                self.first = False
                record["first"] = True  # its time includes the script's start-up
                if self.count:
                    record["resumed_at"], record["resumed_from"] = self.count, self.resume_note
            self.last = now
            last = self.stop_after is not None and self.count + n >= self.stop_after
            self._cuda(record, force=last)
            self._write(record)
            if self.marks:
                os.write(1, (self.marks % (self.source, self.count)).encode())
        except Exception as exc:
            self.fail(exc)
            return
        self.count += n
        if self.stop_after is not None and self.count >= self.stop_after:
            if self.source == "monitor":
                self.stop()  # monitor.step() closes the cycle: nothing of it is left to run
            else:
                # The rest of this cycle runs first (an evaluation after the step, its prints,
                # its files, forwards included): the process ends as the next step starts.
                self.stop_pending = True

    def before_optimizer_step(self, optimizer: Any, args: Any = None, kwargs: Any = None
                              ) -> None:
        if self.stop_pending and id(optimizer) == self.optimizer and os.getpid() == self.pid \
                and self.source == "optimizer":
            self.stop()

    def stop(self) -> None:
        """End the process cleanly, between two cycles: the script unwinds (its ``finally``
        blocks and ``atexit`` handlers run) and exits 0."""
        with _suppress():
            self._write({"ev": "stop", "n": self.count})
        self.stopped = True
        raise SystemExit(0)

    def after_exit_handlers(self) -> None:
        """The last ``atexit`` handler (registered first): after a stop, leave without the
        interpreter's final teardown. The script's loop was left by an exception whose frames
        keep its objects alive until then, and destroying a live process group or data-loader
        threads at that point can abort the process (``terminate called without an active
        exception``), which would turn a clean stop into a crash."""
        if self.stopped and os.getpid() == self.pid:
            for stream in (sys.stdout, sys.stderr):
                with _suppress():
                    stream.flush()
            os._exit(0)

    def _rss(self) -> int | None:
        if self.statm is None:
            try:
                self.statm = os.open("/proc/self/statm", os.O_RDONLY)
            except OSError:
                return None
        try:
            return int(os.pread(self.statm, 256, 0).split()[1]) * self.page_size
        except (OSError, ValueError, IndexError):
            return None

    def _cuda(self, record: dict[str, Any], force: bool = False) -> None:
        """The allocator's figures into ``record`` when they are due (see the module's
        docstring): ``force`` on a stop count's last cycle."""
        torch = self.torch
        if torch is None or not torch.cuda.is_initialized():
            return
        now = self.clock()
        if not (force or not self.cuda_seen or self.sampled_at is None
                or now - self.sampled_at >= self.sample_s):
            self.unread = record["n"]
            return
        self.sampled_at = now
        self.unread = None
        if self.cuda_sample is None:
            # Loaded on the first CUDA sample: the hook runs in the user's process and stays light.
            from gpu_audit.validate.telemetry import cuda_sample

            self.cuda_sample = cuda_sample
        device = torch.cuda.current_device()
        sample, self.retries_seen, self.ooms_seen = self.cuda_sample(
            torch, device, self.retries_seen, self.ooms_seen)
        torch.cuda.reset_peak_memory_stats(device)  # the next record's peaks are its own
        record.update(sample)
        if not self.cuda_seen:
            self.cuda_seen = True
            record["device"] = _device_facts(torch, device)
            record["device"]["memory_fraction"] = self.memory_fraction

    def read_unread(self) -> None:
        """As the process exits (an ``atexit`` handler): the CUDA figures of the cycles since
        the last read, as an ``{"ev": "cuda", "n": <last cycle>}`` record the supervisor adds to
        that cycle, so the peaks of a run's last moments (or of the step that raised) count."""
        if self.unread is None or self.disabled or os.getpid() != self.pid:
            return
        with _suppress():
            record: dict[str, Any] = {"ev": "cuda", "n": self.unread}
            self._cuda(record, force=True)
            if len(record) > 2:
                self._write(record)

    def _write(self, record: dict[str, Any]) -> None:
        if self.fd is None:
            import json

            self.dumps = json.JSONEncoder(separators=(",", ":"), default=str).encode
            self.fd = self._open()
            self.marks = self._marker_format()
            self._write({"ev": "hello", **_identity(self.torch)})
        os.write(self.fd, self.dumps(record).encode() + b"\n")

    def _open(self) -> int:
        rank = os.environ.get("RANK")
        self.name = f"rank-{int(rank)}" if rank and rank.isdigit() else f"pid-{os.getpid()}"
        os.makedirs(self.folder, exist_ok=True)
        return os.open(os.path.join(self.folder, self.name + ".jsonl"),
                       os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def _marker_format(self) -> str | None:
        """Cycle markers go to stdout only when it is the supervisor's own pipe: a program
        that captures a child's output (and parses it) never sees one."""
        try:
            info = os.fstat(1)
        except OSError:
            return None
        if f"{info.st_dev}:{info.st_ino}" != os.environ.get(ENV_PIPE):
            return None
        return f"{MARKER}{self.name} %s %d\n"

    def fail(self, exc: BaseException) -> None:
        if not self.disabled:
            self.disabled = True
            print(f"{PREFIX}: disabled after an error ({type(exc).__name__}: {exc}); the script "
                  "runs on without per-cycle telemetry", file=sys.stderr, flush=True)

    # -- when modules arrive ------------------------------------------------------------------

    def on_torch(self, torch: Any) -> None:
        self.torch = torch
        import importlib

        optimizer = importlib.import_module("torch.optim.optimizer")
        # torch < 2.0 has none: cycles then come from monitor.step() or the output only.
        register = getattr(optimizer, "register_optimizer_step_post_hook", None)
        if register is not None:
            register(self.on_optimizer_step)
            optimizer.register_optimizer_step_pre_hook(self.before_optimizer_step)
        if self.emulate_bytes:
            torch.cuda._lazy_call(self._cap_memory)
        if self.resumed:
            self._watch_loads(torch)

    def _watch_loads(self, torch: Any) -> None:
        """On a later attempt: note a step counter in what the script loads (its checkpoint)."""
        import functools

        original = torch.load

        @functools.wraps(original)
        def load(*args: Any, **kwargs: Any) -> Any:
            loaded = original(*args, **kwargs)
            with _suppress():
                self.loaded = _step_counter(loaded) or self.loaded
            return loaded

        torch.load = load

    def _cap_memory(self) -> None:
        try:
            torch = self.torch
            index = torch.cuda.current_device()
            total = torch.cuda.get_device_properties(index).total_memory
            if self.emulate_bytes and self.emulate_bytes < total:
                self.memory_fraction = self.emulate_bytes / total
                torch.cuda.set_per_process_memory_fraction(self.memory_fraction, index)
        except Exception as exc:
            self.fail(exc)

    def on_monitor(self, module: Any) -> None:
        module.add_step_listener(self.on_monitor_step)


class _ImportWatcher:
    """Calls ``callbacks[name](module)`` once ``name`` has been imported (a ``sys.meta_path``
    finder that wraps the real loader's ``exec_module``); leaves ``sys.meta_path`` when done."""

    def __init__(self, callbacks: dict[str, Any], hook: Hook) -> None:
        self.callbacks = callbacks
        self.hook = hook
        self.busy: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        callback = self.callbacks.get(name)
        if callback is None or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(name, path, target)
                if spec is not None:
                    break
        finally:
            self.busy.discard(name)
        loader = getattr(spec, "loader", None)
        original = getattr(loader, "exec_module", None)
        if original is None:
            return spec

        def exec_module(module: Any) -> None:
            original(module)
            self.callbacks.pop(name, None)
            if not self.callbacks:
                self.leave()
            try:
                callback(module)
            except Exception as exc:
                self.hook.fail(exc)

        try:
            loader.exec_module = exec_module  # type: ignore[union-attr]
        except (AttributeError, TypeError):
            return spec
        return spec

    def leave(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def rss_peak() -> int | None:
    """This process's peak resident memory so far (``ru_maxrss``: KiB on Linux)."""
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return None
    return peak if sys.platform == "darwin" else peak * 1024


class Registration:
    """``<streams>/proc-<pid>.txt`` of this process: its identity as it starts, the stacks
    SIGUSR1 dumps, and its peak memory as it exits (see the module's docstring)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.fd: int | None = None
        self.pid = 0

    def register(self) -> None:
        import json

        self.pid = os.getpid()
        path = os.path.join(self.folder, f"{PROC_PREFIX}{self.pid}{PROC_SUFFIX}")
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        facts = {"pid": self.pid, "ppid": os.getppid(), "pgid": os.getpgid(0),
                 "sid": os.getsid(0), "rank": _int(os.environ.get("RANK")), "t": time.time()}
        os.write(self.fd, (json.dumps(facts) + "\n").encode())
        _stacks_on_usr1(self.fd)

    def in_child(self) -> None:
        """A forked child (a data-loader worker) is a process of its own: its own file."""
        with _suppress():
            self.register()

    def on_exit(self) -> None:
        if self.fd is None or os.getpid() != self.pid:
            return
        with _suppress():
            os.write(self.fd, f'{{"ev":"exit","rss_peak_bytes":{rss_peak() or 0}}}\n'.encode())


def install(environ: Any = os.environ) -> Hook | None:
    """Start the hook in this process when the supervisor asked for it (else nothing)."""
    global _hook
    folder = environ.get(ENV_STREAMS)
    if not folder or _hook is not None:
        return _hook
    try:
        stop = environ.get(ENV_STOP_AFTER)
        emulate = environ.get(ENV_EMULATE)
        cycles = environ.get(ENV_STAGE_CYCLES)
        hook = Hook(folder, int(stop) if stop else None, int(emulate) if emulate else None,
                    sample_interval(environ.get(ENV_SAMPLE_MS)),
                    int(cycles) if cycles else None, environ.get(ENV_RESUMED) == "1")
        callbacks = {"torch": hook.on_torch, "gpu_audit.monitor.api": hook.on_monitor}
        for name in list(callbacks):
            module = sys.modules.get(name)
            if module is not None:
                callbacks.pop(name)(module)
        if callbacks:
            sys.meta_path.insert(0, _ImportWatcher(callbacks, hook))
        registration = Registration(folder)
        with _suppress():  # unregistered, the process is still found by its tree and session
            registration.register()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=registration.in_child)
        import atexit

        atexit.register(hook.after_exit_handlers)
        atexit.register(registration.on_exit)
        atexit.register(hook.read_unread)  # runs before after_exit_handlers (last in, first)
        _hook = hook
    except Exception as exc:
        print(f"{PREFIX}: not started ({type(exc).__name__}: {exc}); the script runs without "
              "per-cycle telemetry", file=sys.stderr, flush=True)
    return _hook


def sample_interval(text: str | None) -> float:
    """``GPU_AUDIT_SCRIPT_CUDA_SAMPLE_MS`` in seconds (0: every cycle); the default when unset
    or not a number from 0 to 60000."""
    try:
        ms = float(text) if text else None
    except ValueError:
        ms = None
    return ms / 1000 if ms is not None and 0 <= ms <= 60_000 else CUDA_SAMPLE_S


def _stacks_on_usr1(fd: int) -> None:
    """SIGUSR1 writes every thread's stack to ``fd`` (this process's registration file)
    instead of ending the process, unless the script handles SIGUSR1 itself: the supervisor
    forwards the runner's SIGUSR1 to the command before stopping a hung one, so the report can
    say where each rank waited. A file per process: dumps of several ranks never interleave."""
    import signal

    if hasattr(signal, "SIGUSR1") and signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL:
        import faulthandler

        faulthandler.register(signal.SIGUSR1, file=fd, all_threads=True)


def _suppress() -> Any:
    import contextlib

    return contextlib.suppress(Exception)


def _identity(torch: Any) -> dict[str, Any]:
    return {"pid": os.getpid(), "rank": _int(os.environ.get("RANK")),
            "local_rank": _int(os.environ.get("LOCAL_RANK")),
            "world_size": _int(os.environ.get("WORLD_SIZE")),
            "python": sys.version.split()[0], "argv": sys.argv[:1],
            "torch_version": getattr(torch, "__version__", None) if torch else None,
            "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None)
            if torch else None}


def _device_facts(torch: Any, index: int) -> dict[str, Any]:
    facts: dict[str, Any] = {"index": index}
    try:
        props = torch.cuda.get_device_properties(index)
        facts.update(name=props.name, total_memory_bytes=props.total_memory)
        settings = torch.cuda.memory._snapshot().get("allocator_settings")
        facts["allocator_settings"] = settings
        facts["allocator_backend"] = torch.cuda.memory.get_allocator_backend()
    except Exception as exc:
        facts["error"] = f"{type(exc).__name__}: {exc}"
    return facts


def _resumed_from(optimizer: Any, loaded: tuple[int, str] | None) -> tuple[int, str] | None:
    """Where a script that resumed itself starts, read at its first optimizer step: the
    optimizer's step count before that step, else ``loaded``; ``None`` for a fresh start."""
    state = getattr(optimizer, "state", None) or {}
    for group in getattr(optimizer, "param_groups", []):
        for param in group.get("params", []):
            step = state.get(param, {}).get("step") if hasattr(state, "get") else None
            if step is not None:
                done = int(step.item() if hasattr(step, "item") else step) - 1
                return (done, "the optimizer's step count") if done > 0 else loaded
    return loaded


def _step_counter(loaded: Any) -> tuple[int, str] | None:
    """A step counter in a dictionary loaded by the script (its checkpoint), and its key."""
    if not isinstance(loaded, dict):
        return None
    for key in COUNTER_KEYS:
        value = loaded.get(key)
        if type(value) is int and value > 0:
            return value, f"{key!r} in the checkpoint it loaded"
    for key in SCHEDULER_KEYS:
        value = loaded.get(key)
        epoch = value.get("last_epoch") if isinstance(value, dict) else None
        if type(epoch) is int and epoch > 0:
            return epoch, f"its LR scheduler's last_epoch ({key!r} in the checkpoint it loaded)"
    return None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None
