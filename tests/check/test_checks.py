"""Each check passing and failing on hand-built runners; the verdict and its exit code."""

from __future__ import annotations

import dataclasses
import re

import pytest

from gpu_audit.check.checks import all_checks
from gpu_audit.check.engine import judge, known_ids, scan_policy_for
from gpu_audit.check.policy import CheckPolicy
from gpu_audit.check.results import (
    CheckReport,
    CheckResult,
    CheckStatus,
    StageOutcome,
    Verdict,
    verdict,
    verdict_line,
)
from gpu_audit.config import Policy
from gpu_audit.model import AllocatorConfig, Driver, NvmlStatus
from tests import builders as b

GIB, MIB = b.GIB, b.MIB
PASS, WARN, FAIL, SKIP, UNKNOWN = (CheckStatus.PASS, CheckStatus.WARN, CheckStatus.FAIL,
                                   CheckStatus.SKIP, CheckStatus.UNKNOWN)


def run(snap, user: str | None = "ci", stages=None, **policy) -> CheckReport:
    return judge(snap, CheckPolicy(**policy), user=user, stages=stages)


def results(report: CheckReport, check_id: str) -> list[CheckResult]:
    found = [r for r in report.results if r.id == check_id]
    assert found, f"no result for {check_id}: {[r.id for r in report.results]}"
    return found


def only(report: CheckReport, check_id: str) -> CheckResult:
    (result,) = results(report, check_id)
    return result


def idle_h100_node(n: int = 8, **overrides) -> b.Snapshot:
    gpus = [b.gpu(i, total=81559 * MIB, used=530 * MIB, memory_reserved_bytes=530 * MIB,
                  persistence_mode=True) for i in range(n)]
    return b.snapshot(gpus=gpus, host=b.host(nvidia_pci_devices=n), **overrides)


def no_driver(cause: str = "driver-not-loaded") -> b.Snapshot:
    return b.snapshot(gpus=[], driver=None,
                      nvml=NvmlStatus(available=False, cause=cause,
                                      message="NVIDIA driver is not loaded"))


def with_torch(snap, version: str | None, variant: str | None, cuda: str | None):
    alloc = AllocatorConfig(source="env", pytorch_cuda_alloc_conf=None, pytorch_alloc_conf=None,
                            torch_version=version, torch_variant=variant,
                            torch_cuda_version=cuda)
    return dataclasses.replace(snap, allocator=alloc)


# --- the registry and the verdict --------------------------------------------------------


def test_every_check_has_a_kebab_id_a_title_and_documentation():
    checks = all_checks()
    assert len(checks) >= 14
    for check_id, spec in checks.items():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", check_id)
        assert spec.title and spec.summary and len(spec.doc.splitlines()) > 2, check_id


def test_a_check_id_equal_to_a_finding_id_is_the_check_that_judges_that_finding():
    from gpu_audit.check.checks import COVERED_FINDINGS
    from gpu_audit.rules import all_rules

    for shared in set(all_checks()) & set(all_rules()):
        assert COVERED_FINDINGS.get(shared) == shared
    assert set(all_checks()) | set(all_rules()) == known_ids()


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([PASS, SKIP], Verdict.OK),
        ([PASS, WARN], Verdict.WARNING),
        ([PASS, WARN, UNKNOWN], Verdict.UNKNOWN),
        ([WARN, UNKNOWN, FAIL], Verdict.CRITICAL),
        ([], Verdict.OK),
    ],
)
def test_verdict_follows_the_monitoring_plugin_order(statuses, expected):
    rs = [CheckResult("x", "host", s, "X", "x") for s in statuses]
    assert verdict(rs) is expected
    assert expected.exit_code == {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}[
        expected.name]


