"""Root cause first: a log with several signatures reads in causal order, deduplicated."""

from __future__ import annotations

from pathlib import Path

from gpu_audit.explain import classify_lines, classify_text, explain_sources
from gpu_audit.explain.classify import MAX_LOCATIONS
from tests.explain.helpers import fixture_incidents


def test_illegal_access_on_one_rank_comes_before_the_timeouts_it_caused() -> None:
    incidents = fixture_incidents("ddp8_rank3_illegal_access_nccl_timeouts.log")
    illegal, timeouts, teardown = incidents
    # The timeouts are printed first in the file; the fault on rank 3 is still the root cause.
    assert illegal.cls == "illegal-memory-access" and illegal.role == "root-cause"
    assert illegal.line_numbers == [10] and illegal.ranks == [3]
    assert "illegal memory access was encountered" in illegal.excerpt
    assert timeouts.cls == "nccl" and timeouts.role == "consequence"
    assert timeouts.count == 3 and timeouts.ranks == [0, 1, 2]
    assert timeouts.line_numbers == [1, 2, 3, 4]  # line 4 is the "Timeout at NCCL work" detail
    n = timeouts.numbers
    assert (n["op_type"], n["seq_num"], n["timeout_ms"], n["ran_for_ms"]) == (
        "ALLREDUCE", 48213, 600000, 600031)
    assert (n["last_enqueued_seq"], n["last_completed_seq"]) == (48213, 48212)
    assert "Ranks 0, 1, 2" in timeouts.explanation
    assert teardown.signature == "nccl/operations-failed" and teardown.role == "consequence"


def test_device_assert_comes_before_the_cublas_error_that_follows_it() -> None:
    assertion, cublas = fixture_incidents("llama_embedding_index_device_assert.log")
    assert assertion.cls == "device-assert" and assertion.role == "root-cause"
    # Four threads' assertion lines and the RuntimeError are one incident.
    assert assertion.count == 5
    assert assertion.line_numbers == [1, 2, 3, 4, 8]
    assert assertion.numbers["assertion"] == "srcIndex < srcSelectDimSize"
    assert assertion.numbers["source_file"] == "../aten/src/ATen/native/cuda/Indexing.cu"
    assert assertion.numbers["source_line"] == 1289
    assert "vocabulary" in assertion.numbers["hint"]
    assert cublas.cls == "cublas-failure" and cublas.role == "consequence"
    assert cublas.diagnosis == "execution"
    assert "CUDA_LAUNCH_BLOCKING=1" in cublas.remedy


def test_gpu_off_the_bus_comes_before_the_cuda_errors_it_causes() -> None:
    log = "\n".join([
        "RuntimeError: CUDA error: unknown error",
        "RuntimeError: CUDA error: unspecified launch failure",
        "[913402.118027] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU "
        "has fallen off the bus.",
    ])
    order = [(i.title, i.role) for i in classify_text(log, torch_version=None)]
    assert order == [
        ("Xid 79: GPU has fallen off the bus", "root-cause"),
        ("Unspecified launch failure: a CUDA kernel crashed", "consequence"),
        ("CUDA reported an unknown error", "consequence"),
    ]


def test_xid79_and_the_off_the_bus_line_are_one_event() -> None:
    (gpu,) = fixture_incidents("dmesg_xid79_fallen_off_bus.log")
    assert gpu.count == 2 and gpu.line_numbers == [3, 4]
    assert gpu.numbers["xid"] == 79 and gpu.numbers["pci_bus_id"] == "0000:3b:00"
    assert gpu.severity.value == "critical"


def test_warnings_come_after_failures_even_when_printed_first() -> None:
    log = "\n".join([
        "[W1122 08:00:01 AllocatorConfig.cpp:28] Warning: PYTORCH_CUDA_ALLOC_CONF is deprecated, "
        "use PYTORCH_ALLOC_CONF instead (function operator())",
        "RuntimeError: CUDA error: device-side assert triggered",
    ])
    assert [(i.cls, i.role) for i in classify_text(log, torch_version=None)] == [
        ("device-assert", "root-cause"), ("alloc-conf", "context")]


def test_one_message_from_eight_ranks_is_one_incident() -> None:
    lines = [f"[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. "
             f"GPU {r} has a total capacity of 79.15 GiB of which 100.00 MiB is free."
             for r in range(8)]
    (oom,) = classify_lines(lines, torch_version=None)
    assert oom.count == 8
    assert oom.ranks == list(range(8))
    assert oom.line_numbers == list(range(1, 9))


def test_repeats_are_counted_but_locations_are_bounded() -> None:
    lines = ["RuntimeError: CUDA error: an illegal memory access was encountered"] * 500
    (illegal,) = classify_lines(lines, torch_version=None)
    assert illegal.count == 500
    assert len(illegal.line_numbers) == MAX_LOCATIONS
    assert illegal.line_numbers[:3] == [1, 2, 3]


def test_several_files_one_per_rank(tmp_path: Path) -> None:
    rank0 = tmp_path / "rank0.log"
    rank0.write_text(
        "step 1\n[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLGATHER, NumelIn=1, NumelOut=8, Timeout(ms)=600000) ran for 600100 "
        "milliseconds before timing out.\n")
    rank5 = tmp_path / "rank5.log"
    rank5.write_text("loading\nloading\ntorch.OutOfMemoryError: CUDA out of memory. Tried to "
                     "allocate 8.00 GiB. GPU 5 has a total capacity of 79.15 GiB of which 2.00 "
                     "GiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch, and "
                     "6.00 GiB is reserved by PyTorch but unallocated.\n")
    result = explain_sources([str(rank0), str(rank5)], torch_version=None, workers=1)
    oom, timeout = result.incidents
    assert oom.cls == "cuda-oom" and oom.role == "root-cause"
    assert [(loc.source, loc.line) for loc in oom.locations] == [(str(rank5), 3)]
    assert oom.sources == [str(rank5)]
    assert timeout.cls == "nccl" and timeout.role == "consequence"
    assert timeout.numbers["op_type"] == "ALLGATHER" and timeout.numbers["rank"] == 0
    assert [s.lines for s in result.inputs] == [2, 3]


def test_independent_failures_of_the_same_tier_keep_reading_order() -> None:
    log = "\n".join([
        "Out of memory: Killed process 4410 (python) total-vm:1000kB, anon-rss:900kB, "
        "file-rss:0kB, shmem-rss:0kB",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ])
    incidents = classify_text(log, torch_version=None)
    assert [(i.cls, i.role) for i in incidents] == [
        ("host-oom", "root-cause"), ("illegal-memory-access", "related")]
    assert incidents[0].numbers["anon_rss_bytes"] == 900 * 1024
    assert incidents[0].numbers["pid"] == 4410


def test_secrets_in_a_log_line_are_redacted_in_the_excerpt() -> None:
    log = ("RuntimeError: CUDA error: an illegal memory access was encountered while "
           "uploading to https://user:hunter2@storage.example.com/ckpt?token=abc123")
    (incident,) = classify_text(log, torch_version=None)
    assert "hunter2" not in incident.excerpt and "abc123" not in incident.excerpt
