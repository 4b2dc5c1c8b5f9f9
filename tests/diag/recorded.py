"""Recorded diag figures of real situations, for the judge's tests (no torch, no GPU).

``healthy_h100``: an idle H100 80GB HBM3 on PCIe Gen5 x16 measured by diag's method (memory
copy 2.9 TB/s, pinned host copies ~50 GB/s, bf16 matmul ~720 TFLOPS). ``half_width_h100``: the
same GPU after a reseat left its link at x8: host copies at half speed. ``decaying_h100``: a
sustained bf16 load whose clocks fall from 1980 to 1395 MHz with thermal slowdown.
"""

from __future__ import annotations

from gpu_audit.diag.results import GpuRun, WorkerOutcome

GIB = 1024**3


def h100_tests(h2d: float = 51.2, d2h: float = 50.1) -> dict:
    return {
        "context": {"ok": True, "seconds": 0.41, "name": "NVIDIA H100 80GB HBM3"},
        "kernel-launch": {"ok": True, "latency_us": 18.0},
        "round-trip": {"ok": True, "bytes": 256 * 1024**2, "bad_words": 0},
        "matmul-check": {"ok": True, "n": 512, "max_abs_error": 3e-5, "bound": 0.0226},
        "memtest": {"bytes": 72 * GIB, "patterns": 67, "seed": 1234, "seconds": 38.0,
                    "mismatches": [], "planted": None},
        "memory-bandwidth": {"gbs": 2910.0, "bytes": GIB},
        "host-bandwidth": {"h2d_gbs": h2d, "d2h_gbs": d2h, "bytes": 256 * 1024**2},
        "matmul-fp32": {"tflops": 51.0, "n": 8192},
        "matmul-tf32": {"tflops": 370.0, "n": 8192},
        "matmul-fp16": {"tflops": 730.0, "n": 8192},
        "matmul-bf16": {"tflops": 720.0, "n": 8192},
        "matmul-fp8": {"tflops": 1310.0, "n": 8192},
    }


def h100_run(index: int = 0, **overrides) -> GpuRun:
    base = dict(index=index, name="NVIDIA H100 80GB HBM3",
                uuid=f"GPU-{index:08x}-a1b2-4c3d-8e9f-0123456789ab",
                pci_bus_id=f"00000000:{0x18 + index:02X}:00.0", pcie_gen_current=5,
                pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16, power_limit_w=700.0,
                tests=h100_tests(), worker=WorkerOutcome(status="done"))
    base.update(overrides)
    return GpuRun(**base)


def healthy_h100() -> GpuRun:
    return h100_run()


def half_width_h100() -> GpuRun:
    return h100_run(pcie_width_current=8, tests=h100_tests(h2d=25.6, d2h=25.1))


def _samples(clocks: list[int], reasons: list[list[str]], temps: list[int]) -> list[dict]:
    return [{"t_s": float(t), "sm_clock_mhz": c, "power_draw_w": 690.0, "power_limit_w": 700.0,
             "temperature_c": temp, "throttle_reasons": r,
             "ecc_errors_corrected_volatile": 0, "ecc_errors_uncorrected_volatile": 0,
             "remapped_rows_correctable": 0, "remapped_rows_uncorrectable": 0}
            for t, (c, r, temp) in enumerate(zip(clocks, reasons, temps, strict=True))]


def steady_h100(seconds: int = 60) -> GpuRun:
    run = h100_run(sustain_worker=WorkerOutcome(status="done"))
    run.ticks = [700.0 + (i % 3) for i in range(seconds)]
    run.tick_times_s = [float(i + 1) for i in range(seconds)]
    run.samples = _samples([1980] * seconds, [["sw_power_cap"]] * seconds, [60] * seconds)
    run.new_xids = []
    return run


def decaying_h100(seconds: int = 60) -> GpuRun:
    run = h100_run(sustain_worker=WorkerOutcome(status="done"))
    clocks = [1980 if i < 20 else max(1395, 1980 - 30 * (i - 20)) for i in range(seconds)]
    run.ticks = [round(700.0 * c / 1980, 1) for c in clocks]
    run.tick_times_s = [float(i + 1) for i in range(seconds)]
    reasons = [[] if i < 20 else ["hw_thermal_slowdown", "sw_thermal_slowdown"]
               for i in range(seconds)]
    run.samples = _samples(clocks, reasons, [70 if i < 20 else 88 for i in range(seconds)])
    run.new_xids = []
    return run
