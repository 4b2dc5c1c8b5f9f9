"""``gpu-audit check --slurm prolog|epilog|healthcheck``: gpu-audit as Slurm's hooks need it.

- **prolog** (``Prolog=``, runs before each job on its node): scans, limits the judgement to the
  job's GPUs (``SLURM_JOB_GPUS``, see :mod:`gpu_audit.gpu_selection`), keeps the scan in the
  spool folder as ``prolog-<SLURM_JOB_ID>.json`` for the epilog, and fails only for the node's
  problems (:mod:`gpu_audit.diff.drain`).
- **epilog** (``Epilog=``, after each job): scans again, compares with the prolog's record
  (``gpu-audit diff --user``, the job's user: see :func:`job_user`), and fails for the node's
  problems, among them GPU memory the job's processes still hold; the record is removed and,
  when the node is failed, the diff is kept as ``epilog-<SLURM_JOB_ID>.json``. A process of
  another known user never counts as the job's (:mod:`gpu_audit.diff.view`).
- **healthcheck** (``HealthCheckProgram=`` or NHC): every GPU, no job, no state; and the GPU
  count against what the node should have: ``min_gpus`` when the policy asks for more than its
  default, else ``--slurm-gpus N``, else the ``Gres=gpu:N`` that ``scontrol show node`` reports
  for this node (when ``scontrol`` is on ``PATH``). Fewer GPUs in NVML is ``gpu-missing``.

The job's GPUs are found as ``docs/gpu-identity.md`` describes: ``SLURM_JOB_GPUS`` counts the
node's GPUs in gres order (device minor order), joined from NVML, the kernel driver's
``/proc/driver/nvidia`` and ``/dev/nvidiaN``, so a lost GPU keeps its place. A job's GPU that
NVML does not list (it vanished, or nothing on the node knows it) is the node's problem
``gpu-missing``, named by what any source knows of it (``gpu:/dev/nvidia4``); no other GPU is
judged in its stead. An index past the GPUs Slurm configures for the node (asked of
``scontrol`` only then), or past any node's, is no verdict (exit 3).

Output: one line on standard output, no decoration. Exit codes: 0 the node is fine (the job's
own warnings do not count), 2 a node problem (the line is the drain reason,
``gpu-audit: <finding id> on <gpu>: <numbers>``), 3 no verdict (bad flags or spool folder, or
no answer within the deadline). Slurm drains a node whose prolog or epilog exits non-zero; the
wrapper scripts in ``examples/`` turn 3 into a logged 0, so that gpu-audit's own trouble never
drains a node.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from gpu_audit.bounds import MAX_GPUS, MAX_INT_DIGITS, load_json
from gpu_audit.config import CheckPolicy, Policy
from gpu_audit.diff import DiffReport, compare
from gpu_audit.diff.drain import drain_reason, node_problems
from gpu_audit.diff.rules import gpus_short, job_gpus_missing
from gpu_audit.errors import GpuAuditError, InputError
from gpu_audit.gpu_selection import (
    JOB_VARIABLES,
    GpuSelection,
    apply_selection,
    resolve_gpus,
    select_findings,
)
from gpu_audit.hooks import spool as spool_mod
from gpu_audit.hostname import host_name
from gpu_audit.model import Finding, Scan
from gpu_audit.report.escape import terminal
from gpu_audit.report.jsonout import SCAN_SCHEMA, scan_document
from gpu_audit.rules import evaluate, exit_code
from gpu_audit.serial import dumps, from_jsonable
from gpu_audit.trust import StateDir
from gpu_audit.units import plural

HOOKS = ("prolog", "epilog", "healthcheck")
# The defaults of the policy keys slurm_hook_deadline_s and slurm_settle_s (check passes the
# policy's values): a hook answers well within Slurm's hook timeouts (minutes), and an epilog
# that finds memory still held looks once more after SETTLE_S.
HOOK_DEADLINE_S = CheckPolicy().slurm_hook_deadline_s
EXIT_OK, EXIT_NODE_PROBLEM, EXIT_UNKNOWN = 0, 2, 3
SETTLE_S = CheckPolicy().slurm_settle_s
SETTLING = frozenset({"job-vram-leak", "vram-unreleased"})


class HookTimeout(GpuAuditError):
    """The hook gave no verdict within its deadline."""


@contextlib.contextmanager
def deadline(seconds: float, kind: str) -> Iterator[None]:
    """Raise :class:`HookTimeout` in the main thread after ``seconds`` (a hung driver call, a
    stuck file system): the hook always answers."""
    def expired(signum: int, frame: object) -> None:
        raise HookTimeout(f"UNKNOWN: the {kind} gave no verdict within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def job_selection(spec: str | None, scan: Scan,
                  environ: Mapping[str, str]) -> GpuSelection | None:
    """``spec`` among the scan's GPUs; for ``job`` outside any GPU allocation (none of the
    job variables set) an empty selection: a job without GPUs leaves only host findings. A job
    GPU NVML does not list is in the selection's ``missing``."""
    if not scan.nvml.available:
        return None  # nothing to select; the nvml-unavailable finding says why
    if spec == "job" and not any(name in environ for name in JOB_VARIABLES):
        return GpuSelection("job", (), "no " + ", ".join(JOB_VARIABLES) + ": the job has no "
                                       "GPU; only host findings apply")
    return resolve_gpus(spec, scan.gpus, environ, unlisted=scan.unlisted_gpus,
                        missing_ok=spec == "job")


