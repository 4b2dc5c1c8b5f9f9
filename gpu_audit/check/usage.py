"""Checks of what already uses the runner: swap, copies of a server, memory no process accounts
for, other users' processes and leftovers of earlier jobs.

``swap`` views the scan's ``swap-pressure``, ``duplicate-backends`` its ``duplicate-backend`` and
``unattributed-vram`` its ``unattributed-vram``: the rule decides, the check maps its findings
by the policy's mode key.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.check.registry import (
    PASS,
    SKIP,
    UNKNOWN,
    CheckContext,
    check,
    gib_text,
    ignored_by_mode,
    mode_status,
    process_brief,
    process_label,
    result,
)
from gpu_audit.check.results import CheckResult
from gpu_audit.model import GpuProcess
from gpu_audit.rules.duplicates import duplicate_groups
from gpu_audit.units import fmt_bytes, plural


@check("swap", "Swap in use", views=("swap-pressure",))
def swap(ctx: CheckContext) -> Iterator[CheckResult]:
    """The host uses no more than `max_swap_used_gib` of swap ({max_swap_used_gib} GiB by default).

    Judged by the scan's `swap-pressure` rule with the one policy's `max_swap_used_gib`; more
    swap in use fails (`swap = "warn"` or `"ignore"` relaxes that).

    Why it matters: swap in use before a job starts means host memory is already short: data
    loaders, pinned staging buffers and checkpoint writes will slow by orders of magnitude or meet
    the kernel's OOM killer.

    Example: `FAIL swap host 6.2 GiB of swap in use; the policy allows at most
    {max_swap_used_gib} GiB`.

    Fix: the `swap-pressure` remedy: stop what holds host memory
    (`ps -eo pid,user,rss,comm --sort=-rss | head`), then empty swap with
    `sudo swapoff -a && sudo swapon -a`.
    """
    policy = ctx.policy
    if policy.swap == "ignore":
        yield ignored_by_mode("swap", "swap")
        return
    host = ctx.scan.host
    used = host.swap_used_bytes
    evidence = {"swap_used_bytes": used, "swap_total_bytes": host.swap_total_bytes,
                "max_swap_used_bytes": policy.max_swap_used_bytes,
                "memory_available_bytes": host.memory_available_bytes}
    limit_text = gib_text(policy.max_swap_used_gib)
    found = ctx.finding_on("swap-pressure", "host")
    if used is None:
        yield result("swap", "host", UNKNOWN, "swap use not readable", evidence=evidence,
                     remedy="free -h")
    elif found is not None:
        yield result("swap", "host", mode_status(policy.swap),
                     f"{fmt_bytes(used)} of swap in use; the policy allows at most {limit_text}",
                     evidence=evidence, remedy=found.remedy, finding_id=found.id)
    elif not host.swap_total_bytes:
        yield result("swap", "host", PASS, "no swap configured", evidence=evidence)
    else:
        yield result("swap", "host", PASS, f"{fmt_bytes(used)} in use (<= {limit_text})",
                     evidence=evidence)


def _mapped_findings(ctx: CheckContext, spec_id: str, finding_id: str, mode: str, key: str,
                     fine: str, evidence: dict) -> Iterator[CheckResult]:
    """A check that views one scan rule's findings, one result each, by a mode key."""
    if mode == "ignore":
        yield ignored_by_mode(spec_id, key)
        return
    if not ctx.scan.nvml.available:
        yield result(spec_id, "host", SKIP, "no GPU readings (see nvidia-driver)")
        return
    found = ctx.findings_for(finding_id)
    if not found:
        yield result(spec_id, "host", PASS, fine, evidence=evidence)
        return
    for finding in found:
        yield result(spec_id, finding.subject, mode_status(mode),
                     f"{finding.title}. {finding.detail}", evidence=finding.evidence,
                     remedy=finding.remedy, finding_id=finding_id)


