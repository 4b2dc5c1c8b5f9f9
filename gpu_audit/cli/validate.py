"""``gpu-audit validate``: run the workload's cycle at increasing depth before the long run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from gpu_audit.cli.app import app, err

# Flags that shape a plan; a resumed run keeps the plan it was started with.
_PLAN_FLAGS = ("stage", "cycles", "disable_quantum", "quantum_lite", "max_split_size_mb",
               "alloc_conf", "device", "emulate_memory", "workload", "max_retries", "require",
               "checkpoint_every", "retry_backoff", "hang_factor", "hang_min", "hang_max",
               "startup_timeout", "seed", "run_id", "command", "metric", "cycle_pattern",
               "batch")


@app.command()
def validate(
    stage: list[str] | None = typer.Option(
        None, "--stage", metavar="NAME",
        help="Run only these stages (repeat or comma-separate): imports, smoke, classical, "
             "quantum-lite, full."),
    cycles: int | None = typer.Option(
        None, "--cycles", metavar="N", help="Length of the final stage (default: 500)."),
    disable_quantum: bool | None = typer.Option(
        None, "--disable-quantum", help="Drop the quantum stages; run `full` classically."),
    quantum_lite: bool | None = typer.Option(
        None, "--quantum-lite", help="Quantum stages use the capped (16-qubit) simulator."),
    max_split_size_mb: str | None = typer.Option(
        None, "--max-split-size-mb", metavar="N[,N...]",
        help="Allocator max_split_size_mb; a comma list (e.g. none,128,512) runs the plan once "
             "per value and compares them."),
    alloc_conf: str | None = typer.Option(
        None, "--alloc-conf", metavar="STR",
        help="Allocator settings, set as both PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF "
             "in each worker before torch loads (default: the environment's)."),
    device: str | None = typer.Option(
        None, "--device", metavar="auto|cpu|cuda|cuda:N",
        help="auto: the GPU with the most free memory, else the CPU (with a warning); cuda: "
             "require a GPU (default: auto)."),
    emulate_memory: str | None = typer.Option(
        None, "--emulate-memory", metavar="SIZE",
        help="Cap the worker's usable GPU memory (e.g. 4GiB) to rehearse a smaller card."),
    workload: str | None = typer.Option(
        None, "--workload", metavar="MODULE:ATTR",
        help="Your workload (package.module:Attr or path/file.py:Attr) (default: the built-in "
             "reference workload)."),
    require: list[str] | None = typer.Option(
        None, "--require", metavar="EXPR",
        help="Gate on a metric: 'phi>0.3' (every cycle), 'mean(phi)>=0.5', "
             "'classical:min(phi)>0.3'. Repeatable."),
    max_retries: int | None = typer.Option(
        None, "--max-retries", metavar="N",
        help="Retries of a cycle after an out-of-memory error, halving the batch each time "
             "(default: 3)."),
    retry_backoff: float | None = typer.Option(
        None, "--retry-backoff", metavar="SECONDS",
        help="First wait before an OOM retry; doubles each time (default: 0.5)."),
    checkpoint_every: str | None = typer.Option(
        None, "--checkpoint-every", metavar="PCT",
        help="Checkpoint the workload every PCT percent of a stage (default: 10)."),
    hang_factor: float | None = typer.Option(
        None, "--hang-factor", metavar="X",
        help="A cycle hangs when it runs X times longer than the slowest so far (default: 10)."),
    hang_min: float | None = typer.Option(
        None, "--hang-min", metavar="SECONDS", help="Lower bound of the hang limit (default: 60)."),
    hang_max: float | None = typer.Option(
        None, "--hang-max", metavar="SECONDS",
        help="Upper bound of the hang limit (default: 3600)."),
    startup_timeout: float | None = typer.Option(
        None, "--startup-timeout", metavar="SECONDS",
        help="Limit for imports, CUDA start-up, set-up and the first cycle (default: 900)."),
    seed: int | None = typer.Option(
        None, "--seed", help="Seed passed to the workload (default: 0)."),
    resume: str | None = typer.Option(
        None, "--resume", metavar="RUN",
        help="Continue a run (its id under OUT/runs, or its folder) from its last checkpoint."),
    run_id: str | None = typer.Option(None, "--run-id", metavar="NAME",
                                      help="Name the run folder (default: time-host-random)."),
    out: Path | None = typer.Option(
        None, "--out", metavar="DIR", help="Folder for runs/<run-id>/ (default: reports)."),
    json_out: bool = typer.Option(
        False, "--json", help="Print the result as JSON (schema gpu-audit.validate/1)."),
    progress: str = typer.Option(
        "auto", "--progress", metavar="auto|bar|plain|none",
        help="Progress on stderr: a bar in a terminal (not under CI), else plain lines."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Do not draw the PNG plots."),
    config: Path | None = typer.Option(
        None, "--config", metavar="FILE",
        help="Read [tool.gpu-audit] / [tool.gpu-audit.validate] from this file."),
    cycle_pattern: str | None = typer.Option(
        None, "--cycle-pattern", metavar="REGEX",
        help="With -- COMMAND: an output line matching REGEX ends a cycle (used when the "
             "script neither calls gpu_audit.monitor.step() nor steps a torch optimizer)."),
    metric: list[str] | None = typer.Option(
        None, "--metric", metavar="NAME=REGEX",
        help="With -- COMMAND: a number read from output lines, e.g. "
             "'loss=loss[=:]\\s*([0-9.eE+-]+)', for --require 'mean(loss)<2'. Repeatable."),
    batch: int | None = typer.Option(
        None, "--batch", metavar="N",
        help="With -- COMMAND: the value of {batch}; a stage whose command runs out of memory "
             "runs again with it halved, up to --max-retries times."),
    command: list[str] | None = typer.Argument(
        None, metavar="[-- COMMAND...]",
        help="Your own script, unchanged, run once per stage: placeholders {cycles}, {stage}, "
             "{run_dir}, {quantum}, {resume}."),
) -> None:
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
    from gpu_audit.config import find_config_file, load_policy, read_validate_config
    from gpu_audit.errors import UsageError
    from gpu_audit.serial import dumps
    from gpu_audit.validate import run_validation
    from gpu_audit.validate.plan import ValidateOptions, build_plan

    if progress not in ("auto", "bar", "plain", "none"):
        raise UsageError(f"--progress {progress!r}: expected auto, bar, plain or none")
    flags = {"stage": stage, "cycles": cycles, "disable_quantum": disable_quantum,
             "quantum_lite": quantum_lite, "max_split_size_mb": max_split_size_mb,
             "alloc_conf": alloc_conf, "device": device, "emulate_memory": emulate_memory,
             "workload": workload, "max_retries": max_retries, "require": require,
             "checkpoint_every": checkpoint_every, "retry_backoff": retry_backoff,
             "hang_factor": hang_factor, "hang_min": hang_min, "hang_max": hang_max,
             "startup_timeout": startup_timeout, "seed": seed, "run_id": run_id,
             "command": command, "metric": metric, "cycle_pattern": cycle_pattern,
             "batch": batch}
    folder = out or Path("reports")
    if resume is not None:
        given = [f"--{name.replace('_', '-')}" for name in _PLAN_FLAGS if flags[name]
                 not in (None, [])]
        if given:
            raise UsageError(f"--resume continues a run with the plan it was started with; drop "
                             f"{', '.join(given)} (or start a new run)")
        plan = None
    else:
        path = config if config is not None else find_config_file()
        if config is not None and not config.is_file():
            raise UsageError(f"--config {config}: no such file")
        from gpu_audit.knowledge.findings import ignorable

        policy = load_policy(path, search=False, known_ids=ignorable)
        from_file = read_validate_config(path) if path is not None else {}
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
    raise typer.Exit(result.exit_code)


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
    """Options: flags over the configuration file over the defaults."""
    names = {"stage": "stages", "require": "requires", "retry_backoff": "retry_backoff_s",
             "hang_min": "hang_min_s", "hang_max": "hang_max_s",
             "startup_timeout": "startup_timeout_s", "metric": "metrics"}
    merged = dict(from_file)
    for flag, value in flags.items():
        if flag == "run_id" or value is None or value == []:
            continue
        merged[names.get(flag, flag)] = value
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
            for line in terminal(finding["remedy"] or "").splitlines():
                if line.strip():
                    _print_fix(line.strip())


def _columns() -> int:
    import shutil

    return max(shutil.get_terminal_size().columns, 40)


def _print_wrapped(text: str, indent: str = "") -> None:
    from gpu_audit.report.remedy import wrapped

    print("\n".join(wrapped(text, _columns() - 1, indent)))


def _print_fix(line: str) -> None:
    from gpu_audit.report.remedy import fix_lines

    print("\n".join(fix_lines(line, _columns() - 1, "    fix: ")))
