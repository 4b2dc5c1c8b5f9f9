"""The stage plan: flags and ``[tool.gpu-audit.validate]`` in, a checked :class:`Plan` out.
The table itself is read and its values checked in :mod:`gpu_audit.config.validate_config`.

Stages run in order, each gating the next (DESIGN): ``imports``, ``smoke`` (3 cycles),
``classical`` (50, quantum off), ``quantum-lite`` (50, capped simulator), ``full`` (500).
``--cycles N`` sets the final stage's length (earlier stages never run longer than it);
``--disable-quantum`` drops the quantum stages and runs ``full`` classically; ``--quantum-lite``
makes the quantum stages lite. A stage identical to an earlier one (same length, same quantum
mode) is dropped, so ``--disable-quantum --cycles 50`` runs imports, smoke, then one 50-cycle
classical stage. A comma list of ``--max-split-size-mb`` values repeats the plan per value.

Everything a worker could trip over later is checked here first, so bad values exit 3 before any
worker starts.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_audit.config import Policy
from gpu_audit.config.schema import VALIDATE, VALIDATE_STAGES, key_option_default, table
from gpu_audit.config.schema import default as _default
from gpu_audit.errors import UsageError
from gpu_audit.knowledge.allocator import BOTH_VARS, max_split_minimum
from gpu_audit.units import installed_torch_version, parse_size, plural
from gpu_audit.validate.allocconf import AllocConf, parse_alloc_conf, with_max_split
from gpu_audit.validate.gates import parse_requirement
from gpu_audit.validate.script.spec import ScriptSpec, make_spec, script_notes

STAGE_NAMES = VALIDATE_STAGES
QUANTUM_MODES = ("off", "lite", "full")
DEFAULT_WORKLOAD = "gpu_audit.validate.workloads.reference:ReferenceWorkload"
DEFAULT_CYCLES: int = _default(VALIDATE, "cycles")
SMOKE_CYCLES = 3
GATE_CYCLES = 50
# Values one --max-split-size-mb compares: each repeats every stage of the plan.
MAX_SPLIT_VARIANTS = 16
_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:[0-9]{1,4})$")
_WORKLOAD_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


@dataclass(frozen=True)
class StageSpec:
    name: str
    cycles: int  # 0 for imports
    quantum: str  # "off", "lite" or "full"

    @property
    def description(self) -> str:
        if self.name == "imports":
            return "imports, CUDA initialisation, a small allocation round trip"
        mode = {"off": "quantum off", "lite": "quantum lite", "full": "quantum full"}[self.quantum]
        return f"{plural(self.cycles, 'cycle')}, {mode}"


@dataclass(frozen=True)
class Variant:
    """One allocator configuration the plan runs under."""

    label: str  # "default", "max-split-128", "max-split-none"
    alloc_conf: str | None  # the string set as PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF
    max_split_size_mb: int | None = None
    expected_settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    stages: list[StageSpec]
    variants: list[Variant]
    workload: str
    workload_paths: list[str]  # folders the worker puts on sys.path (cwd, config folder)
    device: str  # as asked: auto, cpu, cuda, cuda:N
    emulate_memory_bytes: int | None
    max_retries: int
    retry_backoff_s: float
    checkpoint_every_pct: float
    requires: list[str]
    max_fragmentation_pct: float
    max_swap_used_bytes: int
    hang_factor: float
    hang_min_s: float
    hang_max_s: float
    startup_timeout_s: float
    seed: int
    final_cycles: int
    torch_version: str | None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    script: ScriptSpec | None = None  # an unmodified command instead of a workload class

    def leg_keys(self) -> list[str]:
        return [leg_key(v.label, s.name) for v in self.variants for s in self.stages]

    def stage(self, name: str) -> StageSpec:
        return next(s for s in self.stages if s.name == name)

    def variant(self, label: str) -> Variant:
        return next(v for v in self.variants if v.label == label)


def leg_key(variant: str, stage: str) -> str:
    return f"{variant}/{stage}"


def split_leg(key: str) -> tuple[str, str]:
    variant, _, stage = key.partition("/")
    return variant, stage


@dataclass
class ValidateOptions:
    """What the user asked for, flags merged over the configuration file."""

    stages: list[str] | None = key_option_default("stages")
    cycles: int = key_option_default("cycles")
    disable_quantum: bool = key_option_default("disable_quantum")
    quantum_lite: bool = key_option_default("quantum_lite")
    max_split_size_mb: str | None = key_option_default("max_split_size_mb")  # "64,128,none"
    alloc_conf: str | None = key_option_default("alloc_conf")
    device: str = key_option_default("device")
    emulate_memory: str | None = key_option_default("emulate_memory")
    workload: str | None = key_option_default("workload")
    max_retries: int = key_option_default("max_retries")
    retry_backoff_s: float = key_option_default("retry_backoff_s")
    checkpoint_every: str = key_option_default("checkpoint_every")
    requires: list[str] = field(default_factory=list)
    hang_factor: float = key_option_default("hang_factor")
    hang_min_s: float = key_option_default("hang_min_s")
    hang_max_s: float = key_option_default("hang_max_s")
    startup_timeout_s: float = key_option_default("startup_timeout_s")
    seed: int = key_option_default("seed")
    config_dir: str | None = None  # folder of the configuration file, for module workloads
    # everything after `--`: the user's own script
    command: list[str] | None = key_option_default("command")
    cycle_pattern: str | None = key_option_default("cycle_pattern")
    metrics: list[str] | dict[str, str] | None = key_option_default("metrics")
    quantum_flags: dict[str, str] | None = key_option_default("quantum_flags")
    resume_flag: str | None = key_option_default("resume_flag")
    # {batch} of a command: where to start, halved after an OOM
    batch: int | None = key_option_default("batch")


def build_plan(options: ValidateOptions, policy: Policy | None = None, *,
               environ: dict[str, str] | None = None, cwd: Path | None = None) -> Plan:
    """Check every option and build the plan; raises :class:`UsageError` on the first problem."""
    policy = policy or Policy()
    env = os.environ if environ is None else environ
    here = (cwd or Path.cwd()).resolve()
    torch_version = installed_torch_version()
    notes: list[str] = []
    warnings: list[str] = []

    _check_ranges(options)
    device = options.device.strip().lower()
    if not _DEVICE.match(device):
        raise UsageError(f"--device {options.device!r}: expected auto, cpu, cuda or cuda:N")
    emulate = None
    if options.emulate_memory is not None:
        try:
            emulate = parse_size(options.emulate_memory)
        except ValueError as exc:
            raise UsageError(f"--emulate-memory: {exc}") from None
        if emulate <= 0:
            raise UsageError("--emulate-memory must be above 0")
        if device == "cpu":
            warnings.append("--emulate-memory caps GPU memory; it does nothing with --device cpu")
    every = _checkpoint_pct(options.checkpoint_every)

    stages = plan_stages(options.cycles, disable_quantum=options.disable_quantum,
                         quantum_lite=options.quantum_lite, selected=options.stages, notes=notes)
    stage_names = [s.name for s in stages]
    for text in options.requires:
        req = parse_requirement(text, STAGE_NAMES)
        if req.stage is not None and req.stage not in stage_names:
            warnings.append(f"--require {text!r} names stage {req.stage!r}, which this plan "
                            "does not run")

    variants = plan_variants(options, torch_version, env, memory_fraction_set=emulate is not None,
                             warnings=warnings, notes=notes)
    workload, paths = _workload(options, here)
    script = _script(options)
    if script is not None:
        workload = f"command: {script.display()}"
        notes.extend(script_notes(script))
    return Plan(
        stages=stages,
        variants=variants,
        workload=workload,
        workload_paths=paths,
        device=device,
        emulate_memory_bytes=emulate,
        max_retries=options.max_retries,
        retry_backoff_s=options.retry_backoff_s,
        checkpoint_every_pct=every,
        requires=[r.strip() for r in options.requires],
        max_fragmentation_pct=policy.alloc_fragmentation_pct,
        max_swap_used_bytes=policy.max_swap_used_bytes,
        hang_factor=options.hang_factor,
        hang_min_s=options.hang_min_s,
        hang_max_s=options.hang_max_s,
        startup_timeout_s=options.startup_timeout_s,
        seed=options.seed,
        final_cycles=options.cycles,
        torch_version=torch_version,
        notes=notes,
        warnings=warnings,
        script=script,
    )


def _script(options: ValidateOptions) -> ScriptSpec | None:
    """The user's command (``-- COMMAND...`` or ``command = [...]``), checked."""
    given = [name for name, value in (("--cycle-pattern", options.cycle_pattern),
                                      ("--metric", options.metrics),
                                      ("resume_flag", options.resume_flag),
                                      ("--batch", options.batch)) if value]
    if not options.command:
        if given:
            raise UsageError(f"{', '.join(given)} applies to a command run with "
                             "`gpu-audit validate [OPTIONS] -- COMMAND...`; none was given")
        return None
    if options.workload:
        raise UsageError("--workload and a command after `--` are two different workloads; "
                         "give one")
    return make_spec(options.command, cycle_pattern=options.cycle_pattern,
                     metrics=options.metrics, quantum_flags=options.quantum_flags,
                     resume_flag=options.resume_flag, batch=options.batch)


