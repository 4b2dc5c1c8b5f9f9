"""Every configuration key, declared once: its table, type, default, range or choices, unit,
description, the commands that read it, and whether a ``GPU_AUDIT_<KEY>`` variable
(``GPU_AUDIT_VALIDATE_<KEY>`` for validate's) or a flag sets it.

Everything else is derived from these declarations: which keys each table accepts and how they
are read and checked (:mod:`.files`, :mod:`.load`, :mod:`.policy`, :mod:`.validate_config`), the
``GPU_AUDIT_<KEY>`` variables, the help of the flags that set a key (default rendered from here),
the reference page ``docs/settings.md`` and the JSON Schema of ``gpu-audit.toml``
(:mod:`.reference`). :class:`~.policy.Policy`, :class:`~.check_policy.CheckPolicy` and
:class:`~gpu_audit.validate.plan.ValidateOptions` keep their typed fields, with defaults taken
from here; ``tests/config/test_schema.py`` fails when a key is in one place only.

Plain classes and tuples: this module is imported on every start.
"""

from __future__ import annotations

from typing import Any

from gpu_audit.bounds import LARGEST_INT, LOWEST_INT

ROOT, CHECK, VALIDATE = "", "check", "validate"
TABLES = (ROOT, CHECK, VALIDATE)
# Where each table is in pyproject.toml; in gpu-audit.toml the sub-tables are [check], [validate].
TABLE_TITLES = {ROOT: "[tool.gpu-audit]", CHECK: "[tool.gpu-audit.check]",
                VALIDATE: "[tool.gpu-audit.validate]"}

SEVERITIES = ("info", "warning", "error", "critical")
MODES = ("fail", "warn", "ignore")  # what a check makes of the problem it judges
CHECK_STAGES = ("imports", "smoke")  # the validation stages check may run; later ones take minutes
VALIDATE_STAGES = ("imports", "smoke", "classical", "quantum-lite", "full")
DEVICES = ("auto", "cpu", "cuda", "cuda:N")
# No threshold needs more (a petabyte in GiB, 30,000 years in hours); larger ones overflow.
MAX_NUMBER = 1e12
# The most any of validate's durations or factors may be: about four months of seconds.
MAX_SECONDS = 1e7

_RULES = ("scan", "check", "fleet")  # the commands that judge a scan with the rules
_REPORTS = ("scan", "check", "diff", "diag", "fleet", "merge")  # the commands that keep reports


class Setting:
    """One key of one table.

    ``type`` is ``float``, ``int``, ``str``, ``bool``, ``list`` (of strings) or ``dict`` (of
    strings); ``optional`` keys may be unset (``None``). ``low``/``high`` bound a number
    (``low_open``: the lowest itself is refused); ``choices`` the words a string (or each item of
    a list) may be; ``format`` names a check of its own (``severity``, ``regex``, ``version``).
    ``flag`` is the option that sets it, ``option`` its name in the options of the command that
    reads it where that differs from the key.
    """

    __slots__ = (
        "choices",
        "commands",
        "default",
        "default_text",
        "env",
        "flag",
        "format",
        "help",
        "high",
        "key",
        "low",
        "low_open",
        "option",
        "optional",
        "table",
        "type",
        "unit",
    )

    def __init__(self, table: str, key: str, type: type, default: Any, help: str, *,
                 commands: tuple[str, ...], optional: bool = False, unit: str = "",
                 low: float | None = None, low_open: bool = False, high: float | None = None,
                 choices: tuple[str, ...] = (), format: str = "", flag: str | None = None,
                 option: str | None = None, default_text: str | None = None,
                 env: bool | None = None) -> None:
        self.table, self.key, self.type, self.default = table, key, type, default
        self.help, self.commands, self.optional, self.unit = help, commands, optional, unit
        self.low, self.low_open, self.high = low, low_open, high
        self.choices, self.format, self.flag = choices, format, flag
        self.option = option or key
        self.default_text = default_text
        self.env = True if env is None else env

    def __repr__(self) -> str:
        return f"Setting({self.table!r}, {self.key!r})"

    def out_of_range(self, value: float) -> str | None:
        """Why a number lies outside this key's declared range (``"must be at least 1"``), or
        None: the one wording of a range, whether a file, a variable or a flag gave the value."""
        if (self.low is None and self.high is None) or isinstance(value, bool):
            return None
        if value != value or value in (float("inf"), float("-inf")):
            return "must be a finite number"
        too_low = self.low is not None and (value < self.low
                                            or (value == self.low and self.low_open))
        high_bound = MAX_NUMBER if self.high is None else self.high
        too_high = value > high_bound
        if not too_low and not too_high:
            return None
        high = shown_number(high_bound)
        if self.low is None:
            return f"must be at most {high}"
        low = shown_number(self.low)
        if self.low_open:
            return f"must be above {low} and at most {high}"
        return f"must lie between {low} and {high}"

    @property
    def env_name(self) -> str | None:
        if not self.env:
            return None
        # validate's keys carry the table's name: GPU_AUDIT_STAGES already names check's stages.
        prefix = "GPU_AUDIT_VALIDATE_" if self.table == VALIDATE else "GPU_AUDIT_"
        return prefix + self.key.upper()

    @property
    def shown_default(self) -> str:
        """The default as help and the reference show it."""
        if self.default_text is not None:
            return self.default_text
        value = self.default
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return f"{value:g}"
        if isinstance(value, list):
            return "none" if not value else ", ".join(value)
        return "unset" if value is None else str(value)

    def flag_help(self, text: str | None = None) -> str:
        """Help for the flag that sets this key: ``text`` (else the key's description) and the
        default, from this declaration (none for a key that is off or empty unless set)."""
        base = text or self.help
        unset = self.default is None or self.default is False or self.default == []
        if self.default_text is None and unset:
            return base
        return f"{base.rstrip('.')} (default: {self.shown_default})."


