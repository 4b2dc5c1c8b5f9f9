"""Failures named in a title in more words (typing slips, a tool's own wording, the allocator's
vocabulary), a DataLoader worker's death without its pid or cut before its signal, XLA's list of
peak buffers without the message above it, an error constant compared in code, an allocator
setting that did not take effect as the root cause when nothing else failed, texts that quote
(notices, requests about a message's wording, pull request templates and change titles, error
pages, a question to the reader), srun's killed task, and a heading that restates a message.
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import OWN_RUN, read_head, title_failure
from gpu_audit.explain.mentions import explainer_cues
from gpu_audit.model import Severity
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root

_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 1.12 GiB is free.\n")
_EXPANDABLE = ("[W1203 08:41:17.220431 CUDAAllocatorConfig.h:30] Warning: expandable_segments not "
               "supported on this platform (function operator())\n")


def failures(text: str) -> list[str]:
    return [i.cls for i in classify_text(text, torch_version=None) if i.is_failure]


# --- titles -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("title", "body", "expected"), [
    # one typing slip in a key word
    ("# failed to initalize NVML: ERROR_LIBRARY_NOT_FOUND", "I see it on start-up.",
     "nvml-unavailable"),
    ("# DataLoader worker is killed by singal: Killed", "I get it after one epoch.", "host-oom"),
    # a tool's own wording of NVML's failure
    ("# Unable to initialise nvidia nvml: Driver/library version mismatch", "I get this error.",
     "nvml-unavailable"),
    ("# nvtop: NVML Driver/library version mismatch", "I get it after an update.",
     "nvml-unavailable"),
    # "OOM" with the caching allocator's words: the GPU's memory
    ("# OOM although reserved memory is small", "I get it at step 3.", "cuda-oom"),
    ("# DataLoader worker exited unexpectedly", "I get it with 8 workers.", "host-oom"),
    ("# DataLoader process killed after epoch 2", "I get it with 8 workers.", "host-oom"),
    ("# GPU lost from the bus after resume", "I see it in dmesg.", "gpu-hardware"),
    # no failure named, a slip too far from the key word, a host "OOM"
    ("# Signal handling when DataLoader workers start", "I use 8 workers.", None),
    ("# DataLoader worker killed by signal: Segmentation fault", "I get it at once.", None),
    ("# failed to inline NVML calls", "I tried it twice.", None),
    ("# OOM on the login node", "I run the preprocessing there.", None),
    ("# OOM-killer ends the job after 80 GB allocated", "I see it in dmesg.", "host-oom"),
    # more failure vocabulary
    ("# Illegal memory access when training with bf16", "I get it at step 9.",
     "illegal-memory-access"),
    ("# NCCL error when training on 2 nodes", "I get it at start-up.", "nccl"),
    ("# Xid 79 during training", "I see it in dmesg.", "gpu-hardware"),
    ("# GPU fell off the bus during training", "I see it in dmesg.", "gpu-hardware"),
    ("# Uncorrectable ECC error on GPU 3", "I see it twice a week.", "gpu-hardware"),
    ("# Out of memory error during training on RTX 3090", "I get it at once.", "cuda-oom"),
    ("# Training gets killed without error", "I run it with 8 workers.", "host-oom"),
    ("# Bus error (core dumped) with DataLoader in docker", "I run 8 workers.", "host-oom"),
    # ... but not where the writer rules memory out, nor in a feature request's title
    ("# Training process killed without error (not a RAM problem)", "I see Xid 31.", None),
    ("# FR: find the OOM incident where a process was killed", "I use it daily.", None),
    ("# [Feature] say which process was killed", "I use it daily.", None),
])
def test_title_wordings(title: str, body: str, expected: str | None) -> None:
    sig_id = title_failure(read_head(f"{title}\n\n{body}\n".encode(), whole=True))
    assert (sig_id.split("/")[0] if sig_id else None) == expected


def test_a_typing_slip_in_the_title_names_the_failure() -> None:
    nvml = root("title_typo_nvml_initialise.log")
    assert nvml.cls == "nvml-unavailable" and nvml.title.startswith("Named in the title")


def test_a_pasted_warning_says_the_text_reports_a_run() -> None:
    # no first-person words, no fenced block: the allocator's warning, pasted inline, is the
    # text's evidence that the OOM of its title happened; the warning stays a warning
    found = incidents("title_oom_reserved_with_pasted_warning.log")
    assert found[0].role == "root-cause" and found[0].cls == "cuda-oom"
    assert found[0].title.startswith("Named in the title")
    warning = next(i for i in found if i.cls == "alloc-conf")
    assert warning.severity == Severity.WARNING


def test_a_title_that_is_itself_a_message_is_read_once() -> None:
    text = ("/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:734: UserWarning: "
            "Can't initialize NVML\n")
    (warning,) = classify_text(text, torch_version=None)
    assert warning.signature == "nvml-unavailable/torch-warning"


# --- DataLoader workers -------------------------------------------------------------------------

def test_a_dataloader_death_cut_before_its_signal() -> None:
    worker = root("dataloader_killed_cut_before_signal.log")
    assert worker.signature == "host-oom/dataloader-killed" and worker.numbers["pids"] == [41177]
    assert worker.locations[0].line == 12


def test_a_dataloader_death_retold_without_its_pid() -> None:
    text = "epoch 2 done\nRuntimeError: DataLoader worker is killed by signal: Killed.\n"
    (worker,) = classify_text(text, torch_version=None)
    assert worker.cls == "host-oom" and worker.numbers["signal"] == "Killed"
    assert worker.title == "A DataLoader worker was killed for memory"


# --- XLA's peak buffers -------------------------------------------------------------------------

def test_xlas_peak_buffers_without_the_message_are_an_oom() -> None:
    oom = root("jax_peak_buffers_without_message.log")
    assert oom.cls == "cuda-oom" and oom.signature == "cuda-oom/xla-peak-buffers"
    assert oom.locations[0].line == 6


def test_xlas_peak_buffers_join_the_message_above_them() -> None:
    text = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
            "to allocate 6442450944 bytes.\nBufferAssignment OOM Debugging.\nPeak buffers:\n"
            + "".join(f"\tBuffer {n}:\n\t\tSize: 1.00GiB\n\t\tXLA Label: fusion\n"
                      f"\t\tShape: f32[{n},1024,1024]\n\t\t==========================\n"
                      for n in range(1, 4)))
    (oom,) = classify_text(text, torch_version=None)
    assert oom.signature == "cuda-oom/xla" and oom.count == 1
    assert oom.numbers["requested_bytes"] == 6 * 1024**3


# --- an error constant compared in code ---------------------------------------------------------

def test_an_error_constant_compared_in_code_is_no_failure() -> None:
    assert [i for i in incidents("feature_request_error_constant_compared.log")
            if i.is_failure] == []


@pytest.mark.parametrize("line", [
    "    if (err == cudaErrorMemoryAllocation) {",
    "    } else if (cudaErrorMemoryAllocation != status) {",
    "      case cudaErrorMemoryAllocation:",
])
def test_comparisons_are_code(line: str) -> None:
    assert failures(f"int main() {{\n{line}\n}}\n") == []


def test_the_constant_as_a_program_printed_it_is_still_a_failure() -> None:
    assert failures("step 4\nCUDA call failed: cudaErrorMemoryAllocation\n") == ["cuda-oom"]


# --- an allocator setting that did not take effect ----------------------------------------------

def test_an_ignored_setting_alone_is_the_root_cause() -> None:
    ignored = root("expandable_unsupported_alone.log")
    assert ignored.signature == "alloc-conf/expandable-unsupported"
    assert ignored.severity == Severity.ERROR and "Nothing else" in ignored.explanation


def test_expandable_segments_on_a_kernel_without_pidfd_getfd_is_the_root_cause() -> None:
    failed = root("expandable_ipc_old_kernel.log")
    assert failed.signature == "alloc-conf/expandable-ipc-kernel"
    assert failed.numbers["syscall"] == "pidfd_getfd" and "5.6" in failed.explanation
    assert failed.numbers["option"] == "expandable_segments"
    assert "expandable_segments:False" in failed.remedy


def test_an_ignored_setting_in_a_plain_log_stays_a_warning() -> None:
    # a log that may have run well: nothing says a problem happened
    found = classify_text("step 1\n" + _EXPANDABLE + "step 2\nstep 3 done\n",
                          torch_version=None)
    assert [(i.cls, i.severity) for i in found] == [("alloc-conf", Severity.WARNING)]


def test_an_ignored_setting_beside_a_failure_stays_a_warning() -> None:
    found = classify_text("step 1\n" + _EXPANDABLE + "step 2\n" + _OOM, torch_version=None)
    assert [i.cls for i in found if i.is_failure] == ["cuda-oom"]
    warning = next(i for i in found if i.cls == "alloc-conf")
    assert warning.severity == Severity.WARNING and warning.role == "context"


# --- texts that quote: notices, requests about a message, pull requests, error pages -----------

@pytest.mark.parametrize("name", [
    "notice_if_you_encounter_this_error.log",  # the title is the message; "if you encounter"
    "feature_request_better_kill_message.log",  # a title asking for a clearer message
    "pr_template_headings_quote_error.log",  # "Test in your PR that fails without your code"
    "pr_change_title_quotes_oom.log",  # "Adds a flag that ...": a change's title
    "error_page_workarounds_other_errors.log",  # a remedy heading and a list of other errors
    "blog_reader_question_ko.log",  # "... 적 있나요?": a question to the reader
])
def test_quoting_texts_raise_no_error(name: str) -> None:
    assert [(i.signature, i.title) for i in incidents(name) if i.is_failure] == []


@pytest.mark.parametrize(("title", "about"), [
    ("# A clearer error message when a submission runs out of memory", True),
    ("# CUDA out-of-memory message is hard to understand", True),
    ("# [Feature request] more helpful OOM message", True),
    ("# CUDA out of memory when the batch is 64", False),
    ("# Error message: CUDA out of memory", False),
])
def test_a_title_about_a_messages_wording(title: str, about: bool) -> None:
    assert read_head(f"{title}\n\nbody\n".encode(), whole=True).about_message is about


def test_a_request_about_a_message_that_pastes_its_own_run_reports_it() -> None:
    text = ("# Improve the OOM message\n\nIt happened in an eval loop:\n```\n" + _OOM + "```\n"
            "The message could name the memory the caching allocator holds.\n")
    assert failures(text) == ["cuda-oom"]


@pytest.mark.parametrize(("title", "pull_request"), [
    ("# Adds a flag that keeps weights in half precision", True),
    ("# Fixes the NVML lookup on Windows", True),
    ("# [GPU-42] fix(xid): read Xid 79 in the new wording", True),  # after a ticket's key
    ("# Fix for CUDA out of memory does not work", False),  # an issue, not a change
    ("# Uses too much memory after the update", False),
])
def test_a_change_title(title: str, pull_request: bool) -> None:
    assert read_head(f"{title}\n\nbody\n".encode(), whole=True).pull_request is pull_request


def test_a_readers_question_is_an_explainer_phrase_but_the_writers_is_not() -> None:
    from gpu_audit.explain.mentions import explainer_cues
    assert explainer_cues(["Have you ever hit CUDA out of memory halfway through an epoch?"])
    for line in ("If you encounter this error, install the newer driver.",
                 "如果你遇到这个错误,先升级驱动。",
                 "このエラーが出たら、ドライバを更新してください。",
                 "이 오류가 발생하면 드라이버를 업데이트하세요."):
        assert explainer_cues([line]) == {"you-have-seen"}, line
    assert not explainer_cues(["How to fix this?"])
    assert not explainer_cues(["Why does my job get CUDA out of memory at step 3?"])


# --- Slurm's srun, and a heading that restates a message ----------------------------------------

def test_srun_reporting_a_killed_task() -> None:
    killed = root("srun_task_killed_ticket.log")
    assert killed.cls == "host-oom" and killed.signature == "host-oom/sigkill"
    assert killed.numbers["task"] == 0


def test_a_heading_that_restates_a_message_comes_after_the_texts_own() -> None:
    nccl = root("title_restates_ranked_message.log")
    assert nccl.cls == "nccl" and nccl.ranks == [5] and nccl.locations[0].line == 6
    heading = next(i for i in incidents("title_restates_ranked_message.log")
                   if i.locations[0].line == 1)
    assert heading.role in ("related", "consequence")


@pytest.mark.parametrize(("text", "heading"), [
    ("# NCCL error on 8 nodes\n\nI get it every run.\n", True),
    ("NCCL error on 8 nodes\n\nI get it every run.\n", True),  # set off by a blank line
    # a raw log's first line is no heading: it keeps its place in the reading order
    ("RuntimeError: CUDA error: an illegal memory access was encountered\nstep 2\n", False),
    ("[I 12:00:01] NCCL INFO comm 0x1 rank 0\n\nstep 1\n", False),
])
def test_a_heading(text: str, heading: bool) -> None:
    assert read_head(text.encode(), whole=True).heading is heading


# --- bug templates' headings as templates write them, a quote after a wrapped sentence, a
# --- DataLoader death retold, the OOM killer in the writer's words, a translated OOM ------------

@pytest.mark.parametrize("body", [
    "### 2. Steps to reproduce the issue",  # numbered
    "**Describe the bug**",  # in bold
    "### 1. Issue or feature description",  # nvidia-docker's template
])
def test_a_bug_templates_heading_says_the_writer_met_the_failure(body: str) -> None:
    assert read_head(f"# title\n\n{body}\nsome text\n".encode(), whole=True).own_run


def test_a_numbered_template_with_a_numbered_step_list_is_a_report() -> None:
    # ("3. disable the firewall" in the steps reads like a remedy; the template's headings say
    # the writer met the failure)
    nvml = root("template_numbered_headings_nvml_container.log")
    assert nvml.cls == "nvml-unavailable" and nvml.severity >= Severity.ERROR


def test_a_title_under_bold_template_headings_names_the_failure() -> None:
    nvml = root("template_bold_headings_title_nvml.log")
    assert nvml.cls == "nvml-unavailable" and nvml.title.startswith("Named in the title")


def test_an_inline_quote_that_continues_the_sentence_above_is_reported() -> None:
    nccl = root("inline_quote_after_wrapped_sentence.log")
    assert nccl.cls == "nccl" and nccl.locations[0].line == 4


def test_an_inline_quote_after_a_finished_sentence_is_still_an_example() -> None:
    text = ("# Notes on multi-node runs\n\nThe launcher prints its own lines.\n"
            "`RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1207, unhandled system error` "
            "appears when a node cannot reach the others.\n")
    assert failures(text) == []


@pytest.mark.parametrize("line", [
    "DataLoader process (pid 5120) was killed by signal: Killed",
    "DataLoader worker (pid 5120) exited is killed by signal: Killed",
    "DataLoader worker (pid 5120) got killed by signal: Killed.",
])
def test_a_dataloader_death_retold(line: str) -> None:
    assert failures(f"epoch 1\n{line}\n") == ["host-oom"]


def test_a_dataloader_death_in_a_chinese_title() -> None:
    killed = root("dataloader_process_killed_title_zh.log")
    assert killed.signature == "host-oom/dataloader-killed" and killed.numbers["pids"] == [5120]


def test_the_oom_killer_in_the_writers_words() -> None:
    killed = root("oom_killer_in_writers_words.log")
    assert killed.signature == "host-oom/kernel-oom-killer"


@pytest.mark.parametrize(("line", "told"), [
    ("My training was killed by the Linux OOM killer after 3 hours.", True),
    ("we got OOM-killed at step 400", True),
    ("训练跑了两个小时后，进程被系统的 oom killer 杀掉了", True),
    ("学習が OOM killer によって kill されました", True),
    ("학습이 OOM killer에 의해 종료되었습니다", True),
    # a question, a conditional, advice to the reader, a prediction: no kill told
    ("I wonder if it was killed by the OOM killer.", False),
    ("如果进程被OOM killer杀死，dmesg里会有记录", False),
    ("look at the syslog to see if the oom killer killed your process", False),
    ("then the OOM killer will kill it", False),
])
def test_oom_killer_wordings(line: str, told: bool) -> None:
    # (a post's last lines are read whatever the prefilter says)
    assert failures(f"step 1\n{line}\n") == (["host-oom"] if told else [])


def test_a_lower_case_oom_killer_is_read_mid_log() -> None:
    steps = "".join(f"step {n}\n" for n in range(20))
    assert failures(f"{steps}my job was killed by the oom killer\n{steps}") == ["host-oom"]


def test_a_feature_request_about_the_oom_killer_names_no_kill() -> None:
    assert [i for i in incidents("oom_killer_whether_question.log") if i.is_failure] == []


def test_a_translated_oom_message_keeps_its_numbers() -> None:
    oom = root("cuda_oom_translated_title_zh.log")
    assert oom.cls == "cuda-oom" and oom.numbers["gpu_index"] == 1
    assert oom.numbers["requested_bytes"] == 96 * 1024**2
    assert oom.numbers["capacity_bytes"] == round(15.77 * 1024**3)
    assert oom.numbers["free_bytes"] == round(20.12 * 1024**2)
    assert [p["pid"] for p in oom.numbers["other_processes"]] == [40417]


@pytest.mark.parametrize("line", [
    "CUDA内存不足。尝试分配 20.00 MiB",  # no space after CUDA: the prefilter still reads it
    "CUDA のメモリが不足しています。 20.00 MiB を割り当てようとしました",
    "CUDA 메모리 부족. 20.00 MiB를 할당하려고 했습니다",
])
def test_translated_oom_heads(line: str) -> None:
    assert failures(f"step 1\n{line}\nstep 2\nstep 3\nstep 4\nstep 5\nstep 6\nstep 7\n") == [
        "cuda-oom"]


# --- a told "then the error occurs", a page's symptom, a Korean explainer, DataLoader deaths typed
# --- by hand or of another signal, NVML's failure without a reason, a bump, a sacrificed child --

def test_then_the_error_occurs_tells_what_happened() -> None:
    assert root("narrative_then_the_error_occurs.log").cls == "illegal-memory-access"


@pytest.mark.parametrize(("line", "cue"), [
    ("and then the error occurs. What is wrong", False),
    ("This error occurs when the batch is too large.", True),
    ("This happens most often when rendering large images.", True),
    ("Symptom: the pipeline dies halfway", True),
    ("가장 많이 겪는 문제는 CUDA out of memory 오류입니다.", True),
])
def test_explainer_phrases(line: str, cue: bool) -> None:
    from gpu_audit.explain.mentions import explainer_cues
    assert bool(explainer_cues([line])) is cue


@pytest.mark.parametrize("name", [
    "explainer_symptom_happens_most_often_when.log",
    "explainer_ko_common_problem.log",
    "pr_bump_driver_quotes_warning.log",
    "dataloader_aborted_after_cut_title.log",
])
def test_texts_and_crashes_that_are_no_gpu_failure(name: str) -> None:
    assert [i.cls for i in incidents(name) if i.is_failure] == []


def test_a_dataloader_death_typed_by_hand() -> None:
    killed = root("dataloader_typed_lowercase_signal.log")
    assert killed.signature == "host-oom/dataloader-killed"
    assert killed.numbers["signal"] == "Killed" and killed.numbers["pids"] == [812]


def test_a_dataloader_worker_crashed_by_another_signal_is_a_warning() -> None:
    crash = next(i for i in incidents("dataloader_aborted_after_cut_title.log")
                 if i.signature == "host-oom/dataloader-killed")
    assert crash.severity == Severity.WARNING and "(Aborted)" in crash.title


@pytest.mark.parametrize("line", [
    "RuntimeError: DataLoader worker (pid 7781) is killed by signal: Aborted.",
    "RuntimeError: DataLoader worker (pid 7781) is killed by signal: Floating point exception.",
])
def test_a_dataloader_worker_crashed_by_another_signal_alone_opens_nothing(line: str) -> None:
    assert classify_text(line, torch_version=None) == []


def test_nvml_init_failed_without_a_reason() -> None:
    assert root("nvml_init_failed_without_reason.log").signature == "nvml-unavailable/init-failed"


@pytest.mark.parametrize(("title", "pull_request"), [
    ("Update the CI runners' NVIDIA driver to 575.57.08", True),
    ("Bump torch to 2.4.1", True),
    ("Update to 535.104 breaks NCCL", False),
    ("Update driver to 535.104 and now NCCL hangs", False),
])
def test_a_bump_title(title: str, pull_request: bool) -> None:
    assert read_head(f"{title}\n\nbody\n".encode(), whole=True).pull_request is pull_request


def test_the_oom_killer_names_the_child_it_killed() -> None:
    killed = root("kernel_oom_sacrifice_child.log")
    assert killed.numbers["pid"] == 4123 and killed.numbers["process_name"] == "trainer"


# --- a container refused for its CUDA requirement, TensorFlow 1's OOM with its node's GPU -------

def test_a_containers_cuda_requirement_the_driver_cannot_meet() -> None:
    refused = root("container_requirement_escaped_oci.log")
    assert refused.signature == "driver-mismatch/container-requirement"
    assert refused.numbers["required_cuda"] == "11.0"


def test_tensorflow1s_oom_takes_its_gpu_from_the_node_below() -> None:
    oom = root("tensorflow1_oom_node_device.log")
    assert oom.signature == "cuda-oom/tensorflow" and oom.numbers["gpu_index"] == 1
    assert oom.numbers["requested_bytes"] == 64 * 128 * 128 * 32 * 4
    assert len([i for i in incidents("tensorflow1_oom_node_device.log") if i.is_failure]) == 1


# --- an out-of-memory in emphasis, under a cut title, in a report that asks how to fix it ------

@pytest.mark.parametrize("name", [
    "oom_in_markdown_emphasis.log",  # "_RuntimeError: CUDA out of memory_"
    "oom_title_cut_patch_in_reply.log",  # a reply's patch in a plain fence: no pull request
    "oom_title_met_en.log",  # "I met cuda out of memory"
    "oom_title_error_shows_ko.log",  # "위와 같은 에러가 뜨는데"
    "oom_unclosed_quote_asks_how_to_fix.log",  # "I don't know how to fix it" asks
])
def test_an_out_of_memory_the_writer_reports(name: str) -> None:
    oom = root(name)
    assert oom.cls == "cuda-oom" and oom.severity >= Severity.ERROR


def test_a_cut_title_keeps_its_numbers_when_a_reply_pastes_a_patch() -> None:
    oom = root("oom_title_cut_patch_in_reply.log")
    assert oom.numbers["requested_bytes"] == 64 * 1024**2 and oom.numbers["gpu_index"] == 1


def test_an_ecc_error_in_a_title_the_chinese_text_says_it_triggered() -> None:
    assert root("ecc_title_triggered_zh.log").signature == "gpu-hardware/uncorrectable-ecc"


@pytest.mark.parametrize("name", [
    "blog_anecdote_error_showed_ko.log",  # a post's past anecdote: "에러 메시지가 떴습니다"
    "blog_met_problem_one_line_fix_zh.log",  # "遇到以下问题" then the post's fix
])
def test_a_posts_own_anecdote_stays_quoted(name: str) -> None:
    assert [i.cls for i in incidents(name) if i.is_failure] == []


@pytest.mark.parametrize(("body", "pull_request"), [
    ("Saves only the adapter.\n```diff\n@@ -1,3 +1,2 @@\n-a\n+b\n```\n", True),
    ("Same here.\n```\ndiff --git a/t.py b/t.py\n@@ -1,3 +1,2 @@\n-a\n+b\n```\n", False),
])
def test_a_diff_makes_a_pull_request_unless_pasted_by_hand(body: str, pull_request: bool) -> None:
    head = read_head(f"Out of memory when saving\n\n{body}".encode(), whole=True)
    assert head.pull_request is pull_request


@pytest.mark.parametrize(("line", "own"), [
    ("训练时总是在第二个 epoch 触发这个错误", True),
    ("如果触发这个错误，请减小 batch size", False),
    ("학습을 시작하면 위와 같은 에러가 뜨는데요", True),
    ("이 오류가 뜨면 배치 크기를 줄이세요", False),
])
def test_reporting_words_in_chinese_and_korean(line: str, own: bool) -> None:
    assert bool(OWN_RUN.search(line)) is own


# --- a consequence printed above its cause ------------------------------------------------------

def test_a_collectives_timeout_comes_before_the_watchdog_that_hung_behind_it() -> None:
    timeout = root("nccl_watchdog_stuck_before_timeout_line.log")
    assert timeout.signature == "nccl/watchdog-timeout"
    assert timeout.numbers["timeout_ms"] == 600000
    assert timeout.numbers["op_type"] == "_ALLGATHER_BASE"


def test_an_xid_comes_before_the_device_handle_nvidia_smi_could_not_get() -> None:
    xid = root("smi_device_handle_then_xid79.log")
    assert xid.signature == "gpu-hardware/xid" and xid.numbers["xid"] == 79


def test_the_drivers_reset_required_under_a_busy_or_unavailable_device() -> None:
    reset = root("device_unavailable_reset_required.log")
    assert reset.signature == "gpu-hardware/reset-required"
    assert reset.severity == Severity.CRITICAL


# --- a GPU's out-of-memory in the writer's own words ----------------------------------------------

def test_an_out_of_memory_told_in_prose_on_a_named_gpu() -> None:
    oom = root("oom_told_in_prose_gpu_named.log")
    assert oom.signature == "cuda-oom/caching-allocator" and oom.severity >= Severity.ERROR
    assert oom.numbers.get("capacity_bytes") is None  # "24G" is the card, not the message's


@pytest.mark.parametrize(("line", "expected"), [
    ("I'm running out of memory even with batch size 1 on an A6000.", ["cuda-oom"]),
    ("We got out of memory on both V100s at step 200.", ["cuda-oom"]),
    ("I tried it on a 48G A6000 but it failed due to an out of memory error.", ["cuda-oom"]),
    ("If it fails with out of memory on the GPU, I lower the batch size.", []),
    ("If I get out of memory on the GPU, I lower the batch size.", []),
    ("I get out of memory while loading the dataset into RAM on the GPU node.", []),
    ("I keep getting out of memory when tokenizing.", []),  # no GPU named: could be the host's
])
def test_out_of_memory_in_the_writers_words(line: str, expected: list[str]) -> None:
    assert failures(line) == expected


def test_an_out_of_memory_the_writer_says_their_attempt_failed_with() -> None:
    oom = root("oom_failed_due_to_prose_gpu_named.log")
    assert oom.cls == "cuda-oom" and oom.severity >= Severity.ERROR


# --- the caching allocator's NVML assert named in a title, with its source position -------------

def test_a_titles_source_position_says_the_run_printed_the_assert() -> None:
    nvml = root("nvml_assert_position_in_title.log")
    assert nvml.signature == "nvml-assert-oom/caching-allocator"
    assert nvml.numbers == {"source_file": "CUDACachingAllocator.cpp", "source_line": 1132}


@pytest.mark.parametrize(("title", "expected"), [
    ("NVML assert in CUDACachingAllocator.cpp:830 at step 900", "nvml-assert-oom"),
    # no position, no word of the writer's run: a subject, not a report
    ("NVML assert in the caching allocator hides the OOM message", None),
])
def test_the_nvml_assert_in_a_title_without_more_text(title: str, expected: str | None) -> None:
    sig_id = title_failure(read_head(f"{title}\n\nThanks.\n".encode(), whole=True))
    assert (sig_id.split("/")[0] if sig_id else None) == expected


# --- a question in bold, an IPython traceback --------------------------------------------------

def test_a_question_set_in_bold_is_the_writers_not_an_explainers() -> None:
    assert root("nccl_title_bold_question_heading.log").cls == "nccl"
    assert explainer_cues(["### **How to fix this problem?**"]) == set()


def test_an_ipython_traceback_says_the_text_reports_a_run() -> None:
    assert root("oom_title_ipython_traceback_cut.log").signature == "cuda-oom/caching-allocator"


def test_a_driver_too_old_told_without_the_space_before_its_version() -> None:
    # (a comment quoting the assert it got keeps the version, also with no space before it)
    too_old = root("driver_too_old_quoted_without_space.log")
    assert too_old.cls == "driver-mismatch" and too_old.numbers["found_version"] == 7050


def test_a_spawned_process_terminated_with_sigkill() -> None:
    killed = root("spawn_worker_terminated_sigkill.log")
    assert killed.signature == "host-oom/sigkill" and killed.severity >= Severity.ERROR


def test_an_nccl_timeout_named_in_a_chinese_title_the_writer_reports() -> None:
    nccl = root("title_nccl_timeout_zh_own_machine.log")
    assert nccl.signature == "nccl/watchdog-timeout" and nccl.title.startswith("Named in the title")