def plan_stages(cycles: int, *, disable_quantum: bool, quantum_lite: bool,
                selected: list[str] | None = None, notes: list[str] | None = None
                ) -> list[StageSpec]:
    """The stages, in order, as DESIGN defines them."""
    notes = notes if notes is not None else []
    final_mode = "off" if disable_quantum else ("lite" if quantum_lite else "full")
    stages = [
        StageSpec("imports", 0, "off"),
        StageSpec("smoke", min(SMOKE_CYCLES, cycles), "off" if disable_quantum else "lite"),
        StageSpec("classical", min(GATE_CYCLES, cycles), "off"),
    ]
    if not disable_quantum:
        stages.append(StageSpec("quantum-lite", min(GATE_CYCLES, cycles), "lite"))
    stages.append(StageSpec("full", cycles, final_mode))

    if selected:
        wanted = _selected_stages(selected, disable_quantum)
        stages = [s for s in stages if s.name in wanted]
    kept: list[StageSpec] = []
    for stage in stages:
        twin = next((k for k in kept if k.cycles == stage.cycles and k.quantum == stage.quantum
                     and k.name != "imports"), None)
        if twin is not None:
            notes.append(f"stage {stage.name} would repeat stage {twin.name} ({stage.description})"
                         "; it runs once")
            continue
        kept.append(stage)
    return kept


