"""Every command's options and arguments, declared once, as data.

A declared command is a function taking its options as keyword arguments and returning its exit
code. ``gpu_audit.cli.typer_app`` builds the typer command from the declarations (its ``--help``,
error messages and completion are typer's); a flag that sets a configuration key takes its name,
help and default from :mod:`gpu_audit.config.schema` (:meth:`Option.setting`). For a ``lean``
command (scan, check), :func:`parse` reads the common case, the command followed only by its long
options, from the same declarations without typer (some 30 ms and 200 million instructions less
on every start). Anything else, any value typer would refuse, returns
``None``, and typer parses the line and says what is wrong with it, as it always does.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

# The type of a path option, named without importing pathlib (which a plain scan never needs):
# Option.type reads it as pathlib.Path.
PATH = "path"


def finite_float(text: object) -> float:
    """What every float option reads: ``nan`` and ``inf`` are refused as they are parsed."""
    value = float(text)  # type: ignore[arg-type]
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


class Option:
    """One option (``--name VALUE``, or a flag when ``type`` is ``bool``) or, with
    ``argument``, a positional argument.

    A plain class, not a dataclass: generating a dataclass's methods costs every start some
    millions of instructions, and these are only read.
    """

    __slots__ = ("_type", "argument", "default", "help", "hidden", "key", "max", "metavar", "min",
                 "multiple", "name", "param", "required")

    def __init__(
        self,
        param: str,  # the keyword the command function takes
        name: str,  # "--timeout" (for an argument, its name in messages)
        type: type | str,  # bool (a flag), str, int, float, or Path (or PATH)
        default: Any = None,
        *,
        help: str = "",
        metavar: str | None = None,
        min: float | None = None,  # inclusive bounds of a number
        max: float | None = None,
        multiple: bool = False,  # repeatable (an argument: any number); the value is a list
        hidden: bool = False,  # left out of --help (test modes)
        argument: bool = False,
        required: bool = False,
    ) -> None:
        if getattr(type, "__module__", None) == "pathlib":
            type = PATH  # one spelling, so that parsing a path never needs pathlib
        self.param, self.name, self._type, self.default = param, name, type, default
        self.help, self.metavar, self.min, self.max = help, metavar, min, max
        self.multiple, self.hidden, self.argument = multiple, hidden, argument
        self.required = required
        self.key: str | None = None  # the configuration key this option sets (Option.setting)

    @classmethod
    def setting(cls, table: str, key: str, param: str, type: type | None = None, *,
                help: str | None = None, **more: Any) -> Option:
        """The flag that sets configuration key ``key`` of ``table``: its name and help (with
        the default) come from the schema (:mod:`gpu_audit.config.schema`); it defaults to
        ``None``, "not given", so that the file and ``GPU_AUDIT_<KEY>`` apply beneath it.
        ``type`` is what the flag reads where that differs from the key's type."""
        from gpu_audit.config.schema import setting

        declared = setting(table, key)
        option = cls(param, more.pop("name", declared.flag or ""), type or declared.type, None,
                     help=declared.flag_help(help), **more)
        option.key = key
        return option

    @property
    def type(self) -> type:
        if self._type == PATH:
            from pathlib import Path

            return Path
        return self._type  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Option({self.param!r}, {self.name!r}, {self.type.__name__})"


# Options several commands take, worded once.
# The forms a GPU spec takes (gpu_audit.gpu_selection reads them), as every --gpus help names them.
SPEC_FORMS = ("indices (0,2), GPU-<uuid>, MIG-<uuid>, PCI bus ids (0000:3b:00.0), or job "
              "(SLURM_STEP_GPUS, SLURM_JOB_GPUS or CUDA_VISIBLE_DEVICES)")


def json_option(what: str, schema: str) -> Option:
    """``--json``: print ``what`` as the JSON document of ``schema`` instead of text."""
    return Option("json_out", "--json", bool, False,
                  help=f"Print {what} as JSON (schema {schema}).")


def out_option(what: str = "the markdown report and its JSON twin") -> Option:
    """``--out DIR``: where the report files go (``what`` they are)."""
    return Option("out", "--out", PATH, metavar="DIR",
                  help=f"Folder for {what} (default: reports).")


OUT = out_option()
NO_REPORT = Option("no_report", "--no-report", bool, False, help="Do not write the report files.")
NVML_TIMEOUT = Option("timeout", "--timeout", float, 5.0, min=0.1, max=86400, metavar="SECONDS",
                      help="Longest wait for the NVIDIA driver before reporting it hung.")


class Declared(NamedTuple):
    name: str  # "scan", or "fleet scan" for a command of a group
    options: tuple[Option, ...]
    function: Callable[..., int]
    epilog: str | None = None  # shown after the options in --help
    help: str | None = None  # the command's help, when not its function's docstring
    lean: bool = False  # a plain line of long options runs without typer (see parse)


