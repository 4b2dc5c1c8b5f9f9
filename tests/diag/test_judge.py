"""The judge with recorded figures: a healthy H100, one at half PCIe width, one whose clocks
decay under load; memory errors, unknown models, peers, counters, hung workers."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from gpu_audit.diag.catalogue import DIAG_DOCS
from gpu_audit.diag.judge import judge
from gpu_audit.diag.results import GpuRun, PeerRun, WorkerOutcome
from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Severity
from tests.diag import recorded


def ids(judgement) -> list[str]:
    return sorted(f.id for f in judgement.findings)


def figure(judgement, subject: str, metric: str):
    return next(f for f in judgement.figures if f.subject == subject and f.metric == metric)


def test_healthy_h100_passes_with_every_figure_beside_its_expectation() -> None:
    out = judge(2, [recorded.healthy_h100()])
    assert ids(out) == [] and out.exit_code == 0
    metrics = {f.metric for f in out.figures}
    assert metrics == {"memory-bandwidth", "h2d-bandwidth", "d2h-bandwidth", "matmul-fp32",
                       "matmul-tf32", "matmul-fp16", "matmul-bf16", "matmul-fp8"}
    bf16 = figure(out, "gpu:0", "matmul-bf16")
    assert bf16.peak == 989.5 and bf16.expected == round(989.5 * 0.65, 2)
    assert bf16.ratio == round(720 / bf16.expected, 3) and bf16.basis == "table"
    h2d = figure(out, "gpu:0", "h2d-bandwidth")
    assert h2d.basis == "link" and h2d.peak == 63.01 and 0.9 < h2d.ratio < 1.1


def test_half_width_link_is_named_with_full_width_figure() -> None:
    out = judge(2, [recorded.half_width_h100()])
    assert ids(out) == ["diag-pcie-link-limited"] and out.exit_code == 1
    finding = out.findings[0]
    assert finding.evidence["pcie_width_current"] == 8
    assert finding.evidence["full_width_link_gbs"] == 63.01
    assert finding.evidence["measured_gbs"] == 25.6
    # Judged against its own (x8) link the copies are healthy: the link, not the GPU, is at fault.
    assert not figure(out, "gpu:0", "h2d-bandwidth").low


def test_slow_host_copies_on_a_full_link_are_low() -> None:
    run = recorded.h100_run(tests=recorded.h100_tests(h2d=12.0, d2h=11.0))
    out = judge(2, [run])
    assert ids(out) == ["diag-bandwidth-low", "diag-bandwidth-low"] and out.exit_code == 2
    assert {f.evidence["metric"] for f in out.findings} == {"h2d-bandwidth", "d2h-bandwidth"}


def test_decaying_clocks_fail_with_the_reason() -> None:
    out = judge(3, [recorded.decaying_h100()])
    assert ids(out) == ["diag-thermal-decay", "diag-throttle-unexpected"]
    decay = next(f for f in out.findings if f.id == "diag-thermal-decay")
    assert decay.evidence["decay_pct"] > 25 and decay.evidence["sm_clock_last_mhz"] == 1395
    assert "hw_thermal_slowdown" in decay.detail
    assert out.sustained[0]["baseline_tflops"] == 700.0 and out.exit_code == 2


def test_steady_load_at_the_power_limit_passes() -> None:
    out = judge(3, [recorded.steady_h100()])
    assert ids(out) == [] and out.sustained[0]["decay_pct"] < 1


def test_power_cap_well_below_the_limit_warns() -> None:
    run = recorded.steady_h100()
    for sample in run.samples:
        sample["power_draw_w"] = 400.0
    out = judge(3, [run])
    assert ids(out) == ["diag-throttle-unexpected"]
    assert out.findings[0].severity is Severity.WARNING


def test_moved_counters_and_new_xids_fail() -> None:
    run = recorded.steady_h100()
    run.samples[-1]["ecc_errors_uncorrected_volatile"] = 2
    run.new_xids = [{"xid": 48, "message": "DBE (double bit error)"}]
    out = judge(3, [run])
    assert ids(out) == ["diag-counter-moved"]
    moved = out.findings[0].evidence["moved"]
    assert moved["ecc_errors_uncorrected_volatile"] == {"before": 0, "after": 2}
    assert moved["xid"][0]["xid"] == 48 and out.exit_code == 2


def test_memtest_mismatch_names_offset_and_bit() -> None:
    run = recorded.healthy_h100()
    run.tests["memtest"]["mismatches"] = [{
        "pattern": "address", "bad_words": 1,
        "errors": [{"offset_bytes": 0x1234567, "bit": 3, "word_offset_bytes": 0x1234564,
                    "bits_in_word": [27], "expected": "0x0048d159", "read": "0x0848d159"}]}]
    out = judge(2, [run])
    assert ids(out) == ["diag-memory-error"]
    finding = out.findings[0]
    assert finding.evidence["offset_bytes"] == 0x1234567 and finding.evidence["bit"] == 3
    assert "0x1234567" in finding.detail and "bit 3" in finding.detail
    assert finding.severity is Severity.CRITICAL


def test_throughput_below_the_table_fails() -> None:
    run = recorded.healthy_h100()
    run.tests["matmul-bf16"] = {"tflops": 300.0, "n": 8192}
    out = judge(2, [run])
    assert ids(out) == ["diag-throughput-low"]
    assert out.findings[0].evidence["ratio"] < 0.7


def test_unknown_model_is_judged_by_its_peers_never_by_absence() -> None:
    def mystery(index: int, gbs: float) -> GpuRun:
        return dataclasses.replace(
            recorded.h100_run(index), name="NVIDIA Mystery 9000",
            tests={"memory-bandwidth": {"gbs": gbs}, "matmul-bf16": {"tflops": 100.0}})

    alone = judge(2, [mystery(0, 10.0)])
    assert ids(alone) == ["diag-model-unknown"] and alone.exit_code == 0
    assert figure(alone, "gpu:0", "memory-bandwidth").expected is None
    node = judge(2, [mystery(0, 500.0), mystery(1, 510.0), mystery(2, 250.0)])
    assert ids(node) == ["diag-bandwidth-low", "diag-model-unknown"]
    low = next(f for f in node.findings if f.id == "diag-bandwidth-low")
    assert low.subject == "gpu:2" and low.evidence["basis"] == "peers"
    assert low.evidence["expected"] == 505.0


def test_peer_access_against_nvlink_claims() -> None:
    gpus = [recorded.h100_run(0), recorded.h100_run(1)]
    switch = {"active_links": 18, "peer_pci_bus_ids": ["00000000:c0:00.0"]}
    peers = PeerRun(indices=[0, 1], matrix=[[None, False], [False, None]],
                    nvlink={0: switch, 1: switch}, worker=WorkerOutcome(status="done"))
    out = judge(1, gpus, peers)
    assert ids(out) == ["diag-p2p-unavailable"]
    assert out.findings[0].severity is Severity.ERROR and out.findings[0].evidence["nvlink"]
    no_links = dataclasses.replace(peers, nvlink={0: None, 1: None})
    out = judge(1, gpus, no_links)
    assert out.findings[0].severity is Severity.WARNING


def test_peer_copies_and_all_reduce_against_nvlink() -> None:
    gpus = [recorded.h100_run(0), recorded.h100_run(1)]
    switch = {"active_links": 18, "peer_pci_bus_ids": ["00000000:c0:00.0"]}
    peers = PeerRun(indices=[0, 1], matrix=[[None, True], [True, None]],
                    nvlink={0: switch, 1: switch}, worker=WorkerOutcome(status="done"),
                    tests={"peer-copy-0-1": {"gbs": 360.0}, "peer-copy-1-0": {"gbs": 120.0},
                           "all-reduce": {"bus_gbs": 330.0, "ok": True}})
    out = judge(2, gpus, peers)
    assert ids(out) == ["diag-bandwidth-low"]
    assert out.findings[0].subject == "gpu:1"
    copy = figure(out, "gpu:0->gpu:1", "peer-copy")
    assert copy.peak == 450.0 and copy.basis == "table" and not copy.low
    assert figure(out, "node", "all-reduce").ratio > 1


def test_hung_and_dead_workers() -> None:
    hung = recorded.h100_run(0, tests={}, worker=WorkerOutcome(status="hung", test="memtest",
                                                               limit_s=120.0))
    died = recorded.h100_run(1, tests={}, worker=WorkerOutcome(status="died", test="matmul-fp8",
                                                               returncode=-6, log_tail="abort"))
    out = judge(2, [hung, died])
    assert ids(out) == ["diag-test-hung", "diag-worker-died"] and out.exit_code == 2


def test_missing_torch_is_unknown_not_failed() -> None:
    run = recorded.h100_run(0, tests={}, worker=WorkerOutcome(
        status="fatal", kind="torch", reason="torch does not import: No module named 'torch'"))
    out = judge(1, [run])
    assert ids(out) == [] and out.exit_code == 3 and "torch" in out.unknown[0]


def test_every_catalogued_id_is_emitted_and_every_emitted_id_catalogued() -> None:
    package = Path(__file__).resolve().parents[2] / "gpu_audit" / "diag"
    emitted = set()
    for name in ("judge.py", "sustain.py"):
        for node in ast.walk(ast.parse((package / name).read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "diag_finding":
                emitted.add(node.args[0].value)
    assert emitted == set(DIAG_DOCS) == set(catalogue.ids(catalogue.DIAG))
