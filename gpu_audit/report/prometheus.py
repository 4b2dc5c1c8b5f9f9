"""The scan as a node_exporter textfile (``scan --prometheus FILE``).

node_exporter's textfile collector (``--collector.textfile.directory=DIR``) reads every
``*.prom`` file in DIR at each scrape: the file is written whole or not at all (a temporary file
in the same folder, then a rename), carries no client-side timestamps (node_exporter drops a
whole file that has them) and is world-readable (node_exporter runs as its own user). The text
comes from ``prometheus_client`` (imported here only, so no other command pays for it), built in
a registry of its own so no process or platform metrics leak in.

Every series is a gauge named ``gpu_audit_*`` (never ``DCGM_FI_*``: the stock DCGM dashboards
must not see duplicates). Per-GPU series carry the labels of NVIDIA's DCGM exporter, with its
names and value formats, so PromQL joins them with the DCGM series, e.g.
``gpu_audit_unattributed_memory_bytes * on(UUID) group_left DCGM_FI_DEV_FB_USED``:

- ``gpu``: the NVML index as a decimal string (``"0"``);
- ``UUID``: ``GPU-<uuid>`` as NVML spells it;
- ``pci_bus_id``: NVML's bus id, ``00000000:3B:00.0`` (8-digit domain, upper-case hex);
- a lost GPU (NVML answers "GPU is lost" and names nothing) carries the UUID and bus id the
  kernel driver keeps for it (``docs/gpu-identity.md``); where no source knows its UUID, the
  ``UUID`` label carries its bus id, so its series stay apart from every other GPU's and never
  carry an empty identity;
- ``modelName``: the NVML device name, ``NVIDIA H100 80GB HBM3``;
- ``Hostname`` and ``hostname``: this host's name. The exporter's GPU template writes
  ``Hostname`` (internal/pkg/rendermetrics/render_metrics.go in NVIDIA/dcgm-exporter); its
  4.6.0-4.8.3 release notes rename it ``hostname`` (#655). Both are written, with the same
  value, so a join works against either generation.

Cardinality is bounded by the machine, never by its workload: per GPU a handful of series, plus
one per (GPU, user) for process memory and monitored allocators, plus one per (finding id,
severity, subject). No label carries a pid, a command line or a port: a finding about a process
(subject ``pid:N``) is counted under subject ``pid``, and process memory is summed per user.

Series (:data:`METRICS` documents each):

- ``gpu_audit_scan_success`` (1: judged; 0: the scan could not judge, see
  :func:`render_failure`), ``gpu_audit_scan_status`` (the exit code, 0-3),
  ``gpu_audit_scan_duration_seconds``, ``gpu_audit_scan_timestamp_seconds``, ``gpu_audit_info``;
- ``gpu_audit_findings{severity}`` (every severity, 0 included) and
  ``gpu_audit_finding{id,severity,subject,<GPU labels>}`` (one per finding, value = how many);
- per GPU: ``gpu_audit_unattributed_memory_bytes``, ``gpu_audit_duplicate_backend_memory_bytes``,
  ``gpu_audit_duplicate_backend_reclaimable_bytes``;
- per GPU and user: ``gpu_audit_process_memory_bytes``, ``gpu_audit_processes``, and from
  processes that publish their allocator (``gpu_audit.monitor``)
  ``gpu_audit_allocator_reserved_bytes``, ``gpu_audit_allocator_allocated_bytes``,
  ``gpu_audit_allocator_fragmentation_ratio`` (the worst process) and
  ``gpu_audit_allocator_monitored_processes``.

``check --prometheus FILE`` writes the same series for the scan it judged, plus the check's own
verdict (:data:`CHECK_METRICS`): ``gpu_audit_check_status`` (its exit code),
``gpu_audit_checks{status}`` and ``gpu_audit_check_passed{id,subject,<GPU labels>}`` (1 passed,
0 warned, failed or could not be judged; skipped checks are left out). A check that cannot judge
writes ``gpu_audit_scan_success 0`` and ``gpu_audit_check_status 3``.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpu_audit.errors import UsageError
from gpu_audit.model import Finding, Gpu, GpuProcess, Scan, Severity
from gpu_audit.report.escape import metric_label
from gpu_audit.rules import exit_code
from gpu_audit.rules.duplicates import duplicate_groups
from gpu_audit.rules.processes import unattributed_bytes
from gpu_audit.serial import check_output_target, write_atomic
from gpu_audit.units import parse_utc

HOST_LABELS = ("Hostname", "hostname")
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "modelName", *HOST_LABELS)
_BOUNDED_SUBJECT = re.compile(r"^(?:host|env|driver|gpu:\d+)$")

# name -> (help, extra labels before the GPU/host ones, per GPU?)
METRICS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "gpu_audit_scan_success": (
        "1 when gpu-audit scanned and judged this machine, 0 when it could not (configuration "
        "error, unreadable input, internal error, interrupted).", (), False),
    "gpu_audit_scan_status": (
        "The scan's exit code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (could not judge).",
        (), False),
    "gpu_audit_scan_duration_seconds": ("How long the scan ran.", (), False),
    "gpu_audit_scan_timestamp_seconds": (
        "When the scan ran (Unix time); compare with time() to find stale files.", (), False),
    "gpu_audit_info": ("Versions of gpu-audit and of the driver it read (value 1).",
                       ("version", "driver_version", "cuda_driver_version"), False),
    "gpu_audit_findings": ("Findings of each severity.", ("severity",), False),
    "gpu_audit_finding": (
        "One series per finding id, severity and subject (process findings under subject "
        "'pid'); the value counts the findings.", ("id", "severity", "subject"), True),
    "gpu_audit_unattributed_memory_bytes": (
        "Device memory in use that no listed process accounts for (before the "
        "unattributed-vram allowance; 0 when processes account for all of it).", (), True),
    "gpu_audit_duplicate_backend_memory_bytes": (
        "Device memory held by processes that are copies of the same server.", (), True),
    "gpu_audit_duplicate_backend_reclaimable_bytes": (
        "Device memory that stopping every copy but the oldest would free.", (), True),
    "gpu_audit_process_memory_bytes": ("Device memory held by each user's processes.",
                                       ("user",), True),
    "gpu_audit_processes": ("Processes of each user on the GPU.", ("user",), True),
    "gpu_audit_allocator_reserved_bytes": (
        "Memory reserved by PyTorch's caching allocator in the user's monitored processes.",
        ("user",), True),
    "gpu_audit_allocator_allocated_bytes": (
        "Memory allocated to tensors in the user's monitored processes.", ("user",), True),
    "gpu_audit_allocator_fragmentation_ratio": (
        "Worst allocator fragmentation among the user's monitored processes: (reserved - "
        "allocated) / reserved, 0-1.", ("user",), True),
    "gpu_audit_allocator_monitored_processes": (
        "The user's processes that publish their allocator state (gpu_audit.monitor).",
        ("user",), True),
}


# What a check adds to the scan's series (same layout as METRICS).
CHECK_METRICS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "gpu_audit_check_status": (
        "The check's exit code: 0 OK, 1 WARNING, 2 CRITICAL (the runner is unfit), 3 UNKNOWN "
        "(could not judge).", (), False),
    "gpu_audit_checks": ("Checks of each status (pass, warn, fail, skip, unknown).",
                         ("status",), False),
    "gpu_audit_check_passed": (
        "1 when every result of this check on this subject passed, 0 when one warned, failed or "
        "could not be judged (process subjects under 'pid'; skipped checks left out).",
        ("id", "subject"), True),
}


class _Families:
    """One ``prometheus_client`` gauge per metric name, in a registry of their own."""

    def __init__(self, hostname: str, *, check: bool = False) -> None:
        from prometheus_client import CollectorRegistry, Gauge

        self.registry = CollectorRegistry(auto_describe=True)
        self.host = {"Hostname": hostname, "hostname": hostname}
        metrics = {**METRICS, **CHECK_METRICS} if check else METRICS
        self.gauges = {
            name: Gauge(name, doc, [*extra, *(GPU_LABELS if per_gpu else HOST_LABELS)],
                        registry=self.registry)
            for name, (doc, extra, per_gpu) in metrics.items()
        }

    def _labels(self, labels: dict[str, str] | None) -> dict[str, str]:
        """Every label value escaped (host names, users and models come from the machine)."""
        return {k: metric_label(v) for k, v in {**self.host, **(labels or {})}.items()}

    def set(self, name: str, value: float, labels: dict[str, str] | None = None) -> None:
        self.gauges[name].labels(**self._labels(labels)).set(value)

    def inc(self, name: str, labels: dict[str, str]) -> None:
        self.gauges[name].labels(**self._labels(labels)).inc()

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def gpu_labels(gpu: Gpu | None, index: int | None = None) -> dict[str, str]:
    """The DCGM exporter's labels for ``gpu`` (empty strings for what is unknown)."""
    if gpu is None:
        return {"gpu": "" if index is None else str(index), "UUID": "", "pci_bus_id": "",
                "modelName": ""}
    bus = gpu.pci_bus_id or ""
    return {"gpu": str(gpu.index), "UUID": gpu.uuid or bus, "pci_bus_id": bus,
            "modelName": gpu.name or ""}


