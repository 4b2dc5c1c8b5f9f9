"""The live stages of ``check --stages imports,smoke``, run through ``gpu-audit validate``'s runner.

Each stage runs in a worker process of its own (torch is never imported here): ``imports``
imports torch and the workload, initialises CUDA and round-trips a small tensor; ``smoke`` runs
three cycles. The workload and its settings are those ``gpu-audit validate`` would use
(``[tool.gpu-audit.validate]``), so "the runner is fit" means "this project's work runs here".
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_audit.check.results import StageOutcome
from gpu_audit.config import find_config_file, load_policy, read_validate_config
from gpu_audit.config.files import key_line
from gpu_audit.config.validate_config import VALIDATE_TABLE as TABLE
from gpu_audit.errors import ConfigError
from gpu_audit.knowledge.torch_builds import GET_STARTED_URL
from gpu_audit.redact import redact_text
from gpu_audit.validate.plan import ValidateOptions, build_plan
from gpu_audit.validate.script.launch import NOT_PYTHON, missing_in_command
from gpu_audit.validate.start import TorchMissing, resolve_device, run_validation

# What to do about a failed stage, by the validate runner's failure kind (when the log's
# classification offers no remedy of its own).
_REMEDIES = {
    "import": "Install the project's dependencies in this environment; for torch, use the "
              "command pytorch.org/get-started gives for this driver's CUDA version.",
    "workload": "The workload does not follow the protocol `gpu-audit validate` expects: see "
                "the reason above and `gpu-audit validate --help`.",
    "cuda": "Run `nvidia-smi` and `python -c 'import torch; print(torch.cuda.is_available())'`: "
            "check the driver, the torch build (CPU-only builds have no CUDA) and "
            "CUDA_VISIBLE_DEVICES.",
    "oom": "The GPU ran out of memory in a short run: free the memory other processes hold "
           "(see free-vram) or run the job on a larger GPU.",
    "hang": "CUDA work hung: check `sudo dmesg | grep -i xid` for driver errors; the GPU may "
            "need a reset (`sudo nvidia-smi -r`) or the machine a reboot.",
    "crash": "The stage's worker died: read {log}; `sudo dmesg | tail` shows kernel kills "
             "(OOM killer) and driver errors.",
    "gate": "A quality gate of the validation plan failed: see the reason above.",
    "error": "The workload raised an error: read {log}.",
}
TAIL_LINES = 12


def validation_device(min_gpus: int, require_torch_cuda: bool, configured: str | None) -> str:
    """Where the stages run: CUDA whenever the policy needs a GPU (so a silent fall-back to the
    CPU cannot pass for working CUDA), otherwise wherever ``validate`` would run."""
    if min_gpus >= 1 or require_torch_cuda:
        if configured and configured.startswith("cuda:"):
            return configured
        return "cuda"
    return configured or "auto"


def _stage_summary(stage: dict[str, Any], doc: dict[str, Any]) -> str:
    if stage["status"] == "passed":
        where = stage.get("device") or "?"
        name = doc.get("device", {}).get("name")
        on = f"{where} ({name})" if name and where.startswith("cuda") else where
        if stage["name"] == "imports" and str(doc.get("workload")).startswith(COMMAND):
            return _command_imports_summary(doc, on)
        if stage["name"] == "imports":
            version = doc.get("torch", {}).get("version")
            torch = f"torch {version}" if version else "torch"
            return f"{torch} imported; {on} initialised; a tensor round-tripped"
        summary = stage.get("summary") or {}
        median = summary.get("median_cycle_s")
        speed = f", median {median * 1000:.0f} ms per cycle" if median is not None else ""
        return f"{stage['cycles_done']}/{stage['cycles_planned']} cycles on {on}{speed}"
    if stage["status"] == "skipped":
        return stage.get("reason") or "not run: an earlier stage failed"
    failure = stage.get("failure") or "failed"
    return redact_text(f"{failure}: {stage.get('reason') or 'the stage failed'}")


COMMAND = "command: "  # how a validation document names a command workload


def _command_imports_summary(doc: dict[str, Any], on: str) -> str:
    """The imports stage of the user's command checked its program, and torch in its Python
    (gpu-audit's own torch, in the document, says nothing about that Python)."""

    program = redact_text(str(doc["workload"])[len(COMMAND):].split(" ", 1)[0])
    if any(NOT_PYTHON in str(f.get("title")) for f in doc.get("findings") or []):
        return f"the command's program {program} was found ({NOT_PYTHON}: torch not checked)"
    if on.startswith("cuda"):
        return (f"torch imports in the command's Python ({program}); {on} initialised; a "
                "tensor round-tripped")
    return f"torch imports in the command's Python ({program}); the stages run on {on}"


def _stage_status(stage: dict[str, Any]) -> str:
    status = stage["status"]
    if status == "failed" and stage.get("failure") == "internal":
        return "error"  # gpu-audit's own worker broke: the runner is not shown unfit
    if status in ("passed", "failed", "skipped"):
        return status
    return "error"


def outcomes_from_document(doc: dict[str, Any], names: list[str],
                           run_dir: str | None = None) -> list[StageOutcome]:
    """A ``gpu-audit.validate/1`` document as one outcome per requested stage (first variant:
    check runs the stages under one allocator configuration)."""
    variants = doc.get("variants") or []
    stages = {s["name"]: s for s in (variants[0]["stages"] if variants else [])}
    outcomes = []
    for name in names:
        stage = stages.get(name)
        if stage is None:
            outcomes.append(StageOutcome(name, "error", "the validation run has no result for "
                                                        "this stage"))
            continue
        worker = stage.get("worker") or {}
        explanation = worker.get("explanation") or []
        tail = worker.get("stderr_tail")
        evidence: dict[str, Any] = {
            "failure": stage.get("failure"),
            "reason": redact_text(stage["reason"]) if stage.get("reason") else None,
            "cycles_done": stage.get("cycles_done"),
            "cycles_planned": stage.get("cycles_planned"),
            "attempts": stage.get("attempts"),
            "torch_version": doc.get("torch", {}).get("version"),
            "device_fallback_reason": doc.get("device", {}).get("fallback_reason"),
        }
        if stage.get("summary"):
            evidence["median_cycle_s"] = stage["summary"].get("median_cycle_s")
        if explanation:
            evidence["explanation"] = [{k: e.get(k) for k in ("cls", "title", "explanation")}
                                       for e in explanation]
        if tail:
            evidence["log_tail"] = redact_text("\n".join(tail.splitlines()[-TAIL_LINES:]))
        if run_dir:
            evidence["run_dir"] = run_dir
            evidence["log"] = worker.get("log")
        status = _stage_status(stage)
        remedy = None
        if status == "failed":
            remedy = next((e["remedy"] for e in explanation if e.get("remedy")), None) or \
                _REMEDIES.get(stage.get("failure") or "", _REMEDIES["error"]).format(
                    log=_where_the_log_is(evidence))
        elif status == "error":
            remedy = ("gpu-audit could not run this stage: run `gpu-audit -v validate --stage "
                      f"{name}` and report the traceback.")
        outcomes.append(StageOutcome(
            name=name, status=status, summary=_stage_summary(stage, doc),
            duration_s=stage.get("duration_s"), device=stage.get("device"),
            evidence={k: v for k, v in evidence.items() if v is not None}, remedy=remedy))
    return outcomes


def _where_the_log_is(evidence: dict[str, Any]) -> str:
    """Where a failed stage's log can be read: the kept run folder's file, else its last lines
    in the evidence (a run folder that was not kept is gone)."""
    if evidence.get("log"):
        return f"the stage's log, {evidence['log']}"
    if evidence.get("log_tail"):
        return ("the end of the stage's log, `log_tail` in this check's evidence "
                "(`gpu-audit check --json`)")
    return "the stage's log: `gpu-audit validate --stage NAME` keeps it in its run folder"


def _check_command(command: list[str], cwd: str, path: Path | None) -> None:
    """A configured command whose program or script is missing is a configuration error (exit
    3), before any stage runs: it says nothing about whether the runner is fit."""
    import os

    problem = missing_in_command(command, os.environ, cwd)
    if problem is None:
        return
    where = f"{path}:{key_line(path, 'command', TABLE) or '?'}: " if path is not None else ""
    raise ConfigError(f"{where}key 'command' ({redact_text(' '.join(command))}): {problem}; "
                      "check --stages runs it as the workload")


def run_stages(names: list[str], *, min_gpus: int, require_torch_cuda: bool,
               out_dir: Path | None = None,
               note: Callable[[str], None] | None = None) -> list[StageOutcome]:
    """Run the stages with ``gpu-audit validate``'s runner; one outcome per stage.

    ``out_dir`` keeps the run folder (``runs/<run-id>/`` with each stage's log); ``None`` runs
    in a temporary folder, removed afterwards unless a stage failed (its remedy names its log).
    A bad ``[tool.gpu-audit.validate]`` raises gpu-audit's own errors (exit 3); Ctrl-C raises
    :class:`KeyboardInterrupt` (exit 130).
    """

    path = find_config_file()
    values = read_validate_config(path) if path is not None else {}
    if "," in str(values.get("max_split_size_mb") or ""):
        # A comparison of allocator settings is validate's job; check runs one configuration.
        values.pop("max_split_size_mb")
    values["stages"] = list(names)
    values["device"] = validation_device(min_gpus, require_torch_cuda, values.get("device"))
    plan = build_plan(ValidateOptions(**values), load_policy(path, search=False))
    if plan.script is not None:
        _check_command(plan.script.command, plan.workload_paths[0], path)
    try:
        plan_device = resolve_device(plan.device)
    except TorchMissing as missing:
        return torch_missing_outcomes(names, missing.reason)
    folder = out_dir if out_dir is not None else Path(tempfile.mkdtemp(prefix="gpu-audit-check-"))
    keep = out_dir is not None
    try:
        result = run_validation(plan, out_dir=folder, progress="auto", plots=False, note=note,
                                device=plan_device)
        if result.exit_code == 130:
            raise KeyboardInterrupt
        outcomes = outcomes_from_document(result.document, names,
                                          str(result.run.path) if keep else None)
        if not keep and any(o.status == "failed" for o in outcomes):
            # A failed stage's log outlives the temporary run folder: its remedy names the file.
            keep = True
            outcomes = outcomes_from_document(result.document, names, str(result.run.path))
        return outcomes
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def torch_missing_outcomes(names: list[str], reason: str) -> list[StageOutcome]:
    """Without torch no stage can run: the first fails (the project's work cannot run on this
    runner as it is set up), the others are skipped, and the checklist and its reports are
    written as for any other failed stage."""
    python = sys.executable
    remedy = (f"Install the project's torch where the stages run: in {python}'s environment "
              "(a virtual environment made with --system-site-packages sees the torch of the "
              "Python it was made from), the build that matches this machine's CUDA driver "
              f"(choose it at {GET_STARTED_URL}; `gpu-audit scan` shows the driver's CUDA "
              "version).")
    first, *rest = names
    outcomes = [StageOutcome(first, "failed", f"torch is not installed for {python} ({reason})",
                             evidence={"failure": "import", "python": python, "reason": reason},
                             remedy=remedy)]
    outcomes += [StageOutcome(name, "skipped", f"not run: the {first} stage failed")
                 for name in rest]
    return outcomes
