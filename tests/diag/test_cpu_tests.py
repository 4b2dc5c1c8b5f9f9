"""diag's tests themselves, run by torch on the CPU: the memory test finds a planted bit and
names it; bandwidth and matmul measured on the CPU are judged against a test table."""

from __future__ import annotations

import pytest

from gpu_audit.diag import probes
from gpu_audit.diag.judge import judge
from gpu_audit.diag.memtest import MemoryTest, patterns
from gpu_audit.diag.results import GpuRun, WorkerOutcome
from gpu_audit.knowledge.gpu_models import GpuModelSpec

torch = pytest.importorskip("torch")
CPU = torch.device("cpu")


def test_clean_buffer_passes_every_pattern() -> None:
    record = MemoryTest(torch, CPU, 1 << 16, chunk_words=1 << 14).run()
    assert record["mismatches"] == [] and record["patterns"] == len(patterns(1234)) == 67
    assert record["bytes"] == 1 << 18


@pytest.mark.parametrize(("offset", "bit"), [(0, 0), (4099, 5), (262143, 7), (100003, 2)])
def test_planted_bit_is_found_with_its_offset_and_bit(offset: int, bit: int) -> None:
    record = MemoryTest(torch, CPU, 1 << 16, chunk_words=1 << 14, plant=(offset, bit)).run()
    assert len(record["mismatches"]) == 1
    mismatch = record["mismatches"][0]
    assert mismatch["pattern"] == "walking-1 bit 0" and mismatch["bad_words"] == 1
    error = mismatch["errors"][0]
    assert (error["offset_bytes"], error["bit"]) == (offset, bit)
    assert error["word_offset_bytes"] == offset // 4 * 4
    assert int(error["read"], 16) ^ int(error["expected"], 16) == 1 << ((offset % 4) * 8 + bit)


def test_patterns_cover_address_and_random_kinds() -> None:
    test = MemoryTest(torch, CPU, 1000, chunk_words=300)
    for name, kind, value in patterns(5):
        test._write(kind, value)
        assert test._verify(name, kind, value) is None
    address = test._expected("address", 0, 600, 603).tolist()
    assert address == [600, 601, 602]
    assert test._expected("address", -1, 0, 2).tolist() == [-1, -2]


def test_round_trip_and_matmul_check_on_cpu() -> None:
    assert probes.round_trip(torch, CPU, 1 << 20)["ok"]
    check = probes.matmul_check(torch, CPU, n=128)
    assert check["ok"] and check["max_abs_error"] < check["bound"]
    launch = probes.kernel_launch(torch, CPU)
    assert launch["ok"] and launch["result"] == launch["expected"] == 1048576.0
    assert launch["latency_us"] > 0 and launch["first_launch_us"] > 0
    assert probes.host_bandwidth(torch, CPU, 1024, 0.1) == {
        "skipped": "the CPU device has no host link"}


def _cpu_run(table_peak_tflops: float, table_bandwidth_gbs: float) -> tuple[object, dict]:
    tests = {"memory-bandwidth": probes.memory_bandwidth(torch, CPU, 8 << 20, 0.1),
             "matmul-fp32": probes.matmul_throughput(torch, CPU, "fp32", 128, 0.1)}
    table = (GpuModelSpec("test-cpu", "test CPU", r"^Test CPU$",
                          {"fp32": table_peak_tflops}, table_bandwidth_gbs,
                          source="https://example.invalid/test-table"),)
    run = GpuRun(index=0, name="Test CPU", tests=tests, worker=WorkerOutcome(status="done"))
    return judge(2, [run], table=table), tests


def test_cpu_measurements_judged_against_a_test_table() -> None:
    # A table the CPU cannot match: both figures are low, each with its ratio.
    out, tests = _cpu_run(table_peak_tflops=1e6, table_bandwidth_gbs=1e7)
    assert tests["memory-bandwidth"]["gbs"] > 0 and tests["matmul-fp32"]["tflops"] > 0
    assert sorted(f.id for f in out.findings) == ["diag-bandwidth-low", "diag-throughput-low"]
    # A table the CPU beats easily: nothing to report, figures above 100%.
    out, _ = _cpu_run(table_peak_tflops=1e-6, table_bandwidth_gbs=1e-3)
    assert out.findings == [] and all(f.ratio > 1 for f in out.figures)


def test_sustained_load_emits_one_tick_per_second() -> None:
    ticks = []
    record = probes.sustained(torch, CPU, "fp32", 64, 1.2, ticks.append, tick=0.25)
    assert len(record["tflops"]) >= 3 and len(ticks) == len(record["tflops"])
    assert all(t["ev"] == "tick" and t["tflops"] > 0 for t in ticks)
