"""``gpu-audit diag``'s outputs: the JSON document (``gpu-audit.diag/1``), the markdown report
and the terminal summary. Every figure is shown beside its expectation and the ratio."""

from __future__ import annotations

from typing import Any

import msgspec

from gpu_audit import __version__
from gpu_audit.diag.results import DiagResult, Figure, GpuRun, WorkerOutcome
from gpu_audit.model import Finding, Severity
from gpu_audit.report.escape import md_code, md_document, md_prose, md_row, md_text, terminal
from gpu_audit.report.remedy import fix_lines, wrapped
from gpu_audit.units import plural

SCHEMA = "gpu-audit.diag/1"
VERDICTS = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN", 130: "INTERRUPTED"}

Object = dict[str, Any]


class DiagSustained(msgspec.Struct):
    summary: Object | None
    tflops: list[float]
    t_s: list[float]
    worker: WorkerOutcome | None
    nvml_samples: list[Object]
    new_xids: Any


class DiagGpu(msgspec.Struct):
    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    pcie: dict[str, int | None]
    power_limit_w: float | None
    memory_free_bytes: int | None
    plan: Any
    subject: str
    mig: Object | None
    worker: WorkerOutcome
    tests: dict[str, Object]
    figures: list[Figure]
    sustained: DiagSustained | None


class DiagPeers(msgspec.Struct):
    indices: list[int]
    peer_access: Any
    nvlink: dict[str, Object | None]
    tests: dict[str, Object]
    worker: WorkerOutcome
    figures: list[Figure]


class DiagSummary(msgspec.Struct):
    exit_code: int
    verdict: str
    counts: dict[str, int]


class DiagDocument(msgspec.Struct):
    schema: str
    tool_version: str
    generated_at: str
    hostname: str
    level: int
    device: str
    test_mode: bool
    driver_version: str | None
    torch_version: str | None
    selection: Object | None
    estimate: Any
    duration_s: float | None
    gpus: list[DiagGpu]
    peers: DiagPeers | None
    checklist: list[Object]
    findings: list[Finding]
    unknown: list[str]
    torch_unusable: Any
    summary: DiagSummary


def _gpu_document(run: GpuRun, result: DiagResult) -> DiagGpu:
    figures = [f for f in result.judgement.figures if f.subject == run.subject]
    sustained = result.judgement.sustained.get(run.index)
    return DiagGpu(
        index=run.index, name=run.name, uuid=run.uuid, pci_bus_id=run.pci_bus_id,
        pcie={"gen_current": run.pcie_gen_current, "gen_max": run.pcie_gen_max,
              "width_current": run.pcie_width_current, "width_max": run.pcie_width_max},
        power_limit_w=run.power_limit_w,
        memory_free_bytes=run.memory_free_bytes,
        plan=result.plans.get(run.key),
        subject=run.subject,
        mig=run.mig,  # a MIG instance: its uuid, ids, profile, SMs and shares
        worker=run.worker,
        tests=run.tests,
        figures=figures,
        sustained=None if sustained is None and not run.ticks else DiagSustained(
            summary=sustained, tflops=run.ticks, t_s=run.tick_times_s,
            worker=run.sustain_worker or None, nvml_samples=run.samples,
            new_xids=run.new_xids),
    )


