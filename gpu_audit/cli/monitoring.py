"""What ``scan`` and ``check`` share for monitoring systems: ``--format`` and the outputs a run
that fails must still leave (not a command of its own).

A Nagios check that cannot judge prints ``GPU-AUDIT UNKNOWN - <why>`` on stdout (exit 3), and a
scan or check with ``--prometheus FILE`` that cannot judge still writes
``gpu_audit_scan_success 0`` there, so the failure is seen where the results are watched. A
command line typer refuses (an unknown option, a bad value) with ``--format nagios`` gets the
same UNKNOWN line (:func:`usage_error_output`), and with ``--prometheus FILE`` the failure
textfile (:func:`usage_error_textfile`).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpu_audit.errors import GpuAuditError, UsageError

if TYPE_CHECKING:
    from pathlib import Path

FORMATS = ("terminal", "json", "nagios")
FORMAT_HELP = ("Output: terminal (default), json (as --json) or nagios (a monitoring-plugin "
               "status line first; exit code unchanged).")

_started: list[float] = []


def output_format(value: str | None, json_out: bool) -> str:
    """The ``--format`` in force (``--json`` is ``--format json``)."""
    if value is None:
        return "json" if json_out else "terminal"
    chosen = value.strip().lower()
    if chosen not in FORMATS:
        raise UsageError(f"--format: unknown format {value!r} (expected one of: "
                         f"{', '.join(FORMATS)})")
    if json_out and chosen != "json":
        raise UsageError(f"--json and --format {chosen} cannot be combined")
    return chosen


def elapsed_s() -> float | None:
    """Seconds since the current command started (``None`` outside one)."""
    return round(time.perf_counter() - _started[-1], 3) if _started else None


def monitored(command: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command whose options include ``output_format`` (and perhaps ``prometheus``):
    when it fails to judge, the Nagios UNKNOWN line and the failure textfile are still written,
    then the error goes on to the usual handling (one line on stderr, exit 3)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        _started.append(time.perf_counter())
        try:
            return command(*args, **kwargs)
        except (Exception, KeyboardInterrupt) as exc:
            if not _is_exit(exc):
                _failed(exc, kwargs, check=command.__name__ == "check")
            raise
        finally:
            _started.pop()

    return run


def _is_exit(exc: BaseException) -> bool:
    """typer's Exit: a command's verdict, not a failure (never raised where typer is not loaded,
    as on the plain command lines that run without it)."""
    typer = sys.modules.get("typer")
    return typer is not None and isinstance(exc, typer.Exit)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, GpuAuditError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc}"


def _failed(exc: BaseException, options: dict[str, Any], *, check: bool = False) -> None:
    prometheus: Path | None = options.get("prometheus")
    if prometheus is not None:
        from gpu_audit.hostname import host_name
        from gpu_audit.report.prometheus import render_failure, write_textfile

        data = render_failure(host_name(), duration_s=elapsed_s(),
                              timestamp_s=time.time(), check=check)
        with contextlib.suppress(GpuAuditError, OSError):  # the path itself may be the problem
            write_textfile(prometheus, data)
    junit: Path | None = options.get("junit")
    if junit is not None:
        _unknown_junit(junit, _reason(exc))
    if _nagios(options):
        from gpu_audit.report.nagios import unknown_output

        with contextlib.suppress(OSError, ValueError):
            sys.stdout.write(unknown_output(_reason(exc)))
            sys.stdout.flush()


def _unknown_junit(path: Path, reason: str) -> None:
    """``--junit FILE`` of a check that could not judge: a report with one error case, so the
    CI job's test view says why instead of showing nothing. A path that cannot be written is
    left alone: the original error is what the run reports."""
    from gpu_audit.hostname import host_name
    from gpu_audit.redact import redact_text
    from gpu_audit.report.junit import render_unknown
    from gpu_audit.serial import write_atomic
    from gpu_audit.units import utc_now

    with contextlib.suppress(GpuAuditError, OSError, ValueError):
        write_atomic(path, render_unknown(host_name(), redact_text(reason),
                                          utc_now()))


def _nagios(options: dict[str, Any]) -> bool:
    value = options.get("output_format")
    return isinstance(value, str) and value.strip().lower() == "nagios"


def usage_error_output(args: list[str], message: str) -> str | None:
    """The Nagios UNKNOWN output for a command line typer refused, when that line asks for
    ``--format nagios`` (the last ``--format`` given, as typer reads it) of a command that has
    ``--format``; ``None`` otherwise. Without it Nagios would show typer's usage text."""
    chosen = _given(args, "output_format")[1]
    if chosen is None or chosen.strip().lower() != "nagios":
        return None
    from gpu_audit.report.nagios import unknown_output

    return unknown_output(f"usage error: {message}")


def usage_error_textfile(args: list[str]) -> None:
    """For a command line typer refused that names ``--prometheus FILE`` (or
    ``--prometheus=FILE``, the last one given, as typer reads it) of a command that has
    ``--prometheus``: the failure textfile there (``gpu_audit_scan_success 0``, status 3),
    atomically, so the previous run's file does not stay behind looking healthy. A path that
    cannot be written is left alone: the usage error is what the run reports."""
    command, path = _given(args, "prometheus")
    if not path or path.startswith("-") or command is None:
        return
    from pathlib import Path

    _failed(UsageError("usage error"), {"prometheus": Path(path)}, check=command == "check")


def _given(args: list[str], param: str) -> tuple[str | None, str | None]:
    """The command of this line and the text of its option ``param``, read with the command's
    declared options (:func:`gpu_audit.cli.declared.given`); ``None`` for a command that does
    not declare it, or an option not given."""
    from gpu_audit.cli.app import _invoked_command
    from gpu_audit.cli.declared import DECLARED, given

    command = _invoked_command(args)
    declared = DECLARED.get(command or "")
    if declared is None:
        return None, None
    return command, given(declared, args[args.index(command) + 1:], param)