def finding_subject(subject: str) -> str:
    """The subject as a bounded label value: ``pid:4242`` -> ``pid``."""
    if _BOUNDED_SUBJECT.match(subject):
        return subject
    return subject.split(":", 1)[0]


def _finding_labels(finding: Finding, gpus: dict[int, Gpu]) -> dict[str, str]:
    return _subject_labels(finding.id, finding.subject, gpus,
                           severity=(finding.severity or Severity.INFO).value)


def _subject_labels(id_: str, subject: str, gpus: dict[int, Gpu],
                    **extra: str) -> dict[str, str]:
    """``id``, the bounded ``subject`` and the GPU labels of a finding or a check result."""
    subject = finding_subject(subject)
    labels = {"id": id_, **extra, "subject": subject}
    if subject.startswith("gpu:"):
        index = int(subject.split(":", 1)[1])
        return {**labels, **gpu_labels(gpus.get(index), index)}
    return {**labels, **gpu_labels(None)}


def _memory_by_gpu(scan: Scan, families: _Families, gpus: dict[int, Gpu]) -> None:
    members: set[int] = set()
    extra: set[int] = set()
    for group in duplicate_groups(scan.processes):
        members.update(p.pid for p in group)
        extra.update(p.pid for p in group[1:])
    on_gpu: dict[int, list[GpuProcess]] = defaultdict(list)
    for p in scan.processes:
        on_gpu[p.gpu_index].append(p)
    for index, gpu in gpus.items():
        labels = gpu_labels(gpu)
        held = on_gpu.get(index, [])
        unattributed = unattributed_bytes(gpu, held)
        if unattributed is not None:
            families.set("gpu_audit_unattributed_memory_bytes", max(unattributed, 0), labels)
        families.set("gpu_audit_duplicate_backend_memory_bytes",
                     sum(p.used_memory_bytes or 0 for p in held if p.pid in members), labels)
        families.set("gpu_audit_duplicate_backend_reclaimable_bytes",
                     sum(p.used_memory_bytes or 0 for p in held if p.pid in extra), labels)
        by_user: dict[str, list[GpuProcess]] = defaultdict(list)
        for p in held:
            by_user[p.user or ""].append(p)
        for user, procs in sorted(by_user.items()):
            user_labels = {**labels, "user": user}
            families.set("gpu_audit_processes", len(procs), user_labels)
            if all(p.used_memory_bytes is not None for p in procs):
                families.set("gpu_audit_process_memory_bytes",
                             sum(p.used_memory_bytes or 0 for p in procs), user_labels)
            _allocators(families, [p.allocator for p in procs if p.allocator], user_labels)


