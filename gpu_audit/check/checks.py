"""The checks: pure functions over a snapshot, the scan findings and the check policy.

Each check is registered with a stable kebab-case id and a docstring that is its documentation
(first line: the summary). It yields one :class:`CheckResult` for the host, or one per GPU,
with the numbers it judged in ``evidence``. A check whose threshold is not configured yields a
``skip``; a check whose reading is missing yields ``unknown`` (the runner cannot be shown fit).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from gpu_audit.check.policy import CheckPolicy
from gpu_audit.check.results import CheckResult, CheckStatus, StageOutcome
from gpu_audit.model import Finding, Gpu, GpuProcess, Severity, Snapshot
from gpu_audit.units import fmt_bytes, pct, version_tuple

PASS, WARN, FAIL, SKIP, UNKNOWN = (CheckStatus.PASS, CheckStatus.WARN, CheckStatus.FAIL,
                                   CheckStatus.SKIP, CheckStatus.UNKNOWN)

# Scan findings that a dedicated check judges with the check policy's own thresholds; they are
# left out of ``scan-findings`` so one problem is not reported twice.
COVERED_FINDINGS = {
    "nvml-unavailable": "nvidia-driver",
    "low-free-vram": "free-vram",
    "swap-pressure": "swap",
    "duplicate-backend": "duplicate-backends",
    "unattributed-vram": "unattributed-vram",
    "torch-cpu-only": "torch-cuda",
    "driver-too-old": "torch-cuda",
    "persistence-mode-off": "persistence-mode",
}

TORCH_INSTALL_HINT = ("Install a CUDA build of PyTorch with the command pytorch.org/get-started "
                      "gives for this driver's CUDA version (e.g. `--index-url "
                      "https://download.pytorch.org/whl/cu124`); a plain `pip install torch` may "
                      "pick a build that does not match.")


@dataclass(frozen=True)
class CheckContext:
    """What every check may read. Built once per run; nothing here does I/O."""

    snapshot: Snapshot
    policy: CheckPolicy
    findings: list[Finding] = field(default_factory=list)
    user: str | None = None  # the user running check: their GPU processes are "own"
    rule_ids: frozenset[str] = frozenset()  # scan rules that exist (so "no finding" means "fine")
    stages: list[StageOutcome] = field(default_factory=list)

    def findings_for(self, finding_id: str) -> list[Finding]:
        return [f for f in self.findings if f.id == finding_id]

    def stage(self, name: str) -> StageOutcome | None:
        return next((s for s in self.stages if s.name == name), None)


CheckFunc = Callable[[CheckContext], Iterator[CheckResult]]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    func: CheckFunc
    policy_keys: tuple[str, ...]

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.split("\n", 1)[0].strip()


_CHECKS: dict[str, CheckSpec] = {}


def check(check_id: str, title: str, *policy_keys: str) -> Callable[[CheckFunc], CheckFunc]:
    """Register ``func`` as the check ``check_id`` (order of registration = checklist order)."""

    def register(func: CheckFunc) -> CheckFunc:
        if check_id in _CHECKS:
            raise ValueError(f"check id {check_id!r} registered twice")
        if not func.__doc__:
            raise ValueError(f"check {check_id!r} has no docstring (it is its documentation)")
        _CHECKS[check_id] = CheckSpec(check_id, title, func, policy_keys)
        return func

    return register


def all_checks() -> dict[str, CheckSpec]:
    return dict(_CHECKS)


def run_checks(ctx: CheckContext) -> list[CheckResult]:
    """Every check in checklist order; checks the policy ignores become one ``skip`` line.

    Ignoring a finding id also skips the check that exists only to judge that finding
    (``swap-pressure`` skips ``swap``); a check judging several findings (``torch-cuda``) runs
    on without the ignored one.
    """
    ignored = set(ctx.policy.ignore)
    judged_by: dict[str, list[str]] = {}
    for finding_id, check_id in COVERED_FINDINGS.items():
        judged_by.setdefault(check_id, []).append(finding_id)
    ignored |= {check_id for check_id, finding_ids in judged_by.items()
                if len(finding_ids) == 1 and finding_ids[0] in ignored}
    results: list[CheckResult] = []
    for spec in _CHECKS.values():
        if spec.id in ignored:
            results.append(CheckResult(spec.id, "host", SKIP, spec.title, "ignored by the policy",
                                       evidence={"ignored_by": ctx.policy.source or "policy"}))
            continue
        results.extend(spec.func(ctx))
    return results


# --- helpers -------------------------------------------------------------------------------


def _result(spec_id: str, subject: str, status: CheckStatus, summary: str, *,
            evidence: dict | None = None, remedy: str | None = None,
            finding_id: str | None = None) -> CheckResult:
    return CheckResult(spec_id, subject, status, _CHECKS[spec_id].title, summary,
                       evidence=evidence or {}, remedy=remedy if status in (WARN, FAIL, UNKNOWN)
                       else None, finding_id=finding_id)


def _not_configured(spec_id: str, key: str) -> CheckResult:
    return _result(spec_id, "host", SKIP, f"not configured (set `{key}` in the policy)")


def _each_gpu(ctx: CheckContext, spec_id: str,
              judge: Callable[[Gpu], CheckResult]) -> Iterator[CheckResult]:
    """``judge`` for every readable GPU; a lost GPU or no GPU at all is a ``skip`` here (the
    ``gpu-count`` and ``nvidia-driver`` checks already fail for those)."""
    if not ctx.snapshot.gpus:
        reason = ("no GPU readings (see nvidia-driver)" if not ctx.snapshot.nvml.available
                  else "no GPU on this host")
        yield _result(spec_id, "host", SKIP, reason)
        return
    for gpu in ctx.snapshot.gpus:
        if gpu.lost:
            yield _result(spec_id, f"gpu:{gpu.index}", SKIP, "GPU is lost (see gpu-count)")
        else:
            yield judge(gpu)


def _gib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g} GiB"


def _process_brief(p: GpuProcess) -> dict:
    return {"pid": p.pid, "gpu_index": p.gpu_index, "user": p.user, "name": p.name,
            "used_memory_bytes": p.used_memory_bytes, "visible": p.visible,
            "container": p.container, "start_time": p.start_time}


def _process_label(p: GpuProcess) -> str:
    who = p.user or ("not visible" if not p.visible else "unknown user")
    return f"{p.pid} ({p.name or '?'}, {who}, GPU {p.gpu_index}, {fmt_bytes(p.used_memory_bytes)})"


# --- the checks, in checklist order ----------------------------------------------------------


@check("nvidia-driver", "NVIDIA driver", "min_driver_version", "min_cuda_driver_version")
def nvidia_driver(ctx: CheckContext) -> Iterator[CheckResult]:
    """The NVIDIA driver answers through NVML and is as new as the policy asks.

    Fails when NVML cannot be used at all (no driver, kernel module not loaded, a library and
    module from different driver versions after an upgrade without a reboot, no permission, a
    hung driver): such a runner cannot run GPU work. With `min_gpus = 0` a missing driver is
    not required and the check is skipped. `min_driver_version` ("535.104.05") and
    `min_cuda_driver_version` ("12.4", the newest CUDA the driver supports, as `nvidia-smi`
    shows it) fail older drivers.
    """
    snap, policy = ctx.snapshot, ctx.policy
    driver = snap.driver
    evidence = {
        "nvml_available": snap.nvml.available,
        "cause": snap.nvml.cause,
        "message": snap.nvml.message,
        "driver_version": driver.driver_version if driver else None,
        "cuda_driver_version": driver.cuda_driver_version if driver else None,
        "nvml_version": driver.nvml_version if driver else None,
        "nvidia_pci_devices": snap.host.nvidia_pci_devices,
    }
    if not snap.nvml.available:
        found = ctx.findings_for("nvml-unavailable")
        reason = found[0].title if found else f"NVML unavailable: {snap.nvml.cause or 'unknown'}"
        if policy.min_gpus == 0:
            yield _result("nvidia-driver", "host", SKIP,
                          f"not required (min_gpus = 0); {reason}", evidence=evidence)
            return
        detail = f" ({snap.nvml.message})" if snap.nvml.message and not found else ""
        remedy = found[0].remedy if found else (
            "Run `nvidia-smi`: its error names the problem; check `dmesg | grep -i nvidia`.")
        yield _result("nvidia-driver", "host", FAIL, reason + detail, evidence=evidence,
                      remedy=remedy, finding_id="nvml-unavailable" if found else None)
        return
    problems: list[str] = []
    unknown: list[str] = []
    for key, actual, label in (
        ("min_driver_version", evidence["driver_version"], "driver"),
        ("min_cuda_driver_version", evidence["cuda_driver_version"], "CUDA driver API"),
    ):
        wanted = getattr(policy, key)
        if wanted is None:
            continue
        evidence[key] = wanted
        if actual is None:
            unknown.append(f"{label} version not reported (policy needs >= {wanted})")
        elif version_tuple(actual) < version_tuple(wanted):
            problems.append(f"{label} {actual} is older than {wanted}")
    described = (f"driver {evidence['driver_version'] or 'n/a'}, "
                 f"CUDA {evidence['cuda_driver_version'] or 'n/a'}")
    if problems:
        yield _result("nvidia-driver", "host", FAIL, f"{'; '.join(problems)} ({described})",
                      evidence=evidence,
                      remedy="Upgrade the NVIDIA driver on this runner (then reboot), or route "
                             "the job to a runner with a newer driver.")
    elif unknown:
        yield _result("nvidia-driver", "host", UNKNOWN, "; ".join(unknown), evidence=evidence,
                      remedy="Run `nvidia-smi` and compare its driver version by hand.")
    else:
        yield _result("nvidia-driver", "host", PASS, described, evidence=evidence)


@check("gpu-count", "GPUs present", "min_gpus")
def gpu_count(ctx: CheckContext) -> Iterator[CheckResult]:
    """At least `min_gpus` GPUs (1 by default) are visible to the driver, and none is lost.

    A GPU that has fallen off the bus (NVML answers "GPU is lost", usually with Xid 79 in the
    kernel log) fails the check even when enough others remain: the machine needs a GPU reset
    or a reboot. Outside containers, fewer GPUs through NVML than NVIDIA devices on the PCI bus
    is a warning (a device the driver did not bring up). NVML ignores `CUDA_VISIBLE_DEVICES`,
    so the count is the machine's, not the job's.
    """
    snap, policy = ctx.snapshot, ctx.policy
    usable = [g for g in snap.gpus if not g.lost]
    lost = [g for g in snap.gpus if g.lost]
    pci = snap.host.nvidia_pci_devices
    evidence = {"gpus": len(usable), "min_gpus": policy.min_gpus,
                "lost": [g.index for g in lost], "nvidia_pci_devices": pci,
                "names": [g.name for g in usable]}
    names = ", ".join(sorted({g.name or "?" for g in usable}))
    found = f"{len(usable)} GPU{'s' if len(usable) != 1 else ''}" + (f" ({names})" if names else "")
    if lost:
        indexes = ", ".join(str(g.index) for g in lost)
        yield _result(
            "gpu-count", "host", FAIL, f"GPU {indexes} lost (fallen off the bus); {found} usable",
            evidence=evidence,
            remedy=("sudo dmesg | grep -i xid  # Xid 79 = fallen off the bus; take the runner out "
                    f"of service, then `sudo nvidia-smi -r -i {lost[0].index}` or reboot"))
    elif len(usable) < policy.min_gpus:
        if not snap.nvml.available:
            remedy = "Fix the driver first (see the nvidia-driver check)."
        elif pci is not None and pci > len(snap.gpus):
            remedy = (f"{pci} NVIDIA devices are on the PCI bus but the driver shows "
                      f"{len(snap.gpus)}: check `sudo dmesg | grep -i nvrm` and, in a container, "
                      "that all GPUs are passed through (`--gpus all`).")
        else:
            remedy = (f"Run this job on a runner with at least {policy.min_gpus} GPU(s) "
                      "(use runner labels or tags), or lower `min_gpus`.")
        yield _result("gpu-count", "host", FAIL,
                      f"{found}; the policy needs at least {policy.min_gpus}",
                      evidence=evidence, remedy=remedy)
    elif (snap.nvml.available and snap.host.container is None and pci is not None
          and pci > len(snap.gpus)):
        yield _result(
            "gpu-count", "host", WARN,
            f"{found}, but {pci} NVIDIA devices are on the PCI bus", evidence=evidence,
            remedy="sudo dmesg | grep -i nvrm  # a device the driver did not initialise")
    elif policy.min_gpus == 0 and not usable:
        yield _result("gpu-count", "host", PASS, "no GPU, and none required (min_gpus = 0)",
                      evidence=evidence)
    else:
        yield _result("gpu-count", "host", PASS, f"{found}; needs at least {policy.min_gpus}",
                      evidence=evidence)


@check("gpu-name", "GPU model", "gpu_name")
def gpu_name(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU's name matches the `gpu_name` regular expression (searched, case-sensitive).

    Use it to keep jobs that need a given model off other runners: `gpu_name = "H100|A100"`;
    prefix `(?i)` to ignore case. Skipped when `gpu_name` is not set.
    """
    pattern = ctx.policy.gpu_name
    if pattern is None:
        yield _not_configured("gpu-name", "gpu_name")
        return
    regex = re.compile(pattern)

    def judge(gpu: Gpu) -> CheckResult:
        evidence = {"name": gpu.name, "gpu_name": pattern}
        subject = f"gpu:{gpu.index}"
        if gpu.name is None:
            return _result("gpu-name", subject, UNKNOWN, "the driver did not report a name",
                           evidence=evidence, remedy=f"nvidia-smi -L  # compare with /{pattern}/")
        if regex.search(gpu.name):
            return _result("gpu-name", subject, PASS, f"{gpu.name} matches /{pattern}/",
                           evidence=evidence)
        return _result("gpu-name", subject, FAIL, f"{gpu.name} does not match /{pattern}/",
                       evidence=evidence,
                       remedy="Route the job to a runner with the GPU it needs (runner labels or "
                              "tags), or correct `gpu_name`.")

    yield from _each_gpu(ctx, "gpu-name", judge)


