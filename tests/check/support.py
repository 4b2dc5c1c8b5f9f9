"""Hand-built runners and a one-line way to judge them, shared by the check tests."""

from __future__ import annotations

import msgspec

from gpu_audit.check.engine import judge
from gpu_audit.check.results import CheckReport, CheckResult, CheckStatus
from gpu_audit.config import CheckPolicy
from gpu_audit.model import AllocatorConfig, NvmlStatus
from tests import builders as b

GIB, MIB = b.GIB, b.MIB
PASS, WARN, FAIL, SKIP, UNKNOWN = (CheckStatus.PASS, CheckStatus.WARN, CheckStatus.FAIL,
                                   CheckStatus.SKIP, CheckStatus.UNKNOWN)


def run(scan, user: str | None = "ci", stages=None, **policy) -> CheckReport:
    return judge(scan, CheckPolicy(**policy), user=user, stages=stages)


def results(report: CheckReport, check_id: str) -> list[CheckResult]:
    found = [r for r in report.results if r.id == check_id]
    assert found, f"no result for {check_id}: {[r.id for r in report.results]}"
    return found


def only(report: CheckReport, check_id: str) -> CheckResult:
    (result,) = results(report, check_id)
    return result


def idle_h100_node(n: int = 8, **overrides) -> b.Scan:
    gpus = [b.gpu(i, total=81559 * MIB, used=530 * MIB, memory_reserved_bytes=530 * MIB,
                  persistence_mode=True) for i in range(n)]
    return b.scan(gpus=gpus, host=b.host(nvidia_pci_devices=n), **overrides)


def no_driver(cause: str = "driver-not-loaded") -> b.Scan:
    return b.scan(gpus=[], driver=None,
                      nvml=NvmlStatus(available=False, cause=cause,
                                      message="NVIDIA driver is not loaded"))


def with_torch(scan, version: str | None, variant: str | None, cuda: str | None):
    alloc = AllocatorConfig(source="env", pytorch_cuda_alloc_conf=None, pytorch_alloc_conf=None,
                            torch_version=version, torch_variant=variant,
                            torch_cuda_version=cuda)
    return msgspec.structs.replace(scan, allocator=alloc)
