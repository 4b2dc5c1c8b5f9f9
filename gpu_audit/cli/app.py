"""The ``gpu-audit`` command: one typer app, one thin module per command.

Exit codes follow the monitoring-plugin convention (see DESIGN): 0 OK, 1 WARNING, 2 CRITICAL,
3 UNKNOWN, 130 interrupted. Click's own usage errors (exit 2) are remapped to 3 so that a typo
is never mistaken for an unfit machine. Our errors print one line; ``-v`` adds the traceback.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import math
import os
import re
import sys

import typer

from gpu_audit import __version__
from gpu_audit.errors import GpuAuditError

try:  # typer 0.28 carries its own copy of click and raises that copy's errors
    from typer._click.exceptions import ClickException
    from typer._click.types import FloatParamType
except ImportError:  # older typer runs on click itself (importing it separately costs ~20 ms)
    from click.exceptions import ClickException
    from click.types import FloatParamType


def _finite_float(text: object) -> float:
    """What every float flag reads: ``nan`` and ``inf`` are refused as they are parsed."""
    value = float(text)  # type: ignore[arg-type]
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    return value


# Every float option (``--timeout``, ``--hang-factor``, ...) goes through this: a NaN compares
# false with every bound, so a range check alone would let it through.
FloatParamType._number_class = staticmethod(_finite_float)  # type: ignore[assignment]

EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

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

_state = {"verbose": 0}


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
    "fleet": "fleet",
    "merge": "merge",
}


def _invoked_command(args: list[str]) -> str | None:
    """The command named on the command line, skipping the root options before it."""
    for arg in args:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def hoist_verbose(args: list[str]) -> list[str]:
    """``-v`` / ``-vv`` / ``--verbose`` anywhere before ``--`` moved in front of the command.

    It is an option of ``gpu-audit`` itself, so typer accepts it only before the command; users
    type it after (``gpu-audit scan -v``), as they do with every other flag.
    """
    cut = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:cut] if a == "--verbose" or re.fullmatch(r"-v+", a)]
    rest = [a for a in args[:cut] if not (a == "--verbose" or re.fullmatch(r"-v+", a))]
    return [*flags, *rest, *args[cut:]]


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
    problem = _environment_problem()
    if problem:
        err(problem)
        return EXIT_UNKNOWN
    try:
        args = hoist_verbose(args)
        _register_commands(args)
        result = app(args=args, prog_name="gpu-audit", standalone_mode=False)
        failed = _flush_stdout()  # a full disk shows here, not as a traceback at exit
        if failed is not None:
            return failed
    except typer.Exit as exc:
        failed = _flush_stdout()
        return exc.exit_code if failed is None else failed
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
        _drop_stdout()
        return EXIT_OK
    except OSError as exc:
        if exc.errno in _OUTPUT_ERRNOS:
            return _output_failed(exc)
        return _internal_error(exc)
    except Exception as exc:
        return _internal_error(exc)
    return result if isinstance(result, int) else EXIT_OK


def _internal_error(exc: BaseException) -> int:
    if _state["verbose"]:
        import traceback

        traceback.print_exception(exc)
    err(f"internal error: {type(exc).__name__}: {exc}")
    err("this is a bug in gpu-audit; run again with -v and report the traceback")
    return EXIT_UNKNOWN


# Writing failed for want of space or a device: the environment, not a bug.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EBADF})


def _output_failed(exc: OSError, *, stdout: bool = False) -> int:
    where = " standard output" if stdout else f" {exc.filename}" if exc.filename else \
        " the output"
    err(f"cannot write{where}: {exc.strerror or exc}")
    _drop_stdout()
    return EXIT_UNKNOWN


def _flush_stdout() -> int | None:
    """Flush standard output: ``None`` when done (or its reader has left), else the exit code
    of a write that failed."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    except OSError as exc:
        return _output_failed(exc, stdout=True)
    return None


def _drop_stdout() -> None:
    """What is still buffered for standard output goes nowhere (the exit would flush it again)."""
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _environment_problem() -> str | None:
    """What makes any command fail before it starts (a one-line message), after making standard
    streams safe: a closed stdin reads as empty, output that cannot encode a character gets a
    replacement instead of an error."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return "the current folder no longer exists (deleted or unmounted): cd to another one"
    except OSError as exc:
        return f"cannot use the current folder: {exc.strerror or exc}"
    if sys.stdout is None:
        return "standard output is closed: give the command somewhere to write (> FILE)"
    if sys.stdin is None:  # hold fd 0, so that no file opened later is mistaken for stdin
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as we do
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and (stream.encoding or "").lower().replace("-", "") != "utf8":
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")
    return None


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