@check("duplicate-backends", "Duplicate servers", views=("duplicate-backend",))
def duplicate_backends(ctx: CheckContext) -> Iterator[CheckResult]:
    """No GPU process is a copy of another server (`duplicate_backends` = "{duplicate_backends}").

    Judges the scan's `duplicate-backend` findings: the same `uvicorn`, `gunicorn`, jupyter
    kernel or similar started several times. The ranks of one distributed job are not copies.
    Set `duplicate_backends = "warn"` or `"ignore"` to relax it.

    Why it matters: each copy holds its own model on the GPU, memory the job needs.

    Example: `PASS duplicate-backends host no copies among 1 GPU process`; a group of copies
    becomes a line with the scan finding's title, `3 copies of the same server hold GPU memory`.

    Fix: the `duplicate-backend` remedy: confirm the stale copies with `ps`, keep the oldest and
    stop the others by pid.
    """
    groups = ctx.findings_for("duplicate-backend")  # one finding per group of copies
    evidence = {"gpu_processes": len(ctx.scan.processes), "duplicate_groups": len(groups)}
    yield from _mapped_findings(ctx, "duplicate-backends", "duplicate-backend",
                                ctx.policy.duplicate_backends, "duplicate_backends",
                                "no copies among "
                                + plural(len(ctx.scan.processes), "GPU process", "GPU processes"),
                                evidence)


@check("unattributed-vram", "Unattributed GPU memory", views=("unattributed-vram",))
def unattributed_vram(ctx: CheckContext) -> Iterator[CheckResult]:
    # Documented with the scan rule of the same id (gpu_audit.rules.processes).
    used = {g.index: g.memory_used_bytes for g in ctx.scan.gpus}
    yield from _mapped_findings(ctx, "unattributed-vram", "unattributed-vram",
                                ctx.policy.unattributed_vram, "unattributed_vram",
                                "all used GPU memory is accounted for",
                                {"memory_used_bytes": used})


def _compute_processes(ctx: CheckContext) -> list[GpuProcess]:
    """Compute processes that are running somewhere.

    Graphics-only processes (Xorg, a desktop shell) belong to the display, not to a job; their
    memory still counts in free-vram. A PID this namespace cannot see is another container's
    (or the host's) when check runs in a container; outside one it has exited and its memory
    is the scan's ``gpu-process-gone`` finding, not a process to ask about.
    """
    in_container = ctx.scan.host.container is not None
    return [p for p in ctx.scan.processes
            if "compute" in p.type and (p.visible or in_container)]


def _is_own(p: GpuProcess, user: str | None) -> bool:
    return user is not None and p.user is not None and p.user == user


def _copies_judged_elsewhere(ctx: CheckContext) -> dict[int, int]:
    """Pid -> the pid of the copy to keep, for every process of a group of server copies that
    ``duplicate-backends`` judges (its remedy keeps the oldest and stops the others); empty when
    that check does not run or found nothing. The groups are the scan rule's own grouping."""
    policy = ctx.policy
    if (policy.duplicate_backends == "ignore" or "duplicate-backends" in policy.ignore
            or not ctx.findings_for("duplicate-backend")):
        return {}
    return {p.pid: group[0].pid for group in duplicate_groups(ctx.scan.processes) for p in group}


def _process_check(ctx: CheckContext, spec_id: str, mode: str, key: str,
                   chosen: list[GpuProcess], fine: str, what: str,
                   remedy: str, extra: dict | None = None) -> Iterator[CheckResult]:
    evidence = {"user": ctx.user, "processes": [process_brief(p) for p in chosen],
                **(extra or {})}
    if mode == "ignore":
        yield ignored_by_mode(spec_id, key, evidence)
        return
    if not ctx.scan.nvml.available:
        yield result(spec_id, "host", SKIP, "no GPU readings (see nvidia-driver)",
                     evidence=evidence)
        return
    if not chosen:
        yield result(spec_id, "host", PASS, fine, evidence=evidence)
        return
    total = sum(p.used_memory_bytes or 0 for p in chosen)
    listing = ", ".join(process_label(p) for p in chosen[:5])
    more = f" and {len(chosen) - 5} more" if len(chosen) > 5 else ""
    count = f"1 process {what} holds" if len(chosen) == 1 else \
        f"{len(chosen)} processes {what} hold"
    yield result(spec_id, "host", mode_status(mode),
                 f"{count} {fmt_bytes(total)}: {listing}{more}",
                 evidence=evidence, remedy=remedy.format(
                      pids=" ".join(str(p.pid) for p in chosen)))


