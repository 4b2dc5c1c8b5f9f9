"""Texts that quote failures without reporting them (pull requests, diffs, one-phrase
explainers, message templates, sentences about code), threads that name their failure only in
the title, Windows' NVML library missing, and Xid events under a cuDNN failure. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import read_head, title_failure
from gpu_audit.model import Severity
from tests.explain.helpers import SHAPES
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(name: str):  # type: ignore[no-untyped-def]
    return [i for i in incidents(name) if i.is_failure]



# --- texts that quote failures: no error-level incident ---------------------------------------

@pytest.mark.parametrize("name", [
    "pr_commit_title_diff_quoting_xids.log",  # a commit title and a fenced diff of Xid lines
    "pr_this_patch_handles_library_not_found.log",  # "This patch catches ..." in its first lines
    "pr_summary_test_plan_allocator_diff.log",  # review trailers and a diff of TORCH_CHECKs
    "explainer_one_cue_only.log",  # one explainer phrase, nobody says it happened to them
    "explainer_placeholder_template_ja.log",  # "Tried to allocate XXX MiB": a template
    "code_sentence_backticked_error.log",  # "its handler maps `X` to ...": about code
    "title_only_without_own_run.log",  # a title, but no report of the failure
    "blog_oom_first_line_can_be_solved_ko.log",  # "... 때문에 발생하는 오류", "해결할 수 있다"
    "pr_review_merging_smi_motivation.log",  # a fenced motivation, then "Merging now."
    "pr_ticket_keys_xid_table.log",  # two ticket keys before "fix(...):", Xid lines as data
    "scenario_second_person_fallen_off_bus.log",  # "You launch a ... job": a made-up scenario
])
def test_quoted_failures_raise_no_error(name: str) -> None:
    assert failures(name) == [], [(i.signature, i.title) for i in failures(name)]


@pytest.mark.parametrize("name", [
    "pr_commit_title_diff_quoting_xids.log",
    "pr_this_patch_handles_library_not_found.log",
    "pr_summary_test_plan_allocator_diff.log",
    "pr_review_merging_smi_motivation.log",
    "pr_ticket_keys_xid_table.log",
])
def test_a_pull_request_is_known_from_its_first_lines(name: str) -> None:
    assert read_head((SHAPES / name).read_bytes(), whole=True).pull_request


def test_what_a_pull_request_quotes_stays_as_context() -> None:
    found = incidents("pr_this_patch_handles_library_not_found.log")
    assert found and all(i.severity <= Severity.INFO for i in found)
    assert all(i.title.startswith("Quoted in an explanation") for i in found)


def test_an_issue_is_no_pull_request() -> None:
    assert not read_head((SHAPES / "issue_log_then_suggested_diff.log").read_bytes(),
                         whole=True).pull_request


def test_a_report_with_one_explainer_phrase_and_the_writers_own_run_is_a_failure() -> None:
    oom = root("report_one_cue_with_own_run.log")
    assert oom.cls == "cuda-oom" and oom.numbers["requested_bytes"] == 2 * 1024**3


def test_an_issue_log_still_counts_when_a_reply_suggests_a_diff() -> None:
    found = failures("issue_log_then_suggested_diff.log")
    assert [(i.cls, i.locations[0].line) for i in found] == [("alloc-conf", 5)]


def test_a_diff_line_is_a_quote_but_a_log_line_starting_with_a_dash_is_not() -> None:
    quoted = "```diff\n-    RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert [i for i in classify_text(quoted, torch_version=None) if i.is_failure] == []
    logged = "step 7\n-- RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert [i.cls for i in classify_text(logged, torch_version=None) if i.is_failure] == [
        "illegal-memory-access"]


def test_a_template_needs_placeholders_for_its_numbers() -> None:
    real = ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB "
            "total capacity; 6.10 GiB already allocated; 3.50 MiB free; 6.20 GiB reserved in "
            "total by PyTorch)\n")
    assert [i.cls for i in classify_text(real, torch_version=None) if i.is_failure] == [
        "cuda-oom"]


def test_a_training_step_line_is_no_explainer_phrase() -> None:
    text = ("step 1\n[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
            "OpType=ALLGATHER, NumelIn=1, NumelOut=8, Timeout(ms)=600000) ran for 600100 "
            "milliseconds before timing out.\n")
    assert [i.cls for i in classify_text(text, torch_version=None) if i.is_failure] == ["nccl"]


# --- the failure named only in a thread's title -----------------------------------------------

@pytest.mark.parametrize(("name", "cls"), [
    ("title_only_nccl_timeout_info_lines.log", "nccl"),
    ("title_only_fallen_off_bus_template.log", "gpu-hardware"),
])
def test_a_title_names_the_failure_when_the_text_reports_it(name: str, cls: str) -> None:
    incident = root(name)
    assert incident.cls == cls and incident.title.startswith("Named in the title")
    assert incident.locations[0].line == 1 and incident.excerpt.startswith("#")


def test_an_infiniband_completion_error_as_a_title_over_info_lines() -> None:
    # "NET/IB:Got completion ..." without "NCCL WARN" and without a space after the colon
    incident = root("nccl_ib_completion_title_info_lines.log")
    assert incident.signature == "nccl/network" and incident.locations[0].line == 1
    assert incident.numbers["status"] == 12


@pytest.mark.parametrize("name", [
    "oom_title_glog_body_cut_zh.log",  # a glog line below: a program's own log, cut
    "oom_title_hyphenated_question_zh.log",  # "out-of-memory"; "我在 ... 会出现"
])
def test_an_oom_title_over_a_run_the_writer_reports(name: str) -> None:
    incident = root(name)
    assert incident.cls == "cuda-oom" and incident.title.startswith("Named in the title")


@pytest.mark.parametrize(("name", "cls"), [
    ("oom_title_reply_tried_diff.log", "cuda-oom"),  # a "```diff" the reply says it ran
    ("illegal_memory_errors_in_writers_words.log", "illegal-memory-access"),
    ("slurm_oom_title_fenced_command.log", "host-oom"),  # "slurm OOM", whatever the GPU
])
def test_a_title_over_a_text_that_reports_it(name: str, cls: str) -> None:
    incident = root(name)
    assert incident.cls == cls and incident.title.startswith("Named in the title")


def test_a_diff_the_writer_says_they_ran_makes_no_pull_request() -> None:
    head = read_head((SHAPES / "oom_title_reply_tried_diff.log").read_bytes(), whole=True)
    assert not head.pull_request


def test_a_launchers_error_code_minus_9_is_a_sigkill() -> None:
    killed = root("error_code_minus_9_after_hours.log")
    assert killed.signature == "host-oom/sigkill" and killed.is_failure


def test_a_message_quoted_in_the_title_with_what_the_writer_did_is_reported() -> None:
    incident = root("nccl_title_quoted_when_training.log")
    assert incident.cls == "nccl" and incident.title.startswith("Named in the title")


@pytest.mark.parametrize("name", [
    "title_oom_finetune_same_problem.log",  # QLoRA, 13B; "I have the same problem"
    "title_oom_am_i_doing_wrong_screenshot.log",  # "4*a-100"; "Am I doing something wrong?"
])
def test_an_oom_named_with_a_fine_tunings_words_in_a_reported_title(name: str) -> None:
    incident = root(name)
    assert incident.cls == "cuda-oom" and incident.title.startswith("Named in the title")
    assert incident.locations[0].line == 1


@pytest.mark.parametrize(("title", "body", "expected"), [
    ("# Killed error", "I run it on a big image and I get the error killed.", "host-oom"),
    ("# torch.OutOfMemoryError on two 4090s", "```\n| GPU Name |\n```", "cuda-oom"),
    ("# BUG Report using backend:cudaMallocAsync", "I get a crash at start-up.", "alloc-conf"),
    ("# [Troubleshoot]: torch.OutOfMemoryError on 4090s", "```\nnvidia-smi\n```", "cuda-oom"),
    ("# How to fix CUDA out of memory", "I get it every time.", None),  # a question
    ("# fix(nccl): retry on timeout", "This PR adds a retry.", None),  # a pull request
    ("# NCCL timeout", "Some background on collectives.", None),  # nothing says it happened
    ("# OOM error while running LoRA", "I am using CUDA 12.1.", "cuda-oom"),
    ("# 增加 NCCL 超时时间后仍然报错", "我的环境: 2 nodes", "nccl"),
    ("# 如何设置 NCCL 超时时间", "我用 8 张卡", None),  # "how to set ...": a question
    ("# 如何避免 GPU out of memory", "我用 8 张卡", None),
    ("# [Usage] OOM for 7B finetuning 8xA100(40G)", "I tried 2 nodes.", "cuda-oom"),
    ("# [Feature] catch OOM during LoRA fine-tuning", "I have the same problem.", None),
    ("# OOM killed while fine-tuning a 7B model", "I have the same problem.", "host-oom"),
    # a message quoted in the title, then what the writer was doing when it came
    ('"ProcessGroupNCCL\'s watchdog got stuck" when training on 2 nodes', "Any update?", "nccl"),
    ('"ProcessGroupNCCL\'s watchdog got stuck" in the docs', "Some background.", None),
    # a log's own first line, not a title, though a block follows
    ("[I 12:00:01] NCCL INFO comm 0x1 timeout 1800s", "```\nstep 1\n```", None),
    ("2024-05-01 10:00:01 NCCL all-reduce timing out?", "```\nstep 1\n```", None),
])
def test_title_failures(title: str, body: str, expected: str | None) -> None:
    head = read_head(f"{title}\n\n{body}\n".encode(), whole=True)
    sig_id = title_failure(head)
    assert (sig_id.split("/")[0] if sig_id else None) == expected


def test_a_message_in_the_text_outranks_the_title() -> None:
    text = ("# NCCL timeout on 8 nodes\n\nI get this on every run:\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 3 has "
            "a total capacity of 79.15 GiB of which 512.00 MiB is free.\n")
    found = [i for i in classify_text(text, torch_version=None) if i.is_failure]
    assert [i.cls for i in found] == ["cuda-oom"]


# --- Windows: NVML's DLL missing ------------------------------------------------------------

def test_pynvml_reporting_its_library_missing_on_windows() -> None:
    nvml = root("windows_nvml_dll_cut_traceback.log")
    assert nvml.cls == "nvml-unavailable" and nvml.signature == "nvml-unavailable/library-missing"
    assert nvml.locations[0].line == 13


def test_nvml_dll_not_found_in_a_tools_words() -> None:
    text = ("starting\n" + "gpu-monitor: Error: nvml.dll not found, GPU metrics disabled\n"
            + "".join(f"tick {n}\n" for n in range(40)))  # not among the last lines
    (nvml,) = classify_text(text, torch_version=None)
    assert nvml.cls == "nvml-unavailable" and nvml.is_failure and nvml.locations[0].line == 2


@pytest.mark.parametrize(("line", "named", "not_named"), [
    ("gpu-monitor: Error: nvml.dll not found, GPU metrics disabled", "nvml.dll",
     "libnvidia-ml"),
    ("OSError: libnvidia-ml.so.1: cannot open shared object file: No such file or directory",
     "libnvidia-ml.so.1", "nvml.dll"),
])
def test_the_missing_library_is_named_for_the_system_the_log_shows(line: str, named: str,
                                                                    not_named: str) -> None:
    (nvml,) = classify_text(line + "\n", torch_version=None)
    assert named in nvml.title and named in nvml.explanation
    assert not_named not in nvml.title + nvml.explanation + nvml.remedy


def test_a_log_that_does_not_say_its_system_gets_both_libraries() -> None:
    (nvml,) = classify_text("pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found\n",
                            torch_version=None)
    assert "libnvidia-ml.so.1 on Linux, nvml.dll on Windows" in nvml.explanation
    assert "ldconfig" in nvml.remedy and "where nvml.dll" in nvml.remedy


# --- Xid events under a cuDNN failure --------------------------------------------------------

def test_xids_beside_a_cudnn_failure_are_the_root_cause() -> None:
    found = incidents("xid_under_cudnn_internal_error.log")
    first = found[0]
    assert first.role == "root-cause" and first.cls == "gpu-hardware"
    assert first.numbers["xid"] in (31, 43) and "cuDNN/cuBLAS failure" in first.explanation
    library = next(i for i in found if i.cls == "cudnn-failure")
    assert library.role in ("consequence", "related")


def test_xid_13_alone_stays_a_warning() -> None:
    text = ("[ 88.1] NVRM: Xid (PCI:0000:1b:00): 13, pid=771, name=python, Graphics SM Warp "
            "Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address\n")
    (xid,) = classify_text(text, torch_version=None)
    assert xid.severity == Severity.WARNING and xid.role == "context"


# --- a reporter's guess at the cause is no explainer ------------------------------------------

def test_a_guess_at_what_caused_the_writers_failure_keeps_it_reported() -> None:
    # "It seems this error occurs when ...": the writer's guess, not a page explaining the error
    assert root("device_assert_guessed_cause.log").cls == "device-assert"


# --- an NCCL timeout told in Chinese prose ----------------------------------------------------

def test_an_nccl_timeout_the_writer_reports_in_chinese() -> None:
    # "30分钟后报NCCL超时错误": thirty minutes later it reported an NCCL timeout error
    timeout = root("nccl_timeout_told_zh.log")
    assert timeout.signature == "nccl/timeout-told" and timeout.is_failure


def test_an_nccl_timeout_asked_about_in_chinese_is_no_failure() -> None:
    # "如何解决 ... 出现NCCL超时？", "如果NCCL报超时": a question and a condition
    assert failures("nccl_timeout_question_zh.log") == []