def test_a_fit_runner_passes_with_exit_0_and_a_nagios_status_line():
    report = run(idle_h100_node(), min_gpus=8, gpu_name="H100", min_gpu_memory_gib=79,
                 require_persistence_mode=True, max_gpu_temperature_c=80)
    bad = [r for r in report.results if r.status not in (PASS, SKIP)]
    assert bad == []
    assert report.exit_code == 0
    line = verdict_line(report)
    assert line.startswith("CHECK OK: ")
    assert re.search(r"\| fail=0;;;0 unknown=0;;;0 warn=0;;;0 pass=\d+;;;0 skip=\d+;;;0$", line)


def test_status_line_names_the_failed_checks():
    report = run(idle_h100_node(1), min_gpus=2)
    assert verdict_line(report).startswith("CHECK CRITICAL: gpu-count on node1")


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
    snap = b.snapshot(driver=Driver("535.104.05", "12.535.104.05", "12.2"))
    old = only(run(snap, min_driver_version="550.54.15"), "nvidia-driver")
    assert old.status is FAIL and "driver 535.104.05 is older than 550.54.15" in old.summary
    cuda = only(run(snap, min_cuda_driver_version="12.4"), "nvidia-driver")
    assert cuda.status is FAIL and "12.2 is older than 12.4" in cuda.summary
    ok = only(run(snap, min_driver_version="535.104", min_cuda_driver_version="12.2"),
              "nvidia-driver")
    assert ok.status is PASS


def test_unreported_driver_version_with_a_minimum_is_unknown():
    snap = b.snapshot(driver=Driver(None, None, None))
    result = only(run(snap, min_driver_version="535"), "nvidia-driver")
    assert result.status is UNKNOWN
    assert run(snap, min_driver_version="535").exit_code == 3


# --- gpu-count -----------------------------------------------------------------------------


def test_gpu_count_passes_at_the_minimum_and_fails_below():
    assert only(run(idle_h100_node(8), min_gpus=8), "gpu-count").status is PASS
    short = only(run(idle_h100_node(4), min_gpus=8), "gpu-count")
    assert short.status is FAIL
    assert "4 GPUs (NVIDIA H100 80GB HBM3); the policy needs at least 8" in short.summary
    assert short.evidence["gpus"] == 4 and short.evidence["min_gpus"] == 8


def test_a_lost_gpu_fails_even_when_enough_remain():
    snap = idle_h100_node(2)
    snap = dataclasses.replace(snap, gpus=[snap.gpus[0], b.Gpu(index=1, lost=True)])
    report = run(snap, min_gpus=1)
    result = only(report, "gpu-count")
    assert result.status is FAIL and "GPU 1 lost" in result.summary
    assert "nvidia-smi -r -i 1" in result.remedy
    assert [r.status for r in results(report, "free-vram")] == [PASS, SKIP]


def test_devices_on_the_pci_bus_the_driver_misses_warn_outside_containers():
    snap = b.with_host(idle_h100_node(7), nvidia_pci_devices=8)
    assert only(run(snap, min_gpus=7), "gpu-count").status is WARN
    contained = b.with_host(snap, container="docker")
    assert only(run(contained, min_gpus=7), "gpu-count").status is PASS
    missing = only(run(snap, min_gpus=8), "gpu-count")
    assert missing.status is FAIL and "8 NVIDIA devices are on the PCI bus" in missing.remedy


# --- gpu-name, gpu-memory, temperature, persistence ---------------------------------------


def test_gpu_name_is_checked_per_gpu():
    snap = b.snapshot(gpus=[b.gpu(0), b.gpu(1, name="NVIDIA A10G")])
    report = run(snap, gpu_name="H100|A100")
    first, second = results(report, "gpu-name")
    assert (first.subject, first.status) == ("gpu:0", PASS)
    assert (second.subject, second.status) == ("gpu:1", FAIL)
    assert "NVIDIA A10G does not match /H100|A100/" in second.summary
    assert only(run(snap), "gpu-name").status is SKIP
    unnamed = b.snapshot(gpus=[b.gpu(0, name=None)])
    assert only(run(unnamed, gpu_name="H100"), "gpu-name").status is UNKNOWN


