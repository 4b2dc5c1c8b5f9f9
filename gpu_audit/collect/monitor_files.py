"""Reading what ``gpu_audit.monitor`` publishes, without trusting the folder it lives in.

The per-user runtime folder is writable by the user and, for ``/tmp/gpu-audit-<uid>``, its
name is predictable, so anything may be found there: files of processes that died (SIGKILL
skips the clean-up), a PID reused by another program, a symlink planted to make us read
elsewhere, a FIFO that would block a reader, garbage, or a folder created by another user.
:func:`read_publications` never follows a symlink (``O_NOFOLLOW`` on the folder and on each
file, ownership and mode checked on the open descriptor), never blocks, never raises, and
keeps only files whose process is alive and is the one that wrote them (same start time in
the same PID namespace on the same host). What it refuses is listed, so a scan can say why.

:func:`attach_allocator_states` joins the publications to NVML's process list by PID and start
time, and to the right device by UUID or PCI bus id.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from gpu_audit.hostname import host_name
from gpu_audit.model import AllocatorSample, Gpu, GpuProcess, ProbeError, ProcessAllocatorState
from gpu_audit.publication import (
    CREATE_TIME_TOLERANCE_S,
    FILE_NAME,
    MAX_FILE_BYTES,
    SCHEMA_KIND,
    SCHEMA_MAJOR,
    ProcessIdentity,
    figure_problem,
    pid_namespace,
    private_dir_problem,
    process_identity,
    runtime_dir_candidates,
    same_process,
)
from gpu_audit.redact import redact_settings
from gpu_audit.units import parse_utc, plural

MAX_TEXT = 500  # longest string kept from a publication (settings, names)
MAX_DEVICES = 64
MAX_HISTORY = 256
MAX_DROPPED_SHOWN = 5  # dropped figures named in one probe error; the rest are counted


@dataclass(frozen=True)
class Publication:
    path: str
    pid: int
    start_time: str | None
    create_time: float | None
    published_at: str
    age_s: float | None
    document: dict[str, Any]
    dropped: tuple[str, ...] = ()  # figures set to null as out of range: "devices[0].x (why)"


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str
    suspicious: bool  # True: unsafe or foreign (worth telling the user); False: merely stale


@dataclass(frozen=True)
class MonitorFiles:
    publications: list[Publication]
    skipped: list[SkippedFile]

    def probe_errors(self) -> list[ProbeError]:
        """The suspicious refusals, as probe errors a scan reports (stale files stay quiet), and
        the figures dropped from the publications read."""
        errors = [ProbeError("monitor", "host", f"ignored {s.path}: {s.reason}")
                  for s in self.skipped if s.suspicious]
        for p in self.publications:
            if p.dropped:
                shown = "; ".join(p.dropped[:MAX_DROPPED_SHOWN])
                more = len(p.dropped) - MAX_DROPPED_SHOWN
                rest = f"; and {more} more" if more > 0 else ""
                errors.append(ProbeError(
                    "monitor", f"pid:{p.pid}",
                    f"{p.path}: {plural(len(p.dropped), 'malformed figure')} dropped (not shown): "
                    f"{shown}{rest}"))
        return errors


class _Refused(Exception):
    def __init__(self, reason: str, suspicious: bool = True) -> None:
        super().__init__(reason)
        self.reason, self.suspicious = reason, suspicious


def read_publications(dirs: Iterable[Path] | None = None, *,
                      now: dt.datetime | None = None) -> MonitorFiles:
    """Every live, trustworthy publication in this user's runtime folders. Never raises."""
    publications: list[Publication] = []
    skipped: list[SkippedFile] = []
    seen: set[int] = set()
    now = now or dt.datetime.now(dt.UTC)
    if not hasattr(os, "geteuid"):
        return MonitorFiles([], [])  # no per-user ownership to check (Windows): nothing is read
    try:
        folders = list(dirs) if dirs is not None else runtime_dir_candidates()
        context = _ReaderContext()
    except Exception as exc:  # never take a scan down
        return MonitorFiles([], [SkippedFile("(runtime folder)", f"cannot look: {exc}", True)])
    for folder in folders:
        try:
            _read_folder(Path(folder), context, now, publications, skipped, seen)
        except Exception as exc:  # an unforeseen oddity in one folder must not hide the others
            skipped.append(SkippedFile(str(folder), f"unreadable: {exc}", True))
    publications.sort(key=lambda p: p.pid)
    return MonitorFiles(publications, skipped)


