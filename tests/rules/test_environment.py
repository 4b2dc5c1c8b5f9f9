"""Environment lint findings, from hand-built snapshots (no I/O)."""

from __future__ import annotations

import pytest

from gpu_audit.config import Policy
from gpu_audit.model import AllocatorConfig, NvmlStatus, Scan, Severity
from gpu_audit.rules.environment import (
    caching_allocator_disabled,
    device_order_mismatch,
    interpret_visible_devices,
    launch_blocking,
    profiler_injection,
    pytorch_no_nvml,
    visible_devices_missing,
)
from tests import builders as b


def shell(environment: dict[str, str], gpus: list | None = None, **overrides) -> Scan:
    """A host whose job environment holds ``environment`` (one H100 unless ``gpus``)."""
    alloc = AllocatorConfig(source="env", pytorch_cuda_alloc_conf=None, pytorch_alloc_conf=None,
                            torch_version="2.13.0+cu126", environment=environment)
    return b.scan(gpus=gpus, allocator=alloc, **overrides)


def run(rule, scan: Scan):
    return list(rule(scan, Policy()))


def eight_h100() -> list:
    return [b.gpu(i) for i in range(8)]


# --------------------------------------------------------------------------------- simple vars


def test_pytorch_no_nvml_is_reported_whatever_its_value():
    for value in ("1", "0", ""):
        (finding,) = run(pytorch_no_nvml, shell({"PYTORCH_NO_NVML": value}))
        assert finding.remedy.startswith("unset PYTORCH_NO_NVML")
        assert finding.evidence == {"PYTORCH_NO_NVML": value}
    assert run(pytorch_no_nvml, shell({})) == []


