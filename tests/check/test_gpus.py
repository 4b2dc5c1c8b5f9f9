"""The driver and GPU checks, passing and failing on hand-built runners."""

from __future__ import annotations

import msgspec

from gpu_audit.check.results import Verdict
from gpu_audit.config import CheckPolicy, Policy
from gpu_audit.model import Driver
from tests import builders as b
from tests.check.support import (
    FAIL,
    GIB,
    MIB,
    PASS,
    SKIP,
    UNKNOWN,
    WARN,
    idle_h100_node,
    no_driver,
    only,
    results,
    run,
)

# --- nvidia-driver -------------------------------------------------------------------------


def test_absent_driver_fails_on_a_gpu_runner_with_the_scan_rule_remedy():
    report = run(no_driver())
    result = only(report, "nvidia-driver")
    assert result.status is FAIL
    assert "driver not loaded" in result.summary.lower()
    assert "modprobe nvidia" in result.remedy
    assert result.finding_id == "nvml-unavailable"
    assert only(report, "gpu-count").status is FAIL
    assert only(report, "free-vram").status is SKIP
    assert report.verdict is Verdict.CRITICAL and report.exit_code == 2


def test_absent_driver_is_fine_when_no_gpu_is_required():
    report = run(no_driver("library-not-found"), min_gpus=0)
    assert only(report, "nvidia-driver").status is SKIP
    assert only(report, "gpu-count").status is PASS
    assert report.exit_code == 0


def test_driver_older_than_policy_fails_and_newer_passes():
    scan = b.scan(driver=Driver("535.104.05", "12.535.104.05", "12.2"))
    old = only(run(scan, min_driver_version="550.54.15"), "nvidia-driver")
    assert old.status is FAIL and "driver 535.104.05 is older than 550.54.15" in old.summary
    cuda = only(run(scan, min_cuda_driver_version="12.4"), "nvidia-driver")
    assert cuda.status is FAIL and "12.2 is older than 12.4" in cuda.summary
    ok = only(run(scan, min_driver_version="535.104", min_cuda_driver_version="12.2"),
              "nvidia-driver")
    assert ok.status is PASS


def test_unreported_driver_version_with_a_minimum_is_unknown():
    scan = b.scan(driver=Driver(None, None, None))
    result = only(run(scan, min_driver_version="535"), "nvidia-driver")
    assert result.status is UNKNOWN
    assert run(scan, min_driver_version="535").exit_code == 3


# --- gpu-count -----------------------------------------------------------------------------


def test_gpu_count_passes_at_the_minimum_and_fails_below():
    assert only(run(idle_h100_node(8), min_gpus=8), "gpu-count").status is PASS
    short = only(run(idle_h100_node(4), min_gpus=8), "gpu-count")
    assert short.status is FAIL
    assert "4 GPUs (NVIDIA H100 80GB HBM3); the policy needs at least 8" in short.summary
    assert short.evidence["gpus"] == 4 and short.evidence["min_gpus"] == 8


def test_a_lost_gpu_fails_even_when_enough_remain():
    scan = idle_h100_node(2)
    scan = msgspec.structs.replace(scan, gpus=[scan.gpus[0], b.Gpu(index=1, lost=True)])
    report = run(scan, min_gpus=1)
    result = only(report, "gpu-count")
    assert result.status is FAIL and "GPU 1 lost" in result.summary
    assert "nvidia-smi -r -i 1" in result.remedy
    assert [r.status for r in results(report, "free-vram")] == [PASS, SKIP]


def test_devices_on_the_pci_bus_the_driver_misses_warn_outside_containers():
    scan = b.with_host(idle_h100_node(7), nvidia_pci_devices=8)
    assert only(run(scan, min_gpus=7), "gpu-count").status is WARN
    contained = b.with_host(scan, container="docker")
    assert only(run(contained, min_gpus=7), "gpu-count").status is PASS
    missing = only(run(scan, min_gpus=8), "gpu-count")
    assert missing.status is FAIL and "8 NVIDIA devices are on the PCI bus" in missing.remedy


# --- gpu-name, gpu-memory, temperature, persistence ---------------------------------------


def test_gpu_name_is_checked_per_gpu():
    scan = b.scan(gpus=[b.gpu(0), b.gpu(1, name="NVIDIA A10G")])
    report = run(scan, gpu_name="H100|A100")
    first, second = results(report, "gpu-name")
    assert (first.subject, first.status) == ("gpu:0", PASS)
    assert (second.subject, second.status) == ("gpu:1", FAIL)
    assert "NVIDIA A10G does not match /H100|A100/" in second.summary
    assert only(run(scan), "gpu-name").status is SKIP
    unnamed = b.scan(gpus=[b.gpu(0, name=None)])
    assert only(run(unnamed, gpu_name="H100"), "gpu-name").status is UNKNOWN


def test_gpu_memory_size():
    scan = b.scan(gpus=[b.gpu(0, total=24564 * MIB, used=300 * MIB)])
    assert only(run(scan, min_gpu_memory_gib=23.5), "gpu-memory").status is PASS
    small = only(run(scan, min_gpu_memory_gib=40), "gpu-memory")
    assert small.status is FAIL and "24.0 GiB total; the policy needs at least 40 GiB" in \
        small.summary
    unknown = b.scan(gpus=[b.gpu(0, memory_total_bytes=None)])
    assert only(run(unknown, min_gpu_memory_gib=40), "gpu-memory").status is UNKNOWN