@dataclass(frozen=True)
class _ReaderContext:
    uid: int = dataclasses.field(default_factory=lambda: os.geteuid())
    namespace: str | None = dataclasses.field(default_factory=pid_namespace)
    hostname: str = dataclasses.field(default_factory=host_name)


def _read_folder(folder: Path, ctx: _ReaderContext, now: dt.datetime,
                 publications: list[Publication], skipped: list[SkippedFile],
                 seen: set[int]) -> None:
    problem = private_dir_problem(folder)
    if problem == "does not exist":
        return
    if problem:
        skipped.append(SkippedFile(str(folder), f"folder {problem}", True))
        return
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        dir_fd = os.open(folder, flags)
    except OSError as exc:
        skipped.append(SkippedFile(str(folder), f"folder cannot be opened: {exc.strerror}", True))
        return
    try:
        # The folder may have been swapped between the check and the open: check what we hold.
        info = os.fstat(dir_fd)
        if info.st_uid != ctx.uid or info.st_mode & 0o077 or not stat.S_ISDIR(info.st_mode):
            skipped.append(SkippedFile(str(folder), "folder changed while being opened", True))
            return
        for name in sorted(os.listdir(dir_fd)):
            match = FILE_NAME().match(name)
            if not match:
                continue  # temporary files of an atomic write, or not ours
            path = folder / name
            try:
                doc = _load(dir_fd, name, ctx)
                publication = _accept(doc, int(match["pid"]), str(path), ctx, now)
            except _Refused as refused:
                skipped.append(SkippedFile(str(path), refused.reason, refused.suspicious))
                continue
            if publication.pid not in seen:
                seen.add(publication.pid)
                publications.append(publication)
    finally:
        os.close(dir_fd)


