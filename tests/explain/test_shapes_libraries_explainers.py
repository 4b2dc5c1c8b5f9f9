"""Messages of libraries that allocate or check on the GPU themselves (PhysX, spconv, cuda-gdb,
nvtop), Slurm's memory accounting, an indexing assertion retold without its quotes; explainers
in Korean, Japanese, German and an error catalogue's English. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.mentions import explainer_cues
from gpu_audit.model import Severity
from tests.explain.helpers import SHAPES
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def _root(text: str):  # type: ignore[no-untyped-def]
    found = [i for i in classify_text(text, torch_version=None) if i.role == "root-cause"]
    assert found, "no failure found"
    return found[0]


@pytest.mark.parametrize("name", [
    # "OOM Killer 란", "발생하는 경우 ... 다음과 같은", "생기는 원인"
    "explainer_oom_killer_ko.log",
    # "OOM Killerとは", "発生した場合、以下のような", "発生する原因"
    "explainer_oom_killer_ja.log",
    "explainer_nccl_catalogue_en.log",  # "... are usually caused by", "Common misconception:"
])
def test_explainers_quote_failures_without_raising_them(name: str) -> None:
    failures = [i for i in incidents(name) if i.is_failure]
    assert failures == [], [(i.signature, i.title) for i in failures]


@pytest.mark.parametrize(("name", "kinds"), [
    ("explainer_oom_killer_ko.log", {"why", "you-have-seen"}),
    ("explainer_oom_killer_ja.log", {"why", "you-have-seen"}),
    ("explainer_nccl_catalogue_en.log", {"why", "error-means"}),
])
def test_explainer_phrases_in_korean_japanese_and_a_catalogue(name: str, kinds: set[str]) -> None:
    lines = (SHAPES / name).read_text(encoding="utf-8").splitlines()
    assert kinds <= explainer_cues(lines)


def test_explainer_phrases_in_german() -> None:
    assert explainer_cues(["Mögliche Ursachen", "Wenn dieser Fehler auftritt, prüfen Sie ...",
                           "So beheben Sie den Fehler"]) == {"why", "you-have-seen",
                                                             "how-to-fix"}


def test_a_korean_report_of_the_following_error_stays_a_failure() -> None:
    # "다음과 같은 에러가 발생합니다" reports the writer's own run: no condition before it
    found = root("report_ko_following_error.log")
    assert (found.cls, found.severity) == ("cuda-oom", Severity.ERROR)


def test_physx_states_the_size_it_could_not_allocate() -> None:
    found = _root("PxgCudaDeviceMemoryAllocator fail to allocate memory 268435456 bytes!! "
                  "Result = 2\n")
    assert found.cls == "cuda-oom" and found.numbers["requested_bytes"] == 268435456
    assert "256.00 MiB" in found.explanation and "num_envs" in found.remedy


def test_spconv_status_2_is_out_of_memory_and_other_statuses_are_not() -> None:
    found = _root("RuntimeError indice_cuda.cu 124 cuda execution failed with error 2\n")
    assert found.cls == "cuda-oom" and "cudaErrorMemoryAllocation" in found.explanation
    assert classify_text("RuntimeError indice_cuda.cu 124 cuda execution failed with error 21\n",
                         torch_version=None) == []


def test_slurm_accounting_limit_reads_its_sizes_in_kib() -> None:
    found = _root("slurmstepd: error: Job 311 exceeded memory limit (70254592 > 67108864), "
                  "being killed\n")
    assert found.cls == "host-oom"
    assert found.numbers["used_bytes"] == 70254592 * 1024
    assert found.numbers["limit_bytes"] == 64 * 1024**3
    assert "64.00 GiB allowed" in found.explanation and "--mem" in found.remedy


def test_an_unquoted_indexing_assertion_gets_its_hint() -> None:
    found = _root("训练一会就出现 Assertion srcIndex \uff1c srcSelectDimSize failed.\n")
    assert found.cls == "device-assert"
    assert found.numbers["assertion"] == "srcIndex < srcSelectDimSize"
    assert "index_select/embedding" in found.numbers["hint"]


def test_cuda_gdb_names_the_exception() -> None:
    found = _root('Thread 9 "python" received signal CUDA_EXCEPTION_14, Warp Illegal Address.\n')
    assert found.cls == "illegal-memory-access"
    assert found.numbers == {"exception_code": 14, "exception": "Warp Illegal Address"}


def test_nvtop_without_nvml_says_where_the_library_is_looked_up() -> None:
    found = _root("$ nvtop\nNo GPU to monitor.\n")
    assert found.cls == "nvml-unavailable"
    assert "ldconfig -p | grep libnvidia-ml" in found.remedy and "Jetson" in found.explanation


def test_an_nvml_call_answering_unknown_error_names_containers_and_vms() -> None:
    found = _root("Found 1 NVIDIA devices\nError: nvmlDeviceGetHandleByIndex(): Unknown Error\n")
    assert found.cls == "nvml-unavailable"
    assert found.numbers["call"] == "nvmlDeviceGetHandleByIndex"
    assert "virtual machine" in found.explanation and "/dev/nvidia*" in found.explanation


def test_the_elastic_record_keeps_its_pid_when_it_is_there() -> None:
    found = _root("  traceback : Signal 9 (SIGKILL) received by PID 4242\n")
    assert found.signature == "host-oom/sigkill" and found.numbers["pid"] == 4242
