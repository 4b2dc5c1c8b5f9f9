"""Host memory and collectives in more of the shapes people post them: Ray's memory monitor in
its releases' words, PyTorch's CPU allocator without its name, a kill or a full RAM told in the
writer's words, the NCCL watchdog's timeout seen only in its stack trace, NCCL's "unhandled cuda
error" retold in a title, and a question about what an exit status means. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(text: str) -> list[str]:
    return [i.cls for i in classify_text(text, torch_version=None) if i.is_failure]


def signatures(text: str) -> list[str]:
    return [i.signature for i in classify_text(text, torch_version=None) if i.is_failure]


# --- Ray's memory monitor -----------------------------------------------------------------------

def test_ray_exception_message_in_a_title_is_ray_oom() -> None:
    found = root("ray_task_killed_low_memory_title.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/ray-oom-killer")


def test_raylet_summary_of_workers_killed_is_ray_oom() -> None:
    found = root("ray_raylet_memory_pressure_summary.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/ray-oom-killer")
    assert found.numbers.get("workers") == 6


@pytest.mark.parametrize(("text", "expected"), [
    # Ray 2.55 and later count the workers it killed
    ("(raylet) Task train_shard failed due to oom. Error: 3 worker(s) were killed due to the node "
     "running low on memory. Memory on the node (IP: 10.0.0.7, ID: 51ab) was 118.40GB / "
     "124.00GB (0.954839)\n", ["host-oom/ray-oom-killer"]),
    # Ray 1.x's monitor
    ("ray.exceptions.RayOutOfMemoryError: More than 95% of the memory on node gpu-07 is used "
     "(60.2 / 62.8 GB).\n", ["host-oom/ray-oom-killer"]),
    # the summary with no worker killed for memory, only crashes of other kinds
    ("(raylet) node_manager.cc:3041: 0 Workers (tasks / actors) killed due to memory pressure "
     "(OOM), 2 Workers crashed due to other reasons at node (ID: 9e, IP: 10.0.0.8) over the last "
     "time period.\n", []),
])
def test_ray_memory_monitor_wordings(text: str, expected: list[str]) -> None:
    assert signatures(text) == expected


# --- PyTorch's CPU allocator without its name ---------------------------------------------------

def test_cpu_allocator_words_without_allocator_name() -> None:
    found = root("cpu_allocator_title_without_prefix.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/cpu-allocator")
    assert found.numbers["requested_bytes"] == 524288000


def test_gpu_allocation_words_stay_gpu() -> None:
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 23.64 GiB of which 1.10 GiB is free.\n")
    assert failures(text) == ["cuda-oom"]


# --- a kill, or a full RAM, told in the writer's words -----------------------------------------

def test_ram_told_full_then_process_terminated() -> None:
    found = root("ram_full_told_training_terminated.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/ram-full-told")


def test_jobs_told_kicked_out_for_out_of_memory() -> None:
    found = root("jobs_kicked_out_out_of_memory.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/killed-for-memory-told")


@pytest.mark.parametrize(("text", "expected"), [
    ("Long run\n\nOn my first attempt the running process was \"Killed\" at epoch 31 of 90.\n",
     ["host-oom"]),
    ("Worker pods\n\nThe trainer pod is being killed due to OOM halfway through the epoch.\n",
     ["host-oom"]),
    ("Darknet in a notebook\n\nAfter 12 epochs the notebook crashed due to RAM being full.\n",
     ["host-oom"]),
    ("Notebook training\n\nHow much RAM did you use in Colab? When I start training, the "
     "session always crashes and restarts.\n", ["host-oom"]),
    ("Data prep\n\nThe CPU memory use grows and occupies the entire available CPU memory, "
     "leading to system OOM errors.\n", ["host-oom"]),
    ("Export\n\nexport.py fails at `Merging shards: 40%` with message `killed`.\n",
     ["host-oom"]),
    # conditions, advice, and the GPU's memory tell nothing of the host
    ("Export\n\nIf it fails with message `killed`, add swap.\n", []),
    ("Data prep\n\nIf the RAM is full, the kernel kills the largest process.\n", []),
    ("Data prep\n\nWhen your RAM fills up the job gets terminated, so keep an eye on it.\n", []),
    ("Render job\n\nThe GPU RAM is full and then the renderer crashes.\n", []),
    ("Worker pods\n\nIf a job is killed due to OOM, raise its memory request.\n", []),
])
def test_host_memory_told(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_title_with_the_shell_word_in_brackets_after_an_exit() -> None:
    text = ("acme/detector · issue #55 · closed · Python\n"
            "# 训练到一半的时候总是退出（killed），也没有报错\n\n"
            "maintainer · comment · 2021-03-01\n看起来是内存不够，机器有多少内存？\n")
    assert failures(text) == ["host-oom"]


# --- collectives --------------------------------------------------------------------------------

def test_watchdog_timeout_read_from_its_stack_trace() -> None:
    found = root("nccl_checktimeout_frames_launcher_prefix.log")
    assert (found.cls, found.signature) == ("nccl", "nccl/watchdog-timeout-frame")


def test_timeout_frame_joins_the_timeout_message() -> None:
    text = ("[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
            "Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
            "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono"
            "::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f00 in libtorch_cuda.so)\n")
    found = [i for i in classify_text(text, torch_version=None) if i.is_failure]
    assert [(i.cls, i.signature) for i in found] == [("nccl", "nccl/watchdog-timeout")]
    assert found[0].numbers["seq_num"] == 88


def test_unhandled_cuda_error_retold_in_a_title() -> None:
    text = ("acme/infer · issue #77 · closed · Python\nlabels: bug\n# Two-node inference: "
            "Unhandled CUDA error in ProcessGroupNCCL.cpp (from all_reduce)\n\n"
            "[turn 0 by osprey, continued]\n```\nnode3:     dist.all_reduce(out, group=grp)\n"
            "```\n")
    assert signatures(text) == ["nccl/error"]


# --- a question about what an exit status means ------------------------------------------------

def test_question_about_an_exit_status_is_no_kill() -> None:
    assert not [i for i in incidents("exit_code_meaning_question.log") if i.is_failure]


@pytest.mark.parametrize(("text", "expected"), [
    ("# Job exit code 137\n\nI ran into exit code 137 when launching the script on node 4.\n",
     ["host-oom"]),
    ("# what does the exit code 137 I get mean?\n\nThe trainer stops at epoch 2.\n",
     ["host-oom"]),
])
def test_exit_status_reported_stays_a_kill(text: str, expected: list[str]) -> None:
    assert failures(text) == expected
