"""The torch check: PyTorch is a CUDA build the driver can run, and, with the ``imports`` stage,
CUDA works.

``torch-cuda`` views the scan's ``torch-cpu-only`` and ``driver-too-old`` findings.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpu_audit.check.registry import (
    FAIL,
    PASS,
    SKIP,
    WARN,
    CheckContext,
    check,
    result,
)
from gpu_audit.check.results import CheckResult, CheckStatus
from gpu_audit.knowledge.torch_builds import install_command
from gpu_audit.model import Severity


def _install_hint(ctx: CheckContext, version: str | None) -> str:
    """The CUDA build of torch for this driver, chosen as the scan's torch findings choose it."""
    driver = ctx.scan.driver.cuda_driver_version if ctx.scan.driver else None
    return (f"Install a CUDA build of PyTorch for this driver: {install_command(version, driver)}"
            " (a plain `pip install torch` may pick a build that does not match).")


def _torch_cuda_judgement(ctx: CheckContext) -> tuple[CheckStatus, str, str | None, str | None]:
    """(status, summary, remedy, finding id) from the installed build and the scan's torch
    findings (``torch-cpu-only``, ``driver-too-old``); no stages."""
    alloc = ctx.scan.allocator
    version = alloc.torch_version if alloc else None
    variant = alloc.torch_variant if alloc else None
    build_cuda = alloc.torch_cuda_version if alloc else None
    if version is None:
        return (FAIL, "torch is not installed in this Python environment",
                _install_hint(ctx, None), None)
    for finding in ctx.findings_for("torch-cpu-only"):
        return FAIL, finding.title, finding.remedy, finding.id
    if variant in ("cpu", "rocm", "xpu"):
        kind = {"cpu": "CPU-only", "rocm": "ROCm", "xpu": "XPU"}[variant]
        return FAIL, f"torch {version} is a {kind} build, not a CUDA build", \
            _install_hint(ctx, version), None
    for finding in ctx.findings_for("driver-too-old"):
        too_old = (finding.severity or Severity.ERROR) >= Severity.ERROR
        return (FAIL if too_old else WARN), f"{finding.title}. {finding.detail}", \
            finding.remedy, finding.id
    if variant is None:
        if ctx.scan.host.os != "Linux":
            return (FAIL, f"torch {version} on {ctx.scan.host.os}: PyPI's default build here "
                          "has no CUDA", _install_hint(ctx, version), None)
        return (WARN, f"torch {version} has no build label: PyPI's default Linux build uses CUDA, "
                      "but that is unconfirmed",
                "Confirm CUDA works with `gpu-audit check --stages imports`.", None)
    return PASS, f"torch {version} (CUDA {build_cuda or '?'} build)", None, None


@check("torch-cuda", "PyTorch with CUDA", views=("torch-cpu-only", "driver-too-old"))
def torch_cuda(ctx: CheckContext) -> Iterator[CheckResult]:
    """PyTorch is installed as a CUDA build the driver can run (`require_torch_cuda = true`).

    Read from package metadata without importing torch (the build label `+cu124`, `+cpu`,
    `+rocm6.2`), judged with the scan's `torch-cpu-only` and `driver-too-old` findings. With
    `--stages imports` the check also needs the `imports` stage to have initialised CUDA and
    moved a tensor through it. When torch is not required the check is skipped, except that a
    CUDA build the driver cannot run is still a warning.

    Why it matters: a CPU build or a CUDA build newer (major version) than the driver supports
    cannot initialise CUDA: the job fails at its first `.cuda()` or silently runs on the CPU.

    Example: `FAIL torch-cuda env torch 2.5.1+cpu is a CPU-only build on a host with 1 NVIDIA
    GPU`.

    Fix: install a torch build for the driver's CUDA (the remedy gives the command), or upgrade
    the driver.
    """
    alloc = ctx.scan.allocator
    evidence = {
        "torch_version": alloc.torch_version if alloc else None,
        "torch_variant": alloc.torch_variant if alloc else None,
        "torch_cuda_version": alloc.torch_cuda_version if alloc else None,
        "cuda_driver_version": ctx.scan.driver.cuda_driver_version
        if ctx.scan.driver else None,
    }
    status, summary, remedy, finding_id = _torch_cuda_judgement(ctx)
    if not ctx.policy.require_torch_cuda:
        if finding_id == "driver-too-old":
            yield result("torch-cuda", "env", WARN, summary, evidence=evidence, remedy=remedy,
                         finding_id=finding_id)
        else:
            yield result("torch-cuda", "env", SKIP, "not required (set `require_torch_cuda = "
                         f"true`); {summary}", evidence=evidence)
        return
    stage = ctx.stage("imports")
    if stage is not None:
        evidence["imports_stage"] = stage.status
        if stage.status == "failed":
            yield result("torch-cuda", "env", FAIL, f"CUDA does not work: {stage.summary}",
                         evidence=evidence, remedy=stage.remedy or remedy)
            return
        on_cuda = (stage.device or "").startswith("cuda")
        if stage.status == "passed" and on_cuda and status is not FAIL:
            yield result("torch-cuda", "env", PASS,
                         f"{summary}; CUDA initialised and a tensor round-tripped on "
                         f"{stage.device}", evidence=evidence)
            return
    yield result("torch-cuda", "env", status, summary, evidence=evidence, remedy=remedy,
                 finding_id=finding_id)
