"""The ``gpu-audit`` command: one typer app, one thin module per command.

Exit codes follow the monitoring-plugin convention (see DESIGN): 0 OK, 1 WARNING, 2 CRITICAL,
3 UNKNOWN, 130 interrupted. Click's own usage errors (exit 2) are remapped to 3 so that a typo
is never mistaken for an unfit machine. Our errors print one line; ``-v`` adds the traceback.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from typing import Any

from gpu_audit.errors import GpuAuditError

EXIT_OK, EXIT_WARNING, EXIT_CRITICAL, EXIT_UNKNOWN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

_state = {"verbose": 0, "plain": False}  # plain: a declared command ran without typer


def __getattr__(name: str) -> Any:
    """``app``, the typer app, built on first use (gpu_audit.cli.typer_app): a plain scan line
    runs without typer."""
    if name == "app":
        from gpu_audit.cli.typer_app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "diff": "diff",
    "diag": "diag",
}


def _invoked_command(args: list[str]) -> str | None:
    """The command named on the command line, skipping the root options before it."""
    for arg in args:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def _is_verbose(arg: str) -> bool:
    """``--verbose``, ``-v``, ``-vv``, ...: compared as text (a pattern costs every start)."""
    return arg == "--verbose" or (len(arg) > 1 and arg == "-" + "v" * (len(arg) - 1))


def hoist_verbose(args: list[str]) -> list[str]:
    """``-v`` / ``-vv`` / ``--verbose`` anywhere before ``--`` moved in front of the command.

    It is an option of ``gpu-audit`` itself, so typer accepts it only before the command; users
    type it after (``gpu-audit scan -v``), as they do with every other flag.
    """
    cut = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:cut] if _is_verbose(a)]
    rest = [a for a in args[:cut] if not _is_verbose(a)]
    return [*flags, *rest, *args[cut:]]


def _register_commands(args: list[str]) -> None:
    """Import the invoked command's module only, so a scan never pays for validate's imports;
    everything when no known command is named (``--help`` lists them all)."""
    importlib.import_module("gpu_audit.cli.typer_app")  # first: declared commands join it
    invoked = _invoked_command(args)
    for name in [invoked] if invoked else list(COMMANDS):
        importlib.import_module(f"gpu_audit.cli.{COMMANDS[name]}")


# Tests set this to False to run every line through typer (the two paths must agree).
FAST_PATH = True


def _fast_command(args: list[str]) -> Any:
    """A declared command and its options when ``args`` need no typer (see
    gpu_audit.cli.declared): ``-v`` flags, the command, its long options; else ``None``."""
    if not FAST_PATH or "_GPU_AUDIT_COMPLETE" in os.environ:  # shell completion is typer's
        return None
    count = 0
    for at, arg in enumerate(args):
        if _is_verbose(arg):
            count += 1 if arg == "--verbose" else len(arg) - 1
            continue
        module = COMMANDS.get(arg) if arg.isidentifier() else None
        if module is None:
            return None
        from gpu_audit.cli.declared import DECLARED, parse

        if arg not in DECLARED:
            importlib.import_module(f"gpu_audit.cli.{module}")
        declared = DECLARED.get(arg)
        options = parse(declared, args[at + 1:]) if declared is not None else None
        if options is None:
            return None
        return count, declared.function, options
    return None


def err(message: str) -> None:
    """A message for the user on stderr (data goes to stdout): one line in a log, wrapped
    between words on a terminal so a flag or a path never breaks across lines."""
    line = f"gpu-audit: {message}"
    if "\n" not in line and sys.stderr.isatty():
        import shutil

        from gpu_audit.report.remedy import wrapped

        line = "\n".join(wrapped(line, shutil.get_terminal_size().columns, "    "))
    print(line, file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app and map every outcome onto the documented exit codes."""
    args = sys.argv[1:] if argv is None else argv
    problem = _environment_problem()
    if problem:
        err(problem)
        return EXIT_UNKNOWN
    try:
        args = hoist_verbose(args)
        fast = _fast_command(args)
        return _run_typer(args) if fast is None else _run_fast(*fast)
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
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


def _run_typer(args: list[str]) -> int:
    import typer

    from gpu_audit.cli.typer_app import ClickException, app

    try:
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
    except ClickException as exc:
        from gpu_audit.cli.monitoring import usage_error_output, usage_error_textfile

        usage_error_textfile(args)  # a stale "success 1" file would look healthy
        nagios = usage_error_output(args, exc.format_message())
        if nagios is not None:  # a monitoring system reads stdout: a status line, not nothing
            sys.stdout.write(nagios)
        exc.show(file=sys.stderr)
        return EXIT_UNKNOWN
    return result if isinstance(result, int) else EXIT_OK


def _run_fast(verbose: int, function: Any, options: dict[str, Any]) -> int:
    """A declared command run as typer runs it (``standalone_mode=False``), without typer:
    the same exit code for its result and for each way it can stop."""
    _state["verbose"] = verbose
    _state["plain"] = True
    try:
        code = function(**options)
    except EOFError:  # typer: an empty line on stderr, then click's Abort
        print(file=sys.stderr)
        err("interrupted")
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # typer: Exit(130)
        code = EXIT_INTERRUPTED
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        _drop_stdout()  # typer: standard streams silenced, exit 1
        raise SystemExit(1) from None
    failed = _flush_stdout()  # a full disk shows here, not as a traceback at exit
    return code if failed is None else failed


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
    code = main()
    spare_the_final_collection()
    sys.exit(code)


def spare_the_final_collection() -> None:
    """Move every object into the collector's permanent generation as the command ends.

    What start-up built (modules, classes, the command tree) lives until exit, and the
    interpreter's last garbage collection would walk all of it to find nothing: some 5 ms of a
    scan. The command's output is flushed and its files closed by now, so nothing waits on that
    collection; atexit handlers and threads still run. What only reference cycles keep alive is
    not finalized at exit, which Python does not promise either. For the ``gpu-audit`` process
    only (``run``): importing gpu_audit or calling ``main`` changes nothing.
    """
    import gc

    gc.freeze()


if __name__ == "__main__":  # python -m gpu_audit.cli.app: the same command as python -m gpu_audit
    run()
