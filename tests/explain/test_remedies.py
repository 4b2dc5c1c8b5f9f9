"""The allocator variable per torch version, the Xid table, and the advice built on them."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.knowledge.allocator import (
    alloc_conf_export,
    alloc_conf_variables,
    fragmentation_remedy,
    supports_expandable_segments,
)
from gpu_audit.knowledge.xid import XID_TABLE, xid_info
from gpu_audit.model import Severity
from gpu_audit.units import torch_release
from tests.explain.helpers import FIXTURES, fixture_incidents

BOTH = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


@pytest.mark.parametrize(("version", "variables"), [
    ("1.13.1+cu117", ("PYTORCH_CUDA_ALLOC_CONF",)),
    ("2.8.0", ("PYTORCH_CUDA_ALLOC_CONF",)),
    ("2.9.1+cu128", BOTH),  # 2.9 reads only the old name for CUDA; setting both is safe
    ("2.10.0", BOTH),  # 2.10 and 2.11 prefer the new name
    ("2.10.0a0+gitc0ffee", BOTH),
    ("2.13.0+cpu", BOTH),  # the old name wins again: the new one alone would be overridden
    (None, BOTH),
    ("not-a-version", BOTH),
])
def test_variables_that_reach_the_allocator(version: str | None, variables: tuple) -> None:
    assert alloc_conf_variables(version) == variables


def test_export_lines() -> None:
    assert alloc_conf_export("expandable_segments:True", "2.4.0") == (
        "export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'")
    assert alloc_conf_export("expandable_segments:True", None) == (
        "export PYTORCH_ALLOC_CONF='expandable_segments:True' "
        "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'")


def test_versions_and_expandable_segments() -> None:
    assert torch_release("v2.3.1") == (2, 3)
    assert torch_release("") is None
    assert supports_expandable_segments("2.0.1") is False
    assert supports_expandable_segments("2.1.0") is True
    assert supports_expandable_segments(None) is None
    assert "max_split_size_mb" in fragmentation_remedy("1.13.1")


REQUIRED_XIDS = (13, 31, 32, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119,
                 120, 140, 143, 154)


def test_xid_table_covers_the_common_xids() -> None:
    missing = [x for x in REQUIRED_XIDS if x not in XID_TABLE]
    assert missing == []
    assert xid_info(79).origin == "hardware" and xid_info(79).severity is Severity.CRITICAL
    assert xid_info(13).origin == "application"
    assert xid_info(43).origin == "consequence"
    assert xid_info(63).severity is Severity.WARNING


def test_unknown_xid_is_reported_neutrally() -> None:
    info = xid_info(999)
    assert info.mnemonic == "UNKNOWN" and "999" in info.meaning


def test_xid_154_severity_follows_the_required_recovery_action() -> None:
    (gsp, recovery) = fixture_incidents("dmesg_xid119_gsp_xid154.log")
    assert gsp.numbers["xid"] == 119 and gsp.numbers["pid"] == 3320
    assert recovery.numbers["recovery_action"] == "GPU Reset Required"
    assert recovery.severity is Severity.CRITICAL
    (none,) = classify_text("NVRM: Xid (PCI:0000:1b:00): 154, GPU recovery action changed from "
                            "0x1 (GPU Reset Required) to 0x0 (None)", torch_version=None)
    assert none.severity is Severity.INFO and not none.is_failure


def test_application_xids_point_at_the_program_and_hardware_xids_at_the_node() -> None:
    (_xid13, xid31) = fixture_incidents("dmesg_xid31_mmu_fault_2012_format.log")
    assert "program" in xid31.explanation and "compute-sanitizer" in xid31.remedy
    assert xid31.numbers["process_name"] == "python"
    (dbe, *_rest) = fixture_incidents("dmesg_xid48_dbe_xid45.log")
    assert dbe.numbers["xid"] == 48 and "reset the GPU" in dbe.remedy


def test_alloc_conf_advice() -> None:
    (typo,) = fixture_incidents("torch210_unknown_alloc_key.log", torch_version="2.10.1")
    assert typo.numbers["key"] == "expandable_segment"
    assert "Did you mean 'expandable_segments'?" in typo.remedy
    assert "PYTORCH_ALLOC_CONF" in typo.remedy
    (old,) = fixture_incidents("torch201_expandable_segments_unknown.log")
    assert "2.1 or newer" in old.explanation
    (small,) = fixture_incidents("torch29_max_split_too_small.log", torch_version="2.9.0")
    assert ("export PYTORCH_ALLOC_CONF='max_split_size_mb:128' "
            "PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128'") in small.remedy
    (deprecated,) = fixture_incidents("torch29_deprecated_alloc_conf_healthy.log")
    assert 'export PYTORCH_ALLOC_CONF="$PYTORCH_CUDA_ALLOC_CONF"' in deprecated.remedy


def test_driver_advice_carries_its_numbers() -> None:
    (old,) = fixture_incidents("old_driver_cu121_wheel.log")
    assert old.numbers["driver_cuda_version"] == "11.4"
    assert "download.pytorch.org/whl/" in old.remedy
    (arch,) = fixture_incidents("rtx5090_torch26_cu124_no_kernel_image.log")
    assert arch.numbers["capability"] == "sm_120"
    assert arch.numbers["supported"] == "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
    assert arch.count == 2  # the warning and the "no kernel image" error are one problem
    (compat,) = fixture_incidents("geforce_cuda_compat_error_804.log")
    assert compat.numbers["code"] == 804 and "cuda-compat" in compat.explanation
    (fabric,) = fixture_incidents("hgx_fabric_manager_down_802.log")
    assert "nvidia-fabricmanager" in fabric.remedy


def test_host_memory_advice_tells_ram_from_shared_memory() -> None:
    killed, _shm_hint, slurm = fixture_incidents("slurm_dataloader_killed_oom.log")
    assert killed.numbers == {"pids": [9833], "signal": "Killed"}
    assert "RAM" in killed.explanation and "num_workers" in killed.remedy
    assert slurm.numbers["step"] == "36358.batch"
    (bus,) = fixture_incidents("docker_default_shm_bus_error.log")
    assert "--shm-size" in bus.remedy
    (kernel,) = fixture_incidents("dmesg_oom_killer_kernel3.log")
    assert kernel.count == 1 and kernel.line_numbers == [1, 2]
    assert kernel.numbers["anon_rss_bytes"] == 30111000 * 1024
    assert kernel.numbers["process_name"] == "python"


def test_nccl_shared_memory_failure_names_dev_shm() -> None:
    (nccl,) = fixture_incidents("nccl_unhandled_system_error_shm.log")
    assert nccl.numbers["kind"] == "unhandled system error"
    assert nccl.numbers["nccl_version"] == "2.20.5"
    assert nccl.numbers["kind_detail"] == "SystemError"
    assert nccl.numbers["shm_size_bytes"] == 9637888
    assert "/dev/shm" in nccl.explanation and "--ipc=host" in nccl.remedy


def test_by_default_remedies_are_for_the_torch_installed_here() -> None:
    import importlib.metadata

    from gpu_audit.units import installed_torch_version

    try:
        installed = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    assert installed_torch_version() == installed
    (default,) = classify_text((FIXTURES / "a100_fragmented_oom_torch23.log").read_text())
    expected = alloc_conf_export("expandable_segments:True", installed)
    assert expected in default.remedy
    (old_torch,) = fixture_incidents("a100_fragmented_oom_torch23.log", torch_version="2.4.0")
    if installed is not None and torch_release(installed) >= (2, 9):
        assert default.remedy != old_torch.remedy  # both names here, the old one alone there