def shown_number(number: float) -> str:
    """A bound as a person writes it: 20, 0.5, 1e+07 (an integer in full)."""
    if isinstance(number, int) or (number.is_integer() and abs(number) < 1e6):
        return str(int(number))
    return f"{number:g}"


def _root(key: str, type: type, default: Any, help: str, **more: Any) -> Setting:
    more.setdefault("commands", _RULES)
    return Setting(ROOT, key, type, default, help, **more)


def _check(key: str, type: type, default: Any, help: str, **more: Any) -> Setting:
    return Setting(CHECK, key, type, default, help, commands=("check",), **more)


def _validate(key: str, type: type, default: Any, help: str, **more: Any) -> Setting:
    # Tables and the command have no one-line form: the file or the flags set them.
    more.setdefault("env", type is not dict and key != "command")
    return Setting(VALIDATE, key, type, default, help, commands=("validate",), **more)


_PCT = {"unit": "%", "high": 100.0}

SETTINGS: tuple[Setting, ...] = (
    # [tool.gpu-audit]: what the scan rules read (check may set any of them again for itself)
    _root("max_swap_used_gib", float, 2.0, "Swap in use above this is a finding.", unit="GiB"),
    _root("min_host_available_pct", float, 10.0,
          "Host memory available below this share of the total is a finding.", **_PCT),
    _root("min_free_vram_pct", float, 10.0,
          "A GPU with less free memory than this share of its total is a finding.", **_PCT),
    _root("unattributed_vram_allowance_mib", float, 512.0,
          "GPU memory in use that no process accounts for, tolerated before it is a finding.",
          unit="MiB"),
    _root("alloc_fragmentation_pct", float, 50.0,
          "Share of the allocator's reserved memory left unused above which it is fragmented.",
          commands=(*_RULES, "validate"), **_PCT),
    _root("temperature_margin_c", float, 5.0,
          "A GPU this close to its slowdown temperature is a finding.", unit="°C"),
    _root("busy_utilization_pct", float, 20.0,
          "A GPU this busy should run its PCIe link at full speed.", **_PCT),
    _root("small_gpu_gib", float, 8.0,
          "At or below this much memory, allocator advice is given unasked.", unit="GiB"),
    _root("xid_recent_hours", float, 24.0,
          "Application-caused Xids older than this are only noted.", unit="hours"),
    _root("keep_reports", int, 50,
          "Reports per command and host kept in the report folder (0: keep all).",
          commands=_REPORTS),
    _root("unreleased_vram_min_gib", float, 1.0,
          "vram-unreleased: report memory no process accounts for from this much growth on.",
          unit="GiB", low=0.0, low_open=True, commands=("diff", "check"),
          flag="--unreleased-min-gib"),
    _root("fail_on", str, "error", "Exit 2 at or above this severity.", choices=SEVERITIES,
          format="severity", flag="--fail-on",
          commands=("scan", "check", "diff", "fleet", "validate")),
    _root("ignore", list, [],
          "Finding ids (and, for check, check ids) to leave out; misspelt ids are errors.",
          commands=(*_RULES, "diff")),
    # [tool.gpu-audit.check]: what only check reads
    _check("min_gpus", int, 1, "Fewer GPUs than this fails."),
    _check("gpu_name", str, None, "A regular expression searched in each GPU's name.",
           optional=True, format="regex"),
    _check("min_gpu_memory_gib", float, None, "A GPU with less total memory than this fails.",
           optional=True, unit="GiB"),
    _check("min_free_vram_gib", float, None, "A GPU with less free memory than this fails.",
           optional=True, unit="GiB"),
    _check("max_gpu_temperature_c", float, None, "A GPU hotter than this fails.", optional=True,
           unit="°C"),
    _check("require_persistence_mode", bool, False, "Every GPU must have persistence mode on."),
    _check("min_driver_version", str, None, "Oldest NVIDIA driver accepted, e.g. 535.104.05.",
           optional=True, format="version"),
    _check("min_cuda_driver_version", str, None,
           "Oldest CUDA version the driver must support, e.g. 12.4.", optional=True,
           format="version"),
    _check("free_vram", str, "fail", "What too little free GPU memory makes of the check.",
           choices=MODES),
    _check("swap", str, "fail", "What swap in use makes of the check.", choices=MODES),
    _check("duplicate_backends", str, "fail",
           "What two CUDA allocator settings variables that disagree make of the check.",
           choices=MODES),
    _check("unattributed_vram", str, "warn",
           "What GPU memory no process accounts for makes of the check.", choices=MODES),
    _check("foreign_processes", str, "fail",
           "What other users' processes on the GPUs make of the check.", choices=MODES),
    _check("own_processes", str, "warn",
           "What your own processes already on the GPUs make of the check.", choices=MODES),
    _check("warn_on", str, "warning",
           "Scan findings at or above this severity (below fail_on) warn.", choices=SEVERITIES,
           format="severity"),
    _check("require_torch_cuda", bool, False, "torch must import and see CUDA."),
    _check("stages", list, [], "Also run these validation stages after the static checks.",
           choices=CHECK_STAGES, flag="--stages"),
    _check("slurm_hook_deadline_s", float, 30.0,
           "check --slurm answers within this (Slurm's hook timeouts are minutes).",
           unit="seconds", low=0.0, low_open=True, high=3600.0),
    _check("slurm_settle_s", float, 3.0,
           "An epilog that finds memory still held looks once more after this long (0: never).",
           unit="seconds", low=0.0, high=300.0),
    # [tool.gpu-audit.validate]: gpu-audit validate's plan (flags over the file)
    _validate("stages", list, None,
              "Run only these stages (repeat or comma-separate): imports, smoke, classical, "
              "quantum-lite, full.", optional=True, choices=VALIDATE_STAGES, flag="--stage"),
    _validate("cycles", int, 500, "Length of the final stage.", flag="--cycles", low=1,
              high=10**9),
    _validate("disable_quantum", bool, False, "Drop the quantum stages; run `full` classically.",
              flag="--disable-quantum"),
    _validate("quantum_lite", bool, False,
              "Quantum stages use the capped (16-qubit) simulator.", flag="--quantum-lite"),
    _validate("max_split_size_mb", str, None,
              "Allocator max_split_size_mb; a comma list (e.g. none,128,512) runs the plan once "
              "per value and compares them.", optional=True, flag="--max-split-size-mb",
              format="int-list", unit="MB"),
    _validate("alloc_conf", str, None,
              "Allocator settings, set as both PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF "
              "in each worker before torch loads.", optional=True, flag="--alloc-conf",
              default_text="the environment's"),
    _validate("device", str, "auto",
              "auto: the GPU with the most free memory, else the CPU (with a warning); cuda: "
              "require a GPU.", choices=DEVICES, flag="--device"),
    _validate("emulate_memory", str, None,
              "Cap the worker's usable GPU memory (e.g. 4GiB) to rehearse a smaller card.",
              optional=True, format="size", flag="--emulate-memory"),
    _validate("workload", str, None,
              "Your workload (package.module:Attr or path/file.py:Attr).", optional=True,
              flag="--workload", default_text="the built-in reference workload"),
    _validate("max_retries", int, 3,
              "Retries of a cycle after an out-of-memory error, halving the batch each time.",
              flag="--max-retries", low=0, high=20),
    _validate("retry_backoff_s", float, 0.5,
              "First wait before an OOM retry; doubles each time.", unit="seconds",
              flag="--retry-backoff", low=0, high=MAX_SECONDS),
    _validate("checkpoint_every_pct", float, 10.0,
              "Checkpoint the workload every PCT percent of a stage.", unit="%",
              flag="--checkpoint-every", option="checkpoint_every"),
    _validate("require", list, [],
              "Gate on a metric: 'phi>0.3' (every cycle), 'mean(phi)>=0.5', "
              "'classical:min(phi)>0.3'. Repeatable.", flag="--require", option="requires"),
    _validate("hang_factor", float, 10.0,
              "A cycle hangs when it runs X times longer than the slowest so far.",
              flag="--hang-factor", low=1, high=MAX_SECONDS),
    _validate("hang_min_s", float, 60.0,
              "Lower bound of the hang limit; for a command, the limit until its second cycle "
              "(its first, which includes its start-up, does not count).", unit="seconds",
              flag="--hang-min", low=0, low_open=True, high=MAX_SECONDS),
    _validate("hang_max_s", float, 3600.0, "Upper bound of the hang limit.", unit="seconds",
              flag="--hang-max", low=0, low_open=True, high=MAX_SECONDS),
    _validate("startup_timeout_s", float, 900.0,
              "Limit for imports, CUDA start-up, set-up and the first cycle.", unit="seconds",
              flag="--startup-timeout", low=0, low_open=True, high=MAX_SECONDS),
    _validate("seed", int, 0, "Seed passed to the workload.", flag="--seed", low=LOWEST_INT,
              high=LARGEST_INT),
    _validate("command", list, None,
              "Your own script, unchanged, run once per stage: placeholders {cycles}, {stage}, "
              "{run_dir}, {quantum}, {resume}, {batch}.", optional=True, flag="-- COMMAND"),
    _validate("cycle_pattern", str, None,
              "With -- COMMAND: an output line matching REGEX ends a cycle (used when the script "
              "neither calls gpu_audit.monitor.step() nor steps a torch optimizer).",
              optional=True, format="regex", flag="--cycle-pattern"),
    _validate("metrics", dict, None,
              "With -- COMMAND: numbers read from output lines, name = regex with one group, "
              "for --require.", optional=True, flag="--metric"),
    _validate("quantum_flags", dict, None,
              "With -- COMMAND: the words {quantum} stands for in each quantum mode "
              "(off, lite, full).", optional=True),
    _validate("resume_flag", str, None,
              "With -- COMMAND: the words {resume} stands for when a stage resumes.",
              optional=True),
    _validate("batch", int, None,
              "With -- COMMAND: the value of {batch}; a stage whose command runs out of memory "
              "runs again with it halved, up to --max-retries times.", optional=True,
              flag="--batch", low=1),
)