# Words that end with a full stop without ending the sentence.
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.")


def first_sentence(text: str) -> str:
    """The first sentence of a help text: up to the first full stop that is followed by a space
    (or ends the paragraph) and does not end an abbreviation such as "e.g."; the command list of
    ``gpu-audit --help`` and the command pages show it."""
    words: list[str] = []
    for word in text.split("\n\n", 1)[0].split():
        words.append(word)
        if word.endswith(".") and word.lower() not in _ABBREVIATIONS:
            break
    return " ".join(words)


DECLARED: dict[str, Declared] = {}
# Groups of commands ("fleet"): name -> help.
GROUPS: dict[str, str] = {}

_TYPER_APP = "gpu_audit.cli.typer_app"


def group(name: str, help: str) -> None:
    """Declare ``gpu-audit NAME SUBCOMMAND``: commands named ``"NAME SUBCOMMAND"`` join it."""
    GROUPS[name] = help


def command(
    name: str, options: Sequence[Option], *, epilog: str | None = None, help: str | None = None,
    lean: bool = False,
) -> Callable[[Callable[..., int]], Callable[..., int]]:
    """Declare ``gpu-audit NAME``: the decorated function takes every option as a keyword
    argument and returns the exit code; its docstring (or ``help``) is the command's help,
    ``epilog`` the text after the options. ``lean``: a plain line of long options is parsed
    here, without typer (see :func:`parse`)."""

    def declare(function: Callable[..., int]) -> Callable[..., int]:
        declared = Declared(name, tuple(options), function, epilog, help, lean)
        DECLARED[name] = declared
        typer_app = sys.modules.get(_TYPER_APP)
        if typer_app is not None:  # typer is in use: the command joins its app now
            typer_app.add_declared(declared)
        return function

    return declare


_REFUSED = object()


def _convert(option: Option, text: str) -> Any:
    """``text`` as typer would pass it to the command, or ``_REFUSED`` where typer might say
    anything but yes (it then gets the line and says it)."""
    if text == "":
        return _REFUSED
    if option.type is str:
        return text
    if option._type == PATH:
        # typer's path type refuses an existing path that cannot be read; the rest pass as given.
        try:
            os.stat(text)
        except OSError:
            return option.type(text)
        except ValueError:  # a NUL byte
            return _REFUSED
        return option.type(text) if os.access(text, os.R_OK) else _REFUSED
    try:
        value = finite_float(text) if option.type is float else option.type(text)
    except (ValueError, TypeError):
        return _REFUSED
    if (option.min is not None and value < option.min) or (
        option.max is not None and value > option.max
    ):
        return _REFUSED
    return value


def parse(declared: Declared, args: Sequence[str]) -> dict[str, Any] | None:
    """The keyword arguments for ``declared.function`` from ``args`` (what follows the command
    name), or ``None`` when this line is for typer: anything but known long options given once,
    as ``--flag``, ``--name value`` or ``--name=value``, with values typer would accept. Only a
    ``lean`` command's lines, and only of single-valued long options, are parsed here."""
    if not declared.lean or any(o.argument or o.multiple for o in declared.options):
        return None
    by_name = {option.name: option for option in declared.options}
    values: dict[str, Any] = {}
    at = 0
    while at < len(args):
        name, equals, text = args[at].partition("=")
        at += 1
        option = by_name.get(name)
        if option is None or option.param in values:
            return None
        if option.type is bool:
            if equals:
                return None
            values[option.param] = True
            continue
        if not equals:
            if at == len(args) or args[at].startswith("-"):
                return None
            text = args[at]
            at += 1
        value = _convert(option, text)
        if value is _REFUSED:
            return None
        values[option.param] = value
    return {option.param: values.get(option.param, option.default) for option in declared.options}


def given(declared: Declared, args: Sequence[str], param: str) -> str | None:
    """The text of option ``param`` as the last ``--name VALUE`` or ``--name=VALUE`` on a line
    typer refused (``""`` when the option ends the line), or ``None`` when it is not given.

    The line is read with the declarations: a flag takes no value, so ``--json --format nagios``
    names the format, and the value of another option (``--from --format``) is not mistaken for
    it. Words the declarations do not know are passed over."""
    by_name = {option.name: option for option in declared.options if not option.argument}
    wanted = next((o for o in declared.options if o.param == param and not o.argument), None)
    if wanted is None:
        return None
    cut = list(args).index("--") if "--" in args else len(args)
    chosen = None
    at = 0
    while at < cut:
        name, equals, text = args[at].partition("=")
        option = by_name.get(name)
        at += 1
        if option is None or option.type is bool:
            continue
        if not equals:
            text = args[at] if at < cut else ""
            at += 1
        if option is wanted:
            chosen = text
    return chosen