def test_gpu_memory_size():
    snap = b.snapshot(gpus=[b.gpu(0, total=24564 * MIB, used=300 * MIB)])
    assert only(run(snap, min_gpu_memory_gib=23.5), "gpu-memory").status is PASS
    small = only(run(snap, min_gpu_memory_gib=40), "gpu-memory")
    assert small.status is FAIL and "24.0 GiB total; the policy needs at least 40 GiB" in \
        small.summary
    unknown = b.snapshot(gpus=[b.gpu(0, memory_total_bytes=None)])
    assert only(run(unknown, min_gpu_memory_gib=40), "gpu-memory").status is UNKNOWN


def test_gpu_temperature():
    hot = b.snapshot(gpus=[b.gpu(0, temperature_c=88), b.gpu(1, temperature_c=40)])
    first, second = results(run(hot, max_gpu_temperature_c=80), "gpu-temperature")
    assert first.status is FAIL and "88 C" in first.summary
    assert second.status is PASS
    assert only(run(hot), "gpu-temperature").status is SKIP


def test_persistence_mode():
    off = b.snapshot(gpus=[b.gpu(0, persistence_mode=False)])
    result = only(run(off, require_persistence_mode=True), "persistence-mode")
    assert result.status is FAIL and "nvidia-persistenced" in result.remedy
    on = b.snapshot(gpus=[b.gpu(0, persistence_mode=True)])
    assert only(run(on, require_persistence_mode=True), "persistence-mode").status is PASS
    unknown = b.snapshot(gpus=[b.gpu(0, persistence_mode=None)])
    assert only(run(unknown, require_persistence_mode=True),
                "persistence-mode").status is UNKNOWN
    assert only(run(off), "persistence-mode").status is SKIP


# --- free-vram -----------------------------------------------------------------------------


def test_free_vram_fails_below_the_share_and_names_the_holders():
    holder = b.process(4242, 30 * 1024, ["python", "train.py"], user="ci")
    snap = b.snapshot(gpus=[b.gpu(0, total=80 * GIB, used=31 * GIB)], processes=[holder])
    result = only(run(snap), "free-vram")
    assert result.status is FAIL
    assert "49.0 GiB of 80.0 GiB free (61.2%); the policy needs >= 70%" in result.summary
    assert "4242 (python, ci, GPU 0, 30.0 GiB)" in result.remedy
    assert result.evidence["holders"][0]["pid"] == 4242
    assert only(run(snap, min_free_vram_pct=60), "free-vram").status is PASS


def test_free_vram_absolute_minimum():
    snap = b.snapshot(gpus=[b.gpu(0, total=4 * GIB, used=300 * MIB)])
    assert only(run(snap, min_free_vram_gib=3.5), "free-vram").status is PASS
    result = only(run(snap, min_free_vram_gib=6), "free-vram")
    assert result.status is FAIL and ">= 6 GiB and >= 70%" in result.summary
    assert "sudo fuser -v /dev/nvidia0" in result.remedy  # no process listed on the GPU


def test_free_vram_can_be_turned_off_and_is_unknown_without_a_reading():
    busy = b.snapshot(gpus=[b.gpu(0, total=8 * GIB, used=7 * GIB)])
    assert only(run(busy, min_free_vram_pct=0), "free-vram").status is PASS
    unread = b.snapshot(gpus=[b.gpu(0, memory_free_bytes=None)])
    assert only(run(unread), "free-vram").status is UNKNOWN


# --- swap ----------------------------------------------------------------------------------


def test_swap_over_the_limit_fails_with_the_scan_rule_remedy():
    snap = b.with_host(b.snapshot(), swap_used_bytes=3 * GIB)
    result = only(run(snap), "swap")
    assert result.status is FAIL and "3.0 GiB of swap in use" in result.summary
    assert result.finding_id == "swap-pressure" and "swapoff" in result.remedy
    assert only(run(snap, max_swap_used_gib=4), "swap").status is PASS