def diag_document(result: DiagResult) -> DiagDocument:
    judgement = result.judgement
    peers = result.peers
    findings = sorted(judgement.findings,
                      key=lambda f: (-(f.severity or Severity.INFO).rank, f.subject, f.id))
    return DiagDocument(
        schema=SCHEMA,
        tool_version=__version__,
        generated_at=result.generated_at,
        hostname=result.hostname,
        level=result.options.level,
        device=result.options.device,
        test_mode=result.options.device == "cpu",
        driver_version=result.driver_version,
        torch_version=result.torch_version,
        selection=result.selection.to_dict() if result.selection else None,
        estimate=result.estimate,
        duration_s=result.duration_s,
        gpus=[_gpu_document(run, result) for run in result.gpus],
        peers=None if peers is None else DiagPeers(
            indices=peers.indices, peer_access=peers.matrix,
            nvlink={str(k): v for k, v in peers.nvlink.items()}, tests=peers.tests,
            worker=peers.worker,
            figures=[f for f in judgement.figures if "->" in f.subject or f.subject == "node"]),
        checklist=result.checklist,
        findings=findings,
        unknown=judgement.unknown,
        torch_unusable=judgement.torch_unusable,
        summary=DiagSummary(exit_code=result.exit_code,
                            verdict=VERDICTS.get(result.exit_code, "UNKNOWN"),
                            counts={s.value: sum(f.severity is s for f in findings)
                                    for s in Severity}),
    )


def _severity(finding: Finding) -> str:
    return str(finding.severity.value if finding.severity else None)


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}g}"


def figure_row(f: Figure) -> str:
    ratio = "n/a" if f.ratio is None else f"{f.ratio:.0%}"
    mark = " LOW" if f.low else ""
    basis = f.basis or "no expectation"
    return md_row([f.subject, f.metric, f"{_num(f.measured)} {f.unit}", _num(f.expected),
                   f"{ratio}{mark}", basis])


def render_markdown(result: DiagResult, plots: dict[int, str] | None = None) -> str:
    doc = diag_document(result)
    lines = [f"# gpu-audit diag level {result.options.level}: {doc.summary.verdict}", "",
             f"- host: {md_text(result.hostname)}; generated {md_text(result.generated_at)}; "
             f"{result.duration_s} s",
             f"- driver {md_text(result.driver_version or 'n/a')}, "
             f"torch {md_text(result.torch_version or 'n/a')}"
             + ("; **test mode: the tests ran on the CPU**" if doc.test_mode else ""),
             f"- GPUs: {md_text(', '.join(g.label.removeprefix('GPU ') for g in result.gpus))}"]
    if result.selection is not None:
        lines.append(f"- selection: {md_text(result.selection.reason)}")
    lines += ["", "## Findings", ""]
    if not result.judgement.findings:
        lines.append("No findings.")
    for f in doc.findings:
        lines += [f"- **{_severity(f)}** {md_code(f.id)} ({md_text(f.subject)}): "
                  f"{md_prose(f.title)}: {md_prose(f.detail, newlines=True)}",
                  f"  - remedy: {md_prose(f.remedy, newlines=True)}"]
    for reason in result.judgement.unknown:
        lines.append(f"- **could not judge**: {md_text(reason)}")
    if result.judgement.torch_unusable:
        lines.append("  - remedy: "
                     + md_text(result.judgement.torch_unusable["remedy"], newlines=True))
    if result.checklist:
        lines += ["", "## Checklist (what `gpu-audit check` judges)", ""]
        lines += [f"- {md_text(r['status'])} {md_code(r['id'])} ({md_text(r['subject'])}): "
                  f"{md_prose(r['summary'])}" for r in result.checklist]
    if result.judgement.figures:
        lines += ["", "## Figures", "",
                  "Expected = peak x the share a healthy GPU reaches with this method; "
                  "LOW below 70% of that (or 85% of the node's other GPUs).", "",
                  "| subject | metric | measured | expected | ratio | basis |",
                  "|---|---|---|---|---|---|"]
        lines += [figure_row(f) for f in result.judgement.figures]
        sources = sorted({f.source for f in result.judgement.figures if f.source})
        if sources:
            lines += ["", "Sources: " + md_text("; ".join(sources))]
    if result.peers is not None and result.peers.matrix is not None:
        idx = result.peers.indices
        lines += ["", "## Peer access", "", "| from \\ to | " + " | ".join(map(str, idx)) + " |",
                  "|---" * (len(idx) + 1) + "|"]
        for a, row in zip(idx, result.peers.matrix, strict=False):
            cells = ["-" if v is None else "yes" if v else "NO" for v in row]
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
        links = [f"GPU {i}: " + (f"{(result.peers.nvlink.get(i) or {}).get('active_links')} "
                                 "active" if result.peers.nvlink.get(i) else "not reported")
                 for i in idx]
        lines += ["", "NVLink as NVML reports it: " + "; ".join(links)]
    for index, summary in sorted(result.judgement.sustained.items()):
        lines += ["", f"## Sustained load, GPU {index}", "",
                  f"- throughput {_num(summary['baseline_tflops'])} -> "
                  f"{_num(summary['tail_tflops'])} TFLOPS (decay {summary['decay_pct']}%, "
                  f"bound {summary['decay_bound_pct']:g}%)",
                  f"- SM clock {_num(summary['sm_clock_first_mhz'], 5)} -> "
                  f"{_num(summary['sm_clock_last_mhz'], 5)} MHz; up to "
                  f"{_num(summary['temperature_max_c'])} C, {_num(summary['power_max_w'])} W "
                  f"(limit {_num(summary['power_limit_w'])} W)",
                  f"- throttle reasons: {md_text(summary['throttle_reasons'] or 'none')}"]
        if plots and index in plots:
            lines += ["", f"![GPU {index} under load]({plots[index]})"]
    return md_document("\n".join(lines) + "\n")


