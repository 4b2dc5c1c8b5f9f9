"""Shapes read since the 57th and 58th held-out sets: a pull request that improves how an error
is reported quotes it; an issue whose writer met the failure stays a report when a maintainer
explains it; the CPU named as the device a module falls back to is not the host's memory; and
titles: TensorFlow's exception by its name, an exit status 137, "CUDA memory errors",
nvidia-smi hanging, torchrun's -9 without its pid, torch.cuda.is_available() "---> false".
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root
from tests.explain.helpers import text_incidents


def test_a_pull_request_that_improves_error_reporting_quotes_the_error() -> None:
    assert not [i for i in incidents("pull_request_improves_error_reporting.log")
                if i.is_failure]


def test_an_issue_whose_writer_met_it_stays_a_report_when_a_maintainer_explains() -> None:
    found = root("issue_own_run_maintainer_explains.log")
    assert found.cls == "cuda-oom" and not found.title.startswith("Quoted")


def test_a_module_that_falls_back_to_the_cpu_leaves_the_gpu_s_memory_told() -> None:
    assert root("oom_told_module_falls_back_to_cpu.log").cls == "cuda-oom"


def test_tensorflow_s_exception_by_its_name_in_a_title() -> None:
    found = root("title_resource_exhausted_error_bfc_chunks.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/tensorflow")


_REPORT = "\n\nalex · description · 2026-01-02\nIt happens every time I start it.\n"


@pytest.mark.parametrize(("title", "expected"), [
    ("# Error code 137 when loading the 13B model", "host-oom"),
    ("# CUDA Memory Errors at first epoch at default batch size", "cuda-oom"),
    ("# nvidia-smi hangs on the new node", "nvml-unavailable"),
    ("# torch.cuda.is_available() ---> false", "driver-mismatch"),
    ("# error of multi-GPU: torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
     "local_rank: 0", "host-oom"),
    # a question of what a status means names no failure
    ("# What does exit code 137 mean for a container?", None),
])
def test_titles_read_since_the_57th_and_58th_sets(tmp_path: Path, title: str,
                                                  expected: str | None) -> None:
    text = "example-lab/trainer · issue #12 · open · Python\n" + title + _REPORT
    found = [i.cls for i in text_incidents(tmp_path, text) if i.is_failure]
    assert found[:1] == ([expected] if expected else [])


def test_a_gpu_off_the_bus_gives_the_xid_its_line_names(tmp_path: Path) -> None:
    text = ("example-lab/device-plugin · issue #38 · open · Go\n"
            "# [Bug]: A GPU that has fallen off the bus (Xid 79) makes every allocation fail\n")
    found = [i for i in text_incidents(tmp_path, text) if i.is_failure]
    assert (found[0].signature, found[0].numbers.get("xid")) == ("gpu-hardware/fallen-off-bus", 79)


@pytest.mark.parametrize(("title", "expected"), [
    ("# Assertion error with class labels (t >= 0 && t < n_classes).", "device-assert"),
    ("# 训练时经常掉卡，重启后恢复", "gpu-hardware"),
])
def test_a_kernel_assertion_s_condition_and_a_card_lost_in_chinese(
        tmp_path: Path, title: str, expected: str) -> None:
    text = "example-lab/seg · issue #2 · closed · Python\n" + title + "\n"
    assert [i.cls for i in text_incidents(tmp_path, text) if i.is_failure][:1] == [expected]


def test_a_card_lost_in_a_condition_in_chinese_is_no_telling(tmp_path: Path) -> None:
    text = "# 说明\n如果训练时掉卡，先检查电源和PCIe插槽。\n"
    assert [i for i in text_incidents(tmp_path, text) if i.is_failure] == []


def test_a_distributed_run_told_hanging_in_a_thread_s_body() -> None:
    # keyed by its verb in the middle of the thread (not among its last lines)
    found = root("distributed_hang_told_mid_thread.log")
    assert (found.cls, found.signature) == ("nccl", "nccl/hang-told")


@pytest.mark.parametrize(("line", "expected"), [
    ("With DeepSpeed ZeRO-3 the training hangs after a few steps.\n", ["nccl"]),
    ("多卡训练时卡住不动，没有报错。\n", ["nccl"]),
    # a condition, a rule, and a run with one GPU
    ("# Notes\nIf DDP training hangs, set NCCL_DEBUG=INFO.\n", []),
    ("# Notes\nDDP training usually hangs when one rank crashes.\n", []),
    ("# Notes\nThe single-GPU training hangs at epoch 3.\n", []),
])
def test_distributed_hang_wordings(tmp_path: Path, line: str, expected: list[str]) -> None:
    assert [i.cls for i in text_incidents(tmp_path, line) if i.is_failure] == expected
