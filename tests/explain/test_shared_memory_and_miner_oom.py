"""NCCL's shared-memory helper failing on the attaching rank's side (in its log and cut short
in a title), and named failing in a writer's words; miners' CUDA checks that print the
function in angle brackets and the runtime's "out of memory" quoted. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_root as root


def test_nccl_cannot_attach_to_a_shared_memory_segment() -> None:
    nccl = root("nccl_shm_attach_vllm_workers.log")
    assert (nccl.cls, nccl.signature) == ("nccl", "nccl/shm-segment")
    assert nccl.numbers["shm_path"] == "/dev/shm/nccl-Kd93aQ"
    assert nccl.numbers["shm_size_bytes"] == 4194304
    assert "attach" in nccl.explanation and "--ipc=host" in nccl.remedy


def test_nccl_attach_failure_cut_short_in_a_title() -> None:
    nccl = root("nccl_shm_attach_title.log")
    assert (nccl.cls, nccl.signature) == ("nccl", "nccl/shm-segment")
    assert "--shm-size" in nccl.remedy


def test_nccls_other_shared_memory_steps() -> None:
    for line in ("node1:81:81 [0] misc/shmutils.cc:61 NCCL WARN Error: failed to create shared "
                 "memory file /dev/shm/nccl-XXXXXX, error No space left on device (28)",
                 "node1:81:81 [0] misc/shmutils.cc:98 NCCL WARN Error: Could not map "
                 "/dev/shm/nccl-Ab12Cd size 9637892, error: Cannot allocate memory (12)"):
        (nccl,) = classify_text(line, torch_version=None)
        assert (nccl.cls, nccl.signature) == ("nccl", "nccl/shm-segment")


def test_ncclshmopen_failure_told() -> None:
    nccl = root("nccl_shm_open_told.log")
    assert (nccl.cls, nccl.signature) == ("nccl", "nccl/shm-open-told")
    assert "--shm-size" in nccl.remedy


def test_ncclshmopen_in_a_condition_is_not_told() -> None:
    line = "If ncclShmOpen fails in your container, raise its --shm-size."
    assert not [i for i in classify_text(line, torch_version=None) if i.cls == "nccl"]


def test_miners_cuda_check_with_the_function_in_angle_brackets() -> None:
    oom = root("miner_cuda_thread_oom.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/cuda-error")


def test_miners_cuda_error_and_its_exception_text() -> None:
    oom = root("miner_cuda_init_oom_exception.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/cuda-error")
