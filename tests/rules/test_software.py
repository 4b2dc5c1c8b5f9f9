"""Software compatibility findings, from hand-built snapshots (no I/O)."""

from __future__ import annotations

import msgspec
import pytest

from gpu_audit.config import Policy
from gpu_audit.knowledge.torch_builds import build_for_driver
from gpu_audit.model import AllocatorConfig, Driver, Scan, Severity, TorchDevice, TorchProbe
from gpu_audit.rules.software import (
    driver_too_old,
    no_kernel_image,
    runs_on,
    torch_cpu_only,
    torch_cuda_unavailable,
    torch_import_failed,
)
from tests import builders as b


def installed(torch: str | None, variant: str | None = None, cuda: str | None = None,
              driver_cuda: str = "12.4", **overrides) -> Scan:
    alloc = AllocatorConfig(source="env", pytorch_cuda_alloc_conf=None, pytorch_alloc_conf=None,
                            torch_version=torch, torch_variant=variant, torch_cuda_version=cuda)
    overrides.setdefault("driver", Driver("550.90.07", "12.550.90.07", driver_cuda))
    return b.scan(allocator=alloc, **overrides)


def probed(scan: Scan, **probe) -> Scan:
    return msgspec.structs.replace(scan, torch_probe=TorchProbe(python="/venv/bin/python", **probe))


def run(rule, scan: Scan):
    return list(rule(scan, Policy()))


# ------------------------------------------------------------------------------ driver-too-old


def test_newer_major_cuda_than_the_driver_is_an_error():
    (finding,) = run(driver_too_old, installed("2.9.0+cu130", "cuda", "13.0", driver_cuda="12.4"))
    assert finding.severity is None  # error
    assert finding.evidence["torch_cuda_source"] == "package metadata"
    assert "--index-url https://download.pytorch.org/whl/cu124" in finding.remedy
    assert "torch==2.9.0" in finding.remedy


def test_newer_minor_cuda_runs_under_minor_version_compatibility_as_a_warning():
    (finding,) = run(driver_too_old, installed("2.7.1+cu128", "cuda", "12.8", driver_cuda="12.2"))
    assert finding.severity == Severity.WARNING
    assert "minor-version" in finding.detail


def test_driver_new_enough_or_versions_unknown_is_quiet():
    assert run(driver_too_old, installed("2.5.1+cu124", "cuda", "12.4", driver_cuda="12.4")) == []
    assert run(driver_too_old, installed("2.5.1+cu118", "cuda", "11.8", driver_cuda="12.4")) == []
    assert run(driver_too_old, installed("2.13.0+cpu", "cpu")) == []
    assert run(driver_too_old, installed(None)) == []
    assert run(driver_too_old, installed("2.9.0+cu130", "cuda", "13.0", driver=None)) == []


def test_the_probe_knows_the_cuda_of_an_unlabelled_build():
    scan = probed(installed("2.9.0", None, None, driver_cuda="12.8"),
                  torch_version="2.9.0", cuda_version="13.0")
    (finding,) = run(driver_too_old, scan)
    assert finding.evidence["torch_cuda_source"] == "torch.version.cuda"


def test_build_for_driver_picks_the_newest_published_build_it_can_run():
    assert build_for_driver((12, 4)) == "cu124"
    assert build_for_driver((12, 5)) == "cu124"
    assert build_for_driver((13, 1)) == "cu130"
    assert build_for_driver((11, 4)) is None


# ----------------------------------------------------------------------------- torch-cpu-only


def test_cpu_build_on_a_gpu_host_is_an_error_with_a_cuda_index():
    (finding,) = run(torch_cpu_only, installed("2.5.1+cpu", "cpu", driver_cuda="12.6"))
    assert finding.severity is None
    assert "pytorch.org/whl/cu126" in finding.remedy


def test_cpu_build_is_fine_without_gpus_and_cuda_builds_are_fine():
    no_gpu = installed("2.5.1+cpu", "cpu", gpus=[])
    assert run(torch_cpu_only, b.with_host(no_gpu, nvidia_pci_devices=0)) == []
    assert run(torch_cpu_only, installed("2.5.1+cu124", "cuda", "12.4")) == []
    assert run(torch_cpu_only, installed(None)) == []


def test_gpus_seen_only_on_the_pci_bus_still_count():
    scan = b.with_host(installed("2.5.1+cpu", "cpu", gpus=[]), nvidia_pci_devices=2)
    (finding,) = run(torch_cpu_only, scan)
    assert finding.evidence["gpu_count"] == 2


def test_probe_overrides_the_package_label():
    # An unlabelled wheel looked like CUDA from its metadata, torch says otherwise.
    scan = probed(installed("2.5.1", "cuda", "12.4"), torch_version="2.5.1", cuda_version=None)
    (finding,) = run(torch_cpu_only, scan)
    assert finding.evidence["source"] == "torch.version.cuda is None"


