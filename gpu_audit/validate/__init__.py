"""``gpu-audit validate``: the user's own cycle, run at increasing depth, under chosen allocator
settings, in a worker process per stage, resumable, with a report.

Library use (``gpu-audit check`` runs the ``imports``/``smoke`` stages this way)::

    from gpu_audit.validate import ValidateOptions, build_plan, run_validation
    plan = build_plan(ValidateOptions(stages=["imports", "smoke"], device="auto"))
    result = run_validation(plan, out_dir=Path("reports"))
    result.exit_code, result.document["variants"][0]["stages"]

Modules: :mod:`.plan` (stages, flags, checks), :mod:`.runner` (parent), :mod:`.worker` (child),
:mod:`.telemetry`, :mod:`.gates`, :mod:`.state` (run folder, log, checkpoints, resume),
:mod:`.findings`, :mod:`.report`, :mod:`.protocol` (the workload protocol) and
:mod:`.workloads.reference` (the built-in workload). Nothing here imports torch in the runner.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_audit.errors import UsageError
from gpu_audit.validate.plan import Plan, ValidateOptions, build_plan
from gpu_audit.validate.state import RunDir, RunState

__all__ = ["Plan", "ValidateOptions", "ValidationResult", "build_plan", "run_validation"]


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
                   note: Callable[[str], None] | None = None) -> ValidationResult:
    """Run ``plan`` (or continue the run named by ``resume``); writes the report; never exits.

    Exit codes in the result follow DESIGN: 0 every stage passed, 2 a stage failed, 130
    interrupted (state saved; ``resume`` continues). Bad input raises gpu-audit's own errors.
    """
    import psutil

    from gpu_audit.validate.progress import make_progress
    from gpu_audit.validate.report import write_report
    from gpu_audit.validate.runner import Runner, resolve_device, start_run
    from gpu_audit.validate.state import RunLock, find_run, load_records

    out_dir = Path(out_dir)
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
        try:
            run, state = start_run(plan, out_dir, run_id)
        except OSError as exc:
            raise UsageError(f"cannot create the run folder under {out_dir / 'runs'}: "
                             f"{exc.strerror or exc} (pass a writable --out DIR)") from None
        lock = RunLock(run.lock_path)
        lock.acquire()
        say(f"run {run.run_id}: {run.path}")
    try:
        for warning in plan.warnings:
            say(f"warning: {warning}")
        if state.device.resolved is None:
            state.device = resolve_device(plan.device)
            if state.device.fallback_reason and state.device.resolved == "cpu":
                say(f"warning: no usable CUDA device ({state.device.fallback_reason}); "
                    "running on the CPU")
            run.write_state(state)
        say(f"device: {state.device.resolved}"
            + (f" ({state.device.name})" if state.device.name else ""))
        runner = Runner(run, plan, state, progress=reporter, note=say, lock=lock)
        code = runner.execute()
        records = load_records(run.cycles_path)
        document = write_report(run, plan, state, records, plots=plots,
                                host_memory_bytes=psutil.virtual_memory().total)
    finally:
        lock.release()
    return ValidationResult(run=run, plan=plan, state=state, document=document, exit_code=code)