@check("foreign-processes", "Other users' GPU processes")
def foreign_processes(ctx: CheckContext) -> Iterator[CheckResult]:
    """No other user's compute process is on a GPU (`foreign_processes` = "{foreign_processes}").

    "Foreign" means a compute process owned by a user other than the one running check, or one
    whose owner cannot be seen: when check runs in a container, a process of another container
    or of the host (NVML lists host PIDs that are not in this PID namespace), or one hidden by
    permissions. Graphics-only processes such as a display server are not counted, nor are PIDs
    that no longer exist outside containers (the scan's `gpu-process-gone` finding reports
    those). Processes of the user running check are judged by `own-processes`.

    Why it matters: another user's process takes GPU memory and compute the job counted on, and
    the job cannot stop it.

    Example: `FAIL foreign-processes host 1 process of other users or containers holds 18.0 GiB:
    7312 (python, alice, GPU 0, 18.0 GiB)`.

    Fix: `ps -o pid,user,etime,args -p PIDS`, then ask their owners or run the job elsewhere;
    inside a container, check the host with `nvidia-smi`.
    """
    chosen = [p for p in _compute_processes(ctx) if not _is_own(p, ctx.user)]
    yield from _process_check(
        ctx, "foreign-processes", ctx.policy.foreign_processes, "foreign_processes", chosen,
        "no other user's process is on a GPU",
        "of other users or containers",
        "ps -o pid,user,etime,args -p {pids}  # ask their owners, or run the job elsewhere; "
        "inside a container, check the host with `nvidia-smi`")


@check("own-processes", "Leftover GPU processes")
def own_processes(ctx: CheckContext) -> Iterator[CheckResult]:
    """No compute process of the running user is on a GPU (`own_processes` = "{own_processes}").

    Set `own_processes = "fail"` on dedicated runners, or `"ignore"` when check runs beside your
    own work. Copies of one server that `duplicate-backends` judges are left to it (its remedy
    keeps the oldest copy and stops the others), so each process gets one remedy; evidence lists
    them as `duplicate_copies`.

    Why it matters: on a CI runner the runner's own user should hold no GPU before a job starts:
    such a process is a leftover of an earlier job (killed by a timeout, its children orphaned)
    and takes the memory the new job needs.

    Example: `WARN own-processes host 1 process of ci holds 20.5 GiB: 51234 (python, ci, GPU 0,
    20.5 GiB)`.

    Fix: `ps -o pid,etime,args -p PIDS` to confirm they are left over, then `kill PIDS`.
    """
    own = [p for p in _compute_processes(ctx) if _is_own(p, ctx.user)]
    copies = _copies_judged_elsewhere(ctx)
    chosen = [p for p in own if p.pid not in copies]
    copy_pids = sorted({p.pid for p in own if p.pid in copies})
    who = ctx.user or "this user"
    fine = f"no process of {who} is on a GPU"
    if copy_pids:
        fine = (f"no process of {who} is on a GPU besides the server copies "
                f"{' '.join(map(str, copy_pids))} (see duplicate-backends)")
    yield from _process_check(
        ctx, "own-processes", ctx.policy.own_processes, "own_processes", chosen, fine,
        f"of {who}",
        "ps -o pid,etime,args -p {pids}  # confirm they are left over, then: kill {pids}",
        extra={"duplicate_copies": copy_pids})