def _selected_stages(selected: list[str], disable_quantum: bool) -> set[str]:
    wanted: set[str] = set()
    for item in selected:
        for name in (part.strip() for part in item.split(",")):
            if not name:
                continue
            if name not in STAGE_NAMES:
                raise UsageError(f"--stage {name!r}: unknown stage (stages: "
                                 f"{', '.join(STAGE_NAMES)})")
            if name == "quantum-lite" and disable_quantum:
                raise UsageError("--stage quantum-lite and --disable-quantum contradict each "
                                 "other")
            wanted.add(name)
    if not wanted:
        raise UsageError("--stage: no stage named")
    return wanted


def plan_variants(options: ValidateOptions, torch_version: str | None, env: Any, *,
                  memory_fraction_set: bool, warnings: list[str], notes: list[str]
                  ) -> list[Variant]:
    base = _base_conf(options, torch_version, env, memory_fraction_set, notes)
    if base is not None:
        warnings.extend(base.warnings)
    if options.max_split_size_mb is None:
        return [Variant("default", base.text if base else None,
                        expected_settings=base.expected_settings() if base else {})]
    values = _max_split_values(options.max_split_size_mb, torch_version)
    variants = []
    for value in values:
        conf = with_max_split(base, value, torch_version=torch_version,
                              memory_fraction_set=memory_fraction_set)
        label = f"max-split-{value if value is not None else 'none'}"
        variants.append(Variant(label, conf.text if conf else None, value,
                                conf.expected_settings() if conf else {}))
    return variants