def test_swap_edge_cases():
    none = b.with_host(b.snapshot(), swap_total_bytes=0, swap_used_bytes=0)
    assert only(run(none), "swap").summary == "no swap configured"
    unread = b.with_host(b.snapshot(), swap_used_bytes=None)
    assert only(run(unread), "swap").status is UNKNOWN


# --- processes -------------------------------------------------------------------------------


def test_duplicate_backends_fail_by_default_and_follow_the_policy():
    snap = b.gtx1650_three_uvicorn()
    result = only(run(snap, user="alice"), "duplicate-backends")
    assert result.status is FAIL and result.finding_id == "duplicate-backend"
    assert "kill 2202 2303" in result.remedy
    assert only(run(snap, user="alice", duplicate_backends="warn"),
                "duplicate-backends").status is WARN
    assert only(run(snap, user="alice", duplicate_backends="ignore"),
                "duplicate-backends").status is SKIP
    assert only(run(b.snapshot()), "duplicate-backends").status is PASS


def test_unattributed_vram_warns_by_default():
    snap = b.snapshot(gpus=[b.gpu(0, total=16 * GIB, used=6 * GIB)])
    result = only(run(snap), "unattributed-vram")
    assert result.status is WARN and result.subject == "gpu:0"
    assert "fuser" in result.remedy
    assert only(run(snap, unattributed_vram="fail"), "unattributed-vram").status is FAIL
    assert only(run(b.snapshot()), "unattributed-vram").status is PASS


def test_foreign_processes_are_other_users_and_unseen_ones_not_the_display():
    procs = [
        b.process(1201, 38, ["/usr/lib/xorg/Xorg"], type="graphics", user="root"),
        b.process(3001, 2048, ["python", "serve.py"], user="bob"),
        b.process(3002, 1024, None, user=None, visible=False,
                  note="not visible from this container's PID namespace"),
        b.process(3003, 512, ["python", "mine.py"], user="ci"),
    ]
    used = sum(p.used_memory_bytes for p in procs)
    snap = b.snapshot(gpus=[b.gpu(0, used=used)], processes=procs,
                      host=b.host(container="docker"))
    report = run(snap, user="ci")
    foreign = only(report, "foreign-processes")
    assert foreign.status is FAIL
    assert [p["pid"] for p in foreign.evidence["processes"]] == [3001, 3002]
    assert "3001 (python, bob, GPU 0, 2.0 GiB)" in foreign.summary
    assert "3002 (?, not visible" in foreign.summary
    own = only(report, "own-processes")
    assert own.status is WARN and [p["pid"] for p in own.evidence["processes"]] == [3003]
    assert "kill 3003" in own.remedy
    strict = run(snap, user="ci", own_processes="fail", foreign_processes="warn")
    assert only(strict, "own-processes").status is FAIL
    assert only(strict, "foreign-processes").status is WARN


def test_outside_a_container_an_unseen_pid_is_gone_not_foreign():
    gone = b.process(3002, 1024, None, user=None, visible=False, note="no such process")
    snap = b.snapshot(gpus=[b.gpu(0, used=1324 * MIB)], processes=[gone])
    report = run(snap, user="ci")
    assert only(report, "foreign-processes").status is PASS
    assert only(report, "gpu-process-gone").status is WARN


def test_an_idle_runner_has_neither_foreign_nor_own_processes():
    display = b.process(1201, 38, ["/usr/lib/xorg/Xorg"], type="graphics", user="root")
    report = run(b.snapshot(processes=[display]), user="ci")
    assert only(report, "foreign-processes").status is PASS
    assert only(report, "own-processes").status is PASS


def test_process_checks_skip_without_gpu_readings():
    report = run(no_driver())
    for check_id in ("foreign-processes", "own-processes", "duplicate-backends",
                     "unattributed-vram"):
        assert only(report, check_id).status is SKIP, check_id


