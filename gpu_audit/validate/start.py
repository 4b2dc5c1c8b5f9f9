"""Starting and resuming a validation run: its folder, its device, the runner, the report.

:func:`run_validation` is what ``gpu-audit validate`` and ``gpu-audit check`` call. The device
is chosen in a subprocess (:func:`probe_devices`), so the runner never imports torch.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_audit.errors import ConfigError, UsageError
from gpu_audit.knowledge.torch_builds import GET_STARTED_URL
from gpu_audit.units import utc_now
from gpu_audit.validate.plan import Plan
from gpu_audit.validate.progress import make_progress
from gpu_audit.validate.report import write_report
from gpu_audit.validate.runner import Runner
from gpu_audit.validate.spawn import worker_env
from gpu_audit.validate.state import (
    DeviceChoice,
    LegState,
    RunDir,
    RunLock,
    RunState,
    find_run,
    load_records,
    new_run_id,
)

PROBE_TIMEOUT_S = 180.0


@dataclass
class ValidationResult:
    run: RunDir
    plan: Plan
    state: RunState
    document: dict[str, Any]
    exit_code: int


def run_validation(plan: Plan | None = None, *, out_dir: Path = Path("reports"),
                   resume: str | None = None, run_id: str | None = None,
                   progress: str = "auto", plots: bool = True,
                   note: Callable[[str], None] | None = None,
                   device: DeviceChoice | None = None) -> ValidationResult:
    """Run ``plan`` (or continue the run named by ``resume``); writes the report; never exits.

    ``device``: the plan's device, already resolved by the caller (saves probing it twice).

    Exit codes in the result follow DESIGN: 0 every stage passed, 2 a stage failed, 130
    interrupted (state saved; ``resume`` continues). Bad input raises gpu-audit's own errors.
    """
    import psutil

    out_dir = Path(out_dir)
    chosen: DeviceChoice | None = None
    reporter = make_progress(progress)
    say = note or reporter.note
    if resume is not None:
        run = find_run(resume, out_dir)
        lock = RunLock(run.lock_path)
        lock.acquire()
        plan = run.read_plan()
        state = run.read_state()
        state.resumes += 1
        if state.legs and all(leg.status == "passed" for leg in state.legs.values()):
            say(f"run {run.run_id} already passed every stage; nothing to resume (the report "
                "is written again)")
        else:
            say(f"resuming run {run.run_id} ({run.path})")
    else:
        if plan is None:
            raise ValueError("run_validation needs a plan or a run to resume")
        # Before the run folder: no torch is exit 3.
        chosen = device or resolve_device(plan.device)
        try:
            run, state = start_run(plan, out_dir, run_id)
        except OSError as exc:
            raise UsageError(f"cannot create the run folder under {out_dir / 'runs'}: "
                             f"{exc.strerror or exc} (pass a writable --out DIR)") from None
        lock = RunLock(run.lock_path)
        lock.acquire()
        say(f"run {run.run_id}: {run.path}")
    finished = False
    try:
        for warning in plan.warnings:
            say(f"warning: {warning}")
        if state.device.resolved is None or chosen is not None:
            state.device = chosen or resolve_device(plan.device)
            if state.device.fallback_reason and state.device.resolved == "cpu":
                say(f"warning: no usable CUDA device ({state.device.fallback_reason}); "
                    "running on the CPU")
            run.write_state(state)
        say(f"device: {state.device.resolved}"
            + (f" ({state.device.name})" if state.device.name else ""))
        runner = Runner(run, plan, state, progress=reporter, note=say, lock=lock)
        code = runner.execute()
        run.remove_empty_scratch()
        records = load_records(run.cycles_path)
        document = write_report(run, plan, state, records, plots=plots,
                                host_memory_bytes=psutil.virtual_memory().total)
        finished = True  # the runner has waited for its workers: nobody else holds the lock
    finally:
        lock.release(remove=finished)
    return ValidationResult(run=run, plan=plan, state=state, document=document, exit_code=code)


def start_run(plan: Plan, out_dir: Path, run_id: str | None = None) -> tuple[RunDir, RunState]:
    """A new run folder under ``out_dir/runs/`` with its plan and a fresh state."""
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}", run_id):
        raise UsageError(f"--run-id {run_id!r}: use letters, digits, '.', '_' and '-' only "
                         "(it names a folder)")
    runs = out_dir / "runs"
    _make_folders(runs)
    for _ in range(100):
        run = RunDir(runs / (run_id or new_run_id()))
        try:
            # Made exclusively: of two runs started together with one --run-id, one proceeds.
            run.path.mkdir(mode=0o755)
            break
        except FileExistsError:
            if run_id is not None:
                raise UsageError(f"run {run.run_id} already exists in {runs}; resume it with "
                                 f"--resume {run.run_id} (or remove its folder if it holds no "
                                 "plan.json)") from None
    else:
        raise UsageError(f"cannot find a free run name in {runs}; pass --run-id NAME")
    run.write_plan(plan)
    state = new_state(run.run_id, plan, DeviceChoice(requested=plan.device))
    run.write_state(state)
    return run, state


def _make_folders(path: Path) -> None:
    """``path`` and its missing parents, none writable by group or others whatever the umask:
    a resume refuses a run folder others could change (:class:`RunDir`)."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o755, exist_ok=True)


def new_state(run_id: str, plan: Plan, device: DeviceChoice) -> RunState:
    import socket

    return RunState(run_id=run_id, status="running", started_at=utc_now(), device=device,
                    legs={key: LegState() for key in plan.leg_keys()},
                    hostname=socket.gethostname())


class TorchMissing(ConfigError):
    """torch does not import in the Python the stages would run in: nothing could run."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(torch_missing_message(reason))
        self.reason = (reason or "").removeprefix("torch does not import: ") or \
            "it does not import"


def resolve_device(requested: str, *, probe: Callable[[], dict[str, Any]] | None = None
                   ) -> DeviceChoice:
    """``auto``/``cuda``: the CUDA device with the most free memory (asked in a subprocess).

    Raises :class:`TorchMissing` when torch is not installed: nothing could run."""
    if requested == "cpu" or requested.startswith("cuda:"):
        import importlib.util

        if importlib.util.find_spec("torch") is None:  # looked up, not imported
            raise TorchMissing("No module named 'torch'")
        return DeviceChoice(requested=requested, resolved=requested)
    found = (probe or probe_devices)()
    if found.get("torch_missing"):
        raise TorchMissing(found.get("reason"))
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


def torch_missing_message(reason: str | None) -> str:
    """Why validate cannot start without torch, and how to get the right build."""
    reason = (reason or "").removeprefix("torch does not import: ") or "it does not import"
    return (f"torch is not installed for {sys.executable} ({reason}); "
            "validate runs your workload with torch. Install the build that matches this "
            f"machine's CUDA driver into this environment (choose it at {GET_STARTED_URL}; "
            "`gpu-audit scan` shows the driver's CUDA version), then run validate again")


def probe_devices() -> dict[str, Any]:
    """The worker's ``probe-devices`` answer: CUDA devices with their free memory, or why none."""
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