def _allocators(families: _Families, states: list[Any], labels: dict[str, str]) -> None:
    if not states:
        return
    families.set("gpu_audit_allocator_monitored_processes", len(states), labels)
    for field, name in (("reserved_bytes", "gpu_audit_allocator_reserved_bytes"),
                        ("allocated_bytes", "gpu_audit_allocator_allocated_bytes")):
        values = [getattr(s, field) for s in states if getattr(s, field) is not None]
        if values:
            families.set(name, sum(values), labels)
    ratios = [s.fragmentation_pct / 100 for s in states if s.fragmentation_pct is not None]
    if ratios:
        families.set("gpu_audit_allocator_fragmentation_ratio", max(ratios), labels)


def _run_metrics(families: _Families, *, success: bool, status: int, duration_s: float | None,
                 timestamp_s: float | None) -> None:
    families.set("gpu_audit_scan_success", 1 if success else 0)
    families.set("gpu_audit_scan_status", status)
    if duration_s is not None:
        families.set("gpu_audit_scan_duration_seconds", duration_s)
    if timestamp_s is not None:
        families.set("gpu_audit_scan_timestamp_seconds", timestamp_s)


def render_textfile(scan: Scan, findings: list[Finding], exit_code: int, *,
                    duration_s: float | None) -> bytes:
    """The textfile of a scan that judged the machine (``gpu_audit_scan_success 1``)."""
    families = _Families(scan.host.hostname)
    _scan_series(families, scan, findings, exit_code, duration_s=duration_s)
    return families.text()


