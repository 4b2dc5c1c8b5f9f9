"""CUDA statuses printed by number after the call that returned them, and failures a thread's
title or its writer tells in words (a quoted message at a heading's start, a GPU told bad or
missing, a machine that restarts under training). Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.knowledge.cuda_errors import reported_number
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