def test_gpu_temperature():
    hot = b.scan(gpus=[b.gpu(0, temperature_c=88), b.gpu(1, temperature_c=40)])
    first, second = results(run(hot, max_gpu_temperature_c=80), "gpu-temperature")
    assert first.status is FAIL and "88 C" in first.summary
    assert second.status is PASS
    assert only(run(hot), "gpu-temperature").status is SKIP


def test_persistence_mode():
    off = b.scan(gpus=[b.gpu(0, persistence_mode=False)])
    result = only(run(off, require_persistence_mode=True), "persistence-mode")
    assert result.status is FAIL and "nvidia-persistenced" in result.remedy
    assert result.finding_id == "persistence-mode-off"
    windows = b.with_host(off, os="Windows")  # the rule judges Linux only; so does the check
    assert only(run(windows, require_persistence_mode=True), "persistence-mode").status is SKIP
    on = b.scan(gpus=[b.gpu(0, persistence_mode=True)])
    assert only(run(on, require_persistence_mode=True), "persistence-mode").status is PASS
    unknown = b.scan(gpus=[b.gpu(0, persistence_mode=None)])
    assert only(run(unknown, require_persistence_mode=True),
                "persistence-mode").status is UNKNOWN
    assert only(run(off), "persistence-mode").status is SKIP


# --- free-vram -----------------------------------------------------------------------------


def test_free_vram_fails_below_the_share_and_names_the_holders():
    holder = b.process(4242, 30 * 1024, ["python", "train.py"], user="ci")
    scan = b.scan(gpus=[b.gpu(0, total=80 * GIB, used=31 * GIB)], processes=[holder])
    report = run(scan, min_free_vram_pct=70)
    result = only(report, "free-vram")
    assert result.status is FAIL and result.finding_id == "low-free-vram"
    assert "49.0 GiB of 80.0 GiB free (61.2%); the policy needs >= 70%" in result.summary
    assert "4242 (python, ci, GPU 0, 30.0 GiB)" in result.remedy
    assert result.evidence["holders"][0]["pid"] == 4242
    (finding,) = [f for f in report.findings if f.id == "low-free-vram"]  # the rule decided
    assert finding.evidence["min_free_pct"] == 70 and finding.subject == "gpu:0"
    assert only(run(scan, min_free_vram_pct=60), "free-vram").status is PASS
    assert only(run(scan), "free-vram").status is PASS  # the one default: 10%


def test_free_vram_default_is_the_scan_threshold_and_its_mode_relaxes_it():
    full = b.scan(gpus=[b.gpu(0, total=16 * GIB, used=15 * GIB)],
                      processes=[b.process(77, 15 * 1024, ["python", "serve.py"], user="ci")])
    assert CheckPolicy().min_free_vram_pct == Policy().min_free_vram_pct == 10
    result = only(run(full), "free-vram")
    assert result.status is FAIL and ">= 10%" in result.summary
    assert only(run(full, free_vram="warn"), "free-vram").status is WARN
    assert only(run(full, free_vram="ignore"), "free-vram").status is SKIP
    assert only(run(full, ignore=["low-free-vram"]), "free-vram").status is SKIP


def test_free_vram_absolute_minimum():
    scan = b.scan(gpus=[b.gpu(0, total=4 * GIB, used=300 * MIB)])
    assert only(run(scan, min_free_vram_gib=3.5), "free-vram").status is PASS
    result = only(run(scan, min_free_vram_gib=3.9), "free-vram")
    assert result.status is FAIL and ">= 3.9 GiB and >= 10%" in result.summary
    assert result.finding_id is None  # the absolute minimum is the check's own key
    assert "sudo fuser -v /dev/nvidia0" in result.remedy  # no process listed on the GPU


def test_free_vram_beyond_the_card_says_change_the_policy_or_the_gpu():
    """20 GiB asked of a 4 GiB card: no process to stop can free that, whoever holds memory."""
    for scan in (b.gtx1650_three_uvicorn(), b.scan(gpus=[b.gpu(0, total=4 * GIB, used=0)])):
        result = only(run(scan, min_free_vram_gib=20), "free-vram")
        assert result.status is FAIL and ">= 20 GiB" in result.summary
        assert "less than the 20 GiB the policy asks free" in result.remedy
        assert "Lower `min_free_vram_gib`" in result.remedy and "more memory" in result.remedy
        assert "stop the ones" not in result.remedy and "fuser" not in result.remedy


def test_free_vram_can_be_turned_off_and_is_unknown_without_a_reading():
    busy = b.scan(gpus=[b.gpu(0, total=8 * GIB, used=7680 * MIB)])
    assert only(run(busy), "free-vram").status is FAIL
    assert only(run(busy, min_free_vram_pct=0), "free-vram").status is PASS
    unread = b.scan(gpus=[b.gpu(0, memory_free_bytes=None)])
    assert only(run(unread), "free-vram").status is UNKNOWN
