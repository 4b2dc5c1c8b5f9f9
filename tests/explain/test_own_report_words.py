"""A writer who reports their own failure in words the first-person patterns did not know: a
run that went wrong or a fix that did not help, told in Chinese ("训练出错", "还是不行"), a label
over the writer's paste ("报错信息："), the writer at a loss ("not sure what to do"), their setup
said to be current ("I have the latest driver"), a reply that met the same error. Such a text is
a report even when it reaches explain without a line saying where it was copied from; a guide's
conditions ("如果还是不行") and its plain "错误信息" heading stay an explainer's. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain.documents import OWN_RUN, read_head
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("line", "own"), [
    ("GPU训练出错", True),
    ("评测是正常的，但是运行微调报错了，怎么解决呢？", True),
    ("按照文档调小了 batch_size，还是不行。", True),
    ("可我调到1后仍然不能解决", True),
    ("报错信息：", True),
    ("**错误信息：**", True),
    ("I have the latest nvidia driver and version 4.2, not sure what to do.", True),
    ("I don't know what to do anymore", True),
    ("Getting same error inside the image", True),
    # a guide's conditions and headings, and a reader addressed
    ("如果调小之后还是不行，再打开梯度检查点", False),
    ("还是报错的话，重启机器", False),
    ("训练出错的解决办法", False),
    ("运行报错了怎么办", False),
    ("错误信息:", False),
    ("If you're not sure what to do, start with the driver.", False),
])
def test_own_report_words(line: str, own: bool) -> None:
    assert bool(OWN_RUN.search(line)) is own


@pytest.mark.parametrize(("name", "cls"), [
    ("report_fix_did_not_help_zh.log", "cuda-oom"),
    ("report_run_went_wrong_zh.log", "cudnn-failure"),
    ("report_at_a_loss_latest_driver.log", "illegal-memory-access"),
    ("report_same_error_in_a_reply.log", "driver-mismatch"),
    # (a thread's labels line above its title, its source line left off: the title is below it)
    ("report_labels_line_first.log", "nccl"),
])
def test_a_thread_reporting_its_own_failure_without_its_source_line(name: str, cls: str) -> None:
    assert root(name).cls == cls


def test_a_guide_with_conditions_and_a_plain_heading_stays_quoted() -> None:
    assert [i.cls for i in incidents("guide_if_still_failing_zh.log") if i.is_failure] == []


def test_a_commit_shaped_title_below_a_labels_line_is_no_pull_request() -> None:
    text = (b"labels: docs-bug\n# docs: Failed to initialize NVML: Driver/library version "
            b"mismatch\n\nI installed the driver and ran nvidia-smi:\n")
    head = read_head(text, whole=True)
    assert head.title.startswith("# docs:")
    assert head.pull_request is False
