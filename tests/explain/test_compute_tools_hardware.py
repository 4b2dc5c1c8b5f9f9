"""GPU compute tools outside deep learning (password crackers, miners, volunteer computing) and
the hardware they wear out: CUDA's kernel faults after a driver call's name, a program's
temperature abort, a miner's memory check, thermal shutdowns and clocks told as the cause, and a
cluster's GPU told failing. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.explain.documents import read_head, title_failure
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root
from tests.explain.helpers import text_incidents


def test_a_driver_calls_name_before_a_misaligned_address() -> None:
    fault = root("cracker_cuda_call_misaligned_address.log")
    assert fault.signature == "illegal-memory-access/misaligned-address"


def test_an_unspecified_launch_failure_alone_in_backticks() -> None:
    fault = root("cracker_cuda_call_launch_failure.log")
    assert fault.signature == "illegal-memory-access/launch-failure"


def test_a_programs_abort_at_its_temperature_limit() -> None:
    hot = root("temperature_limit_abort.log")
    assert (hot.cls, hot.signature) == ("gpu-hardware", "gpu-hardware/temperature-abort")
    assert hot.numbers["device"] == 1


def test_a_miners_unrecoverable_memory_error() -> None:
    memory = root("miner_memory_error.log")
    assert memory.signature == "gpu-hardware/miner-memory-error"
    assert memory.numbers["gpu_index"] == 4


def test_the_gpu_temperature_just_before_a_shutdown() -> None:
    assert root("thermal_shutdown_temperature_before.log").signature == (
        "gpu-hardware/overheat-told")


def test_a_memory_downclock_told_as_the_fix_makes_the_card_the_root() -> None:
    # the kernel's launch failure in the title is the overclocked card's, not the program's
    found = incidents("memory_downclock_fixed.log")
    first = next(i for i in found if i.role == "root-cause")
    assert first.signature == "gpu-hardware/overclock-told"
    assert any(i.signature == "illegal-memory-access/launch-failure" for i in found)


def test_an_unknown_error_after_a_driver_calls_name_is_not_read_as_the_gpus(tmp_path: Path
                                                                           ) -> None:
    # the JIT linker's call answers "unknown error" for a kernel it cannot link: no GPU fault
    body = "\n".join(f"* Device #{n}: skipped" for n in range(1, 9))
    found = text_incidents(tmp_path, f"Session..........: crack\ncuLinkComplete(): unknown error"
                                     f"\n{body}\n")
    assert not [i for i in found if i.is_failure]


def test_a_guide_on_clocks_and_temperatures_raises_nothing() -> None:
    assert not [i for i in incidents("overclock_temperature_guide.log") if i.is_failure]


@pytest.mark.parametrize(("title", "expected"), [
    ("# One of the cluster GPUs is failing, it seems.", "gpu-hardware/card-dead-told"),
    ("# Two of our A100 GPUs have died this week", "gpu-hardware/card-dead-told"),
    ("# I am getting constant thermal shutdowns while crunching", "gpu-hardware/overheat-told"),
    ("# Cant start the cracker because of unsupported ptx version",
     "driver-mismatch/unsupported-ptx"),
    # failing to do something, not failing hardware
    ("# One of the GPUs is failing to initialize after the update", None),
    ("# Thermal shutdown threshold setting", None),
])
def test_compute_tool_title_wordings(title: str, expected: str | None) -> None:
    head = read_head(f"example/tool · issue #9 · open\n{title}\n\nI see it.\n".encode(),
                     whole=True)
    assert title_failure(head) == expected


@pytest.mark.parametrize(("line", "expected"), [
    ("So far it looks like my memory clock was too high.", "gpu-hardware/overclock-told"),
    ("Lowering the memory clock by 200 MHz fixed the freezes.", "gpu-hardware/overclock-told"),
    ("Lowering the memory clock often fixes such freezes.", None),
    ("If your memory clock is too high the card freezes.", None),
    ("I'll try to turn down my memory clock and report back.", None),
    ("IMO this sounds like a cooling issue on the owner's side.", "gpu-hardware/overheat-told"),
    ("If it sounds like a cooling issue, clean the fans first.", None),
])
def test_clocks_and_cooling_told_as_the_cause(line: str, expected: str | None) -> None:
    from gpu_audit.explain.classify import match_signature
    found = match_signature(line)
    assert (found[0].id if found else None) == expected


@pytest.mark.parametrize(("line", "expected"), [
    ("cuStreamSynchronize(): the launch timed out and was terminated",
     "gpu-hardware/launch-timeout"),
    ("cuLaunchKernel(): an illegal instruction was encountered",
     "illegal-memory-access/illegal-instruction"),
    ("cuEventSynchronize(): misaligned address", "illegal-memory-access/misaligned-address"),
])
def test_cuda_words_after_a_driver_calls_name_mid_log(tmp_path: Path, line: str,
                                                      expected: str) -> None:
    # the call's line sits mid-log, with no "error" and no other key on it
    body = "\n".join(f"Progress.........: {n}/9000 ({n / 90:.2f}%)" for n in range(0, 900, 90))
    found = text_incidents(tmp_path, f"Session..........: crack\n{line}\n{body}\n")
    assert [i.signature for i in found if i.role == "root-cause"] == [expected]
