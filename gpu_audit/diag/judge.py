"""Judging ``gpu-audit diag``'s measurements: pure, from recorded figures to findings.

Every figure is put beside its expectation: the model's datasheet peak (``knowledge.gpu_models``)
or the live PCIe link's capacity, times the share a healthy GPU reaches with diag's method. A
GPU model without a table row is compared with the node's other GPUs of the same name only
(and, under sustained load, with its own first seconds: :mod:`gpu_audit.diag.sustain`); it is
never failed for lack of a row.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

import msgspec

from gpu_audit.diag.catalogue import diag_finding
from gpu_audit.diag.results import DiagJudgement, Figure, GpuRun, PeerRun
from gpu_audit.diag.sustain import judge_sustained
from gpu_audit.knowledge.gpu_models import (
    DTYPES,
    LOW_FRACTION,
    METHOD_EFFICIENCY,
    MODELS,
    PEER_FRACTION,
    GpuModelSpec,
    find_model,
    pcie_gbs,
)
from gpu_audit.knowledge.mig import MIG_OFF_NEEDS, mig_off_command
from gpu_audit.knowledge.torch_builds import install_command
from gpu_audit.model import Severity

NO_CUDA_TORCH = ("torch-missing", "torch-build")  # a worker's fatal kinds that are no verdict
_RESEAT = ("Reseat the GPU and its riser or cable, check the slot's lanes in the board manual "
           "and the BIOS PCIe settings; `nvidia-smi -q -d PCIE` shows the link.")


def judge(level: int, gpus: list[GpuRun], peers: PeerRun | None = None,
          table: tuple[GpuModelSpec, ...] = MODELS,
          driver_cuda: str | None = None) -> DiagJudgement:
    """Findings and figures for one diag run (``table``: the expectations; tests pass their own;
    ``driver_cuda``: the newest CUDA the driver supports, for the torch build to suggest)."""
    out = DiagJudgement()
    specs = {g.index: find_model(g.name, table) for g in gpus}
    # A MIG instance's figures have no table expectation (the datasheet is the whole GPU's):
    # they are judged against the node's instances of the same profile only.
    spec_of = {g.subject: None if g.mig is not None else specs[g.index] for g in gpus}
    for gpu in gpus:
        _judge_worker(out, gpu, gpu.worker, "tests", driver_cuda)
        _judge_correctness(out, gpu)
        out.figures.extend(_gpu_figures(gpu, spec_of[gpu.subject]))
    _compare_with_peers(out, gpus)
    for gpu in gpus:
        _bandwidth_findings(out, gpu, spec_of[gpu.subject])
    unknown_names = sorted({g.name or "?" for g in gpus if specs[g.index] is None
                            and g.mig is None and g.worker.status == "done"})
    for name in unknown_names:
        members = [g.index for g in gpus if (g.name or "?") == name
                   and g.mig is None and g.worker.status == "done"]
        compared = f"the node's other {name}" if len(members) > 1 else "no other GPU"
        out.findings.append(diag_finding(
            "diag-model-unknown", f"gpu:{members[0]}", f"No expectations for {name}",
            f"{name} has no row in gpu-audit's table of GPU models; its figures are compared "
            f"with {compared} and, under sustained load, with its own first seconds.",
            "Compare the figures with the vendor's datasheet; nothing to fix on the machine.",
            {"name": name, "gpus": members}))
    if peers is not None:
        _judge_peers(out, gpus, peers, specs)
    if level >= 3:
        for gpu in gpus:
            if gpu.sustain_worker is not None:
                _judge_worker(out, gpu, gpu.sustain_worker, "sustained load", driver_cuda)
            judge_sustained(out, gpu)
    return out


# ------------------------------------------------------------------------------ workers


def _judge_worker(out: DiagJudgement, gpu: GpuRun, worker, what: str,
                  driver_cuda: str | None = None) -> None:
    subject = gpu.subject
    label = gpu.label
    evidence = {"test": worker.test, "returncode": worker.returncode,
                "log_tail": worker.log_tail}
    if worker.status == "hung":
        out.findings.append(diag_finding(
            "diag-test-hung", subject, f"{worker.test} hung on {label}",
            f"the {worker.test} test did not finish within {worker.limit_s:g} s; its worker was "
            "stopped", "Check `sudo dmesg | grep -i xid` for driver errors; the GPU may need a "
            "reset (`sudo nvidia-smi -r -i " f"{gpu.index}`) or the machine a reboot.",
            {**evidence, "limit_s": worker.limit_s}))
    elif worker.status == "died":
        out.findings.append(diag_finding(
            "diag-worker-died", subject, f"The {what} worker died on {label}",
            f"the worker died during {worker.test or 'start-up'} "
            f"(exit status {worker.returncode})", "Read the log lines in the evidence; "
            "`sudo dmesg | tail` shows driver errors and out-of-memory kills.", evidence))
    elif worker.status == "fatal" and worker.kind in NO_CUDA_TORCH:
        _no_cuda_torch(out, worker, driver_cuda)
    elif worker.status == "fatal" and worker.kind == "cuda":
        out.findings.append(diag_finding(
            "diag-cuda-failed", subject, f"CUDA does not work on {label}",
            worker.reason or "CUDA did not initialise",
            "Run `gpu-audit scan --torch`: it says whether the torch build, the driver or "
            "CUDA_VISIBLE_DEVICES is at fault.", {"reason": worker.reason}))
    elif worker.status == "fatal":
        out.unknown.append(worker.reason or "the worker could not start")
    elif worker.status == "not-run" and worker.kind == "mig":
        out.findings.append(diag_finding(
            "diag-mig-not-tested", subject, f"{label} was not tested: MIG mode is on",
            f"{worker.reason or 'MIG mode is on'}: work on this GPU runs in MIG instances, and "
            "diag tests each instance in a worker of its own; with none to address (none "
            "created, or NVML did not list them) the GPU was left untested (the whole GPU "
            "cannot be tested while MIG mode is on)",
            f"nvidia-smi -L  # lists GPU {gpu.index}'s MIG instances\n"
            f"sudo nvidia-smi mig -i {gpu.index} -lgip  # the GPU instance profiles it offers\n"
            f"sudo nvidia-smi mig -i {gpu.index} -cgi 1g.10gb -C  # create instances (profiles "
            f"from the list) with their compute instances, then gpu-audit diag --gpus "
            f"{gpu.index}\n"
            f"{mig_off_command(gpu.index)}  # or test the whole GPU: MIG off ({MIG_OFF_NEEDS})",
            {"mig_mode": True, "gpu_uuid": gpu.uuid, "reason": worker.reason}))
        out.unknown.append(f"GPU {gpu.index}: not tested, MIG mode is on (diag-mig-not-tested)")
    elif worker.status == "not-run":
        out.unknown.append(f"GPU {gpu.index}: {worker.reason or 'the tests did not run'}")


def _no_cuda_torch(out: DiagJudgement, worker, driver_cuda: str | None) -> None:
    """No verdict: the installed torch cannot use a GPU (missing, or built without CUDA), so
    nothing is known about the GPUs. Said once for the run, with the install that fixes it."""
    if out.torch_unusable is not None:
        return
    version = worker.ready.get("torch_version") or worker.facts.get("torch_version")
    python = worker.facts.get("python")
    if worker.kind == "torch-missing":
        problem = "not-installed"
        detail = f"torch is not installed for {python or 'this Python'}"
    else:
        problem = f"{worker.facts.get('variant') or 'cpu-only'}-build"
        detail = worker.reason or f"torch {version} is built without CUDA"
    detail += ("; diag runs its tests with torch, so it gives no verdict on the GPUs (nothing "
               "was tested)")
    out.torch_unusable = {"problem": problem, "torch_version": version, "torch_cuda": None,
                          "python": python, "detail": detail,
                          "remedy": install_command(version, driver_cuda)}
    out.unknown.append(detail)


def _judge_correctness(out: DiagJudgement, gpu: GpuRun) -> None:
    subject = gpu.subject
    for test in ("context", "kernel-launch"):
        record = gpu.tests.get(test)
        if record is not None and record.get("ok") is False:
            out.findings.append(diag_finding(
                "diag-cuda-failed", subject, f"{test} failed on GPU {gpu.index}",
                record.get("error") or f"the {test} test answered wrong: {record}",
                "Run `gpu-audit scan --torch` and `nvidia-smi -q -i "
                f"{gpu.index}`; a GPU that cannot run a kernel needs a reset or service.",
                {"test": test, **record}))
    trip = gpu.tests.get("round-trip")
    if trip is not None and trip.get("ok") is False:
        detail = trip.get("error") or (
            f"{trip.get('bad_words')} of {trip.get('bytes', 0) // 4} words came back wrong "
            f"(first at byte {trip.get('first_bad_offset_bytes')})")
        out.findings.append(diag_finding(
            "diag-memory-error", subject, f"A copy round trip corrupted data on GPU {gpu.index}",
            detail, _memory_remedy(gpu), {"test": "round-trip", **trip}))
    check = gpu.tests.get("matmul-check")
    if check is not None and check.get("ok") is False:
        detail = check.get("error") or (
            f"largest error {check.get('max_abs_error'):.3g} against float64 on the CPU "
            f"(bound {check.get('bound'):.3g})")
        out.findings.append(diag_finding(
            "diag-matmul-wrong", subject, f"Matmul answers wrong on GPU {gpu.index}", detail,
            "Do not train on this GPU; reset it (`sudo nvidia-smi -r -i "
            f"{gpu.index}`) and run `gpu-audit diag --level 2 --gpus {gpu.index}` again.",
            {"test": "matmul-check", **check}))
    memtest = gpu.tests.get("memtest")
    if memtest is None:
        return
    if memtest.get("ok") is False:
        out.unknown.append(f"GPU {gpu.index}: the memory test could not run: "
                           f"{memtest.get('error')}")
        return
    for mismatch in memtest.get("mismatches") or []:
        first = mismatch["errors"][0]
        out.findings.append(diag_finding(
            "diag-memory-error", subject, f"Memory error on GPU {gpu.index}",
            f"pattern {mismatch['pattern']}: byte offset {first['offset_bytes']} "
            f"(0x{first['offset_bytes']:x}) bit {first['bit']} read {first['read']}, "
            f"expected {first['expected']}; {mismatch['bad_words']} bad word"
            f"{'s' if mismatch['bad_words'] != 1 else ''} in {memtest['bytes']} bytes tested",
            _memory_remedy(gpu),
            {"pattern": mismatch["pattern"], "offset_bytes": first["offset_bytes"],
             "bit": first["bit"], "bad_words": mismatch["bad_words"],
             "errors": mismatch["errors"], "bytes_tested": memtest["bytes"],
             "seed": memtest.get("seed")}))


def _memory_remedy(gpu: GpuRun) -> str:
    return (f"Run `gpu-audit diag --level 2 --gpus {gpu.index}` again: an error at the same "
            "offset is a bad cell. Stop using this GPU for training; on data-center parts check "
            "`nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT`; otherwise return it under warranty.")


# ------------------------------------------------------------------------------ figures


def _figure(subject: str, metric: str, unit: str, measured: float | None, peak: float | None,
            efficiency: float | None, basis: str | None, source: str | None) -> Figure:
    expected = float(f"{peak * efficiency:.5g}") if peak is not None and efficiency else None
    ratio = round(measured / expected, 3) if measured is not None and expected else None
    return Figure(subject, metric, unit, measured, expected, ratio,
                  basis if expected is not None else None, peak, efficiency, source,
                  low=ratio is not None and ratio < LOW_FRACTION)


def _gpu_figures(gpu: GpuRun, spec: GpuModelSpec | None) -> Iterable[Figure]:
    subject, source = gpu.subject, spec.source if spec else None
    if gpu.mig is not None:  # no datasheet figure for a slice: only its peers judge it
        source = (f"MIG {gpu.mig.get('profile') or 'instance'}: compared with the node's "
                  "instances of the same profile only")
    memory = gpu.tests.get("memory-bandwidth") or {}
    if "gbs" in memory:
        yield _figure(subject, "memory-bandwidth", "GB/s", memory["gbs"],
                      spec.memory_bandwidth_gbs if spec else None,
                      METHOD_EFFICIENCY["memory_bandwidth"], "table", source)
    host = gpu.tests.get("host-bandwidth") or {}
    link = pcie_gbs(gpu.pcie_gen_max or gpu.pcie_gen_current, gpu.pcie_width_current)
    for key, metric in (("h2d_gbs", "h2d-bandwidth"), ("d2h_gbs", "d2h-bandwidth")):
        if key in host:
            yield _figure(subject, metric, "GB/s", host[key], link, METHOD_EFFICIENCY["pcie"],
                          "link", "PCIe generation x current width (PCI-SIG transfer rates)")
    for dtype in DTYPES:
        record = gpu.tests.get(f"matmul-{dtype}") or {}
        if "tflops" in record:
            yield _figure(subject, f"matmul-{dtype}", "TFLOPS", record["tflops"],
                          spec.peak(dtype) if spec else None, METHOD_EFFICIENCY["matmul"],
                          "table", source)


def _compare_with_peers(out: DiagJudgement, gpus: list[GpuRun]) -> None:
    """A figure with no table expectation gets the median of the node's other GPUs of the same
    name; a figure under ``PEER_FRACTION`` of that median is low whatever the table says."""
    name_of = {g.subject: g.peer_group for g in gpus}
    for i, figure in enumerate(out.figures):
        if figure.measured is None:
            continue
        others = [f.measured for f in out.figures
                  if f.metric == figure.metric and f.subject != figure.subject
                  and f.measured is not None and f.subject in name_of
                  and name_of[f.subject] == name_of.get(figure.subject)]
        if not others:
            continue
        median = statistics.median(others)
        peer_low = median > 0 and figure.measured < PEER_FRACTION * median
        if figure.expected is None:
            out.figures[i] = msgspec.structs.replace(
                figure, expected=round(median, 2), ratio=round(figure.measured / median, 3)
                if median else None, basis="peers", peak=None, efficiency=None,
                source=f"median of {len(others)} other {name_of.get(figure.subject)}",
                low=peer_low)
        elif peer_low and not figure.low:
            out.figures[i] = msgspec.structs.replace(figure, low=True, basis="peers",
                                                 source=f"{figure.source}; median of the node's "
                                                        f"other GPUs {median:g}")


def _bandwidth_findings(out: DiagJudgement, gpu: GpuRun, spec: GpuModelSpec | None) -> None:
    mine = {f.metric: f for f in out.figures if f.subject == gpu.subject}
    label = gpu.label
    for metric in ("memory-bandwidth", "h2d-bandwidth", "d2h-bandwidth"):
        figure = mine.get(metric)
        if figure is None or not figure.low:
            continue
        what = {"memory-bandwidth": "Device memory bandwidth",
                "h2d-bandwidth": "Host-to-device bandwidth",
                "d2h-bandwidth": "Device-to-host bandwidth"}[metric]
        remedy = ("Check clocks and throttling (`nvidia-smi -q -d PERFORMANCE,CLOCK`); another "
                  "process using the GPU lowers this; rerun with the GPU idle."
                  if metric == "memory-bandwidth" else
                  f"Pin the process near the GPU (`nvidia-smi topo -m` shows its NUMA node: "
                  f"`numactl --cpunodebind=N --membind=N`); check IOMMU/ACS settings. {_RESEAT}")
        out.findings.append(diag_finding(
            "diag-bandwidth-low", gpu.subject, f"{what} low on {label}",
            f"{figure.measured:g} GB/s, expected {figure.expected:g} ({figure.ratio:.0%}; "
            f"{_basis_text(figure)})", remedy, _figure_evidence(figure)))
    for metric, figure in mine.items():
        if metric.startswith("matmul-") and figure.low:
            dtype = metric.removeprefix("matmul-")
            out.findings.append(diag_finding(
                "diag-throughput-low", gpu.subject, f"{dtype} matmul throughput low on {label}",
                f"{figure.measured:g} TFLOPS, expected {figure.expected:g} ({figure.ratio:.0%}; "
                f"{_basis_text(figure)})",
                "Check the power limit (`nvidia-smi -q -d POWER`: restore the default with "
                f"`sudo nvidia-smi -i {gpu.index} -pl DEFAULT_W`), application clocks "
                f"(`sudo nvidia-smi -i {gpu.index} -rac`) and other processes on the GPU.",
                _figure_evidence(figure)))
    host = [mine[m] for m in ("h2d-bandwidth", "d2h-bandwidth") if m in mine]
    if host and gpu.pcie_width_current and gpu.pcie_width_max and \
            gpu.pcie_width_current < gpu.pcie_width_max:
        full = pcie_gbs(gpu.pcie_gen_max or gpu.pcie_gen_current, gpu.pcie_width_max)
        best = max(f.measured or 0 for f in host)
        out.findings.append(diag_finding(
            "diag-pcie-link-limited", gpu.subject,
            f"PCIe link at x{gpu.pcie_width_current} of x{gpu.pcie_width_max} on {label}",
            f"host transfers reached {best:g} GB/s on a x{gpu.pcie_width_current} link; at "
            f"x{gpu.pcie_width_max} the link would carry {full:g} GB/s per direction "
            f"(about {full * METHOD_EFFICIENCY['pcie']:g} GB/s measured this way)", _RESEAT,
            {"pcie_width_current": gpu.pcie_width_current,
             "pcie_width_max": gpu.pcie_width_max, "pcie_gen_max": gpu.pcie_gen_max,
             "measured_gbs": best, "full_width_link_gbs": full}))


def _basis_text(figure: Figure) -> str:
    if figure.basis == "peers":
        return figure.source or "the node's other GPUs"
    if figure.peak is not None and figure.efficiency is not None:
        return f"{figure.efficiency:.0%} of {figure.peak:g} from {figure.basis}"
    return figure.basis or "no expectation"


def _figure_evidence(figure: Figure) -> dict:
    return {"metric": figure.metric, "unit": figure.unit, "measured": figure.measured,
            "expected": figure.expected, "ratio": figure.ratio, "basis": figure.basis,
            "peak": figure.peak, "method_efficiency": figure.efficiency,
            "source": figure.source}


# ------------------------------------------------------------------------------ peers


def nvlinked(peers: PeerRun, bus_of: dict[int, str | None], a: int, b: int) -> bool:
    """Whether NVML reports NVLink joining GPUs ``a`` and ``b`` (directly, or both through a
    switch: their links lead to devices that are not GPUs of this node)."""
    la, lb = peers.nvlink.get(a), peers.nvlink.get(b)
    if not la or not lb or not la.get("active_links") or not lb.get("active_links"):
        return False
    buses = {(bus or "").lower()[-12:] for bus in bus_of.values() if bus}
    remote_a = {p.lower()[-12:] for p in la.get("peer_pci_bus_ids") or []}
    direct = (bus_of.get(b) or "").lower()[-12:] in remote_a
    switched = bool(remote_a) and not remote_a & buses
    return direct or switched


def _judge_peers(out: DiagJudgement, gpus: list[GpuRun], peers: PeerRun,
                 specs: dict[int, GpuModelSpec | None]) -> None:
    _judge_worker(out, GpuRun(index=peers.indices[0] if peers.indices else 0),
                  peers.worker, "peer tests")
    matrix = peers.matrix
    if matrix is None:
        return
    by_index = {g.index: g for g in gpus}
    bus_of = {g.index: g.pci_bus_id for g in gpus}
    for a_pos, a in enumerate(peers.indices):
        for b_pos, b in enumerate(peers.indices):
            if a >= b:
                continue
            linked = nvlinked(peers, bus_of, a, b)
            can = (matrix[a_pos][b_pos], matrix[b_pos][a_pos])
            if not all(can):
                out.findings.append(diag_finding(
                    "diag-p2p-unavailable", f"gpu:{a}",
                    f"GPUs {a} and {b} cannot access each other directly",
                    f"peer access {a}->{b}: {can[0]}, {b}->{a}: {can[1]}; NVML reports "
                    f"{'NVLink between them' if linked else 'no NVLink between them'}",
                    "Check `nvidia-smi topo -m` and `nvidia-smi topo -p2p r`; on NVSwitch "
                    "systems start the fabric manager (`systemctl status nvidia-fabricmanager`);"
                    " disable ACS or set the IOMMU to passthrough (`iommu=pt`) for PCIe P2P.",
                    {"gpus": [a, b], "peer_access": list(can), "nvlink": linked},
                    severity=Severity.ERROR if linked else None))
            for src, dst in ((a, b), (b, a)):
                record = peers.tests.get(f"peer-copy-{peers.indices.index(src)}-"
                                         f"{peers.indices.index(dst)}")
                if not record or "gbs" not in record:
                    continue
                spec = specs.get(src)
                if linked and spec is not None and spec.nvlink_gbs:
                    peak, eff, basis = spec.nvlink_gbs / 2, METHOD_EFFICIENCY["p2p"], "table"
                elif all(can):
                    gs, gd = by_index.get(src), by_index.get(dst)
                    links = [pcie_gbs(g.pcie_gen_max or g.pcie_gen_current,
                                      g.pcie_width_current) for g in (gs, gd) if g]
                    known = [x for x in links if x is not None]
                    peak, eff, basis = (min(known) if known else None,
                                        METHOD_EFFICIENCY["pcie"], "link")
                else:
                    peak, eff, basis = None, None, None
                figure = _figure(f"gpu:{src}->gpu:{dst}", "peer-copy", "GB/s", record["gbs"],
                                 peak, eff, basis, spec.source if spec and basis == "table"
                                 else "PCIe link" if basis else None)
                out.figures.append(figure)
                if figure.low:
                    out.findings.append(diag_finding(
                        "diag-bandwidth-low", f"gpu:{src}",
                        f"GPU {src} to GPU {dst} copies low",
                        f"{figure.measured:g} GB/s, expected {figure.expected:g} "
                        f"({figure.ratio:.0%}; {_basis_text(figure)})",
                        "Check `nvidia-smi nvlink -s` (links down or at a lower speed) and "
                        "`nvidia-smi topo -m`.", _figure_evidence(figure)))
    _judge_all_reduce(out, gpus, peers, specs, bus_of)


def _judge_all_reduce(out: DiagJudgement, gpus: list[GpuRun], peers: PeerRun,
                      specs: dict[int, GpuModelSpec | None], bus_of: dict) -> None:
    record = peers.tests.get("all-reduce")
    if not record or "bus_gbs" not in record:
        return
    idx = peers.indices
    all_linked = all(nvlinked(peers, bus_of, a, b) for a in idx for b in idx if a < b)
    spec = specs.get(idx[0]) if idx else None
    same = len({specs.get(i).key if specs.get(i) else None for i in idx}) == 1
    if all_linked and spec is not None and spec.nvlink_gbs and same:
        peak, basis, source = spec.nvlink_gbs / 2, "table", spec.source
    else:
        links = [pcie_gbs(g.pcie_gen_max or g.pcie_gen_current, g.pcie_width_current)
                 for g in gpus if g.index in idx]
        known = [x for x in links if x is not None]
        peak, basis, source = (min(known) if known else None), "link", "PCIe link"
    figure = _figure("node", "all-reduce", "GB/s", record["bus_gbs"], peak,
                     METHOD_EFFICIENCY["allreduce"], basis, source)
    out.figures.append(figure)
    if record.get("ok") is False:
        out.findings.append(diag_finding(
            "diag-allreduce-wrong", "host", "NCCL all-reduce answered wrong",
            f"the all-reduce across GPUs {idx} returned a wrong sum", "Run "
            "`NCCL_DEBUG=INFO` with nccl-tests' all_reduce_perf to see which link corrupts.",
            {"gpus": idx}))
    if figure.low:
        out.findings.append(diag_finding(
            "diag-bandwidth-low", "host", "NCCL all-reduce bandwidth low",
            f"bus bandwidth {figure.measured:g} GB/s across {len(idx)} GPUs, expected "
            f"{figure.expected:g} ({figure.ratio:.0%}; {_basis_text(figure)})",
            "Run with `NCCL_DEBUG=INFO` to see the transport NCCL chose (P2P/NVLink, SHM, "
            "NET); check `nvidia-smi topo -m` and `nvidia-smi nvlink -s`.",
            _figure_evidence(figure)))