def _load(dir_fd: int, name: str, ctx: _ReaderContext) -> Any:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) \
        | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Refused("is a symbolic link") from None
        if exc.errno == errno.ENOENT:
            raise _Refused("vanished while being read (its process just stopped)", False) from None
        raise _Refused(f"cannot be opened: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Refused("is not a regular file")
        if info.st_uid != ctx.uid:
            raise _Refused(f"belongs to uid {info.st_uid}, not to this user")
        if info.st_mode & 0o077:
            raise _Refused(f"has mode {stat.S_IMODE(info.st_mode):04o}; publications are 0600")
        if info.st_size > MAX_FILE_BYTES:
            raise _Refused(f"is {info.st_size} bytes, too large to be a publication")
        chunks, total = [], 0
        while total <= MAX_FILE_BYTES:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    finally:
        os.close(fd)
    if total > MAX_FILE_BYTES:
        raise _Refused("grew too large to be a publication")
    try:
        return json.loads(b"".join(chunks).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Refused("is not valid JSON") from None


def _opt_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _opt_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _opt_text(value: Any) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def _accept(doc: Any, file_pid: int, path: str, ctx: _ReaderContext,
            now: dt.datetime) -> Publication:
    if not isinstance(doc, dict):
        raise _Refused("is not a publication (not a JSON object)")
    schema = doc.get("schema")
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_KIND):
        raise _Refused(f"is not a publication (schema {schema!r:.40})")
    major = schema[len(SCHEMA_KIND):]
    # str(SCHEMA_MAJOR), not int(major): "²" is a digit to isdigit() and 5,000 digits make
    # int() raise, either of which would hide every other publication of the folder.
    if major != str(SCHEMA_MAJOR):
        raise _Refused(f"uses {schema[:60]}, which this gpu-audit cannot read; upgrade gpu-audit",
                       False)
    pid = doc.get("pid")
    if pid != file_pid:
        raise _Refused(f"names pid {pid!r:.20} but is the file of pid {file_pid}")
    if doc.get("uid") != ctx.uid:
        raise _Refused(f"was written for uid {doc.get('uid')!r:.20}, not this user")
    host = doc.get("hostname")
    if isinstance(host, str) and host != ctx.hostname:
        raise _Refused(f"was published on host {host[:80]!r}, not this one", False)
    namespace = doc.get("pid_namespace")
    if isinstance(namespace, str) and ctx.namespace and namespace != ctx.namespace:
        raise _Refused("was published from another PID namespace (a container): its pid means "
                       "nothing here", False)
    published = ProcessIdentity(file_pid, _opt_int(doc.get("start_ticks")),
                                _opt_float(doc.get("create_time_s")))
    live = process_identity(file_pid)
    if live is None:
        raise _Refused(f"is stale: process {file_pid} has exited", False)
    if not same_process(published, live):
        raise _Refused(f"is stale: pid {file_pid} now belongs to a process started later", False)
    published_at = doc.get("published_at")
    moment = parse_utc(published_at) if isinstance(published_at, str) else None
    if moment is None:
        raise _Refused("has no valid published_at time")
    devices = doc.get("devices")
    if not isinstance(devices, list) or len(devices) > MAX_DEVICES \
            or not all(isinstance(d, dict) for d in devices):
        raise _Refused("has no valid device list")
    age = max((now - moment).total_seconds(), 0.0)
    cleaned, dropped = _without_bad_figures(doc)
    create_time = _opt_float(cleaned.get("create_time_s"))
    return Publication(path=path, pid=file_pid, start_time=_opt_text(doc.get("start_time")),
                       create_time=create_time, published_at=published_at,
                       age_s=round(age, 1), document=cleaned, dropped=tuple(dropped))


def _without_bad_figures(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``doc`` with every figure outside its sane range (:func:`figure_problem`) set to null,
    and where each was: the scan shows nothing rather than ``inf%`` or 9e27 TiB."""
    dropped: list[str] = []

    def clean(entry: dict[str, Any], where: str) -> dict[str, Any]:
        out = dict(entry)
        for name, value in entry.items():
            problem = figure_problem(name, value)
            if problem is not None:
                out[name] = None
                plain = name.isascii() and name.isidentifier() and len(name) <= 60
                dropped.append(f"{where}{name if plain else repr(name[:60])}: {problem}")
        return out

    cleaned = clean(doc, "")
    cleaned["devices"] = []
    for i, device in enumerate(doc["devices"]):
        entry = clean(device, f"devices[{i}].")
        history = device.get("history")
        if isinstance(history, list):
            start = max(len(history) - MAX_HISTORY, 0)  # only the samples the scan keeps
            entry["history"] = [clean(item, f"devices[{i}].history[{start + j}].")
                                if isinstance(item, dict) else item
                                for j, item in enumerate(history[start:])]
        cleaned["devices"].append(entry)
    return cleaned, dropped


# --- the join --------------------------------------------------------------------------------


def _uuid_key(uuid: str | None) -> str | None:
    if not uuid:
        return None
    text = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        text = text.removeprefix(prefix)
    return text or None


def _pci_key(bus_id: str | None) -> tuple[int, ...] | None:
    """``00000000:3B:00.0`` and ``0000:3b:00.0`` alike -> (0, 0x3b, 0, 0)."""
    if not bus_id:
        return None
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        return int(domain, 16), int(bus, 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def _history(raw: Any) -> list[AllocatorSample]:
    samples = []
    for item in raw[-MAX_HISTORY:] if isinstance(raw, list) else []:
        if isinstance(item, dict) and isinstance(item.get("at"), str):
            samples.append(AllocatorSample(at=item["at"][:40],
                                           num_alloc_retries=_opt_int(item.get("num_alloc_retries")),
                                           num_ooms=_opt_int(item.get("num_ooms")),
                                           step=_opt_int(item.get("step"))))
    return samples


def allocator_state(publication: Publication, device: dict[str, Any]) -> ProcessAllocatorState:
    """One published device as the model's :class:`ProcessAllocatorState`."""
    doc = publication.document
    ints = {name: _opt_int(device.get(name)) for name in (
        "allocated_bytes", "allocated_peak_bytes", "reserved_bytes", "reserved_peak_bytes",
        "active_bytes", "active_peak_bytes", "inactive_split_bytes", "inactive_split_peak_bytes",
        "requested_bytes", "segments", "reserved_unallocated_bytes", "num_alloc_retries",
        "num_ooms", "max_split_size_bytes")}
    expandable = doc.get("expandable_segments")
    snapshots = doc.get("oom_snapshots")
    return ProcessAllocatorState(
        cuda_device=_opt_int(device.get("index")) or 0,
        published_at=publication.published_at,
        age_s=publication.age_s,
        interval_s=_opt_float(doc.get("interval_s")),
        torch_version=_opt_text(doc.get("torch_version")),
        backend=_opt_text(doc.get("allocator_backend")),
        # Masked as it is read: another user's process may publish anything, and no consumer
        # (rules, evidence, fix lines, documents) then sees a secret in it.
        settings=redact_settings(s) if (s := _opt_text(doc.get("allocator_settings"))) else s,
        expandable_segments=expandable if isinstance(expandable, bool) else None,
        fragmentation_pct=_opt_float(device.get("fragmentation_pct")),
        split_fragmentation_pct=_opt_float(device.get("split_fragmentation_pct")),
        step=_opt_int(doc.get("step")),
        history=_history(device.get("history")),
        oom_snapshots=[s[:MAX_TEXT] for s in snapshots[:20] if isinstance(s, str)]
        if isinstance(snapshots, list) else [],
        **ints,
    )


def _same_start(process_start: str | None, publication: Publication) -> bool:
    if process_start is None or publication.create_time is None:
        return True  # the reader already matched the live process's start time
    moment = parse_utc(process_start)
    if moment is None:
        return True
    # The scan's start time is cut to whole seconds: allow that on top of the usual tolerance.
    return abs(moment.timestamp() - publication.create_time) <= CREATE_TIME_TOLERANCE_S + 1


def _device_for(process: GpuProcess, gpu: Gpu | None, devices: list[dict[str, Any]],
                gpus_of_pid: int) -> dict[str, Any] | None:
    uuid = _uuid_key(process.gpu_uuid or (gpu.uuid if gpu else None))
    if uuid:
        for device in devices:
            if _uuid_key(_opt_text(device.get("uuid"))) == uuid:
                return device
    pci = _pci_key(gpu.pci_bus_id if gpu else None)
    if pci:
        for device in devices:
            if _pci_key(_opt_text(device.get("pci_bus_id"))) == pci:
                return device
    if len(devices) == 1 and gpus_of_pid == 1:
        published = devices[0].get("uuid") or devices[0].get("pci_bus_id")
        if not (uuid or pci) or not published:
            return devices[0]  # one device on each side, and one side cannot name its device
    return None


def attach_allocator_states(processes: list[GpuProcess], gpus: list[Gpu],
                            published: MonitorFiles) -> list[GpuProcess]:
    """``processes`` with ``allocator`` filled in where the process publishes. Pure."""
    by_pid = {p.pid: p for p in published.publications}
    gpu_by_index = {g.index: g for g in gpus}
    gpus_per_pid: dict[int, int] = {}
    for process in processes:
        gpus_per_pid[process.pid] = gpus_per_pid.get(process.pid, 0) + 1
    joined = []
    for process in processes:
        publication = by_pid.get(process.pid)
        device = None
        if publication is not None and process.visible \
                and _same_start(process.start_time, publication):
            device = _device_for(process, gpu_by_index.get(process.gpu_index),
                                 publication.document["devices"], gpus_per_pid[process.pid])
        if device is None:
            joined.append(process)
        else:
            joined.append(msgspec.structs.replace(process,
                                              allocator=allocator_state(publication, device)))
    return joined
