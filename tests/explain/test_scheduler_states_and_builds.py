"""The host's memory limit as schedulers and builders record it: Slurm's job state after an OOM
kill (scontrol's JobState=OUT_OF_MEMORY, sacct's column cut to "OUT_OF_ME+"), docker build's step
killed with code 137, YARN's container over its memory limit. A library's OUT_OF_MEMORY status
stays the GPU's. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize(("name", "signature", "lines"), [
    ("slurm_job_state_out_of_memory.log", "host-oom/slurm-oom-kill", [4, 9, 10]),
    ("docker_build_step_killed_137.log", "host-oom/sigkill", [5]),
    ("yarn_container_beyond_memory.log", "host-oom/yarn-memory-limit", [2]),
])
def test_the_hosts_memory_limit_as_recorded(name: str, signature: str, lines: list[int]) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("host-oom", signature)
    assert found.line_numbers == lines


def test_a_librarys_out_of_memory_status_is_not_slurms_state() -> None:
    text = "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in " \
           "CUDA_ERROR_OUT_OF_MEMORY\n"
    assert [i.cls for i in classify_text(text, torch_version="2.3.1") if i.is_failure] == [
        "cuda-oom"]
