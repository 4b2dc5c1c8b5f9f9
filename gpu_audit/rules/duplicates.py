"""Which GPU processes are copies of the same server: pure, judged from the processes alone.

Two processes are copies when they run the same program with the same arguments once the values
that differ per instance by design are set aside: ports and bind addresses, pid files, worker ids,
connection files, UUIDs. ``uvicorn app:app --port 8000`` and ``... --port 8080`` are copies.
Processes of one distributed job (told apart by a rank, or started by torchrun, DeepSpeed,
accelerate or mpirun) and the workers of one server master are a single job, not copies.

The collectors record no grouping: the ``duplicate-backend`` rule, the scan document's
``duplicate_group`` fields and the process tables all come from :func:`duplicate_groups`, so a
saved scan judged again with ``scan --from`` is grouped afresh.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict

import msgspec

from gpu_audit.lazy import regex as lazy
from gpu_audit.model import GpuProcess, Scan

# Interpreter options that take a value (python -X dev -W ignore script.py)
_PYTHON_OPTS_WITH_VALUE = {"-X", "-W", "-Q"}

# The patterns are compiled on first use (about 2 ms together): a machine without GPU processes
# has no command lines to compare. Each is tried only on a text holding what every match holds
# (a dash, a colon, a launcher's name), so most arguments compile none of them.

# Options whose value differs per instance by design.
_per_instance_opts = lazy(
    r"^-{1,2}(port|p|bind|b|uds|fd|pid|pidfile|pid-file|worker-id|worker_id|"
    r"f|connection-file|connection_file|KernelApp\.connection_file|name|n|hostname|"
    r"log-file|log_file|logfile|access-logfile|error-logfile|socket|listen)$"
)

_rank_opts = lazy(r"^-{1,2}(local[-_]rank|rank|node[-_]rank)(=.*)?$")

# Every match of _launchers holds one of these.
_LAUNCHER_WORDS = ("torchrun", "torch.distributed.", "deepspeed", "accelerate", "mpirun", "mpiexec",
                   "srun", "horovodrun", "colossalai", "lightning")
_launchers = lazy(
    r"(torchrun|torch\.distributed\.(run|launch)|deepspeed|accelerate(\.commands)?[ /]launch|"
    r"accelerate$|mpirun|mpiexec|srun|horovodrun|colossalai|lightning)"
)

_uuid = lazy(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)

_host_port = lazy(r"^(?P<host>[\w.\-\[\]:]*):(?P<port>\d{2,5})$")

_port_opt_value = lazy(r"^-{1,2}(port|p)=(\d{2,5})$")


class Program(msgspec.Struct, frozen=True):
    """A command line split into what it runs and its arguments."""

    program: str
    args: tuple[str, ...]


def python_name(name: str) -> bool:
    """``python``, ``python3``, ``pypy3.10``: the pattern ``^(python|pypy)(\\d+(\\.\\d+)?)?$``
    read as text, a line break allowed at the end as ``$`` allows."""
    body = name[:-1] if name.endswith("\n") else name
    for prefix in ("python", "pypy"):
        if body.startswith(prefix):
            major, dot, minor = body[len(prefix):].partition(".")
            return (not major and not dot) or (major.isdecimal() and (
                not dot or minor.isdecimal()))
    return False


def split_program(argv: list[str]) -> Program:
    """``/venv/bin/python3 -u /venv/bin/uvicorn app:app`` -> Program("uvicorn", ("app:app",))."""
    if not argv:
        return Program("", ())
    head = os.path.basename(argv[0])
    i = 1
    if python_name(head):
        while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-m", "-c"):
            i += 2 if argv[i] in _PYTHON_OPTS_WITH_VALUE else 1
        if i < len(argv) and argv[i] == "-m" and i + 1 < len(argv):
            return Program(argv[i + 1], tuple(argv[i + 2 :]))
        if i < len(argv) and argv[i] == "-c":
            return Program("python -c", tuple(argv[i + 1 :]))
        if i < len(argv):
            return Program(os.path.basename(argv[i]), tuple(argv[i + 1 :]))
        return Program(head, ())
    return Program(head, tuple(argv[1:]))


def normalise_args(args: tuple[str, ...]) -> tuple[str, ...]:
    """Arguments with per-instance values replaced by ``*``."""
    out: list[str] = []
    skip_next = False
    for arg in args:
        if skip_next:
            out.append("*")
            skip_next = False
            continue
        name, sep, _ = arg.partition("=")
        if name.startswith("-") and _per_instance_opts().match(name):
            out.append(f"{name}=*" if sep else name)
            skip_next = not sep
            continue
        if ":" in arg and _host_port().match(arg):
            out.append(_host_port().sub(r"\g<host>:*", arg))
            continue
        out.append(_uuid().sub("*", arg) if arg.count("-") >= 4 else arg)
    return tuple(out)


def instance_port(process: GpuProcess) -> int | None:
    """The port this instance serves on: a listening socket, else ``--port N`` in its arguments."""
    if process.listen_ports:
        return process.listen_ports[0]
    argv = process.cmdline or []
    for i, arg in enumerate(argv):
        if arg.startswith("-") and (match := _port_opt_value().match(arg)):
            return int(match[2])
        if arg in ("--port", "-p") and i + 1 < len(argv) and argv[i + 1].isdigit():
            return int(argv[i + 1])
        bound = argv[i + 1] if arg in ("--bind", "-b") and i + 1 < len(argv) else ""
        if ":" in bound and (match := _host_port().match(bound)):
            return int(match["port"])
    return None


def is_distributed_rank(process: GpuProcess) -> bool:
    """A rank of a distributed job: rank in its environment or arguments, or a launcher parent."""
    if process.dist_rank is not None:
        return True
    if any(arg.startswith("-") and "rank" in arg and _rank_opts().match(arg)
           for arg in process.cmdline or []):
        return True
    parent = " ".join(process.parent_cmdline or [])
    return any(word in parent for word in _LAUNCHER_WORDS) and bool(_launchers().search(parent))


def signature(process: GpuProcess) -> tuple[str | None, str, tuple[str, ...]] | None:
    """What makes two processes copies of each other, or ``None`` when it cannot be told."""
    if not process.visible or not process.cmdline:
        return None
    prog = split_program(process.cmdline)
    return (process.user, prog.program, normalise_args(prog.args))


def _workers_of_one_master(members: list[GpuProcess]) -> bool:
    """All members share a parent that runs the same program: one server's workers."""
    parents = {m.ppid for m in members}
    if len(parents) != 1 or None in parents or 1 in parents:
        return False
    parent_cmd = members[0].parent_cmdline
    if not parent_cmd or not members[0].cmdline:
        return False
    return split_program(parent_cmd).program == split_program(members[0].cmdline).program