@check("gpu-memory", "GPU memory size", "min_gpu_memory_gib")
def gpu_memory(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU has at least `min_gpu_memory_gib` of memory in total.

    The driver reports a little less than the size on the box (a "24 GB" card shows 23.99 GiB,
    a 16 GB T4 15 GiB): set the threshold from what `nvidia-smi --query-gpu=memory.total
    --format=csv` prints. Skipped when `min_gpu_memory_gib` is not set.
    """
    minimum = ctx.policy.gib_bytes("min_gpu_memory_gib")
    if minimum is None:
        yield _not_configured("gpu-memory", "min_gpu_memory_gib")
        return

    def judge(gpu: Gpu) -> CheckResult:
        total = gpu.memory_total_bytes
        evidence = {"memory_total_bytes": total, "min_bytes": minimum}
        subject = f"gpu:{gpu.index}"
        wanted = _gib(ctx.policy.min_gpu_memory_gib)
        if total is None:
            return _result("gpu-memory", subject, UNKNOWN, "memory size not reported",
                           evidence=evidence, remedy="nvidia-smi --query-gpu=memory.total "
                                                     "--format=csv")
        if total < minimum:
            return _result("gpu-memory", subject, FAIL,
                           f"{fmt_bytes(total)} total; the policy needs at least {wanted}",
                           evidence=evidence,
                           remedy="Route the job to a runner with larger GPUs, or lower "
                                  "`min_gpu_memory_gib`.")
        return _result("gpu-memory", subject, PASS, f"{fmt_bytes(total)} total (>= {wanted})",
                       evidence=evidence)

    yield from _each_gpu(ctx, "gpu-memory", judge)


@check("free-vram", "GPU memory free", "min_free_vram_gib", "min_free_vram_pct")
def free_vram(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU has at least `min_free_vram_gib` free and `min_free_vram_pct` of its size free.

    Memory held before a job starts is memory the job cannot have: a leftover process, a
    duplicate server or a dead context turns into `CUDA out of memory` halfway through. The
    default asks for 70% free (set `min_free_vram_pct = 0` to turn it off); a display server
    on a workstation runner takes a few hundred MiB. The result lists what holds the memory.
    """
    policy = ctx.policy
    min_bytes = policy.gib_bytes("min_free_vram_gib")
    min_pct = policy.min_free_vram_pct
    if min_bytes is None and min_pct is None:
        yield _not_configured("free-vram", "min_free_vram_pct")
        return

    def judge(gpu: Gpu) -> CheckResult:
        subject = f"gpu:{gpu.index}"
        free, total = gpu.memory_free_bytes, gpu.memory_total_bytes
        free_pct = pct(free, total)
        holders = sorted((p for p in ctx.snapshot.processes if p.gpu_index == gpu.index),
                         key=lambda p: -(p.used_memory_bytes or 0))
        evidence = {"memory_free_bytes": free, "memory_total_bytes": total, "free_pct": free_pct,
                    "min_free_bytes": min_bytes, "min_free_pct": min_pct,
                    "holders": [_process_brief(p) for p in holders]}
        needs = " and ".join(part for part in (
            f">= {_gib(policy.min_free_vram_gib)}" if min_bytes is not None else "",
            f">= {min_pct:g}%" if min_pct is not None else "") if part)
        if free is None or (min_pct is not None and free_pct is None):
            return _result("free-vram", subject, UNKNOWN, "free memory not reported",
                           evidence=evidence, remedy=f"nvidia-smi -i {gpu.index}")
        shown = f"{fmt_bytes(free)} of {fmt_bytes(total)} free" + (
            f" ({free_pct:g}%)" if free_pct is not None else "")
        short = ((min_bytes is not None and free < min_bytes)
                 or (min_pct is not None and free_pct is not None and free_pct < min_pct))
        if not short:
            return _result("free-vram", subject, PASS, f"{shown}; needs {needs}", evidence=evidence)
        if holders:
            listing = ", ".join(_process_label(p) for p in holders[:5])
            remedy = (f"Held by {listing}. Check them with `ps -o pid,user,etime,args -p "
                      f"{' '.join(str(p.pid) for p in holders[:5])}` and stop the ones left over "
                      "from earlier jobs.")
        else:
            remedy = (f"No process is listed on GPU {gpu.index}: look for holders with `sudo fuser "
                      f"-v /dev/nvidia{gpu.index}` or containers sharing it; a dead context needs "
                      f"`sudo nvidia-smi --gpu-reset -i {gpu.index}` or a reboot.")
        return _result("free-vram", subject, FAIL, f"{shown}; the policy needs {needs}",
                       evidence=evidence, remedy=remedy)

    yield from _each_gpu(ctx, "free-vram", judge)


@check("gpu-temperature", "GPU temperature", "max_gpu_temperature_c")
def gpu_temperature(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU is no hotter than `max_gpu_temperature_c` before the job starts.

    An idle GPU that is already hot has poor cooling (a failed fan, blocked airflow, a hot
    rack) and will throttle its clocks under load. Skipped when `max_gpu_temperature_c` is not set.
    """
    limit = ctx.policy.max_gpu_temperature_c
    if limit is None:
        yield _not_configured("gpu-temperature", "max_gpu_temperature_c")
        return

    def judge(gpu: Gpu) -> CheckResult:
        subject = f"gpu:{gpu.index}"
        temp = gpu.temperature_c
        evidence = {"temperature_c": temp, "max_temperature_c": limit,
                    "temperature_slowdown_c": gpu.temperature_slowdown_c,
                    "utilization_pct": gpu.utilization_pct, "fan_speed_pct": gpu.fan_speed_pct}
        if temp is None:
            return _result("gpu-temperature", subject, UNKNOWN, "temperature not reported",
                           evidence=evidence,
                           remedy=f"nvidia-smi -q -d TEMPERATURE -i {gpu.index}")
        if temp > limit:
            return _result("gpu-temperature", subject, FAIL, f"{temp} C; the policy allows at "
                           f"most {limit:g} C", evidence=evidence,
                           remedy=f"nvidia-smi -q -d TEMPERATURE,PERFORMANCE -i {gpu.index}  "
                                  "# then check fans and airflow before running on this GPU")
        return _result("gpu-temperature", subject, PASS, f"{temp} C (<= {limit:g} C)",
                       evidence=evidence)

    yield from _each_gpu(ctx, "gpu-temperature", judge)


@check("persistence-mode", "Persistence mode", "require_persistence_mode")
def persistence_mode(ctx: CheckContext) -> Iterator[CheckResult]:
    """Each GPU has persistence mode on, when `require_persistence_mode = true`.

    Without it the driver tears the GPU down whenever no process uses it and initialises it
    again for the next one: seconds of start-up per job, and clocks and settings that do not
    stick. Datacenter runners normally run `nvidia-persistenced`.
    """
    if not ctx.policy.require_persistence_mode:
        yield _not_configured("persistence-mode", "require_persistence_mode = true")
        return

    def judge(gpu: Gpu) -> CheckResult:
        subject = f"gpu:{gpu.index}"
        mode = gpu.persistence_mode
        evidence = {"persistence_mode": mode}
        if mode is None:
            return _result("persistence-mode", subject, UNKNOWN,
                           "persistence mode not reported (not supported on this platform?)",
                           evidence=evidence, remedy=f"nvidia-smi -q -i {gpu.index} | grep -i "
                                                     "persistence")
        if not mode:
            return _result("persistence-mode", subject, FAIL, "persistence mode is off",
                           evidence=evidence,
                           remedy="sudo systemctl enable --now nvidia-persistenced  "
                                  "# or, until the next reboot: sudo nvidia-smi -pm 1")
        return _result("persistence-mode", subject, PASS, "persistence mode is on",
                       evidence=evidence)

    yield from _each_gpu(ctx, "persistence-mode", judge)


@check("swap", "Swap in use", "max_swap_used_gib")
def swap(ctx: CheckContext) -> Iterator[CheckResult]:
    """The host uses no more than `max_swap_used_gib` of swap (2 GiB by default).

    Swap in use before a job starts means host memory is already short: data loaders, pinned
    staging buffers and checkpoint writes will slow by orders of magnitude or meet the kernel's
    OOM killer.
    """
    limit = ctx.policy.gib_bytes("max_swap_used_gib")
    if limit is None:
        yield _not_configured("swap", "max_swap_used_gib")
        return
    host = ctx.snapshot.host
    used = host.swap_used_bytes
    evidence = {"swap_used_bytes": used, "swap_total_bytes": host.swap_total_bytes,
                "max_swap_used_bytes": limit, "memory_available_bytes": host.memory_available_bytes}
    limit_text = _gib(ctx.policy.max_swap_used_gib)
    if used is None:
        yield _result("swap", "host", UNKNOWN, "swap use not readable", evidence=evidence,
                      remedy="free -h")
    elif used > limit:
        found = ctx.findings_for("swap-pressure")
        remedy = found[0].remedy if found else (
            "Find what holds memory with `ps -eo pid,user,rss,comm --sort=-rss | head` and "
            "stop it.")
        yield _result("swap", "host", FAIL, f"{fmt_bytes(used)} of swap in use; the policy allows "
                      f"at most {limit_text}", evidence=evidence, remedy=remedy,
                      finding_id="swap-pressure" if found else None)
    elif not host.swap_total_bytes:
        yield _result("swap", "host", PASS, "no swap configured", evidence=evidence)
    else:
        yield _result("swap", "host", PASS, f"{fmt_bytes(used)} in use (<= {limit_text})",
                      evidence=evidence)


def _mapped_findings(ctx: CheckContext, spec_id: str, finding_id: str, mode: str, key: str,
                     fine: str, evidence: dict) -> Iterator[CheckResult]:
    """A check that judges one scan rule's findings with a fail/warn/ignore policy key."""
    if mode == "ignore":
        yield _result(spec_id, "host", SKIP, f"ignored by the policy ({key} = \"ignore\")")
        return
    if not ctx.snapshot.nvml.available:
        yield _result(spec_id, "host", SKIP, "no GPU readings (see nvidia-driver)")
        return
    if ctx.rule_ids and finding_id not in ctx.rule_ids:
        yield _result(spec_id, "host", SKIP, f"the {finding_id} rule is not available")
        return
    found = ctx.findings_for(finding_id)
    if not found:
        yield _result(spec_id, "host", PASS, fine, evidence=evidence)
        return
    status = FAIL if mode == "fail" else WARN
    for finding in found:
        yield _result(spec_id, finding.subject, status, f"{finding.title}. {finding.detail}",
                      evidence=finding.evidence, remedy=finding.remedy, finding_id=finding_id)


@check("duplicate-backends", "Duplicate servers", "duplicate_backends")
def duplicate_backends(ctx: CheckContext) -> Iterator[CheckResult]:
    """No GPU process is a copy of another server (`duplicate_backends`, "fail" by default).

    Judges the scan's `duplicate-backend` findings: the same `uvicorn`, `gunicorn`, jupyter
    kernel or similar started several times, each copy holding its own model on the GPU. The
    ranks of one distributed job are not copies. Set `duplicate_backends = "warn"` or
    `"ignore"` to relax it.
    """
    groups = {p.duplicate_group for p in ctx.snapshot.processes if p.duplicate_group is not None}
    evidence = {"gpu_processes": len(ctx.snapshot.processes), "duplicate_groups": len(groups)}
    yield from _mapped_findings(ctx, "duplicate-backends", "duplicate-backend",
                                ctx.policy.duplicate_backends, "duplicate_backends",
                                f"no copies among {len(ctx.snapshot.processes)} GPU process(es)",
                                evidence)


@check("unattributed-vram", "Unattributed GPU memory", "unattributed_vram")
def unattributed_vram(ctx: CheckContext) -> Iterator[CheckResult]:
    """No GPU has memory in use that no listed process accounts for (`unattributed_vram`, "warn").

    Judges the scan's `unattributed-vram` findings: used memory minus every listed process's
    memory, beyond the allowance `unattributed_vram_allowance_mib` of `[tool.gpu-audit]`.
    Typical causes are a dead context of a killed job or a process in another container. Set
    `unattributed_vram = "fail"` on dedicated runners.
    """
    used = {g.index: g.memory_used_bytes for g in ctx.snapshot.gpus}
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
    in_container = ctx.snapshot.host.container is not None
    return [p for p in ctx.snapshot.processes
            if "compute" in p.type and (p.visible or in_container)]


def _is_own(p: GpuProcess, user: str | None) -> bool:
    return user is not None and p.user is not None and p.user == user


def _process_check(ctx: CheckContext, spec_id: str, mode: str, key: str,
                   chosen: list[GpuProcess], fine: str, what: str,
                   remedy: str) -> Iterator[CheckResult]:
    evidence = {"user": ctx.user, "processes": [_process_brief(p) for p in chosen]}
    if mode == "ignore":
        yield _result(spec_id, "host", SKIP, f"ignored by the policy ({key} = \"ignore\")",
                      evidence=evidence)
        return
    if not ctx.snapshot.nvml.available:
        yield _result(spec_id, "host", SKIP, "no GPU readings (see nvidia-driver)",
                      evidence=evidence)
        return
    if not chosen:
        yield _result(spec_id, "host", PASS, fine, evidence=evidence)
        return
    total = sum(p.used_memory_bytes or 0 for p in chosen)
    listing = ", ".join(_process_label(p) for p in chosen[:5])
    more = f" and {len(chosen) - 5} more" if len(chosen) > 5 else ""
    count = f"1 process {what} holds" if len(chosen) == 1 else \
        f"{len(chosen)} processes {what} hold"
    yield _result(spec_id, "host", FAIL if mode == "fail" else WARN,
                  f"{count} {fmt_bytes(total)}: {listing}{more}",
                  evidence=evidence, remedy=remedy.format(
                      pids=" ".join(str(p.pid) for p in chosen)))


@check("foreign-processes", "Other users' GPU processes", "foreign_processes")
def foreign_processes(ctx: CheckContext) -> Iterator[CheckResult]:
    """No other user's compute process is on a GPU (`foreign_processes`, "fail" by default).

    "Foreign" means a compute process owned by a user other than the one running check, or one
    whose owner cannot be seen: when check runs in a container, a process of another container
    or of the host (NVML lists host PIDs that are not in this PID namespace), or one hidden by
    permissions. Graphics-only processes such as a display server are not counted, nor are PIDs
    that no longer exist outside containers (the scan's `gpu-process-gone` finding reports
    those). Processes of the user running check are judged by `own-processes`.
    """
    chosen = [p for p in _compute_processes(ctx) if not _is_own(p, ctx.user)]
    yield from _process_check(
        ctx, "foreign-processes", ctx.policy.foreign_processes, "foreign_processes", chosen,
        "no other user's process is on a GPU",
        "of other users or containers",
        "ps -o pid,user,etime,args -p {pids}  # ask their owners, or run the job elsewhere; "
        "inside a container, check the host with `nvidia-smi`")


@check("own-processes", "Leftover GPU processes", "own_processes")
def own_processes(ctx: CheckContext) -> Iterator[CheckResult]:
    """No compute process of the user running check is on a GPU (`own_processes`, "warn").

    On a CI runner the runner's own user should hold no GPU before a job starts: such a process
    is a leftover of an earlier job (killed by a timeout, its children orphaned) and takes the
    memory the new job needs. Set `own_processes = "fail"` on dedicated runners, or
    `"ignore"` when check runs beside your own work.
    """
    chosen = [p for p in _compute_processes(ctx) if _is_own(p, ctx.user)]
    yield from _process_check(
        ctx, "own-processes", ctx.policy.own_processes, "own_processes", chosen,
        f"no process of {ctx.user or 'this user'} is on a GPU",
        f"of {ctx.user or 'this user'}",
        "ps -o pid,etime,args -p {pids}  # confirm they are left over, then: kill {pids}")


def _torch_cuda_judgement(ctx: CheckContext) -> tuple[CheckStatus, str, str | None, str | None]:
    """(status, summary, remedy, finding id) from the installed build and the scan's torch
    findings (``torch-cpu-only``, ``driver-too-old``); no stages."""
    alloc = ctx.snapshot.allocator
    version = alloc.torch_version if alloc else None
    variant = alloc.torch_variant if alloc else None
    build_cuda = alloc.torch_cuda_version if alloc else None
    if version is None:
        return FAIL, "torch is not installed in this Python environment", TORCH_INSTALL_HINT, None
    for finding in ctx.findings_for("torch-cpu-only"):
        return FAIL, finding.title, finding.remedy, finding.id
    if variant in ("cpu", "rocm", "xpu"):
        kind = {"cpu": "CPU-only", "rocm": "ROCm", "xpu": "XPU"}[variant]
        return FAIL, f"torch {version} is a {kind} build, not a CUDA build", \
            TORCH_INSTALL_HINT, None
    for finding in ctx.findings_for("driver-too-old"):
        too_old = (finding.severity or Severity.ERROR) >= Severity.ERROR
        return (FAIL if too_old else WARN), f"{finding.title}. {finding.detail}", \
            finding.remedy, finding.id
    if variant is None:
        if ctx.snapshot.host.os != "Linux":
            return (FAIL, f"torch {version} on {ctx.snapshot.host.os}: PyPI's default build here "
                          "has no CUDA", TORCH_INSTALL_HINT, None)
        return (WARN, f"torch {version} has no build label: PyPI's default Linux build uses CUDA, "
                      "but that is unconfirmed",
                "Confirm CUDA works with `gpu-audit check --stages imports`.", None)
    return PASS, f"torch {version} (CUDA {build_cuda or '?'} build)", None, None


@check("torch-cuda", "PyTorch with CUDA", "require_torch_cuda")
def torch_cuda(ctx: CheckContext) -> Iterator[CheckResult]:
    """PyTorch is installed as a CUDA build the driver can run (`require_torch_cuda = true`).

    Read from package metadata without importing torch (the build label `+cu124`, `+cpu`,
    `+rocm6.2`), judged with the scan's `torch-cpu-only` and `driver-too-old` findings: a CUDA
    build newer (major version) than the driver supports cannot initialise. With `--stages
    imports` the check also needs the `imports` stage to have initialised CUDA and moved a
    tensor through it. When torch is not required the check is skipped, except that a CUDA
    build the driver cannot run is still a warning.
    """
    alloc = ctx.snapshot.allocator
    evidence = {
        "torch_version": alloc.torch_version if alloc else None,
        "torch_variant": alloc.torch_variant if alloc else None,
        "torch_cuda_version": alloc.torch_cuda_version if alloc else None,
        "cuda_driver_version": ctx.snapshot.driver.cuda_driver_version
        if ctx.snapshot.driver else None,
    }
    status, summary, remedy, finding_id = _torch_cuda_judgement(ctx)
    if not ctx.policy.require_torch_cuda:
        if finding_id == "driver-too-old":
            yield _result("torch-cuda", "env", WARN, summary, evidence=evidence, remedy=remedy,
                          finding_id=finding_id)
        else:
            yield _result("torch-cuda", "env", SKIP, "not required (set `require_torch_cuda = "
                          f"true`); {summary}", evidence=evidence)
        return
    stage = ctx.stage("imports")
    if stage is not None:
        evidence["imports_stage"] = stage.status
        if stage.status == "failed":
            yield _result("torch-cuda", "env", FAIL, f"CUDA does not work: {stage.summary}",
                          evidence=evidence, remedy=stage.remedy or remedy)
            return
        on_cuda = (stage.device or "").startswith("cuda")
        if stage.status == "passed" and on_cuda and status is not FAIL:
            yield _result("torch-cuda", "env", PASS,
                          f"{summary}; CUDA initialised and a tensor round-tripped on "
                          f"{stage.device}", evidence=evidence)
            return
    yield _result("torch-cuda", "env", status, summary, evidence=evidence, remedy=remedy,
                  finding_id=finding_id)


@check("scan-findings", "Other scan findings", "fail_on", "warn_on", "ignore")
def scan_findings(ctx: CheckContext) -> Iterator[CheckResult]:
    """Every other scan finding, judged by severity: `fail_on` ("error") and `warn_on` ("warning").

    A finding at or above `fail_on` fails the check, one at or above `warn_on` warns, and one
    below is only listed in the JSON document. List finding ids in `ignore` to drop them
    (`gpu-audit rules` lists every id). Findings that a dedicated check above already judges
    (the driver, free memory, persistence mode, swap, duplicate servers, unattributed memory,
    the torch build) are not repeated.
    """
    fail_on, warn_on = ctx.policy.fail_on_severity, ctx.policy.warn_on_severity
    below: list[str] = []
    emitted = False
    for finding in ctx.findings:
        if finding.id in COVERED_FINDINGS or finding.id in ctx.policy.ignore:
            continue
        severity = finding.severity or Severity.INFO
        if severity >= fail_on:
            status = FAIL
        elif severity >= warn_on:
            status = WARN
        else:
            below.append(finding.id)
            continue
        emitted = True
        yield CheckResult(finding.id, finding.subject, status, finding.title,
                          f"{severity.value}: {finding.detail}", evidence=finding.evidence,
                          remedy=finding.remedy, finding_id=finding.id)
    if not emitted:
        yield _result("scan-findings", "host", PASS,
                      f"no other finding at or above {warn_on.value}"
                      + (f" ({len(below)} below: {', '.join(sorted(set(below)))})" if below
                         else ""),
                      evidence={"below_threshold": sorted(set(below)),
                                "warn_on": warn_on.value, "fail_on": fail_on.value})


def _stage_check(ctx: CheckContext, name: str) -> Iterator[CheckResult]:
    stage = ctx.stage(name)
    if stage is None:
        return  # the stage was not asked for
    status = {"passed": PASS, "failed": FAIL, "skipped": SKIP}.get(stage.status, UNKNOWN)
    evidence = {"status": stage.status, "device": stage.device, **stage.evidence}
    result = _result(f"stage-{name}", f"stage:{name}", status, stage.summary, evidence=evidence,
                     remedy=stage.remedy)
    yield dataclasses.replace(result, duration_s=stage.duration_s)


@check("stage-imports", "Validation stage: imports")
def stage_imports(ctx: CheckContext) -> Iterator[CheckResult]:
    """The `imports` validation stage passed (only with `--stages imports` or `stages = [...]`).

    In a child process: torch imports, CUDA initialises, and a small tensor makes a round trip
    through the GPU. A failure here means GPU work cannot run on this runner, whatever NVML says.
    """
    yield from _stage_check(ctx, "imports")


@check("stage-smoke", "Validation stage: smoke")
def stage_smoke(ctx: CheckContext) -> Iterator[CheckResult]:
    """The `smoke` validation stage passed (only with `--stages smoke` or `stages = [...]`).

    Three short cycles of the workload on the GPU. It runs only when `imports` passed; otherwise
    it is reported as skipped.
    """
    yield from _stage_check(ctx, "smoke")
