"""The torch check: the build, the scan's torch findings, the imports stage."""

from __future__ import annotations

import pytest

from gpu_audit.check.results import StageOutcome
from gpu_audit.model import Driver
from gpu_audit.rules import evaluate
from tests import builders as b
from tests.check.support import FAIL, PASS, SKIP, WARN, no_driver, only, run, with_torch

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
    scan = with_torch(b.scan(driver=Driver("550.90.07", "12.550.90.07", "12.4")), version,
                      variant, cuda)
    result = only(run(scan, require_torch_cuda=True), "torch-cuda")
    assert result.status is status, result.summary
    assert words in result.summary
    if status is not PASS:
        assert result.remedy


def test_torch_findings_are_judged_by_the_torch_check_not_repeated():
    driver = Driver("550.90.07", "12.550.90.07", "12.4")
    cpu = with_torch(b.scan(driver=driver), "2.5.1+cpu", "cpu", None)
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
    cpu = with_torch(b.scan(driver=driver), "2.5.1+cpu", "cpu", None)
    assert only(run(cpu), "torch-cuda").status is SKIP
    too_new = with_torch(b.scan(driver=driver), "2.9.0+cu130", "cuda", "13.0")
    assert only(run(too_new), "torch-cuda").status is WARN


def test_torch_cuda_follows_the_imports_stage():
    scan = with_torch(b.scan(), "2.5.1", None, None)  # unlabeled: unconfirmed by metadata
    passed = StageOutcome("imports", "passed", "CUDA initialised", 4.2, device="cuda:0")
    result = only(run(scan, require_torch_cuda=True, stages=[passed]), "torch-cuda")
    assert result.status is PASS and "round-tripped on cuda:0" in result.summary
    failed = StageOutcome("imports", "failed", "CUDA error: no CUDA-capable device is detected",
                          3.1, remedy="Check the driver with `nvidia-smi`.")
    result = only(run(scan, require_torch_cuda=True, stages=[failed]), "torch-cuda")
    assert result.status is FAIL and "no CUDA-capable device" in result.summary
    assert result.remedy == "Check the driver with `nvidia-smi`."


@pytest.mark.parametrize(("version", "variant"), [(None, None), ("2.5.1+rocm6.2", "rocm"),
                                                  ("2.5.1+cpu", "cpu")])
def test_scan_and_check_suggest_the_same_cuda_build_for_one_driver(version, variant):
    """A driver supporting CUDA 12.2 runs the cu121 build, whoever gives the advice."""
    driver = Driver("535.104.05", "12.535.104.05", "12.2")
    scan = with_torch(b.scan(driver=driver), version, variant, None)
    result = only(run(scan, require_torch_cuda=True), "torch-cuda")
    assert result.status is FAIL
    assert "download.pytorch.org/whl/cu121" in result.remedy, result.remedy
    assert "cu124" not in result.remedy
    for finding in evaluate(scan):
        if "download.pytorch.org" in finding.remedy:
            assert "whl/cu121" in finding.remedy and finding.remedy in result.remedy
