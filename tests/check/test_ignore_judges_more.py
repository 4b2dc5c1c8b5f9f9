"""Ignoring the finding a check views, where the check judges more than that finding:
``nvidia-driver`` (driver versions) and ``free-vram`` (an absolute GiB minimum)."""

from __future__ import annotations

from gpu_audit.model import Driver
from tests import builders as b
from tests.check.support import (
    FAIL,
    GIB,
    PASS,
    SKIP,
    idle_h100_node,
    no_driver,
    only,
    results,
    run,
)


def test_ignoring_nvml_unavailable_still_skips_the_driver_check_on_a_cpu_runner():
    report = run(no_driver("library-not-found"), min_gpus=0, ignore=["nvml-unavailable"],
                 min_driver_version="550.54")
    driver = only(report, "nvidia-driver")
    assert driver.status is SKIP and driver.summary == "ignored by the policy"
    assert driver.evidence == {"ignored_by": "policy"}
    assert report.exit_code == 0


def test_ignoring_nvml_unavailable_keeps_judging_the_driver_version_where_nvml_answers():
    old = b.scan(driver=Driver("535.104.05", "12.535.104.05", "12.2"))
    report = run(old, min_driver_version="550.54", ignore=["nvml-unavailable"])
    driver = only(report, "nvidia-driver")
    assert driver.status is FAIL and "535.104.05 is older than 550.54" in driver.summary
    assert only(run(old, ignore=["nvml-unavailable"]), "nvidia-driver").status is PASS
    assert only(run(old, min_driver_version="550.54", ignore=["nvidia-driver"]),
                "nvidia-driver").status is SKIP


def test_ignoring_low_free_vram_keeps_the_gib_minimum():
    busy = b.scan(gpus=[b.gpu(0, total=80 * GIB, used=70 * GIB)])
    short = only(run(busy, min_free_vram_pct=50, min_free_vram_gib=20,
                     ignore=["low-free-vram"]), "free-vram")
    assert short.status is FAIL and short.summary.endswith("the policy needs >= 20 GiB")
    assert short.evidence["min_free_pct"] is None and short.finding_id is None
    enough = only(run(busy, min_free_vram_pct=50, min_free_vram_gib=5,
                      ignore=["low-free-vram"]), "free-vram")
    assert enough.status is PASS and "%" not in enough.summary.split("needs")[1]
    # not ignored: the share fails it
    assert only(run(busy, min_free_vram_pct=50, min_free_vram_gib=5), "free-vram").status is FAIL


def test_ignoring_low_free_vram_without_a_gib_minimum_skips_the_check():
    busy = idle_h100_node(2)
    report = run(busy, min_free_vram_pct=100, ignore=["low-free-vram"])
    (vram,) = results(report, "free-vram")
    assert vram.status is SKIP and vram.summary == "ignored by the policy"