# --- torch-cuda ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "variant", "cuda", "status", "words"),
    [
        ("2.5.1+cu124", "cuda", "12.4", PASS, "torch 2.5.1+cu124 (CUDA 12.4 build)"),
        (None, None, None, FAIL, "torch is not installed"),
        ("2.5.1+cpu", "cpu", None, FAIL, "is a CPU-only build on a host with 1 NVIDIA GPU"),
        ("2.5.1+rocm6.2", "rocm", None, FAIL, "is a ROCm build"),
        ("2.9.0+cu130", "cuda", "13.0", FAIL, "torch needs CUDA 13.0; the driver supports 12.4"),
        ("2.6.0+cu128", "cuda", "12.8", WARN, "minor-version compatibility"),
        ("2.5.1", None, None, WARN, "no build label"),
    ],
)
def test_torch_cuda_when_required(version, variant, cuda, status, words):
    snap = with_torch(b.snapshot(driver=Driver("550.90.07", "12.550.90.07", "12.4")), version,
                      variant, cuda)
    result = only(run(snap, require_torch_cuda=True), "torch-cuda")
    assert result.status is status, result.summary
    assert words in result.summary
    if status is not PASS:
        assert result.remedy


def test_torch_findings_are_judged_by_the_torch_check_not_repeated():
    driver = Driver("550.90.07", "12.550.90.07", "12.4")
    cpu = with_torch(b.snapshot(driver=driver), "2.5.1+cpu", "cpu", None)
    report = run(cpu, require_torch_cuda=True)
    result = only(report, "torch-cuda")
    assert result.finding_id == "torch-cpu-only" and "--index-url" in result.remedy
    assert not [r for r in report.results if r.id == "torch-cpu-only"]
    no_gpu = with_torch(b.with_host(no_driver("library-not-found"), nvidia_pci_devices=0),
                        "2.5.1+cpu", "cpu", None)
    alone = only(run(no_gpu, require_torch_cuda=True), "torch-cuda")
    assert alone.status is FAIL and "is a CPU-only build, not a CUDA build" in alone.summary


def test_torch_cuda_not_required_is_skipped_unless_the_build_cannot_run():
    driver = Driver("550.90.07", "12.550.90.07", "12.4")
    cpu = with_torch(b.snapshot(driver=driver), "2.5.1+cpu", "cpu", None)
    assert only(run(cpu), "torch-cuda").status is SKIP
    too_new = with_torch(b.snapshot(driver=driver), "2.9.0+cu130", "cuda", "13.0")
    assert only(run(too_new), "torch-cuda").status is WARN


def test_torch_cuda_follows_the_imports_stage():
    snap = with_torch(b.snapshot(), "2.5.1", None, None)  # unlabeled: unconfirmed by metadata
    passed = StageOutcome("imports", "passed", "CUDA initialised", 4.2, device="cuda:0")
    result = only(run(snap, require_torch_cuda=True, stages=[passed]), "torch-cuda")
    assert result.status is PASS and "round-tripped on cuda:0" in result.summary
    failed = StageOutcome("imports", "failed", "CUDA error: no CUDA-capable device is detected",
                          3.1, remedy="Check the driver with `nvidia-smi`.")
    result = only(run(snap, require_torch_cuda=True, stages=[failed]), "torch-cuda")
    assert result.status is FAIL and "no CUDA-capable device" in result.summary
    assert result.remedy == "Check the driver with `nvidia-smi`."


# --- stages ----------------------------------------------------------------------------------


