"""``gpu-audit validate``: run the workload's cycle at increasing depth before the long run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gpu_audit.cli.app import err
from gpu_audit.cli.declared import Option, command
from gpu_audit.config.schema import VALIDATE, setting


def _key(key: str, param: str, type: type | None = None, **more: Any) -> Option:
    """A flag that sets a [tool.gpu-audit.validate] key: name, help and default from the
    schema."""
    return Option.setting(VALIDATE, key, param, type, **more)


# Declared as data (gpu_audit.cli.declared): typer builds the command from these. The flags
# that set a [tool.gpu-audit.validate] key shape the plan; a resumed run keeps its own.
OPTIONS = (
    _key("stages", "stage", str, multiple=True, metavar="NAME"),
    _key("cycles", "cycles", metavar="N"),
    _key("disable_quantum", "disable_quantum"),
    _key("quantum_lite", "quantum_lite"),
    _key("max_split_size_mb", "max_split_size_mb", metavar="N[,N...]"),
    _key("alloc_conf", "alloc_conf", metavar="STR"),
    _key("device", "device", metavar="auto|cpu|cuda|cuda:N"),
    _key("emulate_memory", "emulate_memory", metavar="SIZE"),
    _key("workload", "workload", metavar="MODULE:ATTR"),
    _key("require", "require", str, multiple=True, metavar="EXPR"),
    _key("max_retries", "max_retries", metavar="N"),
    _key("retry_backoff_s", "retry_backoff", metavar="SECONDS"),
    _key("checkpoint_every_pct", "checkpoint_every", str, metavar="PCT"),
    _key("hang_factor", "hang_factor", metavar="X"),
    _key("hang_min_s", "hang_min", metavar="SECONDS"),
    _key("hang_max_s", "hang_max", metavar="SECONDS"),
    _key("startup_timeout_s", "startup_timeout", metavar="SECONDS"),
    _key("seed", "seed"),
    Option("resume", "--resume", str, metavar="RUN",
           help="Continue a run (its id under OUT/runs, or its folder) from its last checkpoint."),
    Option("run_id", "--run-id", str, metavar="NAME",
           help="Name the run folder (default: time-host-random)."),
    Option("out", "--out", Path, metavar="DIR",
           help="Folder for runs/<run-id>/ (default: reports)."),
    Option("json_out", "--json", bool, False,
           help="Print the result as JSON (schema gpu-audit.validate/1)."),
    Option("progress", "--progress", str, "auto", metavar="auto|bar|plain|none",
           help="Progress on stderr: a bar in a terminal (not under CI), else plain lines."),
    Option("no_plots", "--no-plots", bool, False, help="Do not draw the PNG plots."),
    Option("config", "--config", Path, metavar="FILE",
           help="Read [tool.gpu-audit] / [tool.gpu-audit.validate] from this file."),
    _key("cycle_pattern", "cycle_pattern", metavar="REGEX"),
    _key("metrics", "metric", str, multiple=True, metavar="NAME=REGEX",
         help="With -- COMMAND: a number read from output lines, e.g. "
              "'loss=loss[=:]\\s*([0-9.eE+-]+)', for --require 'mean(loss)<2'. Repeatable."),
    _key("batch", "batch", metavar="N"),
    _key("command", "command", str, name="--command", multiple=True, argument=True,
         metavar="[-- COMMAND...]"),
)
# Flags named in a --resume refusal: those of the plan, and the run's name.
_PLAN_FLAGS = tuple(o for o in OPTIONS if o.key is not None or o.param == "run_id")


@command("validate", OPTIONS)
def validate(
    *,
    stage: list[str] | None,
    cycles: int | None,
    disable_quantum: bool | None,
    quantum_lite: bool | None,
    max_split_size_mb: str | None,
    alloc_conf: str | None,
    device: str | None,
    emulate_memory: str | None,
    workload: str | None,
    require: list[str] | None,
    max_retries: int | None,
    retry_backoff: float | None,
    checkpoint_every: str | None,
    hang_factor: float | None,
    hang_min: float | None,
    hang_max: float | None,
    startup_timeout: float | None,
    seed: int | None,
    resume: str | None,
    run_id: str | None,
    out: Path | None,
    json_out: bool,
    progress: str,
    no_plots: bool,
    config: Path | None,
    cycle_pattern: str | None,
    metric: list[str] | None,
    batch: int | None,
    command: list[str] | None,
) -> int:
    """Rehearse your own training script in stages before the long run; resumable.

    gpu-audit validate --disable-quantum --cycles 50 -- python train.py --steps {cycles}
    runs your script unchanged once per stage (telemetry injected at interpreter start-up;
    cycles from gpu_audit.monitor.step(), optimizer steps or --cycle-pattern). Without a
    command it runs a workload class (--workload) or the built-in reference workload.

    Stages imports, smoke (3 cycles), classical (50), quantum-lite (50) and full (500) each run
    in a process of their own, under the allocator settings you choose, and each gates the next.
    The report lands in OUT/runs/<run-id>/.

    Exit codes: 0 every stage passed, 2 a stage failed (gate, crash, OOM, hang), 3 usage or
    configuration error, or the run folder's disk filled up (finding disk-full; free space and
    --resume RUN), 130 interrupted (state saved; --resume RUN continues).
    """
    given = dict(locals())
    import os

    from gpu_audit.config import (
        find_config_file,
        load_policy,
        read_validate_config,
        read_validate_environment,
    )
    from gpu_audit.errors import UsageError
    from gpu_audit.serial import dumps
    from gpu_audit.validate import run_validation
    from gpu_audit.validate.plan import ValidateOptions, build_plan

    if progress not in ("auto", "bar", "plain", "none"):
        raise UsageError(f"--progress {progress!r}: expected auto, bar, plain or none")
    flags = {o.param: given[o.param] for o in _PLAN_FLAGS}
    folder = out or Path("reports")
    if resume is not None:
        named = [o.name for o in _PLAN_FLAGS if flags[o.param] not in (None, [])]
        if named:
            raise UsageError(f"--resume continues a run with the plan it was started with; drop "
                             f"{', '.join(named)} (or start a new run)")
        plan = None
    else:
        path = config if config is not None else find_config_file()
        if config is not None and not config.is_file():
            raise UsageError(f"--config {config}: no such file")
        from gpu_audit.knowledge.findings import ignorable

        policy = load_policy(path, search=False, known_ids=ignorable)
        from_file = read_validate_config(path) if path is not None else {}
        from_file |= read_validate_environment(os.environ)  # the variables over the file
        options = ValidateOptions(**_merge(from_file, flags))
        plan = build_plan(options, policy)

    result = run_validation(plan, out_dir=folder, resume=resume, run_id=run_id,
                            progress=progress, plots=not no_plots,
                            note=lambda message: err(message))
    if json_out:
        sys.stdout.write(dumps(result.document) + "\n")
    else:
        _print_summary(result.document)
    print(f"report: {result.run.path / 'report.md'}", file=sys.stderr)
    if result.exit_code == 130 or _resumable(result):
        print(f"resume: gpu-audit validate --resume {result.run.run_id}"
              + (f" --out {folder}" if out is not None else ""), file=sys.stderr)
    return result.exit_code


def _resumable(result: Any) -> bool:
    """Whether ``--resume`` could change anything: not when every stage that did not pass
    failed on its merits with all its cycles done (or was skipped behind one)."""
    from gpu_audit.validate.plan import split_leg
    from gpu_audit.validate.state import can_resume

    if result.state.status not in ("failed", "interrupted"):
        return False
    return any(can_resume(leg, result.plan.stage(split_leg(key)[1]).cycles)
               for key, leg in result.state.legs.items())


def _merge(from_file: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Options: flags over the configuration file over the defaults (each flag sets the option
    of its key, as the schema names it)."""
    merged = dict(from_file)
    for option in OPTIONS:
        value = flags.get(option.param)
        if option.key is None or value is None or value == []:
            continue
        merged[setting(VALIDATE, option.key).option] = value
    return merged