def test_no_cuda_memory_caching_counts_even_when_zero():
    (finding,) = run(caching_allocator_disabled, shell({"PYTORCH_NO_CUDA_MEMORY_CACHING": "0"}))
    assert "0 included" in finding.detail
    (finding,) = run(caching_allocator_disabled, shell({"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}))
    assert "0 included" not in finding.detail
    assert run(caching_allocator_disabled, shell({"PYTORCH_CUDA_ALLOC_CONF_X": "1"})) == []


def test_launch_blocking_only_when_one():
    (finding,) = run(launch_blocking, shell({"CUDA_LAUNCH_BLOCKING": "1"}))
    assert finding.remedy == "unset CUDA_LAUNCH_BLOCKING"
    assert run(launch_blocking, shell({"CUDA_LAUNCH_BLOCKING": "0"})) == []
    assert run(launch_blocking, shell({})) == []


def test_no_environment_at_all_is_quiet():
    scan = b.scan(allocator=None)
    for rule in (pytorch_no_nvml, caching_allocator_disabled, launch_blocking, profiler_injection,
                 visible_devices_missing, device_order_mismatch):
        assert run(rule, scan) == []


# -------------------------------------------------------------------------- CUDA_VISIBLE_DEVICES


@pytest.mark.parametrize("value,count,visible,stops", [
    ("0,1", 8, [0, 1], False),
    ("1gpu,2", 8, [1, 2], False),  # read like strtoul
    ("0,9,1", 8, [0], True),  # stops at the first index beyond the GPUs present
    ("0,-1,1", 8, [0], True),
    ("NoDevFiles", 8, [], True),
    ("0,0", 8, [], True),  # a repeated device empties the list
    ("", 8, [], True),
])
def test_visible_devices_read_like_cuda(value, count, visible, stops):
    seen = interpret_visible_devices(value, [b.gpu(i) for i in range(count)], count)
    assert seen.visible == visible
    assert (seen.reason is not None) == stops


def test_visible_devices_by_uuid_prefix():
    gpus = [b.gpu(0, uuid="GPU-aaaa1111-0000"), b.gpu(1, uuid="GPU-aaaa2222-0000")]
    assert interpret_visible_devices("GPU-aaaa2", gpus, 2).visible == [1]
    ambiguous = interpret_visible_devices("GPU-aaaa", gpus, 2)
    assert ambiguous.visible == [] and "more than one" in ambiguous.reason
    missing = interpret_visible_devices("GPU-aaaa1,GPU-ffff", gpus, 2)
    assert missing.visible == [0] and missing.dropped == ["GPU-ffff"]


def test_visible_devices_beyond_the_host_is_an_error():
    (finding,) = run(visible_devices_missing, shell({"CUDA_VISIBLE_DEVICES": "0,1,2,3"},
                                                    gpus=[b.gpu(0), b.gpu(1)]))
    assert finding.severity is None  # error
    assert finding.evidence["visible"] == [0, 1]
    assert finding.evidence["ignored_entries"] == ["2", "3"]
    assert finding.remedy == "export CUDA_VISIBLE_DEVICES=0,1"


def test_visible_devices_empty_hides_everything():
    (finding,) = run(visible_devices_missing, shell({"CUDA_VISIBLE_DEVICES": ""}))
    assert "0 of 1" in finding.title
    assert finding.remedy == "export CUDA_VISIBLE_DEVICES=0"


def test_visible_devices_valid_or_uncheckable_is_quiet():
    assert run(visible_devices_missing, shell({"CUDA_VISIBLE_DEVICES": "0"})) == []
    assert run(visible_devices_missing, shell({"CUDA_VISIBLE_DEVICES": "MIG-1234"})) == []
    # NVML down and no PCI count: nothing to check against
    blind = shell({"CUDA_VISIBLE_DEVICES": "5"}, gpus=[],
                  nvml=NvmlStatus(False, "driver-not-loaded"))
    blind = b.with_host(blind, nvidia_pci_devices=None)
    assert run(visible_devices_missing, blind) == []


def test_visible_devices_checked_against_pci_count_when_nvml_is_down():
    scan = shell({"CUDA_VISIBLE_DEVICES": "3"}, gpus=[], nvml=NvmlStatus(False, "version-mismatch"))
    scan = b.with_host(scan, nvidia_pci_devices=2)
    (finding,) = run(visible_devices_missing, scan)
    assert finding.evidence["gpu_count"] == 2


# ---------------------------------------------------------------------------- CUDA_DEVICE_ORDER


def test_device_order_on_a_mixed_host_is_a_warning():
    gpus = [b.gpu(0, name="NVIDIA RTX A6000"), b.gpu(1, name="NVIDIA GeForce RTX 3090")]
    (finding,) = run(device_order_mismatch, shell({"CUDA_VISIBLE_DEVICES": "1"}, gpus=gpus))
    assert finding.severity is None  # warning
    assert finding.remedy == "export CUDA_DEVICE_ORDER=PCI_BUS_ID"


def test_device_order_on_identical_gpus_is_info():
    (finding,) = run(device_order_mismatch,
                     shell({"CUDA_VISIBLE_DEVICES": "2,3"}, gpus=eight_h100()))
    assert finding.severity == Severity.INFO


def test_device_order_is_quiet_when_pci_ordered_single_gpu_or_uuids():
    ordered = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert run(device_order_mismatch, shell(ordered, gpus=eight_h100())) == []
    assert run(device_order_mismatch, shell({"CUDA_VISIBLE_DEVICES": "0"})) == []
    by_uuid = {"CUDA_VISIBLE_DEVICES": "GPU-00000001"}
    assert run(device_order_mismatch, shell(by_uuid, gpus=eight_h100())) == []
    assert run(device_order_mismatch, shell({}, gpus=eight_h100())) == []


# ---------------------------------------------------------------------------- profiler injection


def test_profiler_hooks_are_listed_and_unset_together():
    env = {"CUDA_INJECTION64_PATH": "/opt/nvidia/nsight-systems/libToolsInjection64.so",
           "CUDA_DEVICE_WAITS_ON_EXCEPTION": "1",
           "LD_PRELOAD": "/usr/lib/libjemalloc.so:/usr/local/cuda/extras/CUPTI/lib64/libcupti.so"}
    (finding,) = run(profiler_injection, shell(env))
    assert finding.remedy == "unset CUDA_INJECTION64_PATH CUDA_DEVICE_WAITS_ON_EXCEPTION LD_PRELOAD"
    assert "libcupti.so" in finding.detail
    assert "libjemalloc" not in finding.detail


def test_switched_off_or_unrelated_values_are_quiet():
    env = {"CUDA_DEVICE_WAITS_ON_EXCEPTION": "0", "TORCH_COMPILE_DEBUG": "0",
           "CUDA_INJECTION64_PATH": "", "LD_PRELOAD": "/usr/lib/libtcmalloc.so"}
    assert run(profiler_injection, shell(env)) == []
    (finding,) = run(profiler_injection, shell({"TORCH_COMPILE_DEBUG": "1"}))
    assert "TORCH_COMPILE_DEBUG" in finding.title
