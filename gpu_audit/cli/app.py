"""The ``gpu-audit`` command: one typer app, one thin module per command.

Exit codes follow the monitoring-plugin convention (see DESIGN): 0 OK, 1 WARNING, 2 CRITICAL,
3 UNKNOWN, 130 interrupted. Click's own usage errors (exit 2) are remapped to 3 so that a typo
is never mistaken for an unfit machine. Our errors print one line; ``-v`` adds the traceback.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from gpu_audit import __version__
from gpu_audit.errors import GpuAuditError

try:  # typer 0.28 carries its own copy of click and raises that copy's errors
    from typer._click.exceptions import ClickException
except ImportError:  # older typer runs on click itself (importing it separately costs ~20 ms)
    from click.exceptions import ClickException

EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

app = typer.Typer(
    name="gpu-audit",
    help="Is this GPU machine fit for a long PyTorch run, and why did the last one die?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"verbose": 0}


def _version(value: bool) -> None:
    if value:
        print(f"gpu-audit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="Show tracebacks and debug detail."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _state["verbose"] = verbose


def verbose() -> int:
    return _state["verbose"]


# Command name -> the module that registers it on ``app`` (one thin module per command).
COMMANDS = {
    "scan": "scan",
    "check": "check",
    "validate": "validate",
    "explain": "explain",
    "rules": "rules",
    "snapshot": "snapshot",
}


def _invoked_command(args: list[str]) -> str | None:
    """The command named on the command line, skipping the root options before it."""
    for arg in args:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def _register_commands(args: list[str]) -> None:
    """Import the invoked command's module only, so a scan never pays for validate's imports;
    everything when no known command is named (``--help`` lists them all)."""
    invoked = _invoked_command(args)
    for name in [invoked] if invoked else list(COMMANDS):
        importlib.import_module(f"gpu_audit.cli.{COMMANDS[name]}")


def err(message: str) -> None:
    """A message for the user on stderr (data goes to stdout)."""
    print(f"gpu-audit: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app and map every outcome onto the documented exit codes."""
    args = sys.argv[1:] if argv is None else argv
    try:
        _register_commands(args)
        result = app(args=args, prog_name="gpu-audit", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err("interrupted")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
    except ClickException as exc:
        exc.show(file=sys.stderr)
        return EXIT_UNKNOWN
    except GpuAuditError as exc:
        if _state["verbose"]:
            import traceback

            traceback.print_exc()
        err(str(exc))
        return exc.exit_code
    except BrokenPipeError:
        # `gpu-audit scan --json | head`: the reader left; not our failure.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        if _state["verbose"]:
            import traceback

            traceback.print_exc()
        err(f"internal error: {type(exc).__name__}: {exc}")
        err("this is a bug in gpu-audit; run again with -v and report the traceback")
        return EXIT_UNKNOWN
    return result if isinstance(result, int) else EXIT_OK


def collect_garbage_rarely() -> None:
    """Fewer cyclic garbage collections for the rest of this process.

    Start-up creates some hundred thousand objects that live until exit (modules, classes,
    dataclass methods, typer's command tree); with the default threshold the collector walks
    them some 40 times during a scan, about 8 ms of it. A command allocates little cyclic
    garbage, so collecting every 50,000 allocations instead of every 700 costs no memory to speak
    of. For the ``gpu-audit`` process only: importing gpu_audit changes nothing.
    """
    import gc

    gc.set_threshold(50_000, *gc.get_threshold()[1:])


def run() -> None:
    collect_garbage_rarely()
    sys.exit(main())