def duplicate_groups(processes: list[GpuProcess]) -> list[list[GpuProcess]]:
    """Groups of two or more distinct PIDs that are copies of one server, oldest first."""
    by_signature: dict[tuple, dict[int, GpuProcess]] = defaultdict(dict)
    for process in processes:
        if is_distributed_rank(process):
            continue
        sig = signature(process)
        if sig is not None:
            by_signature[sig].setdefault(process.pid, process)
    groups = []
    for members in by_signature.values():
        ordered = sorted(members.values(), key=lambda p: (p.start_time or "", p.pid))
        if len(ordered) >= 2 and not _workers_of_one_master(ordered):
            groups.append(ordered)
    groups.sort(key=lambda g: g[0].pid)
    return groups


def annotate_duplicates(processes: list[GpuProcess]) -> list[GpuProcess]:
    """``processes`` with ``duplicate_group`` set (1, 2, ...) on every member of a group and
    cleared on every other process, whatever the processes said before."""
    group_of: dict[int, int] = {}
    for number, group in enumerate(duplicate_groups(processes), start=1):
        for member in group:
            group_of[member.pid] = number
    return [msgspec.structs.replace(p, duplicate_group=group_of.get(p.pid)) for p in processes]


def with_duplicate_groups(scan: Scan) -> Scan:
    """``scan`` with its processes' ``duplicate_group`` judged afresh (see
    :func:`annotate_duplicates`): what the scan document and the process tables show."""
    if not scan.processes:
        return scan
    return msgspec.structs.replace(scan, processes=annotate_duplicates(scan.processes))
