"""The user's own command as a validation workload: what it is, and how each stage runs it.

``gpu-audit validate [OPTIONS] -- COMMAND...`` runs ``COMMAND`` once per stage (and per
allocator variant), unchanged but for its placeholders:

- ``{cycles}``: the stage's cycle count (3 for smoke, 50 for classical, ...);
- ``{stage}``: the stage's name;
- ``{run_dir}``: a folder of its own for this stage (``<run>/scripts/<variant>.<stage>``);
- ``{quantum}``: ``--disable-quantum``, ``--quantum-lite`` or nothing, following the stage's
  quantum mode (the words are ``quantum_flags`` in ``[tool.gpu-audit.validate]``);
- ``{resume}``: nothing on a stage's first attempt; on a later one, the script's own resume
  flag (``resume_flag``, a template that may use the placeholders above);
- ``{batch}``: the batch size, from ``--batch N``; a stage whose command runs out of memory is
  run again with it halved (the OOM retry a command can have: the whole stage, not the step).

A placeholder that is a whole argument and expands to nothing is dropped; one expanding to
several words (``quantum_flags = {lite = "--quantum lite"}``) becomes several arguments. ``{{``
and ``}}`` are literal braces. Any other ``{name}`` is a usage error (exit 3).

Pure and plain data: the plan stores a :class:`ScriptSpec`; the script supervisor expands it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from gpu_audit.errors import UsageError

PLACEHOLDERS = ("cycles", "stage", "run_dir", "quantum", "resume", "batch")
DEFAULT_QUANTUM_FLAGS = {"off": "--disable-quantum", "lite": "--quantum-lite", "full": ""}
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_METRIC_NAME = re.compile(r"^[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class ScriptSpec:
    """An unmodified command run by the stages (everything after ``--``)."""

    command: list[str]
    cycle_pattern: str | None = None  # a line matching it ends a cycle
    metrics: dict[str, str] = field(default_factory=dict)  # name -> regex with one group
    quantum_flags: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_QUANTUM_FLAGS))
    resume_flag: str | None = None  # template for {resume} on a resumed stage
    batch: int | None = None  # {batch} to start from; halved after an out-of-memory

    @property
    def takes_batch(self) -> bool:
        return any("{batch}" in arg for arg in self.command)

    @property
    def counts_its_cycles(self) -> bool:
        """Whether the command is told its cycle count (else gpu-audit stops it)."""
        return any("{cycles}" in arg for arg in self.command)

    def display(self) -> str:
        """The command as the user wrote it: a word is quoted only where a shell needs it,
        and a ``{placeholder}`` is no reason to (a shell leaves ``{cycles}`` as it is)."""
        return " ".join(shown_word(word) for word in self.command)


def shown_word(word: str) -> str:
    """``word`` shell-quoted only when it needs to be, placeholders read as plain letters."""
    plain = _PLACEHOLDER.sub(lambda m: "x" if m[1] in PLACEHOLDERS else m[0], word)
    return word if word and shlex.quote(plain) == plain else shlex.quote(word)


def placeholders_in(text: str) -> list[str]:
    return [m[1] for m in _PLACEHOLDER.finditer(text) if m[1] is not None]


def check_placeholders(text: str, where: str, allowed: tuple[str, ...] = PLACEHOLDERS) -> None:
    for name in placeholders_in(text):
        if name not in allowed:
            raise UsageError(f"{where}: unknown placeholder {{{name}}} in {text!r} (known: "
                             + ", ".join(f"{{{p}}}" for p in allowed)
                             + "; write {{ and }} for literal braces)")


def make_spec(command: list[str], *, cycle_pattern: str | None = None,
              metrics: list[str] | dict[str, str] | None = None,
              quantum_flags: dict[str, str] | None = None,
              resume_flag: str | None = None, batch: int | None = None) -> ScriptSpec:
    """Check everything about the command before any stage runs; :class:`UsageError` if not."""
    if not command or not command[0].strip():
        raise UsageError("no command after `--` (e.g. gpu-audit validate -- python train.py "
                         "--steps {cycles})")
    for arg in command:
        check_placeholders(arg, "the command")
    if cycle_pattern is not None:
        _compile(cycle_pattern, "--cycle-pattern", groups=None)
    parsed = parse_metrics(metrics or [])
    flags = dict(DEFAULT_QUANTUM_FLAGS)
    for mode, words in (quantum_flags or {}).items():
        if mode not in flags:
            raise UsageError(f"quantum_flags: unknown quantum mode {mode!r} (off, lite, full)")
        if not isinstance(words, str):
            raise UsageError(f"quantum_flags.{mode}: expected a string, got {words!r}")
        check_placeholders(words, f"quantum_flags.{mode}", ())
        flags[mode] = words
    if resume_flag is not None:
        check_placeholders(resume_flag, "resume_flag",
                           tuple(p for p in PLACEHOLDERS if p != "resume"))
    spec = ScriptSpec(command=list(command), cycle_pattern=cycle_pattern, metrics=parsed,
                      quantum_flags=flags, resume_flag=resume_flag, batch=batch)
    if spec.takes_batch and batch is None:
        raise UsageError("the command uses {batch}: give the batch size to start from with "
                         "--batch N (or batch = N in [tool.gpu-audit.validate])")
    if batch is not None and not spec.takes_batch:
        raise UsageError(f"--batch {batch}: the command has no {{batch}} placeholder to put it in")
    return spec


def parse_metrics(items: list[str] | dict[str, str]) -> dict[str, str]:
    """``--metric NAME=REGEX`` (or a ``metrics`` table): the regex's first group (or, without
    a group, the whole match) is the number."""
    pairs: list[tuple[str, str]] = []
    if isinstance(items, dict):
        pairs = [(str(k), v) for k, v in items.items()]
    else:
        for item in items:
            name, sep, regex = item.partition("=")
            if not sep:
                raise UsageError(f"--metric {item!r}: expected NAME=REGEX, e.g. "
                                 "'loss=loss[=:]\\s*([0-9.eE+-]+)'")
            pairs.append((name.strip(), regex))
    metrics: dict[str, str] = {}
    for name, regex in pairs:
        if not _METRIC_NAME.match(name):
            raise UsageError(f"--metric {name!r}: a metric name is letters, digits, '_' and '.'")
        if not isinstance(regex, str):
            raise UsageError(f"metrics.{name}: expected a regular expression, got {regex!r}")
        _compile(regex, f"--metric {name}", groups=1)
        metrics[name] = regex
    return metrics


def _compile(regex: str, where: str, groups: int | None) -> re.Pattern[str]:
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise UsageError(f"{where} {regex!r}: not a regular expression ({exc})") from None
    if groups is not None and pattern.groups > groups:
        raise UsageError(f"{where} {regex!r}: use at most {groups} capturing group (the number); "
                         "(?:...) groups do not capture")
    return pattern


def expand(spec: ScriptSpec, *, stage: str, cycles: int, quantum: str, run_dir: str,
           resumed: bool, batch: int | None = None) -> list[str]:
    """The command for one stage attempt, placeholders filled in."""
    values = {"cycles": str(cycles), "stage": stage, "run_dir": run_dir,
              "quantum": spec.quantum_flags.get(quantum, ""), "resume": "",
              "batch": str(batch if batch is not None else spec.batch)}
    if resumed and spec.resume_flag:
        values["resume"] = _fill(spec.resume_flag, values)
    argv: list[str] = []
    for arg in spec.command:
        whole = re.fullmatch(r"\{(quantum|resume)\}", arg)
        if whole:
            argv.extend(shlex.split(values[whole[1]]))
            continue
        argv.append(_fill(arg, values))
    return argv


def _fill(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        token = match[0]
        if token in ("{{", "}}"):
            return token[0]
        return values[match[1]]

    return _PLACEHOLDER.sub(one, text)


def script_notes(script: ScriptSpec) -> list[str]:
    """What the report says plainly about how a command is run."""
    notes = ["a command resumes at stage granularity: --resume re-runs the first stage that "
             "did not pass from its start (with {resume} filled in, for a script that can "
             "continue itself, whose cycles then count from where it resumed: "
             "docs/validate-scripts.md); the stages that passed are not repeated",
             "the OOM retry inside a cycle does not apply to a command (half a step of its "
             "own loop cannot be re-run): "
             + ("an out-of-memory runs the stage again from its start with {batch} halved, up "
                "to --max-retries times" if script.takes_batch else
                "an out-of-memory fails the stage; compare allocator settings with "
                "--max-split-size-mb / --alloc-conf, or give the command a {batch} placeholder "
                "and --batch N to have the stage re-run at half the batch")]
    if not script.counts_its_cycles:
        notes.append("the command has no {cycles} placeholder: gpu-audit ends it after each "
                     "stage's cycles, between two steps")
    return notes