def test_stage_results_map_onto_checks_with_their_durations():
    stages = [
        StageOutcome("imports", "passed", "torch 2.5.1 imported; CUDA initialised", 5.5,
                     device="cuda:0", evidence={"torch_version": "2.5.1"}),
        StageOutcome("smoke", "failed", "cycle 2 of 3 ran out of memory", 12.0,
                     remedy="Free GPU memory first."),
    ]
    report = run(b.snapshot(), stages=stages)
    imports, smoke = only(report, "stage-imports"), only(report, "stage-smoke")
    assert (imports.status, imports.subject, imports.duration_s) == (PASS, "stage:imports", 5.5)
    assert imports.evidence["torch_version"] == "2.5.1"
    assert (smoke.status, smoke.remedy) == (FAIL, "Free GPU memory first.")
    assert report.exit_code == 2


def test_stage_that_could_not_run_is_unknown_and_unrequested_stages_are_absent():
    broken = StageOutcome("imports", "error", "the stage runner crashed", None)
    report = run(b.snapshot(), stages=[broken])
    assert only(report, "stage-imports").status is UNKNOWN
    assert not [r for r in report.results if r.id == "stage-smoke"]
    assert not [r for r in run(b.snapshot()).results if r.id.startswith("stage-")]


# --- other scan findings, ignore ------------------------------------------------------------


def test_other_findings_map_by_severity():
    starved = b.with_host(b.snapshot(), memory_total_bytes=64 * GIB,
                          memory_available_bytes=256 * MIB)  # low-host-memory at ERROR
    result = only(run(starved), "low-host-memory")
    assert result.status is FAIL and result.finding_id == "low-host-memory"
    assert result.summary.startswith("error: ")
    assert not [r for r in run(starved).results if r.id == "scan-findings"]
    relaxed = run(starved, fail_on="critical")
    assert only(relaxed, "low-host-memory").status is WARN
    quiet = run(starved, fail_on="critical", warn_on="critical")
    assert only(quiet, "scan-findings").status is PASS
    assert "low-host-memory" in only(quiet, "scan-findings").evidence["below_threshold"]


def test_clean_runner_reports_no_other_findings():
    result = only(run(b.snapshot()), "scan-findings")
    assert result.status is PASS
    assert result.summary.startswith("no other finding at or above warning")


def test_ignore_drops_findings_and_checks_and_their_covered_findings():
    starved = b.with_host(b.snapshot(), memory_available_bytes=256 * MIB,
                          swap_used_bytes=5 * GIB)
    report = run(starved, ignore=["low-host-memory", "swap-pressure", "gpu-count"])
    assert not [f for f in report.findings if f.id in ("low-host-memory", "swap-pressure")]
    assert only(report, "swap").status is SKIP
    assert only(report, "swap").summary == "ignored by the policy"
    assert only(report, "gpu-count").status is SKIP
    assert report.exit_code == 0


def test_ignoring_one_torch_finding_keeps_the_torch_check():
    driver = Driver("550.90.07", "12.550.90.07", "12.4")
    too_new = with_torch(b.snapshot(driver=driver), "2.6.0+cu128", "cuda", "12.8")
    report = run(too_new, require_torch_cuda=True, ignore=["driver-too-old"])
    assert only(report, "torch-cuda").status is PASS
    assert only(run(too_new, require_torch_cuda=True), "torch-cuda").status is WARN


def test_findings_covered_by_a_check_are_not_reported_twice():
    snap = b.with_host(b.snapshot(), swap_used_bytes=5 * GIB)
    report = run(snap)
    assert [f.id for f in report.findings].count("swap-pressure") == 1
    assert not [r for r in report.results if r.id == "swap-pressure"]
    assert only(report, "swap").status is FAIL


def test_check_thresholds_reach_the_scan_rules():
    scan = scan_policy_for(CheckPolicy(max_swap_used_gib=0.5, min_free_vram_pct=90,
                                       fail_on="warning", ignore=["gpu-name"]),
                           Policy(ignore=["swap-pressure"], unattributed_vram_allowance_mib=64))
    assert scan.max_swap_used_gib == 0.5 and scan.min_free_vram_pct == 90
    assert scan.fail_on == "warning" and scan.unattributed_vram_allowance_mib == 64
    assert set(scan.ignore) == {"gpu-name", "swap-pressure"}