# ---------------------------------------------------------------------------- no-kernel-image


@pytest.mark.parametrize("entry,device,ok", [
    ("sm_80", 86, True),  # same major, newer minor
    ("sm_86", 80, False),  # older minor cannot run newer-minor code
    ("sm_90", 100, False),  # another major
    ("compute_90", 120, True),  # PTX is compiled for newer devices
    ("compute_90", 86, False),
    ("sm_90a", 90, True),
    ("sm_90a", 100, False),  # arch-specific code runs on exactly that version
    ("sm_80", 87, False),  # Jetson Orin runs only its own binaries
    ("sm_87", 87, True),
    ("sm_100f", 103, True),
    ("bogus", 80, False),
])
def test_runs_on_follows_nvidia_compatibility(entry, device, ok):
    assert runs_on(entry, device) is ok


def gtx1080_on_new_build() -> Scan:
    scan = installed("2.8.0+cu128", "cuda", "12.8", driver_cuda="12.8",
                     gpus=[b.gpu(0, name="NVIDIA GeForce GTX 1080", total=8 * b.GIB,
                                 compute_capability="6.1")])
    return probed(scan, torch_version="2.8.0+cu128", cuda_version="12.8", cuda_available=True,
                  arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120",
                             "compute_120"],
                  devices=[TorchDevice(0, "NVIDIA GeForce GTX 1080", "6.1", 8 * b.GIB,
                                       "GPU-00000000-0000-0000-0000-000000000000")])


def test_pascal_gpu_on_a_build_without_sm_61_has_no_kernel_image():
    (finding,) = run(no_kernel_image, gtx1080_on_new_build())
    assert finding.subject == "gpu:0"
    assert "sm_61" in finding.title
    assert finding.evidence["arch_list"][0] == "sm_75"


def test_supported_gpu_or_no_probe_is_quiet():
    fine = gtx1080_on_new_build()
    fine = msgspec.structs.replace(fine, torch_probe=msgspec.structs.replace(
        fine.torch_probe, arch_list=["sm_50", "sm_60", "sm_70", "sm_75", "sm_80"]))
    assert run(no_kernel_image, fine) == []
    assert run(no_kernel_image, installed("2.8.0+cu128", "cuda", "12.8")) == []


def test_torch_device_is_matched_to_nvml_by_uuid():
    scan = gtx1080_on_new_build()
    gpus = [b.gpu(0), b.gpu(1, name="NVIDIA GeForce GTX 1080", uuid="GPU-feed")]
    device = TorchDevice(0, "NVIDIA GeForce GTX 1080", "6.1", None, "GPU-FEED")
    scan = msgspec.structs.replace(scan, gpus=gpus, torch_probe=msgspec.structs.replace(
        scan.torch_probe, devices=[device]))
    (finding,) = run(no_kernel_image, scan)
    assert finding.subject == "gpu:1"


# -------------------------------------------------------------------- torch-cuda-unavailable


def test_cuda_build_that_cannot_reach_the_gpus():
    scan = probed(installed("2.5.1+cu124", "cuda", "12.4"), torch_version="2.5.1+cu124",
                  cuda_version="12.4", cuda_available=False,
                  warnings=["CUDA initialization: The NVIDIA driver on your system is too old"])
    (finding,) = run(torch_cuda_unavailable, scan)
    assert "driver on your system is too old" in finding.detail


def test_cuda_available_cpu_build_or_no_gpu_is_quiet():
    ok = probed(installed("2.5.1+cu124"), torch_version="2.5.1+cu124", cuda_version="12.4",
                cuda_available=True)
    assert run(torch_cuda_unavailable, ok) == []
    cpu = probed(installed("2.5.1+cpu"), torch_version="2.5.1+cpu", cuda_available=False)
    assert run(torch_cuda_unavailable, cpu) == []
    no_gpu = probed(installed("2.5.1+cu124", gpus=[]), torch_version="2.5.1+cu124",
                    cuda_version="12.4", cuda_available=False)
    assert run(torch_cuda_unavailable, no_gpu) == []


# ------------------------------------------------------------------------- torch-import-failed


def test_import_failure_is_reported_with_the_interpreter():
    scan = probed(installed("2.5.1+cu124"),
                  import_error="ImportError: libcudnn.so.9: cannot open shared object file")
    (finding,) = run(torch_import_failed, scan)
    assert "libcudnn.so.9" in finding.title
    assert finding.remedy.startswith("/venv/bin/python -c 'import torch'")
    assert run(torch_import_failed, probed(installed("2.5.1"), torch_version="2.5.1")) == []
    timed_out = probed(installed("2.5.1"), error="timed out after 120 s")
    assert run(torch_import_failed, timed_out) == []
