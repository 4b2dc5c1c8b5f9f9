"""CUDA statuses printed by number after the call that returned them, and failures a thread's
title or its writer tells in words (a quoted message at a heading's start, a GPU told bad or
missing, a machine that restarts under training). Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.knowledge.cuda_errors import reported_number
from tests.explain.helpers import shape_incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "signature"), [
    # a physics engine's check of one driver call: "cuStreamSynchronize failed with error 700"
    ("physics_engine_call_failed_700.log", "illegal-memory-access/illegal-address"),
    # the PTX status retyped in a title without its first word, and its number
    ("title_ptx_toolchain_by_number.log", "driver-mismatch/unsupported-ptx"),
])
def test_statuses_by_number_and_retyped(name: str, signature: str) -> None:
    assert root(name).signature == signature


@pytest.mark.parametrize(("line", "signature"), [
    ("cudaMemcpyAsync failed with error code 700", "illegal-memory-access/illegal-address"),
    ("cuLaunchKernel() failed with error 719", "illegal-memory-access/launch-failure"),
    ("RuntimeError: CUDA error 222 at module load", "driver-mismatch/unsupported-ptx"),
    ("Check failed: error == cudaSuccess (222 vs. 0)", "driver-mismatch/unsupported-ptx"),
])
def test_call_statuses_by_number(line: str, signature: str) -> None:
    (failure,) = classify_text(line, torch_version=None)
    assert failure.signature == signature


@pytest.mark.parametrize("line", [
    "cuStreamSynchronize failed with error 7000",  # no status
    "cuEventRecord failed with error 700.5 ms in",  # a figure
    "the call failed with error 700",  # no CUDA call named
])
def test_other_call_numbers_are_no_status(line: str) -> None:
    assert not [i for i in classify_text(line, torch_version=None)
                if i.cls == "illegal-memory-access"]


def test_reported_number_takes_only_table_statuses() -> None:
    with pytest.raises(ValueError):
        reported_number(701)


@pytest.mark.parametrize(("name", "signature"), [
    # a thread's heading that opens with the quoted status and says when it came
    ("heading_quoted_status_when.log", "cublas-failure/cublas-status"),
    # "I experienced `X` when I train"
    ("writer_experienced_quoted_fault.log", "illegal-memory-access/illegal-address"),
    # a title's plural ("illegal memory addresses")
    ("title_illegal_addresses_plural.log", "illegal-memory-access/illegal-address"),
    # a kernel's index check named as a "CUDA index error"
    ("title_cuda_index_error.log", "device-assert/triggered"),
])
def test_failures_told_in_titles_and_quotes(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_heading_quote_that_explains_is_no_failure() -> None:
    assert not [i for i in shape_incidents("heading_quoted_status_explained.log")
                if i.is_failure]


@pytest.mark.parametrize(("name", "signature"), [
    # a node back from a reboot with a card fewer
    ("node_came_up_short_a_gpu.log", "gpu-hardware/lost-told"),
    # a cluster's node told to have a bad card
    ("node_has_a_bad_gpu.log", "gpu-hardware/card-dead-told"),
    # the run first, then the machine going off
    ("run_first_then_machine_restarts.log", "gpu-hardware/power-loss-told"),
])
def test_hardware_told_by_the_writer(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_program_restarting_a_job_and_advice_are_no_hardware_failure() -> None:
    assert not [i for i in shape_incidents("server_restarts_the_job.log") if i.is_failure]


@pytest.mark.parametrize(("name", "signature"), [
    # cuDNN's frontend raising a descriptor it could not finalize as the error itself
    ("frontend_descriptor_finalize_failed.log", "cudnn-failure/status"),
    # the runtime's missing-program error retyped in a title
    ("title_smi_not_in_path.log", "nvml-unavailable/smi-missing"),
])
def test_library_and_tool_errors_in_titles(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_plan_warning_with_finalize_is_no_failure() -> None:
    line = ("UserWarning: Plan failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_"
            "DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED"
            " (Triggered internally at Conv_v8.cpp:919.)")
    assert not [i for i in classify_text(line, torch_version=None) if i.is_failure]