def render_check_textfile(report: Any, *, duration_s: float | None) -> bytes:
    """The textfile of a check that judged the machine: the series of the scan it judged (its
    status the exit code ``scan`` would give under the policy's ``fail_on``), then the check's
    verdict (:data:`CHECK_METRICS`)."""

    scan = report.scan
    families = _Families(scan.host.hostname, check=True)
    _scan_series(families, scan, report.findings,
                 exit_code(report.findings, report.policy.fail_on_severity),
                 duration_s=duration_s)
    families.set("gpu_audit_check_status", report.exit_code)
    for status, count in report.counts().items():
        families.set("gpu_audit_checks", count, {"status": status})
    gpus = {gpu.index: gpu for gpu in scan.gpus}
    passed: dict[tuple[tuple[str, str], ...], int] = {}
    for result in report.results:
        if result.status.value == "skip":
            continue
        key = tuple(_subject_labels(result.id, result.subject, gpus).items())
        passed[key] = min(passed.get(key, 1), int(result.status.value == "pass"))
    for key, value in passed.items():
        families.set("gpu_audit_check_passed", value, dict(key))
    return families.text()


def _scan_series(families: _Families, scan: Scan, findings: list[Finding], exit_code: int, *,
                 duration_s: float | None) -> None:
    generated = parse_utc(scan.generated_at)
    _run_metrics(families, success=True, status=exit_code, duration_s=duration_s,
                 timestamp_s=generated.timestamp() if generated else None)
    driver = scan.driver
    families.set("gpu_audit_info", 1, {
        "version": scan.tool_version,
        "driver_version": (driver.driver_version if driver else None) or "",
        "cuda_driver_version": (driver.cuda_driver_version if driver else None) or ""})
    for severity in Severity:
        families.set("gpu_audit_findings",
                     sum(1 for f in findings if (f.severity or Severity.INFO) is severity),
                     {"severity": severity.value})
    gpus = {gpu.index: gpu for gpu in scan.gpus}
    for finding in findings:
        families.inc("gpu_audit_finding", _finding_labels(finding, gpus))
    _memory_by_gpu(scan, families, gpus)


def render_failure(hostname: str, *, duration_s: float | None, timestamp_s: float | None,
                   status: int = 3, check: bool = False) -> bytes:
    """The textfile of a scan (or, with ``check``, a check) that could not judge:
    ``gpu_audit_scan_success 0`` and the exit status, so an alert fires on the failure instead of
    on a file gone stale."""
    families = _Families(hostname, check=check)
    _run_metrics(families, success=False, status=status, duration_s=duration_s,
                 timestamp_s=timestamp_s)
    if check:
        families.set("gpu_audit_check_status", status)
    return families.text()


def check_textfile_target(path: Path) -> None:
    """Refuse, before scanning, a ``--prometheus`` path that can never be written (a folder, a
    link another user could have planted, a folder that does not exist: exit 3); warn when
    node_exporter would not read it."""

    check_output_target(path)
    _require_folder(path)
    if path.suffix != ".prom":
        print(f"gpu-audit: warning: {path}: node_exporter's textfile collector reads only "
              "*.prom files", file=sys.stderr)


def _require_folder(path: Path) -> None:
    """The textfile's folder must exist: it is node_exporter's, never made up here."""
    if not path.parent.is_dir():
        raise UsageError(f"--prometheus: {path.parent} is not an existing folder "
                         "(node_exporter's --collector.textfile.directory)")


def write_textfile(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, readable by node_exporter (mode 0644); a path
    that cannot be written is a one-line usage error (exit 3)."""

    _require_folder(path)
    try:
        return write_atomic(path, data, mode=0o644)
    except UsageError:
        raise
    except OSError as exc:
        raise UsageError(f"--prometheus: cannot write {path}: {exc.strerror or exc}") from None
