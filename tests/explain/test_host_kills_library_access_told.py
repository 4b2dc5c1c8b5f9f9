"""Host memory kills in more shapes (zsh's job notice right after a progress bar, the kernel's
"oom-kill" noun in a title, the shell's word as a title's message where the text names the
host's memory, the host's memory named in a title beside the failure, a notebook's RAM with the
notebook crashing), an FAQ that answers "what to do about an out-of-memory" (no alarm), NVML's
library that may not be opened, a driver or a build for the wrong architecture told in the
writer's words, and an NCCL hang named with the hang first in a title. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import read_head, title_failure
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(text: str) -> list[str]:
    return [i.signature for i in classify_text(text, torch_version=None) if i.is_failure]


# --- kills -------------------------------------------------------------------------------------

def test_zsh_job_notice_after_a_progress_bar_is_a_kill() -> None:
    found = root("zsh_job_killed_after_progress_bar.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/shell-killed")
    assert found.numbers.get("pid") == 30417


@pytest.mark.parametrize(("text", "expected"), [
    ("Epoch 3: 100%|██████████| 50/50 [00:40<00:00][2]  + 5120 killed     python train.py\n",
     ["host-oom/shell-killed"]),
    # a job that ended on its own is no kill
    ("Epoch 3: 100%|██████████| 50/50 [00:40<00:00][2]  + 5120 done       python train.py\n", []),
])
def test_zsh_job_notices_after_a_bar(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


@pytest.mark.parametrize(("name", "signature"), [
    ("oom_kill_noun_title_mpi.log", "host-oom/kernel-oom-killer"),
    ("killed_message_title_small_vm.log", "host-oom/shell-killed"),
    ("host_memory_title_problem_occurs.log", "host-oom/ram-full-told"),
    ("notebook_ram_title_crashing.log", "host-oom/notebook-session-ram"),
])
def test_host_memory_kills_named_in_a_title(name: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("host-oom", signature)
    assert found.title.startswith("Named in the title")


def test_the_shells_word_as_a_title_needs_the_hosts_memory_below() -> None:
    # the text puts the kill on the cluster's time limit: nothing says memory
    assert not [i for i in incidents("killed_message_title_no_memory_word.log") if i.is_failure]


@pytest.mark.parametrize(("title", "body", "expected"), [
    ("# oom-kill while running four ranks per node", "I see it every time.",
     "host-oom/kernel-oom-killer"),
    # docker's option and the kernel's score are no kill
    ("# --oom-kill-disable is ignored by the runtime", "I set it on the container.", None),
    ("# oom_score_adj of the workers is reset", "I set it at start-up.", None),
    ("# When host memory use reaches 90%, the job crashes", "I get it after two epochs.",
     "host-oom/ram-full-told"),
    # the GPU's memory is not the host's
    ("# When GPU memory reaches 90%, the job crashes", "I get it after two epochs.", None),
    ("# (Colab) RAM use climbs when loading, runtime keeps crashing", "I use the free tier.",
     "host-oom/notebook-session-ram"),
    ("# (Colab) GPU RAM use climbs when loading, runtime crashing", "I use the free tier.", None),
    ('# "Killed" message when building the index', "I get it with 4 GB of RAM in the VM.",
     "host-oom/shell-killed"),
    ('# "Killed" message when building the index', "I get it on the login node.", None),
])
def test_title_wordings_of_host_memory(title: str, body: str, expected: str | None) -> None:
    assert title_failure(read_head(f"{title}\n\n{body}\n".encode(), whole=True)) == expected


# --- an FAQ is no report -----------------------------------------------------------------------

def test_what_to_do_title_answered_by_its_first_post_is_no_alarm() -> None:
    assert not [i for i in incidents("oom_faq_answered_by_first_post_zh.log") if i.is_failure]


def test_what_to_do_title_over_the_writers_own_run_is_read() -> None:
    found = root("oom_what_to_do_title_own_run_zh.log")
    assert found.cls == "cuda-oom"


@pytest.mark.parametrize(("title", "body", "expected"), [
    ("# What to do when CUDA runs out of memory?",
     "acme · description · 2024-01-01\nIt can be avoided by lowering the batch size.", None),
    ("# What to do when CUDA runs out of memory?",
     "bob · description · 2024-01-01\nI run a 7B model on one card and get it at step 1.",
     "cuda-oom/caching-allocator"),
])
def test_faq_titles(title: str, body: str, expected: str | None) -> None:
    text = f"acme/tool · issue #1 · open\n{title}\n\n{body}\n"
    assert title_failure(read_head(text.encode(), whole=True)) == expected


# --- NVML's library, the driver and the build told ---------------------------------------------

def test_nvml_library_permission_denied_retyped() -> None:
    found = root("nvml_library_permission_denied_title.log")
    assert (found.cls, found.signature) == ("nvml-unavailable", "nvml-unavailable/library-missing")
    assert found.numbers.get("library") == "libnvidia-ml.so.1"
    assert "may not be opened" in found.title and "getenforce" in found.remedy


@pytest.mark.parametrize(("text", "expected"), [
    ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot "
     "open shared object file: permission denied\n",
     ["nvml-unavailable/container-cli"]),
    ("OSError: libnvidia-ml.so.1: cannot open shared object file: Permission denied\n",
     ["nvml-unavailable/library-missing"]),
])
def test_nvml_library_permission_denied_lines(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_driver_told_not_supported_by_the_framework() -> None:
    found = root("driver_not_supported_by_torch_told.log")
    assert (found.cls, found.signature) == ("driver-mismatch",
                                            "driver-mismatch/driver-older-than-cuda")


@pytest.mark.parametrize(("text", "expected"), [
    ("Our driver doesn't support the CUDA that this torch needs.\n",
     ["driver-mismatch/driver-older-than-cuda"]),
    ("If my driver is not supported by torch, what should I install?\n", []),
    ("Maybe my NVIDIA driver does not support this CUDA.\n", []),
])
def test_driver_told_wordings(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_build_for_the_wrong_architecture_told() -> None:
    found = root("wrong_arch_told_jetson.log")
    assert (found.cls, found.signature) == ("driver-mismatch", "driver-mismatch/wrong-arch-told")
    assert "CUDA_ARCH_BIN" in found.remedy


def test_wrong_architecture_as_a_guess_is_not_read() -> None:
    assert not [i for i in incidents("wrong_arch_advice_only.log") if i.is_failure]


@pytest.mark.parametrize(("text", "expected"), [
    ("We had compiled it for the wrong compute capability, now it runs.\n",
     ["driver-mismatch/wrong-arch-told"]),
    ("The problem was incorrect arch flags in the Makefile (sm_52 instead of sm_86).\n",
     ["driver-mismatch/wrong-arch-told"]),
    ("You should check whether the problem is a wrong TORCH_CUDA_ARCH_LIST.\n", []),
    ("The architecture list is set in CMakeLists.txt.\n", []),
])
def test_wrong_architecture_wordings(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


# --- a hang named before NCCL in a title ---------------------------------------------------------

@pytest.mark.parametrize(("title", "expected"), [
    ("# Hang with nccl all_reduce_perf on 4 cards", "nccl/watchdog-timeout"),
    ("# Training stuck in NCCL init on two nodes", "nccl/watchdog-timeout"),
    ("# How to debug a hang with NCCL?", None),
])
def test_nccl_hang_first_in_a_title(title: str, expected: str | None) -> None:
    text = f"acme/tool · issue #2 · open\n{title}\n\nbob · description · 2024-01-01\nI run it.\n"
    assert title_failure(read_head(text.encode(), whole=True)) == expected
