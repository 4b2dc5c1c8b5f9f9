"""Scientific, mining and cracking programs' own words for memory and build failures, and
causes told in the writer's words: RELION's allocator with its request on the next line,
hashcat 3's device-memory check, a miner's check naming a qualified function, LLVM's and C++'s
host allocation failures, ggml's build without the GPU's architecture, a cuBLAS check with its
file and code, an NCCL timeout met (Chinese), a GPU disconnected, a power cable or a board found
at fault, a card's temperature told too high, one node's CUDA OOM under an NCCL title, a GPU
told to need a newer CUDA, a kill in a title's brackets. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.model import Severity
from tests.explain.helpers import shape_incidents
from tests.explain.helpers import shape_root as root


def test_relions_allocator_with_its_request_below() -> None:
    oom = root("relion_custom_allocator_request.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (RELION)")
    assert oom.numbers["requested_bytes"] == 192 << 20
    assert "MPI ranks" in oom.remedy


def test_hashcat3s_device_memory_check() -> None:
    oom = root("hashcat3_device_memory_attack.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (hashcat)")


def test_a_miners_check_naming_a_qualified_function() -> None:
    oom = root("miner_qualified_function_oom.log")
    assert oom.cls == "cuda-oom"


@pytest.mark.parametrize("name", ["llvm_out_of_memory_small_ram.log",
                                  "native_bad_alloc_mpi_rank.log",
                                  "opencl_host_memory_status.log"])
def test_native_host_allocation_failures(name: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("host-oom", "host-oom/native-allocation")


def test_a_device_allocators_bad_alloc_stays_the_gpus() -> None:
    line = ("terminate called after throwing an instance of 'thrust::system::detail::bad_alloc'\n"
            "  what():  std::bad_alloc: cudaErrorMemoryAllocation: out of memory")
    assert {i.cls for i in classify_text(line, torch_version=None)} == {"cuda-oom"}


def test_ggmls_build_without_this_gpus_architecture() -> None:
    found = root("ggml_build_without_gpu_arch.log")
    assert (found.cls, found.signature) == ("driver-mismatch",
                                            "driver-mismatch/invalid-device-function")


def test_a_cublas_check_with_file_line_and_code() -> None:
    found = root("cublas_check_code_file_line.log")
    assert (found.cls, found.signature) == ("cublas-failure", "cublas-failure/status-code")
    assert found.numbers["status"] == "CUBLAS_STATUS_NOT_SUPPORTED"


def test_an_nccl_timeout_met_told_in_chinese() -> None:
    assert root("nccl_timeout_met_zh.log").signature == "nccl/timeout-told"
    assert not classify_text("如何解决遇到的NCCL Timeout问题？", torch_version=None)


def test_a_gpu_told_disconnected() -> None:
    assert root("gpu_disconnected_told.log").signature == "gpu-hardware/lost-told"
    assert not classify_text("If the GPU disconnected, would the job resume?",
                             torch_version=None)


def test_a_power_cable_found_at_fault() -> None:
    assert root("weak_power_cable_told.log").signature == "gpu-hardware/power-supply-told"
    assert not classify_text("Faults can be due to a loose power cable if you use adapters.",
                             torch_version=None)


def test_a_new_board_that_ended_the_kernel_faults() -> None:
    found = root("board_swap_fixed_kernel_faults.log")
    assert (found.cls, found.signature) == ("gpu-hardware", "gpu-hardware/board-swap-told")
    assert not classify_text("Maybe replaced the motherboard would have fixed it.",
                             torch_version=None)


def test_a_cards_temperature_told_too_high_in_a_title() -> None:
    found = root("card_temperature_too_high_title.log")
    assert (found.cls, found.signature) == ("gpu-hardware", "gpu-hardware/overheat-told")


def test_one_nodes_cuda_oom_under_an_nccl_title() -> None:
    assert root("node_failed_with_cuda_oom_told.log").cls == "cuda-oom"


def test_a_gpu_told_to_need_a_newer_cuda_over_cudnns_status() -> None:
    found = root("gpu_needs_newer_cuda_told.log")
    assert (found.cls, found.signature) == ("driver-mismatch",
                                            "driver-mismatch/gpu-needs-newer-cuda-told")
    assert not classify_text("Does the 3090 only support cuda 11.0 or newer?",
                             torch_version=None)


def test_a_kill_in_a_titles_brackets() -> None:
    assert root("title_kill_in_brackets.log").cls == "host-oom"


def test_a_photogrammetry_programs_check_for_a_cuda_gpu() -> None:
    found = root("depth_map_needs_cuda_gpu.log")
    assert (found.cls, found.signature) == ("driver-mismatch",
                                            "driver-mismatch/no-usable-cuda-gpu")
    assert "driver" in found.remedy


def test_the_same_check_on_a_machine_told_without_an_nvidia_card_is_no_failure() -> None:
    incidents = shape_incidents("depth_map_needs_cuda_gpu_no_nvidia.log")
    assert incidents and all(i.severity != Severity.ERROR for i in incidents)
