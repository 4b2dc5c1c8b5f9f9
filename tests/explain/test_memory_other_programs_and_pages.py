"""GPU and host memory in other programs' and people's words, and pages that only explain a
memory failure. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import read_head
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(name: str) -> list[str]:
    return [i.cls for i in incidents(name) if i.is_failure]


# --- the GPU's memory in other programs' words ----------------------------------------------------

def test_miner_check_naming_its_function_reads_as_gpu_oom() -> None:
    found = root("miner_cuda_func_line_oom.log")
    assert (found.cls, found.signature, found.line_numbers) == (
        "cuda-oom", "cuda-oom/cuda-error", [8])


def test_catboost_sizes_retyped_in_lower_case_are_read() -> None:
    found = root("catboost_sizes_lower_case.log")
    assert found.signature == "cuda-oom/framework-allocator"
    assert found.numbers["framework"] == "catboost"
    assert found.numbers["requested_bytes"] == 2048 * 2**20
    assert found.numbers["free_bytes"] == 512 * 2**20


def test_cracker_device_memory_check_reads_as_gpu_oom() -> None:
    found = root("cracker_allocatable_device_memory.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/framework-allocator")
    assert found.numbers["framework"] == "hashcat"
    assert "-w 1" in found.remedy


def test_cracker_device_or_host_mapping_is_not_read_as_the_gpu() -> None:
    # (the device's memory or the host's: the message does not say which)
    assert "cuda-oom" not in failures("cracker_device_or_host_mapping.log")


def test_opencl_buffer_allocation_failure_reads_as_gpu_oom() -> None:
    found = root("opencl_buffer_allocation_failure.log")
    assert (found.cls, found.numbers["framework"]) == ("cuda-oom", "opencl")


def test_tensorflow_convolution_algorithm_title_with_oom_told() -> None:
    found = root("tf_conv_algorithm_title_told_oom.log")
    assert (found.cls, found.signature) == ("cuda-oom", "cuda-oom/told-cause")
    cudnn = [i for i in incidents("tf_conv_algorithm_title_told_oom.log")
             if i.signature == "cudnn-failure/framework-init"]
    assert cudnn and cudnn[0].line_numbers == [2]


def test_cublas_allocation_sentence_beside_the_writers_oom() -> None:
    found = root("cublas_sentence_told_oom_by_writer.log")
    assert (found.cls, found.line_numbers) == ("cuda-oom", [5])
    assert "cublas-failure" in failures("cublas_sentence_told_oom_by_writer.log")


# --- the host's memory told or shown -------------------------------------------------------------

@pytest.mark.parametrize(("name", "signature"), [
    ("killed_for_cpu_memory_told.log", "host-oom/killed-for-memory-told"),
    ("title_sigkill_nine.log", "host-oom/sigkill"),
    ("killed_memory_exceeded_ko.log", "host-oom/host-memory-told"),
])
def test_host_memory_told(name: str, signature: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("host-oom", signature)


def test_korean_rule_about_memory_is_not_a_kill() -> None:
    assert failures("killed_memory_rule_ko.log") == []


# --- pages that explain a memory failure ---------------------------------------------------------

def test_web_page_with_its_address_is_a_web_page() -> None:
    head = read_head(b"docs.example.org \xc2\xb7 https://docs.example.org/faq\n# FAQ\n", True)
    assert head.web_page
    assert not read_head(b"docs.example.org \xc2\xb7 see below\n# FAQ\n", True).web_page


@pytest.mark.parametrize("name", [
    "web_page_address_oom_kill_faq.log",
    "explainer_sound_familiar_ru.log",
    "explainer_sound_familiar_en.log",
])
def test_explainers_raise_no_failure(name: str) -> None:
    found = incidents(name)
    assert found and not [i for i in found if i.is_failure]


@pytest.mark.parametrize(("text", "expected"), [
    ("Stage 3 run\n\nThe job was killed at step 40 because the node ran out of memory.\n",
     ["host-oom"]),
    ("Stage 3 run\n\nThe job was killed at step 40 because it used too much host memory.\n",
     ["host-oom"]),
    # (the GPU's memory named after it is the GPU's, not the host's; advice is no telling)
    ("Stage 3 run\n\nThe job was killed because it ran out of memory on the GPU.\n",
     ["cuda-oom"]),
    ("Stage 3 run\n\nIf your job is killed because it used too much CPU memory, add swap.\n",
     []),
])
def test_killed_because_of_host_memory_in_words(text: str, expected: list[str]) -> None:
    assert [i.cls for i in classify_text(text, torch_version=None) if i.is_failure] == expected
