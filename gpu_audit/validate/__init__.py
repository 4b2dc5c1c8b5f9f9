"""``gpu-audit validate``: the user's own cycle, run at increasing depth, under chosen allocator
settings, in a worker process per stage, resumable, with a report.

Library use (``gpu-audit check`` runs the ``imports``/``smoke`` stages this way)::

    from gpu_audit.validate import ValidateOptions, build_plan, run_validation
    plan = build_plan(ValidateOptions(stages=["imports", "smoke"], device="auto"))
    result = run_validation(plan, out_dir=Path("reports"))
    result.exit_code, result.document["variants"][0]["stages"]

Modules: :mod:`.plan` (stages, flags, checks), :mod:`.start` (start or resume a run),
:mod:`.runner` (the parent: watches each stage's worker), :mod:`.spawn` (the worker process),
:mod:`.verdict` (how a stage ended), :mod:`.worker` (the child's entry point), :mod:`.stage`
(the child: one stage's cycles), :mod:`.channels` (events and stop requests between the two),
:mod:`.device` (CUDA start-up in the child), :mod:`.telemetry`, :mod:`.gates`, :mod:`.state`
(run folder, log, resume), :mod:`.checkpoints` (saved and read without trusting the file),
:mod:`.findings` and :mod:`.catalogue`, :mod:`.report`,
:mod:`.protocol` (the workload protocol) and :mod:`.workloads.reference` (the built-in
workload); :mod:`.script` runs the user's own command instead (``validate -- COMMAND``).
Nothing here imports torch in the runner.
"""

from __future__ import annotations

from gpu_audit.lazy import exports

__all__ = ["Plan", "ValidateOptions", "ValidationResult", "build_plan", "run_validation"]

__getattr__, __dir__ = exports(__name__, {
    "Plan": "gpu_audit.validate.plan",
    "ValidateOptions": "gpu_audit.validate.plan",
    "build_plan": "gpu_audit.validate.plan",
    "ValidationResult": "gpu_audit.validate.start",
    "run_validation": "gpu_audit.validate.start",
}, globals())
