"""``gpu-audit explain LOGFILE...``: why did the GPU job die?"""

from __future__ import annotations

import sys

from gpu_audit.cli.app import err
from gpu_audit.cli.declared import Option, command, json_option
from gpu_audit.errors import InputError, UsageError

_HELP = (
    "Read logs, find known GPU failure signatures, and explain them root cause first.\n\n"
    "Recognises CUDA and host out-of-memory (with its numbers: fragmentation, too big, or other "
    "processes), the NVML assert that hides an OOM, NVML and driver mismatches, allocator "
    "configuration errors, cuBLAS/cuDNN failures, illegal memory accesses, device-side asserts, "
    "Xid and other GPU hardware errors, NCCL timeouts and errors, and the host OOM killer; "
    "`gpu-audit rules` lists every failure class and message signature.\n\n"
    "Exit 0 when no GPU failure was found, 1 when one was, 3 when a log cannot be read."
)


OPTIONS = (
    Option("logfiles", "LOGFILE...", str, argument=True, required=True, multiple=True,
           metavar="LOGFILE...",
           help="Logs to read: files, '-' for stdin, FIFOs; gzip, bzip2 and xz logs are "
                "decompressed (up to 4 GiB each, as is stdin or a FIFO). Give every rank's log "
                "(and dmesg) at once to see the cause across ranks."),
    json_option("the incidents", "gpu-audit.explain/1"),
    Option("fail_on", "--fail-on", str, "error", metavar="SEVERITY",
           help="Lowest incident severity that counts as a GPU failure for the exit code: info, "
                "warning, error or critical."),
    Option("torch_version", "--torch-version", str, metavar="VERSION",
           help="Write remedies for this torch version (the allocator variable's name changed "
                "in 2.10) instead of the one installed here."),
)


@command("explain", OPTIONS, help=_HELP)
def explain(*, logfiles: list[str], json_out: bool, fail_on: str,
            torch_version: str | None) -> int:
    """Explain why a GPU job died (see ``_HELP``)."""
    from gpu_audit import __version__
    from gpu_audit.explain import DETECT, explain_sources
    from gpu_audit.explain.render import render_terminal, to_document
    from gpu_audit.model import Severity
    from gpu_audit.units import utc_now

    try:
        threshold = Severity.parse(fail_on)
    except ValueError as exc:
        raise UsageError(f"--fail-on: {exc}") from None
    if logfiles.count("-") > 1:
        raise UsageError("'-' (stdin) can be given only once")
    if "-" in logfiles and sys.stdin.isatty():
        err("reading the log from the terminal; paste it and end with Ctrl-D "
            "(or pipe it: `gpu-audit explain - < train.log`)")
    readable, unreadable = _readable(logfiles)
    if not readable:
        raise unreadable[0]
    result = explain_sources(readable, torch_version=torch_version or DETECT)
    if json_out:
        from gpu_audit.serial import dumps

        document = to_document(result, tool_version=__version__, generated_at=utc_now(),
                               fail_on=threshold)
        sys.stdout.write(dumps(document) + "\n")
    else:
        from gpu_audit.report.terminal import make_console

        render_terminal(result, make_console(), fail_on=threshold)
    for problem in unreadable:
        err(f"{problem} (not read; the explanation above covers the other logs)")
    failed = any(incident.severity >= threshold for incident in result.incidents)
    return 3 if unreadable else 1 if failed else 0


def _readable(names: list[str]) -> tuple[list[str], list[InputError]]:
    """The regular files that open (and everything else, read later), and the errors of those
    that do not: one unreadable log does not hide what the others say."""
    import os
    import stat

    from gpu_audit.explain.sources import STDIN, open_log

    readable, unreadable = [], []
    for name in names:
        try:
            if name != STDIN and (not os.path.exists(name)
                                  or stat.S_ISREG(os.stat(name).st_mode)):
                open_log(name)[0].close()
        except InputError as exc:
            unreadable.append(exc)
            continue
        except OSError as exc:
            unreadable.append(InputError(f"{name}: cannot read: {exc.strerror or exc}"))
            continue
        readable.append(name)
    return readable, unreadable
