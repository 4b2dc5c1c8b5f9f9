"""``gpu-audit diag``'s run: choose the GPUs, refuse busy ones, say what it will cost, run the
workers, sample NVML during the load, judge.

Order: each selected GPU's level 1-2 tests (level 1 on every GPU at once; level 2 one GPU at a
time, so host transfers do not share the host's bandwidth); the tests between GPUs in one worker
that sees them all; then, for level 3, the sustained load on every selected GPU at once (the
node's power and cooling under full load) with NVML read every second and the kernel log's Xid
events read before and after.

``device="cpu"`` is the test mode: the same pipeline with small sizes and the tests run by torch
on the CPU (one run per selected GPU, or one for the host when there is none); NVML is still
read and sampled, so the fake NVML of the test suite plays the GPUs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from gpu_audit.check.engine import judge as judge_check
from gpu_audit.collect import collect_scan
from gpu_audit.collect.diag_sampling import NvmlSampler, xid_events
from gpu_audit.collect.nvml.links import read_nvlinks
from gpu_audit.config import load_check_policy
from gpu_audit.diag import mig as mig_runs
from gpu_audit.diag.judge import NO_CUDA_TORCH, judge
from gpu_audit.diag.results import DiagOptions, DiagResult, GpuRun, PeerRun, WorkerOutcome
from gpu_audit.diag.supervise import Child, run_children, worker_args
from gpu_audit.errors import UsageError
from gpu_audit.gpu_selection import GpuSelection, apply_selection, pci_key, resolve_gpus
from gpu_audit.knowledge.findings import ignorable
from gpu_audit.knowledge.gpu_models import MODELS, GpuModelSpec, find_model
from gpu_audit.model import Gpu, GpuProcess, Scan
from gpu_audit.units import GIB, MIB, fmt_bytes, noun, utc_now

MEMTEST_PASSES = 5 * 67  # buffer passes of the 67 patterns (write, expected, compare)
STARTUP_S = 10.0  # torch import and CUDA context, per worker, for the estimate


# ------------------------------------------------------------------------------ planning


def plan_for(gpu: Gpu | None, options: DiagOptions,
             spec: GpuModelSpec | None) -> dict[str, Any]:
    """The sizes and limits of one GPU's tests."""
    base = {"level": options.level, "test_timeout_s": options.timeout_s,
            "startup_s": max(options.timeout_s, 120.0), "plant": options.plant,
            "sustain_s": options.duration_s, "sustain_dtype": "bf16"}
    if options.device == "cpu":
        return {**base, "roundtrip_bytes": 4 * MIB, "memtest_bytes": 8 * MIB,
                "bandwidth_bytes": 32 * MIB, "host_bytes": 4 * MIB, "matmul_n": 256,
                "sustain_n": 256, "measure_s": 0.2, "peer_bytes": 4 * MIB,
                "dtypes": ["fp32", "bf16"], "sustain_dtype": "fp32",
                "memtest_timeout_s": options.timeout_s}
    free = (gpu.memory_free_bytes if gpu is not None else None) or 2 * GIB
    memtest = max(64 * MIB, int(free * options.memory_share) - 512 * MIB) // MIB * MIB
    bandwidth = spec.memory_bandwidth_gbs * 1e9 if spec and spec.memory_bandwidth_gbs else 200e9
    memtest_s = MEMTEST_PASSES * memtest / (0.5 * bandwidth)
    small = free < 4 * GIB
    capability = _capability(gpu)
    if capability is not None and capability < (8, 0):
        base["sustain_dtype"] = "fp16"  # no bf16 tensor cores before Ampere
    return {**base, "roundtrip_bytes": 256 * MIB, "memtest_bytes": memtest,
            "bandwidth_bytes": min(GIB, free // 8), "host_bytes": 256 * MIB,
            "matmul_n": 4096 if small else 8192, "sustain_n": 4096 if small else 8192,
            "measure_s": 1.0, "peer_bytes": 256 * MIB,
            "dtypes": ["fp32", "tf32", "fp16", "bf16", "fp8"],
            "memtest_timeout_s": options.timeout_s + 4 * memtest_s}


def _capability(gpu: Gpu | None) -> tuple[int, ...] | None:
    text = gpu.compute_capability if gpu is not None else None
    try:
        return tuple(int(part) for part in text.split(".")) if text else None
    except ValueError:
        return None


def estimate(plans: dict[int, dict[str, Any]], options: DiagOptions,
             peers: bool) -> dict[str, Any]:
    """GPU memory (per GPU, at most) and wall time the run will take, roughly."""
    per_gpu_s, memory = 0.0, 0
    if options.level == 1:  # the GPUs' workers run together
        per_gpu_s = -(STARTUP_S + 3) * max(0, len(plans) - 1)
    for plan in plans.values():
        seconds = STARTUP_S + 3
        need = plan["roundtrip_bytes"] * 2 + 512 * MIB
        if options.level >= 2:
            seconds += (plan["memtest_timeout_s"] - options.timeout_s) / 4 + \
                plan["measure_s"] * (2 + 2 + 2 * len(plan["dtypes"]))
            need = max(need, plan["memtest_bytes"] + 512 * MIB)
        per_gpu_s += seconds
        memory = max(memory, need)
    total = per_gpu_s
    if peers:
        n = len(plans)
        total += STARTUP_S + (n * (n - 1) + 2) * (next(iter(plans.values()))["measure_s"] + 0.5)
    if options.level >= 3 and plans:
        total += STARTUP_S + options.duration_s
    return {"memory_per_gpu_bytes": memory if options.device == "cuda" else None,
            "seconds": round(total), "gpus": len(plans)}


def _disturbs(process: GpuProcess, run: GpuRun) -> bool:
    """Whether ``process`` (on ``run``'s GPU) shares the memory ``run`` would test.

    A whole GPU: every process on it. A MIG instance: the processes in its GPU instance. MIG
    partitions the memory system by GPU instance (its memory, L2 slices and memory controllers
    are its own), so a process in another GPU instance neither holds the memory the memory test
    covers nor competes for the bandwidth measured; the compute instances of one GPU instance
    share all of them, so a process in a sibling compute instance counts. Not isolated between
    GPU instances: power, clocks and temperature are the whole GPU's, so a loaded neighbour can
    lower the matmul figures through throttling (those are judged against the node's instances
    of the same profile, not the datasheet). A process whose instance NVML did not report
    counts: it may be in this one.
    """
    if run.mig is None:
        return True
    mine = run.mig.get("gpu_instance_id")
    if process.mig_gpu_instance_id is not None and mine is not None:
        return process.mig_gpu_instance_id == mine
    if process.mig_uuid and run.mig.get("uuid"):
        return process.mig_uuid.lower() == str(run.mig["uuid"]).lower()
    return True


def _targets(targets: Sequence[int | GpuRun]) -> list[GpuRun]:
    return [t if isinstance(t, GpuRun) else GpuRun(index=t) for t in targets]


def _named(run: GpuRun) -> str:
    return f"GPU {run.index}" + (f" MIG {run.mig['instance']}" if run.mig is not None else "")


def busy_processes(scan: Scan, targets: Sequence[int | GpuRun]) -> dict[int | str, list[str]]:
    """Each busy target (a GPU index, or a run: a whole GPU or a MIG instance) by its run key
    (the index; the subject for an instance) -> descriptions of the compute processes of
    others that share its memory."""
    me = os.getpid()
    busy: dict[int | str, list[str]] = {}
    for run in _targets(targets):
        for p in scan.processes:
            if p.gpu_index == run.index and p.pid != me and \
                    "compute" in (p.type or "compute") and _disturbs(p, run):
                busy.setdefault(run.key, []).append(
                    f"pid {p.pid} ({p.name or '?'}, {p.user or 'unknown user'}, "
                    f"{fmt_bytes(p.used_memory_bytes)})")
    return busy


def refuse_busy(scan: Scan, targets: Sequence[int | GpuRun]) -> None:
    """Raises :class:`UsageError` naming the busy GPUs and MIG instances among ``targets``."""
    runs = _targets(targets)
    busy = busy_processes(scan, runs)
    if not busy:
        return
    listed = "; ".join(f"{_named(r)}: {', '.join(busy[r.key])}" for r in runs if r.key in busy)
    free = [str(r.mig["uuid"]) if r.mig is not None else str(r.index) for r in runs
            if r.key not in busy]
    hint = f"--gpus {','.join(free)}, " if free else ""
    which = noun(len(busy), "the GPU", "the GPUs")
    raise UsageError(f"other processes are using {which} diag would load ({listed}): diag "
                     f"would disturb them and measure less than the GPU can do; wait for them, "
                     f"choose other GPUs ({hint}--gpus), or pass --force")


def _gpu_run(gpu: Gpu | None, index: int, name: str | None) -> GpuRun:
    if gpu is None:
        return GpuRun(index=index, name=name)
    return GpuRun(index=gpu.index, name=gpu.name, uuid=gpu.uuid, pci_bus_id=gpu.pci_bus_id,
                  pcie_gen_current=gpu.pcie_gen_current, pcie_gen_max=gpu.pcie_gen_max,
                  pcie_width_current=gpu.pcie_width_current, pcie_width_max=gpu.pcie_width_max,
                  power_limit_w=gpu.power_limit_w, memory_free_bytes=gpu.memory_free_bytes,
                  mig_mode=gpu.mig_mode)


def _visible(gpus: list[GpuRun], device: str) -> dict[str, str]:
    if device == "cpu":
        return {"CUDA_VISIBLE_DEVICES": ""}
    ids = [g.uuid or str(g.index) for g in gpus]
    return {"CUDA_VISIBLE_DEVICES": ",".join(ids), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


# ------------------------------------------------------------------------------ running


def run_diag(options: DiagOptions, *, scan: Scan | None = None,
             note: Callable[[str], None] = lambda _: None) -> DiagResult:
    """The whole run. Raises :class:`UsageError` (exit 3) for a bad selection or busy GPUs and
    :class:`KeyboardInterrupt` after killing every worker on Ctrl-C."""
    if options.level not in (1, 2, 3):
        raise UsageError(f"--level must be 1, 2 or 3, not {options.level}")
    started = time.perf_counter()
    if scan is None:
        scan = collect_scan(timeout_s=options.nvml_timeout_s)
    selection = resolve_gpus(options.gpus, scan.gpus, os.environ, unlisted=scan.unlisted_gpus)
    wanted = set(selection.indices) if selection is not None else None
    nvml_gpus = [g for g in scan.gpus if not g.lost and (wanted is None or g.index in wanted)]
    cpu = options.device == "cpu"
    if not nvml_gpus and not cpu:
        why = ("the selection names no GPU" if selection is not None and not selection.indices
               else scan.nvml.message or "NVML reports no GPU")
        raise UsageError(f"no GPU to test: {why}; `gpu-audit scan` shows what the driver sees")
    table = options.table if options.table is not None else (() if cpu else MODELS)
    by_index = {g.index: g for g in nvml_gpus}
    runs = [_gpu_run(g, g.index, g.name) for g in nvml_gpus] or \
        [_gpu_run(None, 0, "CPU (test mode)")]
    # A GPU in MIG mode runs work in MIG instances: each is tested in a worker of its own
    # (gpu_audit.diag.mig). One whose instances cannot be listed is left untested.
    runs = _with_mig_instances(runs, by_index, selection)
    tested = [r for r in runs if r.worker.kind != "mig"]
    if not options.force and nvml_gpus:  # the GPUs and instances it loads (not an untested one)
        refuse_busy(scan, tested)
    plans = {r.key: _plan(r, by_index.get(r.index), options, table) for r in tested}
    whole = [r for r in tested if r.mig is None]
    with_peers = len(whole) >= 2 and not cpu
    cost = estimate(plans, options, with_peers)
    memory = cost["memory_per_gpu_bytes"]
    untested = ", ".join(str(r.index) for r in runs if r.worker.kind == "mig")
    note(f"diag level {options.level} on {len(tested)} "
         f"{'GPU' if not cpu else 'device'}{'s' if len(tested) != 1 else ''} "
         f"({', '.join(r.subject.removeprefix('gpu:') for r in tested)}"
         f"{', tests on the CPU: test mode' if cpu else ''}): "
         + (f"up to {fmt_bytes(memory)} of GPU memory per GPU, " if memory else "")
         + f"about {cost['seconds']} s"
         + (f" ({cost['seconds'] / 60:.0f} min)" if cost["seconds"] >= 120 else "")
         + f"; each test may take up to {options.timeout_s:g} s "
           "(Ctrl-C stops it cleanly)"
         + (f"; not tested, MIG mode on: GPU {untested}" if untested else ""))

    if options.level == 1:  # nothing is measured at level 1: every GPU at once, in seconds
        _run_tests(tested, plans, options, note)
    else:  # one GPU at a time, so host transfers do not share the host's bandwidth
        for position, run in enumerate(tested):
            _run_tests([run], plans, options, note)
            if run.worker.status == "fatal" and run.worker.kind in NO_CUDA_TORCH:
                for rest in tested[position + 1:]:  # the same torch would fail the same way
                    rest.worker = msgspec.structs.replace(run.worker)
                break
    peers = _run_peers(whole, plans, options, note) if with_peers else None
    if options.level >= 3:
        _run_sustained(whole, plans, options, note)
    _note_mig_skips(tested, options.level)
    driver_cuda = scan.driver.cuda_driver_version if scan.driver else None
    judgement = judge(options.level, runs, peers, table=table, driver_cuda=driver_cuda)
    checklist, checklist_exit = ([], 0)
    if options.checklist and not cpu:
        checklist, checklist_exit = checklist_summary(scan, selection)
    torch_version = next((r.worker.ready.get("torch_version") for r in runs
                          if r.worker.ready.get("torch_version")), None)
    return DiagResult(options=options, generated_at=utc_now(), hostname=scan.host.hostname,
                      selection=selection, gpus=runs, peers=peers, judgement=judgement,
                      plans=plans, estimate=cost, checklist=checklist,
                      checklist_exit=checklist_exit,
                      duration_s=round(time.perf_counter() - started, 2),
                      driver_version=scan.driver.driver_version if scan.driver else None,
                      torch_version=torch_version)


def _with_mig_instances(runs: list[GpuRun], by_index: dict[int, Gpu],
                        selection: GpuSelection | None = None) -> list[GpuRun]:
    """Each MIG-mode GPU's run replaced by one run per MIG instance (per chosen instance, where
    the selection names some); a MIG-mode GPU whose instances cannot be listed keeps its run,
    marked not run (``diag-mig-not-tested``)."""
    out: list[GpuRun] = []
    for run in runs:
        gpu = by_index.get(run.index)
        if not run.mig_mode or gpu is None:
            out.append(run)
            continue
        only = selection.instances_of(gpu) if selection is not None else None
        instances = mig_runs.instance_runs(gpu, only)
        if not instances:
            run.worker = WorkerOutcome(status="not-run", kind="mig",
                                       reason=mig_runs.untested_reason(gpu))
        out.extend(instances or [run])
    return out


def _plan(run: GpuRun, gpu: Gpu | None, options: DiagOptions,
          table: tuple[GpuModelSpec, ...]) -> dict[str, Any]:
    if run.mig is None or gpu is None:
        return plan_for(gpu, options, find_model(run.name, table))
    # An instance: sized from its own memory; no datasheet bandwidth for the time estimate.
    return mig_runs.instance_plan(plan_for(mig_runs.instance_gpu(gpu, run), options, None))


def _note_mig_skips(runs: list[GpuRun], level: int) -> None:
    """What MIG instances were not tested for, in their results (not measured, not faked)."""
    for run in runs:
        if run.mig is None or run.worker.status != "done":
            continue
        if level >= 2:
            run.tests.setdefault("host-bandwidth", dict(mig_runs.HOST_BANDWIDTH_SKIPPED))
            run.tests.setdefault("peers", {"skipped": True, "reason": mig_runs.PEERS_SKIPPED})
        if level >= 3:
            run.tests.setdefault("sustained", {"skipped": True,
                                               "reason": mig_runs.SUSTAIN_SKIPPED})


def _progress(note: Callable[[str], None], label: str) -> Callable[[dict[str, Any]], None]:
    def show(event: dict[str, Any]) -> None:
        if event.get("ev") == "phase":
            note(f"{label}: {event.get('test')}")
        elif event.get("ev") == "tick" and int(event.get("t_s") or 0) % 10 == 0:
            note(f"{label}: {event.get('t_s'):.0f} s, {event.get('tflops'):g} TFLOPS")
    return show


def _run_tests(runs: list[GpuRun], plans: dict[int | str, dict[str, Any]], options: DiagOptions,
               note: Callable[[str], None]) -> None:
    children = [Child(run.subject, worker_args(options.device, "gpu", plans[run.key]),
                      mig_runs.visible(run, options.device) if run.mig is not None
                      else _visible([run], options.device), startup_s=plans[run.key]["startup_s"],
                      on_event=_progress(note, run.label if run.mig is not None
                                         else f"GPU {run.index}")) for run in runs]
    run_children(children)
    for run, child in zip(runs, children, strict=True):
        run.tests = child.results
        run.worker = child.outcome


def _run_peers(runs: list[GpuRun], plans: dict[int, dict[str, Any]], options: DiagOptions,
               note: Callable[[str], None]) -> PeerRun:

    usable = [r for r in runs if r.worker.status == "done"]
    peers = PeerRun(indices=[r.index for r in usable])
    if len(usable) < 2:
        peers.worker = WorkerOutcome(status="done")
        return peers
    peers.nvlink = read_nvlinks(peers.indices, options.nvml_timeout_s)
    plan = plans[usable[0].index]
    child = Child("peers", worker_args("cuda", "peers", plan), _visible(usable, "cuda"),
                  startup_s=plan["startup_s"], on_event=_progress(note, "peers"))
    run_children([child])
    peers.worker = child.outcome
    peers.tests = child.results
    peers.matrix = (child.results.get("peer-matrix") or {}).get("matrix")
    return peers


def _run_sustained(runs: list[GpuRun], plans: dict[int, dict[str, Any]],
                   options: DiagOptions, note: Callable[[str], None]) -> None:

    usable = [r for r in runs if r.worker.status == "done"]
    if not usable:
        return
    before, _ = xid_events()
    children = []
    for run in usable:
        def on_event(event: dict[str, Any], run: GpuRun = run,
                     show: Callable = _progress(note, f"GPU {run.index}")) -> None:
            if event.get("ev") == "tick":
                run.ticks.append(float(event["tflops"]))
                run.tick_times_s.append(float(event["t_s"]))
            show(event)

        plan = plans[run.index]
        children.append(Child(f"sustain:gpu:{run.index}",
                              worker_args(options.device, "sustain", plan),
                              _visible([run], options.device), startup_s=plan["startup_s"],
                              on_event=on_event))
    sampled = [r.index for r in usable if r.uuid is not None or r.pci_bus_id is not None]
    sampler = NvmlSampler(sampled, timeout_s=min(2.0, options.nvml_timeout_s)).start()
    try:
        run_children(children)
    finally:
        samples = sampler.stop()
    after, _ = xid_events()
    for run, child in zip(usable, children, strict=True):
        run.sustain_worker = child.outcome
        run.samples = samples.get(run.index, [])
        if "sustained" in child.results:
            run.tests["sustained"] = {k: v for k, v in child.results["sustained"].items()
                                      if k != "tflops"}
        if before is not None and after is not None:
            run.new_xids = _new_xids(before, after, run.pci_bus_id)


def _new_xids(before: list[dict], after: list[dict], bus_id: str | None) -> list[dict]:
    seen = {(x.get("xid"), x.get("uptime_s"), x.get("message")) for x in before}
    mine = pci_key(bus_id)
    fresh = []
    for event in after:
        if (event.get("xid"), event.get("uptime_s"), event.get("message")) in seen:
            continue
        theirs = pci_key(event.get("pci_bus_id"))
        if mine is None or theirs is None or theirs[:3] == mine[:3]:
            fresh.append(event)
    return fresh


def checklist_summary(scan: Scan, selection: GpuSelection | None) -> tuple[list[dict], int]:
    """What ``gpu-audit check`` judges of this machine, as rows (all but passes and skips),
    and its exit code."""

    policy = load_check_policy(None, known_ids=ignorable())
    report = judge_check(apply_selection(scan, selection), policy)
    rows = [{"id": r.id, "subject": r.subject, "status": r.status.value, "title": r.title,
             "summary": r.summary, "remedy": r.remedy} for r in report.results
            if r.status.value not in ("pass", "skip")]
    return rows, report.exit_code