def table(name: str) -> dict[str, Setting]:
    """The keys of one table, by name."""
    return {s.key: s for s in SETTINGS if s.table == name}


def setting(table_name: str, key: str) -> Setting:
    for item in SETTINGS:
        if item.table == table_name and item.key == key:
            return item
    raise KeyError(f"no key {key!r} in table {TABLE_TITLES.get(table_name, table_name)}")


def default(table_name: str, key: str) -> Any:
    """A key's default, for the typed classes' fields (a fresh list each time)."""
    value = setting(table_name, key).default
    return list(value) if isinstance(value, list) else value


def key_types(*tables: str) -> dict[str, tuple[type, bool]]:
    """Key -> (base type, may be unset) for the keys of ``tables`` (later tables win)."""
    return {s.key: (s.type, s.optional) for s in SETTINGS if s.table in tables}


def key_option_default(option: str) -> Any:
    """The default of the validate key behind option ``option`` of ``ValidateOptions`` (some
    options are named otherwise than their keys: ``requires`` for ``require``). A percentage
    ValidateOptions holds as text is rendered as the flag would give it (``"10"``)."""
    for item in SETTINGS:
        if item.table == VALIDATE and item.option == option:
            value = item.default
            if item.option != item.key and isinstance(value, float):
                return f"{value:g}"
            return list(value) if isinstance(value, list) else value
    raise KeyError(f"no validate key behind option {option!r}")
