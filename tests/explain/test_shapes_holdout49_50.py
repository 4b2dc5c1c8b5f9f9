"""Shapes read since the 49th and 50th held-out sets: a thread's source line said twice, a pull
request that changes an error message, llama.cpp's loader failing on a backend buffer, Numba's
cuInit returning 999, a card told overheated, a reply telling the writer's RAM too small, the
GPU a cuDNN call's field list names, and the rank a communicator's abort names. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "signature"), [
    # the title under a source line repeated with the repository's language is still the title
    ("source_line_twice_title_error.log", "driver-mismatch/insufficient-driver"),
    ("ggml_backend_buffer_title.log", "cuda-oom/ggml"),
    ("numba_cuinit_unknown_999.log", "driver-mismatch/cuda-init"),
    ("overheat_got_overheated_told.log", "gpu-hardware/overheat-told"),
    ("reply_you_lack_ram_told.log", "host-oom/out-of-ram-told"),
])
def test_root_cause(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_cuinit_s_unknown_error_is_a_start_up_failure_not_the_gpu_s() -> None:
    found = root("numba_cuinit_unknown_999.log")
    assert found.numbers["code"] == 999 and "nvidia_uvm" in found.explanation


def test_the_loader_s_backend_buffer_says_its_device_is_not_named() -> None:
    found = root("ggml_backend_buffer_title.log")
    assert "does not name the buffer's device" in found.explanation
    assert "_device_unnamed" not in found.numbers


@pytest.mark.parametrize("name", [
    "pull_request_refines_oom_message.log", "pull_request_refines_oom_message_no_source.log"])
def test_a_pull_request_changing_a_message_quotes_it(name: str) -> None:
    found = incidents(name)
    assert found and not [i for i in found if i.is_failure]


def test_the_gpu_a_call_s_field_list_names() -> None:
    found = root("onnxruntime_cudnn_gpu_field.log")
    assert (found.signature, found.numbers["gpu_index"]) == ("cudnn-failure/status", 1)


def test_the_rank_an_abort_names_is_its_rank() -> None:
    found = root("nccl_aborted_on_rank_title.log")
    assert (found.signature, found.ranks) == ("nccl/communicator-aborted", [3])
