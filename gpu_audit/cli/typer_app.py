"""The typer app behind ``gpu-audit``: loaded on first use of ``gpu_audit.cli.app.app``, so that a
plain ``gpu-audit scan ...`` line (see ``gpu_audit.cli.declared``) never pays for typer."""

from __future__ import annotations

import inspect
from typing import Any

import typer

from gpu_audit import __version__
from gpu_audit.cli.app import _state
from gpu_audit.cli.declared import DECLARED, Declared, finite_float

try:  # typer 0.28 carries its own copy of click and raises that copy's errors
    from typer._click.exceptions import ClickException
    from typer._click.types import FloatParamType
except ImportError:  # older typer runs on click itself (importing it separately costs ~20 ms)
    from click.exceptions import ClickException
    from click.types import FloatParamType

__all__ = ["ClickException", "add_declared", "app"]

# Every float option (``--timeout``, ``--hang-factor``, ...) goes through this: a NaN compares
# false with every bound, so a range check alone would let it through.
FloatParamType._number_class = staticmethod(finite_float)  # type: ignore[assignment]

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


def add_declared(declared: Declared) -> None:
    """Register a declared command on ``app``: its options become typer options with the same
    names, types, defaults, bounds, metavars and help; it exits with the function's result."""
    if declared.name in _added:
        return
    _added.add(declared.name)
    parameters, annotations = [], {}
    for option in declared.options:
        settings: dict[str, Any] = {"help": option.help}
        if option.metavar is not None:
            settings["metavar"] = option.metavar
        if option.min is not None:
            settings["min"] = option.min
        if option.max is not None:
            settings["max"] = option.max
        annotation: Any = option.type
        if option.type is not bool and option.default is None:
            annotation = option.type | None
        annotations[option.param] = annotation
        parameters.append(inspect.Parameter(
            option.param, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
            default=typer.Option(option.default, option.name, **settings)))
    function = declared.function

    def run(**options: Any) -> None:
        raise typer.Exit(function(**options))

    run.__name__ = run.__qualname__ = declared.name
    run.__doc__ = function.__doc__
    run.__module__ = function.__module__
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {**annotations, "return": None}
    app.command(declared.name, epilog=declared.epilog)(run)


for _declared in list(DECLARED.values()):
    add_declared(_declared)
