"""Hand-built snapshots for rule and renderer tests: no I/O, named after the situation."""

from __future__ import annotations

from typing import Any

import msgspec

from gpu_audit.model import (
    AllocatorConfig,
    Driver,
    Gpu,
    GpuProcess,
    Host,
    NvmlStatus,
    Scan,
)

GIB = 1024**3
MIB = 1024**2


def host(**overrides: Any) -> Host:
    base = dict(
        hostname="node1",
        os="Linux",
        kernel="6.8.0",
        wsl=False,
        container=None,
        cpu_count=16,
        memory_total_bytes=64 * GIB,
        memory_available_bytes=48 * GIB,
        swap_total_bytes=8 * GIB,
        swap_used_bytes=0,
        swap_in_bytes=0,
        swap_out_bytes=0,
        nvidia_pci_devices=1,
    )
    base.update(overrides)
    return Host(**base)


def gpu(index: int = 0, total: int = 80 * GIB, used: int = 300 * MIB, **overrides: Any) -> Gpu:
    base = dict(
        index=index,
        uuid=f"GPU-{index:08d}-0000-0000-0000-000000000000",
        name="NVIDIA H100 80GB HBM3",
        memory_total_bytes=total,
        memory_used_bytes=used,
        memory_free_bytes=total - used,
        utilization_pct=0,
        temperature_c=35,
        # A healthy data-centre card that reports every health reading.
        temperature_slowdown_c=87,
        ecc_mode=True,
        ecc_errors_uncorrected_volatile=0,
        ecc_errors_uncorrected_aggregate=0,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        remapped_rows_uncorrectable=0,
        throttle_reasons=[],
        throttle_reasons_mask=0,
        pcie_gen_current=5,
        pcie_gen_max=5,
        pcie_width_current=16,
        pcie_width_max=16,
        persistence_mode=True,
        compute_mode="default",
        mig_mode=False,
    )
    base.update(overrides)
    return Gpu(**base)


def process(
    pid: int,
    vram_mib: float,
    cmdline: list[str] | None = None,
    gpu_index: int = 0,
    **overrides: Any,
) -> GpuProcess:
    base = dict(
        pid=pid,
        gpu_index=gpu_index,
        gpu_uuid=None,
        used_memory_bytes=int(vram_mib * MIB),
        type="compute",
        name=(cmdline[0].rsplit("/", 1)[-1] if cmdline else None),
        user="alice",
        cmdline=cmdline,
        status="sleeping",
        start_time=f"2026-11-22T09:{(pid // 100) % 60:02d}:{pid % 60:02d}Z",
        ppid=1000,
    )
    base.update(overrides)
    return GpuProcess(**base)


def scan(
    gpus: list[Gpu] | None = None, processes: list[GpuProcess] | None = None, **overrides: Any
) -> Scan:
    base = dict(
        host=host(),
        nvml=NvmlStatus(available=True),
        driver=Driver("560.35.03", "12.560.35.03", "12.6"),
        gpus=[gpu()] if gpus is None else gpus,
        processes=processes or [],
        allocator=AllocatorConfig(
            source="env", pytorch_cuda_alloc_conf=None, pytorch_alloc_conf=None, torch_version=None
        ),
        probe_errors=[],
        generated_at="2026-11-22T10:00:00Z",
        tool_version="0.1.0",
    )
    base.update(overrides)
    return Scan(**base)


def with_host(scan: Scan, **overrides: Any) -> Scan:
    return msgspec.structs.replace(scan, host=msgspec.structs.replace(scan.host, **overrides))


def uvicorn(pid: int, port: int, vram_mib: float = 154, **overrides: Any) -> GpuProcess:
    argv = [
        "/home/alice/venv/bin/python3",
        "/home/alice/venv/bin/uvicorn",
        "app:app",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
    ]
    return process(pid, vram_mib, argv, name="uvicorn", listen_ports=[port], **overrides)


def gtx1650_three_uvicorn() -> Scan:
    """A 4 GiB laptop GPU: Xorg, three uvicorn copies at 154 MiB, a monitoring daemon at 114 MiB."""
    procs = [
        process(
            1201, 38, ["/usr/lib/xorg/Xorg", "vt2", "-displayfd", "3"], type="graphics", user="root"
        ),
        uvicorn(2101, 8000),
        uvicorn(2202, 8080),
        uvicorn(2303, 3001),
        process(2404, 114, ["/usr/bin/python3", "/opt/monitor/gpu_daemon.py", "--interval", "5"]),
    ]
    used = sum(p.used_memory_bytes or 0 for p in procs) + 60 * MIB
    card = gpu(0, total=4 * GIB, used=used, name="NVIDIA GeForce GTX 1650")
    return scan(gpus=[card], processes=procs)
