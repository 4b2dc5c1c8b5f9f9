"""Shapes read since the thirty-sixth held-out set: a kernel's assertion whose backticks a page
dropped, kernel faults by the names .NET bindings give CUDA's statuses and by CUDA's own
description, a program's padded "Cuda failure...: misaligned address", a program's check of a
cuBLAS call by name, an RDMA completion queue's failed entry, a segfault told with expandable
segments, an issue titled like a commit, a guide in Traditional Chinese, and power-offs told
with the operating system or the power as subject. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain.mentions import EXPLAINER_MIN_CUES, explainer_cues
from gpu_audit.explain.signatures import SIGNATURES
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root

_POWER_LOSS = next(sig for sig in SIGNATURES if sig.id == "gpu-hardware/power-loss-told")


@pytest.mark.parametrize(("name", "signature"), [
    ("kernel_assert_quotes_lost.log", "device-assert/kernel-assertion"),
    ("dotnet_miner_illegal_address.log", "illegal-memory-access/illegal-address"),
    ("padded_cuda_failure_misaligned.log", "illegal-memory-access/misaligned-address"),
    ("cublas_call_check_not_supported.log", "cublas-failure/call-failed"),
    ("rdma_cqe_retry_exceeded.log", "nccl/network"),
    # an issue's "docs:" tag makes it no pull request: its title is the writer's failure
    ("docs_issue_nvml_mismatch_title.log", "nvml-unavailable/init-failed"),
    # a crash met as a noun, with the setting: "We hit a segfault when ... with ...:True"
    ("expandable_segfault_told_issue.log", "alloc-conf/expandable-told"),
])
def test_the_failure_is_named(name: str, signature: str) -> None:
    found = root(name)
    assert found.signature == signature
    assert found.is_failure


def test_the_assertion_without_backticks_keeps_its_condition_and_place() -> None:
    found = root("kernel_assert_quotes_lost.log")
    assert found.numbers["assertion"].startswith("index >= -sizes[i]")
    assert found.numbers["source_line"] == 92
    assert "outside the dimension" in found.numbers["hint"]


def test_the_completion_status_is_read() -> None:
    assert root("rdma_cqe_retry_exceeded.log").numbers["status"] == 12


def test_the_cublas_call_is_named() -> None:
    assert root("cublas_call_check_not_supported.log").numbers["call"] == (
        "cublasLtMatmulAlgoGetHeuristic")


def test_a_traditional_chinese_guide_raises_no_failure() -> None:
    found = incidents("device_assert_guide_zh_tw.log")
    assert found  # the quoted message is still read ...
    assert not [i for i in found if i.is_failure]  # ... as the guide's example


@pytest.mark.parametrize("line", [
    "在本指南結束時,您會知道如何排查",  # this guide
    "常見原因包括:",  # common causes
    "# 如何修復這個錯誤",  # how to fix
    "當核心的檢查失敗時,會出現此錯誤。",  # this error appears when
])
def test_chinese_guide_phrases_are_explainer_cues(line: str) -> None:
    assert explainer_cues([line])


def test_one_chinese_guide_phrase_alone_is_not_an_explainer() -> None:
    assert len(explainer_cues(["常見原因包括:"])) < EXPLAINER_MIN_CUES


@pytest.mark.parametrize(("line", "told"), [
    ("Windows 10 shuts down when using GPU (tf 2.1 with keras)", True),
    ("Ubuntu reboots during training at a large batch", True),
    ("when I train on my laptop, after a while the power goes off and it runs on battery", True),
    # a condition, and a power plan with no load
    ("If Windows shuts down when training, check the PSU", False),
    ("the power goes off at night by the building's schedule", False),
])
def test_power_off_wordings(line: str, told: bool) -> None:
    assert bool(_POWER_LOSS.regex.search(line)) is told


@pytest.mark.parametrize(("line", "signature"), [
    ("GPU 1: solver loop ErrorMisalignedAddress", "illegal-memory-access/misaligned-address"),
    ("GPU 1: solver loop ErrorIllegalInstruction", "illegal-memory-access/illegal-instruction"),
    ("GPU 1: solver loop ErrorLaunchFailed", "illegal-memory-access/launch-failure"),
])
def test_dotnet_status_names(line: str, signature: str) -> None:
    sig = next(sig for sig in SIGNATURES if sig.id == signature)
    assert sig.regex.search(line)
    assert not sig.regex.search(line.replace("Error", "NoError"))


_EXPANDABLE = next(sig for sig in SIGNATURES if sig.id == "alloc-conf/expandable-told")


@pytest.mark.parametrize(("line", "told"), [
    ("We ran into a segfault when loading models with expandable_segments:True", True),
    ("Segmentation fault under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", True),
    # advice, and the setting named with no crash
    ("If you see a segfault with expandable_segments:True, turn it off", False),
    ("We train with expandable_segments:True on every node", False),
])
def test_segfault_with_expandable_segments_wordings(line: str, told: bool) -> None:
    assert bool(_EXPANDABLE.regex.search(line)) is told