_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_GRES_GPU = re.compile(r"gpu(?::[^:(,\s]+)?:([0-9]{1,6})(?![0-9])")
SCONTROL_TIMEOUT_S = 10.0


def node_name(environ: Mapping[str, str]) -> str:
    """This node's Slurm name: ``SLURMD_NODENAME`` (set in hooks) when well-formed, else the
    short host name."""
    name = (environ.get("SLURMD_NODENAME") or "").strip()
    return name if _NODE_NAME.fullmatch(name) else host_name().split(".")[0]


def parse_gres_gpus(text: str) -> int | None:
    """The GPUs of ``Gres=`` in ``scontrol show node`` output (``gpu:8``,
    ``gpu:h100:4(S:0-1),gpu:a100:4``), summed; ``None`` without a GPU gres."""
    match = re.search(r"(?:^|\s)Gres=(\S*)", text[:65_536])
    if match is None:
        return None
    counts = [int(n) for n in _GRES_GPU.findall(match[1])]
    return min(sum(counts), MAX_GPUS) if counts else None


def slurm_gpu_count(environ: Mapping[str, str],
                    timeout_s: float = SCONTROL_TIMEOUT_S) -> int | None:
    """The GPUs Slurm configures for this node, from ``scontrol show node``; ``None`` when
    ``scontrol`` is not on ``PATH`` or does not say."""
    import shutil
    import subprocess

    program = shutil.which("scontrol", path=environ.get("PATH"))
    if program is None:
        return None
    try:
        done = subprocess.run([program, "show", "node", node_name(environ)], capture_output=True,
                              text=True, errors="replace", timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_gres_gpus(done.stdout) if done.returncode == 0 else None


def expected_gpus(policy: Policy,
                  configured: Callable[[], int | None]) -> tuple[int, str] | None:
    """How many GPUs the node should list, and whence: ``min_gpus`` when the policy asks for
    more than its default, else ``configured()`` (``--slurm-gpus``, else Slurm's gres)."""
    min_gpus = getattr(policy, "min_gpus", CheckPolicy().min_gpus)
    if min_gpus > CheckPolicy().min_gpus:
        return min_gpus, "min_gpus"
    count = configured()
    return (count, "slurm") if count else None


def job_user(environ: Mapping[str, str], given: str | None = None) -> str | None:
    """Whose processes were the job's: ``given`` (``check --user``) when set, else the job's
    user from Slurm's prolog/epilog environment, ``SLURM_JOB_USER``, else the name of
    ``SLURM_JOB_UID`` (its number when it has no name, as process owners are then reported);
    ``None`` when none of them says."""
    if given:
        return given
    name = (environ.get("SLURM_JOB_USER") or "").strip()
    if name:
        return name
    uid = (environ.get("SLURM_JOB_UID") or "").strip()
    if not (uid.isascii() and uid.isdigit()) or len(uid) > MAX_INT_DIGITS:
        return None
    import pwd

    try:
        return pwd.getpwuid(int(uid)).pw_name
    except (KeyError, OverflowError):
        return uid


def _load_record(raw: bytes | None, where: Path, notes: list[str]) -> Scan | None:
    if raw is None:
        notes.append(f"no prolog record {where.name}")
        return None
    try:
        data = load_json(raw, where.name, limit=spool_mod.RECORD_LIMIT)
        if not isinstance(data, dict) or data.get("schema") != SCAN_SCHEMA:
            raise InputError("not a gpu-audit.scan/1 document")
        return from_jsonable(Scan, data)
    except (ValueError, RecursionError, InputError) as exc:
        notes.append(f"prolog record {where.name} unreadable ({str(exc)[:80]})")
        return None


def run_hook(kind: str, *, policy: Policy, environ: Mapping[str, str], spool: Path,
             collect: Callable[[], Scan], gpus: str | None = None, user: str | None = None,
             deadline_s: float = HOOK_DEADLINE_S, settle_s: float = SETTLE_S,
             emit: Callable[[str], None] = print, slurm_gpus: int | None = None) -> int:
    """Run one hook; ``emit`` gets its one line; returns its exit code (0, 2; errors raise).
    ``user`` (``check --user``) overrides the job's user of the environment (:func:`job_user`).
    ``slurm_gpus`` (``--slurm-gpus``): the GPUs Slurm configures for the node, instead of
    asking ``scontrol``."""
    if kind not in HOOKS:
        raise InputError(f"--slurm {kind!r}: expected one of {', '.join(HOOKS)}")
    configured = _once(lambda: slurm_gpus if slurm_gpus is not None else
                       slurm_gpu_count(environ, min(SCONTROL_TIMEOUT_S, deadline_s / 3)))
    with deadline(deadline_s, kind):
        job = None if kind == "healthcheck" else spool_mod.job_id(environ.get("SLURM_JOB_ID"))
        folder = None if job is None else spool_mod.open_spool(spool)
        try:
            problems, limited, findings, notes = _hook(kind, job, folder, policy=policy,
                                                       environ=environ, collect=collect,
                                                       gpus=gpus, user=user, settle_s=settle_s,
                                                       spool=spool, configured=configured)
        finally:
            if folder is not None:
                folder.close()
    if problems:
        kept = next((n.removeprefix("kept ") for n in notes if n.startswith("kept ")), None)
        emit(drain_reason(problems, report=kept))
        return EXIT_NODE_PROBLEM
    judged = len(limited.gpus)
    left = sum(1 for f in findings if f.severity and f.severity.rank >= 1)
    suffix = f"; {'; '.join(notes)}" if notes else ""
    counts = f"{plural(judged, 'GPU')} judged; {plural(left, 'other finding')}"
    emit(terminal(f"gpu-audit: OK: {kind} on {limited.host.hostname or host_name()}: "
                  f"no node problem ({counts} at warning or above, none the node's){suffix}",
                  newlines=False))
    return EXIT_OK


def _once(func: Callable[[], int | None]) -> Callable[[], int | None]:
    """``func``, called at most once (scontrol is asked only when an answer needs it)."""
    memo: list[int | None] = []

    def call() -> int | None:
        if not memo:
            memo.append(func())
        return memo[0]

    return call


def _hook(kind: str, job: str | None, folder: StateDir | None, *, policy: Policy,
          environ: Mapping[str, str], collect: Callable[[], Scan], gpus: str | None,
          user: str | None, settle_s: float,
          configured: Callable[[], int | None],
          spool: Path = spool_mod.DEFAULT_SPOOL,
          ) -> tuple[list[Finding], Scan, list[Finding], list[str]]:
    """The hook's judgement: ``(node problems, the judged scan, its findings, notes)``; a note
    ``kept <path>`` names the epilog's kept diff."""
    spec = gpus or ("job" if job else None)
    scan = collect()
    limited, findings = _judged(scan, spec, policy, environ, configured)
    if kind == "healthcheck" and scan.nvml.available:
        expected = expected_gpus(policy, configured)
        if expected is not None and len(scan.gpus) < expected[0]:
            findings.append(gpus_short(len(scan.gpus), *expected, scan.unlisted_gpus))
    problems = node_problems(findings)
    notes: list[str] = []
    if folder is None or job is None:
        return problems, limited, findings, notes
    spool_mod.prune(folder)
    if kind == "prolog":
        _keep(folder, job, limited, findings, policy)
        return problems, limited, findings, notes
    where = Path(spool_mod.record_name(job))
    before = _load_record(spool_mod.read_record(folder, job), where, notes)
    user = job_user(environ, user)
    report, problems = _epilog(before, limited, findings, policy, user, notes)
    if settle_s > 0 and any(p.id in SETTLING for p in problems):
        # Memory of processes killed at the job's end can take a moment to return.
        time.sleep(settle_s)
        limited, findings = _judged(collect(), spec, policy, environ, configured)
        report, problems = _epilog(before, limited, findings, policy, user, [])
    spool_mod.remove(folder, job)
    kept = spool_mod.keep_diff(folder, job, report) if problems else None
    if kept:
        notes.append(f"kept {spool / kept}")  # the drain reason names it
    return problems, limited, findings, notes


def _keep(folder: StateDir, job: str, limited: Scan, findings: list[Finding],
          policy: Policy) -> None:

    document = scan_document(limited, findings, exit_code(findings, policy.fail_on_severity))
    spool_mod.keep_record(folder, job, dumps(document) + "\n")


def _judged(scan: Scan, spec: str | None, policy: Policy, environ: Mapping[str, str],
            configured: Callable[[], int | None]) -> tuple[Scan, list[Finding]]:
    """The scan limited to ``spec``'s GPUs and the findings about them (judged on the whole
    machine), with ``gpu-missing`` for each of the job's GPUs NVML does not list."""
    selection = job_selection(spec, scan, environ)
    findings = select_findings(evaluate(scan, policy), scan, selection)
    if selection is not None and selection.missing:
        _within_slurm(selection, configured)
        findings += job_gpus_missing(selection.missing, len(scan.gpus))
    return apply_selection(scan, selection), findings


def _within_slurm(selection: GpuSelection, configured: Callable[[], int | None]) -> None:
    """Refuse (no verdict) a job GPU index past the GPUs Slurm configures for this node: no
    Slurm gives one, so the variable is not Slurm's."""
    beyond = [m.position for m in selection.missing if m.position is not None]
    if not beyond:
        return
    count = configured()
    if count is not None and max(beyond) >= count:
        raise InputError(f"{selection.reason.split(':', 1)[0]}: GPU {max(beyond)} is beyond "
                         f"the {plural(count, 'GPU')} Slurm configures for this node")


def _epilog(before: Scan | None, after: Scan, findings: list[Finding], policy: Policy,
            user: str | None, notes: list[str]) -> tuple[DiffReport, list[Finding]]:
    try:
        report = compare(before, after, policy=policy, job_user=user)
    except InputError as exc:  # a record of another machine: judge without it
        notes.append(f"prolog record not comparable ({exc})")
        report = compare(None, after, policy=policy, job_user=user)
    return report, node_problems([*report.findings, *findings])
