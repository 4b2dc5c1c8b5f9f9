"""One full scan of this machine: every collector, the NVML read overlapping the rest."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gpu_audit import __version__
from gpu_audit.model import Scan
from gpu_audit.units import utc_now

if TYPE_CHECKING:
    from gpu_audit.collect.nvml.deadlines import PendingReading
    from gpu_audit.collect.nvml.isolated import ForkedReading
    from gpu_audit.model import KernelLog, ProbeError


def collect_scan(
    *,
    timeout_s: float = 5.0,
    pid: int | None = None,
    nvml: ForkedReading | PendingReading | None = None,
) -> Scan:
    """One full scan of this machine. Never raises for a missing driver, GPU or process.

    ``timeout_s`` bounds the NVML part (a hung driver call is reported, not waited on);
    ``pid`` reads the allocator settings from that process's environment instead of ours.
    ``nvml`` is a read the caller started earlier
    (:func:`gpu_audit.collect.nvml.isolated.start_read`); without one the read starts here.
    Either way the host, the publications and the allocator settings are read while the driver
    answers.
    """
    # The collectors load only when a scan reads the machine: `scan --from` never does.
    from gpu_audit.collect.nvml.isolated import start_read

    started = time.perf_counter()
    pending = nvml or start_read(timeout_s)
    started = min(started, pending.started)

    # Loaded here, not at import, for the same reason (start-up of `scan --from`, `check`).
    from gpu_audit.collect.host import read_host
    from gpu_audit.collect.identity import read_kernel_gpus
    from gpu_audit.collect.kernel_log import read_kernel_log
    from gpu_audit.collect.processes import read_processes
    from gpu_audit.collect.software import read_allocator_config
    from gpu_audit.gpu_identity import join
    from gpu_audit.publication import no_runtime_dir

    host, host_errors = read_host()
    # What processes running gpu_audit.monitor publish about their own allocator (where no
    # runtime folder exists, as on most machines, its reader is not even imported).
    published = None
    if not no_runtime_dir():
        from gpu_audit.collect.monitor_files import attach_allocator_states, read_publications

        published = read_publications()
    allocator, allocator_errors = read_allocator_config(pid)
    # What the kernel driver lists, and the kernel log in /dev/kmsg, do not depend on NVML's
    # answer: read while it comes. (The log's fallbacks run commands: only once NVML answered.)
    kernel_gpus = read_kernel_gpus()
    kmsg = read_kernel_log(dmesg=(), journal=())
    reading = pending.result()
    processes, process_errors = read_processes(reading.processes, host.container)
    if published is not None:
        processes = attach_allocator_states(processes, reading.gpus, published)
    kernel_log, kernel_errors = _kernel_log(kmsg, reading.status.available)
    # NVML's GPUs with what the kernel driver and /dev know of them, and the GPUs only those
    # list (gpu_audit.gpu_identity): resolved once, here, for every command.
    gpus, unlisted = join(reading.gpus, kernel_gpus)
    return Scan(
        host=host,
        nvml=reading.status,
        driver=reading.driver,
        gpus=gpus,
        processes=processes,
        allocator=allocator,
        probe_errors=[
            *host_errors,
            *reading.probe_errors,
            *process_errors,
            *allocator_errors,
            *(published.probe_errors() if published is not None else []),
            *kernel_errors,
        ],
        kernel_log=kernel_log,
        generated_at=utc_now(),
        tool_version=__version__,
        scan_duration_s=round(time.perf_counter() - started, 4),
        unlisted_gpus=unlisted,
    )


def _kernel_log(
    kmsg: tuple[KernelLog | None, list[ProbeError]], nvml_available: bool
) -> tuple[KernelLog | None, list[ProbeError]]:
    """The kernel log's Xid events: from /dev/kmsg as read early, else from the commands."""
    from gpu_audit.collect.kernel_log import read_kernel_log

    if not nvml_available:  # Xid lines come from the NVIDIA driver: none, nothing to look for
        return None, []
    log, _ = kmsg
    if log is None or log.readable:  # not Linux, or /dev/kmsg was read
        return kmsg
    return read_kernel_log()  # /dev/kmsg again, then dmesg and journalctl