def _tested(result: DiagResult) -> str:
    """``2 GPUs``, ``2 GPUs (3 MIG instances)``."""
    gpus = plural(len({g.index for g in result.gpus}), "GPU")
    instances = sum(1 for g in result.gpus if g.mig is not None)
    return gpus + (f" ({plural(instances, 'MIG instance')})" if instances else "")


def render_terminal(result: DiagResult, width: int = 100, *, wrap_status: bool = True) -> str:
    """The summary for a terminal ``width`` columns wide: verdict line, findings (prose wrapped
    between words, fix commands kept whole), figures. ``wrap_status=False`` (output piped into
    a log or a monitoring plugin runner): the verdict line, the status line Nagios reads,
    stays one line whatever its length."""
    doc = diag_document(result)
    counts = doc.summary.counts
    host = terminal(result.hostname, newlines=False)
    status = (f"DIAG {doc.summary.verdict}: level {result.options.level} on "
              f"{_tested(result)} of {host}" + (" (test mode: CPU)" if doc.test_mode else "")
              + " | " + " ".join(f"{k}={v}" for k, v in counts.items()))
    lines = wrapped(status, width, "    ") if wrap_status else [status]
    for f in doc.findings:
        lines += wrapped(f"  {_severity(f).upper():8} {f.id} ({f.subject}): "
                         f"{terminal(f.detail, newlines=False)}", width, " " * 11)
        for remedy in terminal(f.remedy or "").splitlines():
            if remedy.strip():
                lines += fix_lines(remedy.strip(), width, "           fix: ")
    for reason in result.judgement.unknown:
        lines += wrapped(f"  UNKNOWN  {terminal(reason, newlines=False)}", width, " " * 11)
    if result.judgement.torch_unusable:
        lines += fix_lines(terminal(result.judgement.torch_unusable["remedy"], newlines=False),
                           width, "           fix: ")
    for r in result.checklist:
        lines += wrapped(f"  check {r['status']:7} {r['id']} ({r['subject']}): "
                         f"{terminal(r['summary'], newlines=False)}", width, " " * 11)
    if result.judgement.figures:
        lines.append("  figures (measured / expected = ratio):")
        for f in result.judgement.figures:
            ratio = "" if f.ratio is None else f" = {f.ratio:.0%}"
            expected = "" if f.expected is None else f" / {_num(f.expected)} ({f.basis})"
            lines.append(f"    {f.subject:14} {f.metric:18} {_num(f.measured)} {f.unit}"
                         f"{expected}{ratio}{'  LOW' if f.low else ''}")
    return "\n".join(lines) + "\n"
