"""GPU out-of-memory in RAPIDS' and thrust's words, Ollama's older runner line, an answer that
reads the error from the writer's attached log, and the writer telling it in other words.
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import mib, shape_incidents
from tests.explain.helpers import shape_root as root


def test_rmm_bad_alloc_cut_before_the_cuda_error_is_the_gpus() -> None:
    # cuDF raises RMM's bad_alloc as MemoryError: the GPU's memory, not the host's
    oom = root("rapids_memoryerror_cut_rmm_path.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/array-library")
    assert oom.title == "GPU out of memory (RAPIDS RMM)"
    assert all(i.cls != "host-oom" for i in shape_incidents("rapids_memoryerror_cut_rmm_path.log"))


def test_rmm_bad_alloc_states_the_requested_size() -> None:
    oom = root("rapids_bad_alloc_states_size.log")
    assert oom.signature == "cuda-oom/array-library"
    assert oom.numbers["requested_bytes"] == 6 << 30


def test_rmm_bad_alloc_naming_another_cuda_error_is_not_out_of_memory() -> None:
    found = classify_text(
        "MemoryError: std::bad_alloc: CUDA error at: /srv/conda/include/rmm/mr/device/"
        "cuda_memory_resource.hpp:62: cudaErrorIllegalAddress an illegal memory access was "
        "encountered", torch_version=None)
    assert [i.cls for i in found if i.role == "root-cause"] == ["illegal-memory-access"]


def test_thrust_algorithm_out_of_memory() -> None:
    oom = root("thrust_parallel_for_out_of_memory.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (thrust)")
    assert "thrust" in oom.explanation


def test_ollama_runner_no_longer_running_reads_the_backends_size() -> None:
    oom = root("ollama_runner_no_longer_running_title.log")
    assert oom.signature == "cuda-oom/ggml"
    assert oom.numbers["requested_bytes"] == mib(18432.5)
    assert oom.numbers["gpu_index"] == 1


def test_answer_quoting_the_error_from_the_writers_log_reports_it() -> None:
    assert root("answer_reads_error_from_attached_log.log").cls == "cuda-oom"


def test_explainer_saying_if_your_log_shows_stays_quiet() -> None:
    assert not [i for i in shape_incidents("explainer_if_your_log_shows_oom.log")
                if i.role == "root-cause"]


@pytest.mark.parametrize("name", ["told_error_that_cuda_is_out_of_memory.log",
                                  "told_oom_in_gpu_russian.log"])
def test_writer_tells_the_gpu_ran_out_of_memory(name: str) -> None:
    oom = root(name)
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/caching-allocator")
    assert not oom.numbers.get("requested_bytes")


def test_a_condition_in_russian_is_not_told() -> None:
    found = classify_text("Если пишет что out of memory в gpu, уменьшите батч.", torch_version=None)
    assert not [i for i in found if i.cls == "cuda-oom"]
