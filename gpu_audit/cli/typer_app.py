"""The typer app behind ``gpu-audit``: loaded on first use of ``gpu_audit.cli.app.app``, so that a
plain ``gpu-audit scan ...`` line (see ``gpu_audit.cli.declared``) never pays for typer."""

from __future__ import annotations

import inspect
import math
from typing import Any

import typer

from gpu_audit import __version__
from gpu_audit.cli.app import _state
from gpu_audit.cli.declared import DECLARED, GROUPS, Declared, Option, first_sentence

try:  # typer 0.28 and later carry their own copy of click and raise that copy's errors
    from typer._click.exceptions import ClickException
except ImportError:  # older typer runs on click itself
    from click.exceptions import ClickException

__all__ = ["ClickException", "add_declared", "app"]


def _finite(value: Any) -> Any:
    """Every float option is checked with this: a NaN compares false with every bound, so a
    range check alone would let it through, and an infinity is no number of seconds."""
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        if isinstance(item, float) and not math.isfinite(item):
            raise typer.BadParameter(f"'{item}' is not a finite number")
    return value


app = typer.Typer(
    name="gpu-audit",
    help="Is this GPU machine fit for a long PyTorch run, and why did the last one die?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help texts are plain text: "[tool.gpu-audit]" is a TOML table, not console markup.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)


def _version(value: bool) -> None:
    if value:
        print(f"gpu-audit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, show_default=False,
        help="Show tracebacks and debug detail (also after the command: `gpu-audit scan -v`)."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _state["verbose"] = verbose


_added: set[str] = set()
_groups: dict[str, typer.Typer] = {}


def _parameter(option: Option) -> tuple[Any, inspect.Parameter]:
    """The annotation and typer parameter of one declared option."""
    settings: dict[str, Any] = {"help": option.help}
    for name in ("metavar", "min", "max"):
        if getattr(option, name) is not None:
            settings[name] = getattr(option, name)
    if option.hidden:
        settings["hidden"] = True
    if option.type is float:
        settings["callback"] = _finite
    annotation: Any = list[option.type] if option.multiple else option.type  # type: ignore[name-defined]
    if option.default is None and not option.required:
        annotation = annotation | None
    default = ... if option.required else option.default
    if option.argument:
        info = typer.Argument(default, **settings)
    else:
        info = typer.Option(default, option.name, **settings)
    parameter = inspect.Parameter(option.param, inspect.Parameter.KEYWORD_ONLY,
                                  annotation=annotation, default=info)
    return annotation, parameter


def _target(name: str) -> tuple[typer.Typer, str]:
    """The app (or group) a command joins, and its name there."""
    group, _, sub = name.partition(" ")
    if not sub:
        return app, name
    if group not in _groups:
        _groups[group] = typer.Typer(help=GROUPS[group], no_args_is_help=True)
        app.add_typer(_groups[group], name=group)
    return _groups[group], sub


def add_declared(declared: Declared) -> None:
    """Register a declared command on ``app``: its options become typer options (and
    arguments) with the same names, types, defaults, bounds, metavars and help; it exits with
    the function's result."""
    if declared.name in _added:
        return
    _added.add(declared.name)
    parameters, annotations = [], {}
    for option in declared.options:
        annotations[option.param], parameter = _parameter(option)
        parameters.append(parameter)
    function = declared.function

    def run(**options: Any) -> None:
        raise typer.Exit(function(**options))

    target, name = _target(declared.name)
    run.__name__ = run.__qualname__ = name
    run.__doc__ = function.__doc__
    run.__module__ = function.__module__
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {**annotations, "return": None}
    # click's own short help ends at the first word ending in "." ("e.g."): the first sentence.
    short = first_sentence(declared.help or function.__doc__ or "")
    target.command(name, epilog=declared.epilog, help=declared.help, short_help=short)(run)


for _declared in list(DECLARED.values()):
    add_declared(_declared)
