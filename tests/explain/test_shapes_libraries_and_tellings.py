"""Shapes read since the 49th to 54th held-out sets were read as tuning data: a CUDA library that
does not load (ONNX Runtime's provider, a missing libcudart or cuDNN DLL), a rank told to dump
its state after a collective's timeout, a distributed run's hang named in a title, and an
out-of-memory told without saying whose in a text about a GPU, or in a sentence after a
question. Synthetic fixtures in fixtures/ and fixtures/shapes/."""

from __future__ import annotations

from tests.explain.helpers import fixture_incidents
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(name: str) -> list[str]:
    return [i.signature for i in incidents(name) if i.is_failure]


def test_onnx_runtime_s_cuda_provider_that_does_not_load_is_the_cause() -> None:
    found = root("onnxruntime_cuda_provider_not_loaded.log")
    assert (found.cls, found.signature) == ("driver-mismatch",
                                            "driver-mismatch/cuda-library-missing")
    assert "ONNX Runtime" in found.explanation and "CPU" in found.explanation


def test_tensorflow_s_library_warning_on_a_cpu_machine_is_no_failure() -> None:
    # TensorFlow prints it at every start where no GPU is set up; the run went on
    assert failures("tensorflow_dlerror_on_cpu_machine.log") == []


def test_a_rank_told_to_dump_its_state_is_a_collective_s_timeout() -> None:
    found = root("nccl_dump_signal_zh.log")
    assert (found.cls, found.signature) == ("nccl", "nccl/dump-signal")
    assert found.ranks == [2, 5]
    # (two lines of the same length are no terminal's cut when the second opens with its own
    # syslog stamp)
    assert [(loc.line, loc.end_line) for loc in found.locations] == [(6, None), (8, None)]
    assert found.excerpt.endswith("last completed NCCL work: 811.")
    assert found.numbers["last_completed_seq"] in (811, 812)


def test_a_distributed_run_s_hang_named_in_a_title() -> None:
    found = root("title_distributed_hang_zero3.log")
    assert (found.cls, found.signature) == ("nccl", "nccl/hang-told")
    assert found.title.startswith("Named in the title")


def test_an_out_of_memory_told_without_whose_is_the_gpu_s_in_a_gpu_thread() -> None:
    found = [i for i in fixture_incidents("oom_told_unnamed_gpu_thread.log") if i.is_failure]
    assert [i.signature for i in found] == ["cuda-oom/oom-told-unnamed"]


def test_the_same_telling_in_a_thread_about_the_host_s_ram_is_not_the_gpu_s() -> None:
    assert "cuda-oom/oom-told-unnamed" not in failures("oom_told_unnamed_host_thread.log")


def test_a_telling_in_the_sentence_after_a_question_is_read() -> None:
    # "is there any way I can ... ? I always get an error saying tensorflow ran out of memory":
    # the question's words belong to its own sentence
    found = root("oom_told_unnamed_after_question.log")
    assert found.cls == "cuda-oom"