def _print_summary(doc: dict[str, Any]) -> None:
    from gpu_audit.report.escape import terminal
    from gpu_audit.units import fmt_seconds

    run = doc["run"]
    print(f"gpu-audit validate: {run['status'].upper()} (exit {run['exit_code']}), "
          f"run {run['id']} on {doc['device'].get('resolved')}")
    width = max((len(v["label"]) + len(s["name"]) + 1 for v in doc["variants"]
                 for s in v["stages"]), default=10)
    for variant in doc["variants"]:
        for stage in variant["stages"]:
            name = f"{variant['label']}/{stage['name']}"
            summary = stage["summary"] or {}
            facts = []
            if stage["cycles_planned"]:
                facts.append(f"{stage['cycles_done']}/{stage['cycles_planned']} cycles")
            if summary.get("median_cycle_s") is not None:
                facts.append(f"median cycle {fmt_seconds(summary['median_cycle_s'])}")
            if stage["reason"]:
                facts.append(terminal(stage["reason"], newlines=False))
            print(f"  {name:<{width}}  {stage['status']:<11} {'; '.join(facts)}")
    recommendation = doc["recommendation"]
    if recommendation:
        _print_wrapped(f"recommendation: {recommendation['text']}" if recommendation["label"]
                       else recommendation["text"])
    for finding in doc["findings"]:
        if finding["severity"] in ("warning", "error", "critical"):
            _print_wrapped(f"  {finding['severity'].upper()} {finding['id']} "
                           f"({terminal(finding['subject'], newlines=False)}): "
                           f"{terminal(finding['title'], newlines=False)}", indent="    ")
            _print_command_error(finding.get("evidence") or {}, terminal)
            for line in terminal(finding["remedy"] or "").splitlines():
                if line.strip():
                    _print_fix(line.strip())


def _print_command_error(evidence: dict[str, Any], terminal: Any) -> None:
    """A failed command's own error line and last frames, under its finding, and where the
    whole log is."""
    if evidence.get("error_line"):
        print(f"    error: {terminal(evidence['error_line'], newlines=False)}")
    for line in evidence.get("traceback_frames") or []:
        print(f"    {terminal(line, newlines=False)}")
    if evidence.get("stage_log"):
        print(f"    log: {terminal(evidence['stage_log'], newlines=False)}")


def _columns() -> int:
    import shutil

    return max(shutil.get_terminal_size().columns, 40)


def _print_wrapped(text: str, indent: str = "") -> None:
    from gpu_audit.report.remedy import wrapped

    print("\n".join(wrapped(text, _columns() - 1, indent)))


def _print_fix(line: str) -> None:
    from gpu_audit.report.remedy import fix_lines

    print("\n".join(fix_lines(line, _columns() - 1, "    fix: ")))
