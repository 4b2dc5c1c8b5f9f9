"""GPU processes: NVML's PIDs joined with what the OS says about each one.

A PID that is not in this PID namespace (it exited, or lives in another container) stays in the
table with its VRAM and a note; a process of another user shows what ``/proc`` lets anyone see.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Protocol

from gpu_audit.collect import procfs
from gpu_audit.collect.host import iso_utc
from gpu_audit.collect.software import read_process_environ
from gpu_audit.lazy import regex as lazy
from gpu_audit.model import GpuProcess, ProbeError
from gpu_audit.redact import redact_cmdline

# cgroup paths carry the container id: docker-<64 hex>.scope, /docker/<id>, cri-containerd-<id>,
# libpod-<id>, /kubepods/.../<id> (compiled on first use: a host process needs neither)
_CONTAINER_ID = lazy(r"(?:docker|cri-containerd|crio|libpod|containerd)[-/]([0-9a-f]{12,64})")
_KUBEPODS = lazy(r"kubepods.*?([0-9a-f]{64})")


class NvmlProcessLike(Protocol):
    pid: int
    gpu_index: int
    gpu_uuid: str | None
    used_memory_bytes: int | None
    type: str


def container_from_cgroup(cgroup_text: str) -> str | None:
    """A short container label from a ``/proc/PID/cgroup`` text, or ``None`` for a host process."""
    if "kubepods" in cgroup_text and (match := _KUBEPODS().search(cgroup_text)):
        return f"kubernetes:{match[1][:12]}"
    runtimes = ("docker", "crio", "libpod", "containerd")  # the pattern's words
    if any(word in cgroup_text for word in runtimes) and (
        match := _CONTAINER_ID().search(cgroup_text)
    ):
        runtime = match[0].split(match[1])[0].strip("-/")
        return f"{runtime}:{match[1][:12]}"
    return None


def _dist_rank(env: dict[str, str]) -> int | None:
    for key in ("LOCAL_RANK", "RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"):
        value = env.get(key)
        if value is not None and value.isdigit():
            return int(value)
    return None


class _PsutilProcess:
    """psutil's ``Process`` where there is no ``/proc`` to read, its errors as procfs's."""

    def __init__(self, pid: int) -> None:
        import psutil  # only here: importing it costs a scan more than all its reading

        self._psutil = psutil
        self._proc = self._call(psutil.Process, pid)

    def _call(self, func, *args):
        psutil = self._psutil
        try:
            return func(*args)
        except psutil.ZombieProcess as exc:
            raise procfs.ZombieProcess(str(exc)) from exc
        except psutil.NoSuchProcess as exc:
            raise procfs.NoSuchProcess(str(exc)) from exc
        except psutil.AccessDenied as exc:
            raise procfs.AccessDenied(str(exc)) from exc
        except psutil.Error as exc:
            raise procfs.Error(str(exc)) from exc

    def name(self) -> str:
        return self._call(self._proc.name)

    def status(self) -> str:
        return self._call(self._proc.status)

    def create_time(self) -> float:
        return self._call(self._proc.create_time)

    def ppid(self) -> int:
        return self._call(self._proc.ppid)

    def username(self) -> str:
        return self._call(self._proc.username)

    def cmdline(self) -> list[str]:
        return self._call(self._proc.cmdline)

    def rss(self) -> int:
        return self._call(lambda: self._proc.memory_info().rss)

    def listen_ports(self) -> list[int]:
        conns = self._call(self._proc.net_connections, "inet")
        listen = self._psutil.CONN_LISTEN
        return sorted({c.laddr.port for c in conns if c.status == listen and c.laddr})


Opener = Callable[[int], "procfs.Process | _PsutilProcess"]


def process_opener(root: str = procfs.PROC) -> Opener:
    """How this scan looks at a PID: ``/proc`` under ``root`` where it is there (one boot time
    read for all of them), psutil elsewhere."""
    if not procfs.usable(root):
        return _PsutilProcess
    clock = procfs.BootClock(root)
    return lambda pid: procfs.Process(pid, root, clock)


def _own_pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def _read_cgroup(pid: int) -> str | None:
    try:
        raw = procfs.read_bounded(f"/proc/{pid}/cgroup", procfs.MAX_PROC_FILE_BYTES)
    except OSError:
        return None
    text = raw.decode(errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def describe(
    entry: NvmlProcessLike, in_container: bool, opener: Opener | None = None
) -> tuple[GpuProcess, list[ProbeError]]:
    """One NVML process entry, enriched from the OS where it can be seen."""
    base = {
        "pid": entry.pid,
        "gpu_index": entry.gpu_index,
        "gpu_uuid": entry.gpu_uuid,
        "used_memory_bytes": entry.used_memory_bytes,
        "type": entry.type,
        # MIG: the instance it runs in (entries from elsewhere may not know)
        "mig_gpu_instance_id": getattr(entry, "mig_gpu_instance_id", None),
        "mig_compute_instance_id": getattr(entry, "mig_compute_instance_id", None),
        "mig_uuid": getattr(entry, "mig_uuid", None),
    }
    open_process = opener or process_opener()
    errors: list[ProbeError] = []
    try:
        proc = open_process(entry.pid)
        name = proc.name()
        status = proc.status()
        create_time = proc.create_time()
        ppid = proc.ppid()
        user = _safe(proc.username)
        cmdline = _safe(proc.cmdline)
        rss = _safe(proc.rss)
    except procfs.NoSuchProcess:
        note = (
            "not visible from this container's PID namespace (NVML reports host PIDs)"
            if in_container
            else "no such process: it exited, or its memory is held by a defunct context"
        )
        return GpuProcess(**base, visible=False, note=note), errors
    except procfs.AccessDenied as exc:
        errors.append(ProbeError("process", f"pid:{entry.pid}", f"access denied: {exc}"))
        return GpuProcess(**base, note="details hidden: permission denied"), errors

    parent_cmdline = None
    if ppid:
        parent_cmdline = _safe(lambda: open_process(ppid).cmdline())
    try:
        env = read_process_environ(entry.pid)
    except OSError:
        env = {}  # another user's process: its environment is private, as it should be
    cgroup = _read_cgroup(entry.pid)
    return (
        GpuProcess(
            **base,
            name=name,
            user=user,
            cmdline=redact_cmdline(cmdline) if cmdline is not None else None,
            status=status,
            start_time=iso_utc(create_time),
            ppid=ppid or None,
            parent_cmdline=redact_cmdline(parent_cmdline) if parent_cmdline else None,
            rss_bytes=rss,
            container=container_from_cgroup(cgroup) if cgroup else None,
            cgroup=cgroup.strip().splitlines()[-1] if cgroup and cgroup.strip() else None,
            listen_ports=_safe(proc.listen_ports),
            dist_rank=_dist_rank(env),
            note="zombie: exited but not reaped; its parent must wait() for it"
            if status == "zombie"
            else None,
        ),
        errors,
    )


def _safe(func):
    try:
        return func()
    except (procfs.Error, OSError):
        return None


def read_processes(
    entries: Iterable[NvmlProcessLike], container: str | None, root: str = procfs.PROC
) -> tuple[list[GpuProcess], list[ProbeError]]:
    processes: list[GpuProcess] = []
    errors: list[ProbeError] = []
    in_container = container is not None
    opener = process_opener(root)
    for entry in entries:
        process, problems = describe(entry, in_container, opener)
        processes.append(process)
        errors.extend(problems)
    processes.sort(key=lambda p: (p.gpu_index, p.pid))
    return processes, errors
