"""GPU processes: NVML's PIDs joined with what the OS says about each one.

A PID that is not in this PID namespace (it exited, or lives in another container) stays in the
table with its VRAM and a note; a process of another user shows what ``/proc`` lets anyone see.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import psutil

from gpu_audit.collect.host import iso_utc
from gpu_audit.collect.software import read_process_environ
from gpu_audit.model import GpuProcess, ProbeError
from gpu_audit.redact import redact_cmdline

# cgroup paths carry the container id: docker-<64 hex>.scope, /docker/<id>, cri-containerd-<id>,
# libpod-<id>, /kubepods/.../<id>
_CONTAINER_ID = re.compile(r"(?:docker|cri-containerd|crio|libpod|containerd)[-/]([0-9a-f]{12,64})")
_KUBEPODS = re.compile(r"kubepods.*?([0-9a-f]{64})")


class NvmlProcessLike(Protocol):
    pid: int
    gpu_index: int
    gpu_uuid: str | None
    used_memory_bytes: int | None
    type: str


def container_from_cgroup(cgroup_text: str) -> str | None:
    """A short container label from a ``/proc/PID/cgroup`` text, or ``None`` for a host process."""
    if match := _KUBEPODS.search(cgroup_text):
        return f"kubernetes:{match[1][:12]}"
    if match := _CONTAINER_ID.search(cgroup_text):
        runtime = match[0].split(match[1])[0].strip("-/")
        return f"{runtime}:{match[1][:12]}"
    return None


def _dist_rank(env: dict[str, str]) -> int | None:
    for key in ("LOCAL_RANK", "RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"):
        value = env.get(key)
        if value is not None and value.isdigit():
            return int(value)
    return None


def _listen_ports(proc: psutil.Process) -> list[int] | None:
    try:
        conns = proc.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return None
    return sorted({c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr})


def _own_pid_namespace() -> str | None:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def describe(entry: NvmlProcessLike, in_container: bool) -> tuple[GpuProcess, list[ProbeError]]:
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
    errors: list[ProbeError] = []
    try:
        proc = psutil.Process(entry.pid)
        with proc.oneshot():
            name = proc.name()
            status = proc.status()
            create_time = proc.create_time()
            ppid = proc.ppid()
            user = _safe(proc.username)
            cmdline = _safe(proc.cmdline)
            rss = _safe(lambda: proc.memory_info().rss)
    except psutil.NoSuchProcess:
        note = (
            "not visible from this container's PID namespace (NVML reports host PIDs)"
            if in_container
            else "no such process: it exited, or its memory is held by a defunct context"
        )
        return GpuProcess(**base, visible=False, note=note), errors
    except psutil.AccessDenied as exc:
        errors.append(ProbeError("process", f"pid:{entry.pid}", f"access denied: {exc}"))
        return GpuProcess(**base, note="details hidden: permission denied"), errors

    parent_cmdline = None
    if ppid:
        parent_cmdline = _safe(lambda: psutil.Process(ppid).cmdline())
    try:
        env = read_process_environ(entry.pid)
    except OSError:
        env = {}  # another user's process: its environment is private, as it should be
    try:
        cgroup = Path(f"/proc/{entry.pid}/cgroup").read_text()
    except OSError:
        cgroup = None
    proc_obj = proc
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
            listen_ports=_listen_ports(proc_obj),
            dist_rank=_dist_rank(env),
            note="zombie: exited but not reaped; its parent must wait() for it"
            if status == psutil.STATUS_ZOMBIE
            else None,
        ),
        errors,
    )


def _safe(func):
    try:
        return func()
    except (psutil.Error, OSError):
        return None


def read_processes(
    entries: Iterable[NvmlProcessLike], container: str | None
) -> tuple[list[GpuProcess], list[ProbeError]]:
    processes: list[GpuProcess] = []
    errors: list[ProbeError] = []
    in_container = container is not None
    for entry in entries:
        process, problems = describe(entry, in_container)
        processes.append(process)
        errors.extend(problems)
    processes.sort(key=lambda p: (p.gpu_index, p.pid))
    return processes, errors
