"""More logs as people paste them: the kernel's OOM killer seen only through its report around a
kill, the shell's word for Killed followed by the user's own words, launchers' SIGKILL statuses
wrapped over lines, the cudaMallocAsync backend's OOM message, the THC era's ``THCudaCheck FAIL``
lines, and the NVML assert with its path quoted differently. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.knowledge.signals import KILLED_WORDS
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root

# --- the kernel's OOM killer without its "Killed process" line --------------------------------

def test_invoked_oom_killer_alone_is_a_host_oom_naming_the_trigger() -> None:
    oom = root("kernel_oom_invoked_without_kill_line.log")
    assert (oom.cls, oom.signature) == ("host-oom", "host-oom/kernel-oom-killer")
    assert oom.numbers["trigger"] == "python3"
    assert oom.title == "The host ran out of RAM (OOM killer)"
    assert oom.locations[0].line == 3


def test_the_oom_reaper_in_syslog_form_names_the_killed_process() -> None:
    oom = root("syslog_oom_reaper.log")
    assert oom.cls == "host-oom"
    assert (oom.numbers["pid"], oom.numbers["process_name"]) == (29918, "python")
    assert "killed python (pid 29918)" in oom.explanation
    assert [loc.line for loc in oom.locations] == [2, 4]  # one incident, not two


def test_a_memory_cgroup_in_the_call_trace_makes_it_a_cgroup_limit() -> None:
    oom = root("memcg_oom_call_trace.log")
    assert oom.cls == "host-oom" and oom.numbers["trigger"] == "pt_data_worker"
    assert oom.title == "The cgroup memory limit was hit (OOM killer)"
    assert len(incidents("memcg_oom_call_trace.log")) == 1


@pytest.mark.parametrize(("line", "numbers"), [
    ("Apr 25 06:31:56 gpu3 kernel: [594675.027262] python invoked oom-killer: "
     "gfp_mask=0x1100cca(GFP_HIGHUSER_MOVABLE|__GFP_ZERO), order=0, oom_score_adj=0",
     {"trigger": "python"}),
    ("[ 120.1] oom_reaper: reaped process 4411 (pt_main_thread), now anon-rss:0kB, "
     "file-rss:0kB, shmem-rss:0kB", {"pid": 4411, "process_name": "pt_main_thread"}),
    ("[ 301.7] Memory cgroup out of memory: Killed process 5512 (python3) total-vm:3000kB, "
     "anon-rss:2000kB, file-rss:0kB, shmem-rss:0kB", {"pid": 5512, "process_name": "python3"}),
])
def test_kernel_oom_lines_alone(line: str, numbers: dict) -> None:
    found = classify_text(f"step 1\n{line}\n", torch_version="2.3.1")
    assert [i.cls for i in found] == ["host-oom"]
    assert numbers.items() <= found[0].numbers.items()


def test_the_memcg_trace_line_alone_opens_nothing() -> None:
    text = "[ 1.0]  mem_cgroup_out_of_memory+0x131/0x150\n[ 1.1]  try_charge+0x6c7/0x790\n"
    assert classify_text(text, torch_version="2.3.1") == []


# --- the shell's word for Killed, then the user's own words -----------------------------------

def test_the_shells_word_alone_before_prose_is_read() -> None:
    killed = root("shell_killed_zh_then_question.log")
    assert (killed.cls, killed.signature) == ("host-oom", "host-oom/shell-killed")
    assert killed.locations[0].line == 3  # not among the last lines of the log


@pytest.mark.parametrize("lang", sorted(KILLED_WORDS))
def test_every_languages_word_is_read_before_prose(lang: str) -> None:
    prose = "\n".join(f"My question, line {n}: why did the run stop here?" for n in range(10))
    text = f"step 10 loss 0.9\nstep 20 loss 0.8\n{KILLED_WORDS[lang]}\n{prose}\n"
    found = classify_text(text, torch_version="2.3.1")
    assert [i.signature for i in found] == ["host-oom/shell-killed"], lang
    job = f"step 20 loss 0.8\n[1]+  {KILLED_WORDS[lang]}    python train.py\n{prose}\n"
    assert [i.cls for i in classify_text(job, torch_version="2.3.1")] == ["host-oom"], lang


def test_the_word_inside_a_sentence_or_a_command_stays_quiet() -> None:
    assert incidents("killed_word_in_prose_quiet.log") == []


# --- launchers' SIGKILL statuses, wrapped ------------------------------------------------------

@pytest.mark.parametrize(("name", "lines"), [
    ("deepspeed_sigkill_wrapped.log", (2, 3)),
    ("launcher_returncode_minus_9.log", (2, None)),
])
def test_a_launchers_sigkill_status(name: str, lines: tuple[int, int | None]) -> None:
    killed = root(name)
    assert (killed.cls, killed.signature) == ("host-oom", "host-oom/sigkill")
    assert (killed.locations[0].line, killed.locations[0].end_line) == lines


def test_torchrun_exitcode_wrapped_before_the_number() -> None:
    killed = root("torchrun_exitcode_wrapped.log")
    assert killed.signature == "host-oom/sigkill"
    assert (killed.numbers["local_rank"], killed.numbers["pid"]) == (2, 77120)


# --- GPU memory: cudaMallocAsync and the THC era ------------------------------------------------

def test_the_cuda_malloc_async_backends_oom_with_its_numbers() -> None:
    oom = root("cuda_malloc_async_oom.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/caching-allocator")
    gib = 1 << 30
    assert oom.numbers["requested_bytes"] == int(1.5 * gib)
    assert oom.numbers["allocated_bytes"] == oom.numbers["reserved_bytes"]
    assert abs(oom.numbers["capacity_bytes"] - 23.55 * gib) < 0.01 * gib
    assert oom.numbers["free_bytes"] == 412 << 20
    assert oom.numbers["gpu_index"] == 0
    assert [loc.line for loc in oom.locations][:1] == [6]


@pytest.mark.parametrize(("name", "cls", "signature"), [
    ("thc_out_of_memory.log", "cuda-oom", "cuda-oom/cuda-error"),
    ("thc_misaligned_address.log", "illegal-memory-access",
     "illegal-memory-access/misaligned-address"),
    ("thc_illegal_memory_access.log", "illegal-memory-access",
     "illegal-memory-access/illegal-address"),
])
def test_thcudacheck_fail_lines(name: str, cls: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, signature)


# --- the NVML assert, quoted another way ---------------------------------------------------------

@pytest.mark.parametrize("quote", ['"', "'", "`", ""])
def test_the_nvml_assert_path_in_any_quotes(quote: str) -> None:
    text = (f"RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at {quote}../c10/cuda/"
            f"CUDACachingAllocator.cpp{quote}:838, please report a bug to PyTorch.\n")
    found = classify_text(text, torch_version="2.3.1")
    assert [i.cls for i in found] == ["nvml-assert-oom"]
    assert found[0].numbers["source_line"] == 838


def test_the_nvml_assert_back_quoted_and_wrapped_after_at() -> None:
    oom = root("nvml_assert_backquoted_wrapped.log")
    assert oom.cls == "nvml-assert-oom" and oom.numbers["source_line"] == 838
    assert (oom.locations[0].line, oom.locations[0].end_line) == (2, 3)
