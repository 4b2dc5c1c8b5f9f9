"""Judging: ignore, and the rules and the checks reading one policy."""

from __future__ import annotations

import msgspec

from gpu_audit.model import Driver
from tests import builders as b
from tests.check.support import FAIL, GIB, MIB, PASS, SKIP, WARN, only, run, with_torch


def test_ignore_drops_findings_and_checks_and_their_covered_findings():
    starved = b.with_host(b.scan(), memory_available_bytes=256 * MIB,
                          swap_used_bytes=5 * GIB)
    report = run(starved, ignore=["low-host-memory", "swap-pressure", "gpu-count"])
    assert not [f for f in report.findings if f.id in ("low-host-memory", "swap-pressure")]
    assert only(report, "swap").status is SKIP
    assert only(report, "swap").summary == "ignored by the policy"
    assert only(report, "gpu-count").status is SKIP
    assert report.exit_code == 0


def test_ignoring_one_torch_finding_keeps_the_torch_check():
    driver = Driver("550.90.07", "12.550.90.07", "12.4")
    too_new = with_torch(b.scan(driver=driver), "2.6.0+cu128", "cuda", "12.8")
    report = run(too_new, require_torch_cuda=True, ignore=["driver-too-old"])
    assert only(report, "torch-cuda").status is PASS
    assert only(run(too_new, require_torch_cuda=True), "torch-cuda").status is WARN


def test_findings_viewed_by_a_check_are_not_reported_twice():
    scan = b.with_host(b.scan(), swap_used_bytes=5 * GIB)
    report = run(scan)
    assert [f.id for f in report.findings].count("swap-pressure") == 1
    assert not [r for r in report.results if r.id == "swap-pressure"]
    assert only(report, "swap").status is FAIL


def test_the_rules_under_check_read_the_check_policy_so_both_agree():
    scan = b.with_host(b.scan(gpus=[b.gpu(0, total=80 * GIB, used=31 * GIB)]),
                       swap_used_bytes=1 * GIB)
    report = run(scan, max_swap_used_gib=0.5, min_free_vram_pct=90, fail_on="warning")
    assert {"swap-pressure", "low-free-vram"} <= {f.id for f in report.findings}
    assert only(report, "swap").status is FAIL and only(report, "free-vram").status is FAIL
    calm = run(scan, max_swap_used_gib=4)
    assert "swap-pressure" not in {f.id for f in calm.findings}
    assert only(calm, "swap").status is PASS


def test_ignoring_gpu_lost_keeps_counting_the_gpus():
    """gpu-count views gpu-lost but judges the count too: ignoring the finding drops only it."""

    from tests.check.test_gpus import idle_h100_node

    node = idle_h100_node(2)
    lost = msgspec.structs.replace(node, gpus=[node.gpus[0], b.Gpu(index=1, lost=True)])
    short = only(run(lost, min_gpus=2, ignore=["gpu-lost"]), "gpu-count")
    assert short.status is FAIL and "the policy needs at least 2" in short.summary
    assert short.evidence["gpus"] == 1 and short.evidence["lost"] == []
    enough = only(run(lost, min_gpus=1, ignore=["gpu-lost"]), "gpu-count")
    assert enough.status is PASS and "GPU 1 lost" not in enough.summary
    assert only(run(lost, min_gpus=1), "gpu-count").status is FAIL  # not ignored: lost fails
    assert only(run(lost, min_gpus=1, ignore=["gpu-count"]), "gpu-count").status is SKIP
