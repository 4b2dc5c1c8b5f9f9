"""The numbers in out-of-memory messages, what they say about the cause, and which remedy fits."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.knowledge.oom import (
    FRAGMENTATION_MIN_PCT,
    complete_oom_numbers,
    diagnose_oom,
    extract_oom_fields,
)
from tests.explain.helpers import fixture_incidents, gib, mib


def only(incidents):  # type: ignore[no-untyped-def]
    assert len(incidents) == 1, incidents
    return incidents[0]


def test_pytorch21_message_on_a100_is_fragmentation() -> None:
    oom = only(fixture_incidents("a100_fragmented_oom_torch23.log"))
    n = oom.numbers
    assert n["requested_bytes"] == gib(3.00)
    assert n["gpu_index"] == 0
    assert n["capacity_bytes"] == gib(79.15)
    assert n["free_bytes"] == gib(1.85)
    assert n["process_bytes"] == gib(77.29)
    assert n["allocated_bytes"] == gib(58.73)
    assert n["reserved_unallocated_bytes"] == gib(18.02)
    assert n["reserved_bytes"] == gib(58.73) + gib(18.02)
    assert n["fragmentation_pct"] == pytest.approx(100 * 18.02 / (58.73 + 18.02), abs=0.05)
    assert oom.diagnosis == "fragmentation"
    assert "fragmentation" in oom.title
    assert "18.02 GiB" in oom.explanation


def test_pytorch1x_message_on_gtx1650_is_too_big() -> None:
    oom = only(fixture_incidents("gtx1650_oom_too_big_torch113.log"))
    n = oom.numbers
    assert n["requested_bytes"] == mib(512)
    assert n["capacity_bytes"] == gib(3.82)
    assert n["allocated_bytes"] == gib(2.61)
    assert n["free_bytes"] == mib(318.81)
    assert n["reserved_bytes"] == gib(2.78)
    assert n["reserved_unallocated_bytes"] == gib(2.78) - gib(2.61)
    assert oom.diagnosis == "too-large"
    assert "batch size" in oom.remedy and "checkpointing" in oom.remedy


def test_pytorch10_cached_is_reserved_but_unallocated() -> None:
    n = only(fixture_incidents("k80_oom_torch10_cached.log")).numbers
    assert n["allocated_bytes"] == gib(8.57)
    assert n["reserved_unallocated_bytes"] == gib(2.30)
    assert n["reserved_bytes"] == gib(8.57) + gib(2.30)


def test_three_uvicorn_processes_are_named_as_the_cause() -> None:
    oom = only(fixture_incidents("gtx1650_three_uvicorn_oom.log"))
    n = oom.numbers
    assert [p["pid"] for p in n["other_processes"]] == [32993, 33002, 33024]
    assert n["other_processes_bytes"] == 3 * mib(454)
    assert oom.diagnosis == "other-processes"
    assert "gpu-audit scan" in oom.remedy
    assert "pid 32993" in oom.explanation


def test_memory_fraction_cap() -> None:
    oom = only(fixture_incidents("oom_memory_fraction_torch20.log"))
    assert oom.numbers["allowed_bytes"] == gib(10.00)
    assert oom.numbers["gpu_index"] == 1
    assert oom.diagnosis == "memory-fraction"
    assert "set_per_process_memory_fraction" in oom.remedy


def test_unified_allocator_message_with_private_pools() -> None:
    oom = only(fixture_incidents("oom_unified_allocator_newest.log"))
    n = oom.numbers
    assert n["requested_bytes"] == mib(20)
    assert n["private_pool_bytes"] == gib(1.20)
    # "A+P is allocated by PyTorch" and "R-A-P is reserved but unallocated": R = sum of both.
    assert n["reserved_bytes"] == gib(137.02) + gib(1.89)
    assert oom.ranks == [2]
    assert oom.diagnosis == "too-large"


def test_message_wrapped_over_lines_is_put_back_together() -> None:
    oom = only(fixture_incidents("oom_message_wrapped_by_logger.log"))
    # every line of the message belongs to the incident (a line ending in "," is joined with
    # the next one: that location spans both)
    covered = {n for loc in oom.locations for n in range(loc.line, (loc.end_line or loc.line) + 1)}
    assert covered == {2, 3, 4, 5, 6}
    assert oom.count == 1  # continuation lines are not separate events
    n = oom.numbers
    assert n["requested_bytes"] == gib(15.00)
    assert n["capacity_bytes"] == gib(14.56)
    assert n["free_bytes"] == gib(6.91)
    assert n["reserved_unallocated_bytes"] == mib(301.94)
    assert oom.diagnosis == "too-large"
    assert "larger than the whole GPU" in oom.explanation


def test_continuations_go_to_their_own_rank_when_ranks_interleave() -> None:
    log = "\n".join([
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.",
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "[rank0]: GPU 0 has a total capacity of 10.00 GiB of which 100.00 MiB is free.",
        "[rank1]: GPU 1 has a total capacity of 20.00 GiB of which 200.00 MiB is free.",
    ])
    oom = only(classify_text(log, torch_version=None))
    assert oom.count == 2 and oom.ranks == [0, 1]
    # The first occurrence with the most numbers is shown; its numbers are its own rank's.
    assert oom.numbers["requested_bytes"] == gib(1)
    assert oom.numbers["gpu_index"] == 0
    assert oom.numbers["capacity_bytes"] == gib(10)


def test_plain_cuda_error_oom_has_no_numbers_and_says_so() -> None:
    oom = only(classify_text("RuntimeError: CUDA error: out of memory", torch_version=None))
    assert oom.numbers == {}
    assert oom.diagnosis == "unknown"
    assert "gpu-audit scan" in oom.remedy


def test_nvml_assert_is_explained_as_an_oom() -> None:
    oom = only(fixture_incidents("qodo_encoder_nvml_assert.log"))
    assert oom.cls == "nvml-assert-oom"
    assert oom.numbers["nvml_call"] == "nvmlInit_v2"
    assert oom.numbers["source_line"] == 1090
    assert "out-of-memory" in oom.explanation
    assert "PYTORCH_NO_NVML does not exist" in oom.remedy
    assert "reboot" in oom.remedy.lower()


# --- which variable the fragmentation remedy names ----------------------------------------------

BOTH_EXPANDABLE = ["export PYTORCH_ALLOC_CONF='expandable_segments:True' "
                   "PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'"]


@pytest.mark.parametrize(("torch_version", "present", "absent"), [
    ("2.3.1+cu121", ["export PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True'"],
     ["PYTORCH_ALLOC_CONF="]),
    ("2.9.1+cu128", BOTH_EXPANDABLE, []),
    ("2.10.0", BOTH_EXPANDABLE, []),
    (None, BOTH_EXPANDABLE, []),
    ("2.0.1", ["PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128'"], ["expandable_segments:True"]),
])
def test_fragmentation_remedy_names_the_variable_this_torch_reads(
        torch_version: str | None, present: list[str], absent: list[str]) -> None:
    oom = only(fixture_incidents("a100_fragmented_oom_torch23.log", torch_version=torch_version))
    for text in present:
        assert text in oom.remedy
    for text in absent:
        assert text not in oom.remedy


# --- the diagnosis rules on hand-built numbers --------------------------------------------------

def numbers(**kw):  # type: ignore[no-untyped-def]
    return complete_oom_numbers(kw)


def test_fragmentation_needs_both_fit_and_a_real_share_of_the_cache() -> None:
    base = dict(requested_bytes=gib(2), capacity_bytes=gib(24), free_bytes=gib(0.5),
                allocated_bytes=gib(15))
    assert diagnose_oom(numbers(**base, reserved_unallocated_bytes=gib(8))) == "fragmentation"
    # Enough slack to fit, but a sliver of a large cache: the job is at the limit.
    small = round(gib(15) * FRAGMENTATION_MIN_PCT / 100 * 0.9)
    tight = dict(base, requested_bytes=mib(20), free_bytes=0, capacity_bytes=gib(17))
    assert diagnose_oom(numbers(**tight, reserved_unallocated_bytes=small)) == "too-large"
    # A big share that still would not fit the request.
    assert diagnose_oom(numbers(**dict(base, requested_bytes=gib(12)),
                                reserved_unallocated_bytes=gib(8))) == "too-large"


def test_request_larger_than_the_gpu_is_too_large() -> None:
    assert diagnose_oom(numbers(requested_bytes=gib(130206), capacity_bytes=gib(23.56),
                                free_bytes=gib(16), allocated_bytes=gib(5),
                                reserved_unallocated_bytes=gib(1))) == "too-large"


def test_without_process_lines_large_memory_outside_the_cache_points_at_other_processes() -> None:
    # 1.x message: 40 GiB of an 80 GiB GPU is neither free nor in this process's cache.
    n = numbers(requested_bytes=gib(4), capacity_bytes=gib(80), free_bytes=gib(1),
                allocated_bytes=gib(38), reserved_bytes=gib(39))
    assert n["non_pytorch_bytes"] == gib(80) - gib(1) - gib(39)
    assert diagnose_oom(n) == "other-processes"
    # A CUDA context's worth outside the cache is normal.
    n = numbers(requested_bytes=gib(4), capacity_bytes=gib(80), free_bytes=gib(1),
                allocated_bytes=gib(77), reserved_bytes=gib(78.5))
    assert diagnose_oom(n) == "too-large"


def test_a_container_listing_itself_under_a_host_pid_is_not_another_process() -> None:
    text = ("CUDA out of memory. Tried to allocate 1.25 GiB. GPU 1 has a total capacity of "
            "93.02 GiB of which 1.18 GiB is free. Process 2752205 has 91.82 GiB memory in use. "
            "Of the allocated memory 90.63 GiB is allocated by PyTorch, and 120.54 MiB is "
            "reserved by PyTorch but unallocated.")
    n = complete_oom_numbers(extract_oom_fields(text))
    assert n["other_processes"] == []
    assert n["other_processes_bytes"] == 0
    assert diagnose_oom(n) == "too-large"


def test_capacty_typo_of_pytorch_21_is_read() -> None:
    text = ("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacty of "
            "79.15 GiB of which 24.12 MiB is free.")
    fields = extract_oom_fields(text)
    assert fields["capacity_bytes"] == gib(79.15)
    assert fields["free_bytes"] == mib(24.12)


def test_sizes_in_bytes_and_kib_are_read() -> None:
    fields = extract_oom_fields("Tried to allocate 512 bytes. GPU 0 has a total capacity of "
                                "4.00 GiB of which 0 bytes is free.")
    assert fields["requested_bytes"] == 512
    assert fields["free_bytes"] == 0


def test_missing_numbers_stay_null_never_zero() -> None:
    n = complete_oom_numbers({"requested_bytes": gib(1)})
    assert n["capacity_bytes"] is None and n["fragmentation_pct"] is None
    assert n["other_processes"] is None and n["non_pytorch_bytes"] is None
    # the request alone: nothing it did not fit is stated, so nothing is concluded
    assert diagnose_oom(n) == "unknown"
    assert diagnose_oom(complete_oom_numbers({})) == "unknown"


def test_too_large_needs_a_figure_beside_the_request() -> None:
    request = {"requested_bytes": gib(2), "gpu_index": 0}
    assert diagnose_oom(numbers(**request, capacity_bytes=gib(80))) == "unknown"
    assert diagnose_oom(numbers(**request, capacity_bytes=gib(80),
                                free_bytes=gib(1))) == "too-large"
    assert diagnose_oom(numbers(**request, reserved_bytes=gib(79))) == "too-large"
    assert diagnose_oom(numbers(**request, process_bytes=gib(79))) == "too-large"
    # larger than the whole GPU needs nothing else
    assert diagnose_oom(numbers(requested_bytes=gib(100), capacity_bytes=gib(80))) == "too-large"


# --- one parser for every reader -----------------------------------------------------------

TORCH21_OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. "
               "GPU 0 has a total capacty of 14.75 GiB of which 857.06 MiB is free. Including "
               "non-PyTorch memory, this process has 13.91 GiB memory in use. Of the allocated "
               "memory 12.10 GiB is allocated by PyTorch, and 1.52 GiB is reserved by PyTorch "
               "but unallocated.")


def test_torch21_capacity_typo_is_read_by_every_reader() -> None:
    """torch 2.1 printed "capacty": the capacity must still be read, for validate and retry too."""
    from gpu_audit.knowledge.oom import oom_numbers

    numbers = oom_numbers(TORCH21_OOM)
    assert numbers["capacity_bytes"] == gib(14.75)
    assert numbers["free_bytes"] == mib(857.06)
    assert numbers["reserved_bytes"] == gib(12.10) + gib(1.52)
    incident = only(classify_text(TORCH21_OOM, torch_version="2.1.2"))
    assert incident.numbers["capacity_bytes"] == numbers["capacity_bytes"]


# explain's out-of-memory signatures and the kind retry_on_oom and validate give the same line.
OOM_SIGNATURES = {"cuda-oom/caching-allocator": "torch", "cuda-oom/cuda-error": "device",
                  "nvml-assert-oom/caching-allocator": "masked"}


def _corpus_oom_lines() -> list[tuple[str, str, str]]:
    """(fixture, signature, line) for every line of the explain corpus that is a CUDA OOM alone."""
    from tests.explain.helpers import FIXTURES

    found = []
    for path in sorted(FIXTURES.glob("*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if "memory" not in line.lower() and "NVML_SUCCESS" not in line:
                continue
            for incident in classify_text(line, torch_version="2.3.1"):
                if incident.signature in OOM_SIGNATURES:
                    found.append((path.name, incident.signature, line))
    return found


# Raw allocation failures from every era, which no fixture log holds whole.
RAW_OOM_MESSAGES = (
    "RuntimeError: cuda runtime error (2) : out of memory at "
    "/pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
    "RuntimeError: CUDA error: out of memory",
    "NCCL WARN Cuda failure 'out of memory'",
    "RuntimeError: CUDA driver error: CUDA_ERROR_OUT_OF_MEMORY",
    "torch.OutOfMemoryError: Out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.10 GiB",
    "RuntimeError: HIP out of memory. Tried to allocate 1.00 GiB",
)


def _raw_oom_lines() -> list[tuple[str, str, str]]:
    found = []
    for line in RAW_OOM_MESSAGES:
        incident = only(classify_text(line, torch_version="2.3.1"))
        assert incident.signature in OOM_SIGNATURES, line
        found.append(("inline", incident.signature, line))
    return found


CORPUS_OOM_LINES = _corpus_oom_lines() + _raw_oom_lines()


def test_the_corpus_has_oom_messages_of_every_generation() -> None:
    signatures = {signature for _, signature, _ in CORPUS_OOM_LINES}
    assert {"cuda-oom/caching-allocator", "cuda-oom/cuda-error",
            "nvml-assert-oom/caching-allocator"} <= signatures


@pytest.mark.parametrize(("fixture", "signature", "line"), CORPUS_OOM_LINES,
                         ids=[f"{f}:{s}" for f, s, _ in CORPUS_OOM_LINES])
def test_every_oom_explain_knows_has_the_same_kind_for_retry_and_validate(
        fixture: str, signature: str, line: str) -> None:
    from gpu_audit.knowledge.oom import oom_kind_of_text

    expected = OOM_SIGNATURES[signature]
    assert oom_kind_of_text(line) == expected


def test_a_message_retyped_in_lower_case_keeps_its_sizes() -> None:
    # A user quoting the error by hand: the words and units in lower case.
    log = ('I get the "cuda out of memory" after a few minutes of training.\n\n'
           '"cuda out of memory. tried to allocate 30.00 mib (gpu 0; 8.00 gib total capacity; '
           '7.04 gib already allocated; 0 bytes free; 7.28 gib reserved in total by pytorch) if '
           'reserved memory is >> allocated memory try setting max_split_size_mb to avoid '
           'fragmentation."\n')
    oom = only([i for i in classify_text(log) if i.cls == "cuda-oom"])
    n = oom.numbers
    assert n["requested_bytes"] == mib(30.00) and n["gpu_index"] == 0
    assert n["capacity_bytes"] == gib(8.00) and n["free_bytes"] == 0
    assert n["reserved_bytes"] == gib(7.28) and n["allocated_bytes"] == gib(7.04)
