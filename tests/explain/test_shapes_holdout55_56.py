"""Shapes read since the 55th and 56th held-out sets: torch's check of the CUDA toolkit when a
CUDA extension is built, the OpenACC runtime's CUDA status, a reply that reads the writer's
paste, a telling followed by a plea for a fix, a title's out-of-memory "on device" and a card's
critical temperature, RAPIDS' out_of_memory cut in its headers, tellings in Korean and Chinese,
MemoryError in a title's sentence, and the machine told out of memory beside a full GPU.
Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root
from tests.explain.helpers import text_incidents


def failures(name: str) -> list[str]:
    return [i.cls for i in incidents(name) if i.is_failure]


def test_an_extensions_cuda_toolkit_that_does_not_match_torch_s_wrapped() -> None:
    found = root("extension_cuda_mismatch_wrapped.log")
    assert found.signature == "driver-mismatch/extension-cuda-mismatch"
    assert (found.numbers["detected_cuda"], found.numbers["torch_cuda"]) == ("11.8", "12.4")
    assert "CUDA_HOME" in found.remedy


def test_the_same_message_quoted_in_a_condition_in_chinese_is_no_failure() -> None:
    assert failures("extension_cuda_mismatch_tip_condition_zh.log") == []


def test_the_openacc_runtime_s_status_700() -> None:
    found = root("openacc_call_returned_700.log")
    assert (found.cls, found.signature) == ("illegal-memory-access",
                                            "illegal-memory-access/illegal-address")


def test_a_reply_that_reads_the_writer_s_paste_is_no_explainer() -> None:
    found = root("reply_reads_pasted_oom_log.log")
    assert (found.signature, found.numbers["requested_bytes"]) == (
        "cuda-oom/caching-allocator", 40 * 1024**2)


@pytest.mark.parametrize(("name", "cls"), [
    ("gpu_memory_told_then_plea_zh.log", "cuda-oom"),
    ("title_oom_on_device_bug.log", "cuda-oom"),
    ("title_critical_junction_temperature.log", "gpu-hardware"),
    ("rmm_out_of_memory_cut_in_header.log", "cuda-oom"),
    ("gpu_memory_short_reply_ko.log", "cuda-oom"),
    ("cuda_oom_appears_told_zh.log", "cuda-oom"),
    ("illegal_memory_encounter_told_zh.log", "illegal-memory-access"),
    ("memoryerror_in_title_sentence.log", "host-oom"),
    ("machine_out_of_memory_beside_vram.log", "host-oom"),
])
def test_tellings_and_titles_read_since_the_55th_and_56th_sets(name: str, cls: str) -> None:
    assert root(name).cls == cls


@pytest.mark.parametrize(("line", "expected"), [
    # a question about the cause, a condition and a guess are not tellings (under a heading:
    # a text's first line is its title, read as one)
    ("# 说明\n是我的显存不够吗？\n", []),
    ("# 说明\n如果出现cuda out of memory，就把batch调小。\n", []),
    ("# 说明\n训练时可能出现cuda out of memory。\n", []),
    # a minor version apart: the build goes on
    ("UserWarning: The detected CUDA version (12.1) has a minor version mismatch with the "
     "version that was used to compile PyTorch (12.4). Most likely this shouldn't be a "
     "problem.\n", []),
])
def test_what_stays_quiet(tmp_path: Path, line: str, expected: list[str]) -> None:
    assert [i.cls for i in text_incidents(tmp_path, line) if i.is_failure] == expected
