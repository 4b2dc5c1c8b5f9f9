"""``gpu_audit.oom``: every OOM shape PyTorch raises is recognised, and retries clean up, halve
the batch, back off and give up honestly."""

from __future__ import annotations

import logging

import pytest

import gpu_audit
from gpu_audit.knowledge.oom import (
    DEVICE_OOM,
    HOST_OOM,
    LIBRARY_OOM,
    MASKED_OOM,
    TORCH_OOM,
    oom_kind,
    oom_numbers,
)
from gpu_audit.oom import OomPolicy, OomRetrier, retry_on_oom

torch = pytest.importorskip("torch")

NEW_OOM = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
           "3.81 GiB of which 5.12 MiB is free. Including non-PyTorch memory, this process has "
           "3.20 GiB memory in use. Of the allocated memory 2.97 GiB is allocated by PyTorch, and "
           "123.45 MiB is reserved by PyTorch but unallocated.")
OLD_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 7.79 GiB total capacity; "
           "6.97 GiB already allocated; 5.12 MiB free; 7.10 GiB reserved in total by PyTorch)")
NVML_ASSERT = ('NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at '
               '"/pytorch/c10/cuda/CUDACachingAllocator.cpp":1090, please report a bug')


@pytest.mark.parametrize(("error", "kind"), [
    (torch.OutOfMemoryError(NEW_OOM), TORCH_OOM),
    (torch.cuda.OutOfMemoryError("x"), TORCH_OOM),
    (RuntimeError(OLD_OOM), TORCH_OOM),
    (RuntimeError("Out of memory. Tried to allocate 2.00 GiB. GPU 0 has ..."), TORCH_OOM),
    (RuntimeError(NVML_ASSERT), MASKED_OOM),
    (RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously "
                  "reported"), DEVICE_OOM),
    (RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
     LIBRARY_OOM),
    (RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't "
                  "allocate memory: you tried to allocate 68719476736 bytes."), HOST_OOM),
    (MemoryError(), HOST_OOM),
])
def test_every_form_of_out_of_memory_is_recognised(error: BaseException, kind: str) -> None:
    assert oom_kind(error) == kind


@pytest.mark.parametrize("error", [
    RuntimeError("CUDA error: an illegal memory access was encountered"),
    RuntimeError('NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/PeerToPeerAccess.cpp"'
                 ":107"),  # the expandable-segments NVML assert is not an OOM
    ValueError("CUDA out of memory"),  # not an error torch raises: a bug in the caller
    KeyboardInterrupt(),
])
def test_other_errors_are_not_mistaken_for_oom(error: BaseException) -> None:
    assert oom_kind(error) is None


def test_numbers_come_out_of_both_message_generations() -> None:
    new = oom_numbers(NEW_OOM)
    assert new["requested_bytes"] == 20 * 1024**2
    assert new["free_bytes"] == round(5.12 * 1024**2)
    assert new["allocated_bytes"] == round(2.97 * 1024**3)
    assert new["reserved_unallocated_bytes"] == round(123.45 * 1024**2)
    assert new["capacity_bytes"] == round(3.81 * 1024**3)
    old = oom_numbers(OLD_OOM)
    assert old["capacity_bytes"] == round(7.79 * 1024**3)
    assert old["reserved_bytes"] == round(7.10 * 1024**3)


class FitsAtQuarterBatch:
    """A training step that only fits once the batch is a quarter of its size."""

    def __init__(self) -> None:
        self.scale = 1.0
        self.calls = 0

    def shrink(self, scale: float) -> None:
        self.scale = scale

    def step(self) -> str:
        self.calls += 1
        if self.scale > 0.25:
            raise torch.OutOfMemoryError(NEW_OOM)
        return "trained"


def test_retry_halves_the_batch_until_it_fits_and_backs_off_exponentially(
        caplog: pytest.LogCaptureFixture) -> None:
    job = FitsAtQuarterBatch()
    waits: list[float] = []
    retrier = OomRetrier(OomPolicy(max_retries=3, backoff_s=0.5), shrink=job.shrink,
                         sleep=waits.append)
    with caplog.at_level(logging.WARNING, logger="gpu_audit.oom"):
        assert retrier.call(job.step) == "trained"
    assert job.calls == 3
    assert waits == [0.5, 1.0]
    assert [r.batch_scale for r in retrier.history] == [0.5, 0.25]
    assert retrier.scale == 0.25  # kept for the next call
    assert len([r for r in caplog.records if "retry" in r.getMessage()]) == 2


def test_persistent_oom_reraises_the_original_error_with_a_note() -> None:
    def never_fits() -> None:
        raise torch.OutOfMemoryError(NEW_OOM)

    retrier = OomRetrier(OomPolicy(max_retries=2, backoff_s=0), sleep=lambda _: None)
    with pytest.raises(torch.OutOfMemoryError) as caught:
        retrier.call(never_fits)
    assert "still out of memory after 2 retries" in "\n".join(caught.value.__notes__)
    assert [r.gave_up for r in retrier.history] == [False, False, True]


def test_errors_that_are_not_oom_pass_straight_through() -> None:
    calls = []

    def buggy() -> None:
        calls.append(1)
        raise ValueError("shape mismatch")

    with pytest.raises(ValueError):
        OomRetrier(sleep=lambda _: None).call(buggy)
    assert calls == [1]


def test_the_failed_steps_tensors_are_freed_before_the_retry() -> None:
    """The failed call's frames hold its tensors; the retry must not run while they live."""
    import weakref

    seen: list[weakref.ref] = []

    def step() -> str:
        big = torch.ones(1024)
        if not seen:
            seen.append(weakref.ref(big))
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.00 KiB")
        assert seen[0]() is None, "the first attempt's tensor is still alive"
        return "ok"

    assert OomRetrier(OomPolicy(backoff_s=0), sleep=lambda _: None).call(step) == "ok"


def test_shrink_that_cannot_go_lower_keeps_the_scale() -> None:
    attempts = []

    def step() -> None:
        attempts.append(1)
        if len(attempts) < 3:
            raise torch.OutOfMemoryError("CUDA out of memory.")

    retrier = OomRetrier(OomPolicy(max_retries=3, backoff_s=0), shrink=lambda scale: False,
                         sleep=lambda _: None)
    retrier.call(step)
    assert retrier.scale == 1.0 and len(attempts) == 3


def test_public_decorator_from_the_package_root() -> None:
    scales: list[float] = []
    state = {"fail": 1}

    @gpu_audit.retry_on_oom(max_retries=1, backoff_s=0, shrink=scales.append)
    def train_step(x: int) -> int:
        if state["fail"]:
            state["fail"] -= 1
            raise RuntimeError("CUDA error: out of memory")
        return x * 2

    assert train_step(21) == 42
    assert scales == [0.5]
    assert train_step.retrier.history[0].kind == DEVICE_OOM  # type: ignore[attr-defined]
    assert retry_on_oom is gpu_audit.retry_on_oom


def test_bad_policy_values_are_refused() -> None:
    with pytest.raises(ValueError):
        OomPolicy(max_retries=-1)
    with pytest.raises(ValueError):
        OomPolicy(backoff_factor=0.5)