def _base_conf(options: ValidateOptions, torch_version: str | None, env: Any,
               memory_fraction_set: bool, notes: list[str]) -> AllocConf | None:
    if options.alloc_conf is not None:
        if not options.alloc_conf.strip():
            return None
        return parse_alloc_conf(options.alloc_conf, torch_version=torch_version,
                                memory_fraction_set=memory_fraction_set)
    inherited = {name: env[name] for name in BOTH_VARS if env.get(name)}
    if not inherited:
        return None
    if len(set(inherited.values())) > 1:
        raise UsageError(
            "PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF are both set and differ "
            f"({inherited['PYTORCH_CUDA_ALLOC_CONF']!r} vs {inherited['PYTORCH_ALLOC_CONF']!r}); "
            "which one torch reads depends on its version. Set one of them, or pass --alloc-conf"
        )
    name, text = next(iter(inherited.items()))
    notes.append(f"allocator settings taken from {name} in the environment: {text}")
    return parse_alloc_conf(text, torch_version=torch_version, flag=name,
                            memory_fraction_set=memory_fraction_set)


def _max_split_values(text: str, torch_version: str | None) -> list[int | None]:
    lowest = max_split_minimum(torch_version)
    values: list[int | None] = []
    if text.count(",") >= MAX_SPLIT_VARIANTS:  # each value repeats the whole plan
        raise UsageError(f"--max-split-size-mb: at most {MAX_SPLIT_VARIANTS} values to compare")
    for part in (p.strip().lower() for p in text.split(",")):
        if part in ("none", "default", "unlimited"):
            value = None
        elif re.fullmatch(r"[0-9]{1,9}", part):  # up to ~1 PiB in MiB: ASCII digits only
            value = int(part)
            if value < lowest:
                where = f"torch {torch_version}" if torch_version else "every torch version"
                raise UsageError(f"--max-split-size-mb {value} is below the minimum for {where}: "
                                 f"use {lowest} or more (21 works on every version)")
        else:
            raise UsageError(f"--max-split-size-mb {part!r}: expected whole MiB values, "
                             "comma-separated (e.g. 64,128,256; 'none' for the default)")
        if value in values:
            raise UsageError(f"--max-split-size-mb lists {part} twice")
        values.append(value)
    if not values:
        raise UsageError("--max-split-size-mb: no value given")
    return values


def _checkpoint_pct(text: str) -> float:
    raw = str(text).strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"--checkpoint-every {text!r}: expected a percentage of a stage, "
                         "e.g. 10 or 10%") from None
    if not 0 < value <= 100:
        raise UsageError(f"--checkpoint-every {text!r}: must lie in (0, 100]")
    return value


def checkpoint_interval(cycles: int, pct: float) -> int:
    """Cycles between checkpoints: ``pct`` percent of the stage, at least one cycle."""
    return max(1, math.ceil(cycles * pct / 100))


def _check_ranges(options: ValidateOptions) -> None:
    """Each number within its key's declared range (a file's or a variable's value was checked
    where it was read, naming its line or variable; here a flag's is), then what ties two."""
    for declared in table(VALIDATE).values():
        value = getattr(options, declared.option, None)
        if isinstance(value, int | float) and declared.flag:
            problem = declared.out_of_range(value)
            if problem:
                raise UsageError(f"{declared.flag} {value!r}: {problem}")
    if options.hang_max_s < options.hang_min_s:
        raise UsageError("--hang-max must be at least --hang-min")
    if options.disable_quantum and options.quantum_lite:
        raise UsageError("--disable-quantum and --quantum-lite contradict each other")


def _workload(options: ValidateOptions, here: Path) -> tuple[str, list[str]]:
    paths = [str(here)]
    if options.config_dir and options.config_dir not in paths:
        paths.append(options.config_dir)
    spec = (options.workload or "").strip()
    if not spec:
        return DEFAULT_WORKLOAD, paths
    target, sep, attr = spec.rpartition(":")
    if sep and target.endswith(".py"):
        given = Path(target).expanduser()
        candidates = [given] if given.is_absolute() else [here / given]
        if options.config_dir and not given.is_absolute():
            candidates.append(Path(options.config_dir) / given)
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise UsageError(f"--workload {spec!r}: no such file {target}")
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", attr):
            raise UsageError(f"--workload {spec!r}: {attr!r} is not an attribute name")
        return f"{path.resolve()}:{attr}", paths
    if not _WORKLOAD_MODULE.match(spec):
        raise UsageError(f"--workload {spec!r}: expected package.module:Attr or path/file.py:Attr")
    return spec, paths
