"""glog checks that print a CUDA or cuBLAS status by its number (also retyped by hand), a
power supply's protection told tripping, and framework allocators of host memory whose words
read like a GPU's (PaddlePaddle's CPU allocator, ONNX Runtime's CPU arena). Synthetic fixtures
in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.signatures import SIGNATURES
from gpu_audit.knowledge.cuda_errors import status_numbers
from tests.explain.helpers import shape_root as root

_PSU = next(sig for sig in SIGNATURES if sig.id == "gpu-hardware/power-supply-told")


def _root_of(text: str) -> tuple[str, str]:
    found = [i for i in classify_text(text, torch_version=None) if i.role == "root-cause"]
    assert found, text
    return found[0].cls, found[0].signature


def test_a_cublas_check_retyped_by_hand_reads_its_number() -> None:
    failure = root("caffe_cublas_check_retyped.log")
    assert (failure.cls, failure.signature) == ("cublas-failure", "cublas-failure/status-code")
    assert failure.numbers["status"] == "CUBLAS_STATUS_NOT_INITIALIZED"
    assert failure.diagnosis == "out-of-memory"


@pytest.mark.parametrize("line", [
    "Check failed: CUBLAS_STATUS_SUCCESS == stat (0 vs. 1)",
    "Check failed: status == CUBLAS_STATUS_SUCCESS (1 vs. 0)",
    "Check failed: status==CUBLAS_STATUS_SUCCESS (1 VS. 0)",
])
def test_cublas_checks_either_way_round(line: str) -> None:
    (failure,) = classify_text(f"F0101 00:00:00.000000 1 math.cu:26] {line}", torch_version=None)
    assert failure.numbers["status"] == "CUBLAS_STATUS_NOT_INITIALIZED"


def test_a_cuda_check_with_its_number_alone() -> None:
    failure = root("caffe_cuda_check_number_only.log")
    assert (failure.cls, failure.signature) == ("driver-mismatch",
                                                "driver-mismatch/no-kernel-image")


@pytest.mark.parametrize(("check", "cls", "signature"), [
    ("error == cudaSuccess (2 vs. 0)", "cuda-oom", "cuda-oom/cuda-error"),
    ("e == cudaSuccess (2 vs. 0)", "cuda-oom", "cuda-oom/framework-allocator"),  # MXNet's
    ("error == cudaSuccess (35 VS. 0)", "driver-mismatch", "driver-mismatch/insufficient-driver"),
    ("e == cudaSuccess (36 vs. 0)", "driver-mismatch", "driver-mismatch/driver-older-than-cuda"),
    ("error == cudaSuccess (38 vs. 0)", "driver-mismatch", "driver-mismatch/cuda-init"),
    ("cudaSuccess == cudaStat (0 vs. 39)", "gpu-hardware", "gpu-hardware/uncorrectable-ecc"),
    ("e == cudaSuccess (209 vs. 0)", "driver-mismatch", "driver-mismatch/no-kernel-image"),
    ("error == cudaSuccess (77 vs. 0)", "illegal-memory-access",
     "illegal-memory-access/illegal-address"),
    ("e == cudaSuccess (700 vs. 0)", "illegal-memory-access",
     "illegal-memory-access/illegal-address"),
    ("e == cudaSuccess (719 vs. 0)", "illegal-memory-access",
     "illegal-memory-access/launch-failure"),
    ("e == cudaSuccess (803 vs. 0)", "driver-mismatch", "driver-mismatch/cuda-init"),
])
def test_each_cuda_status_number_reads_as_its_class(check: str, cls: str, signature: str) -> None:
    assert _root_of(f"F0101 00:00:00.000000 1 common.cpp:152] Check failed: {check}") == (
        cls, signature)


def test_no_device_by_its_old_number_is_advised_as_no_device() -> None:
    (failure,) = classify_text("Check failed: error == cudaSuccess (38 vs. 0)", torch_version=None)
    assert "CUDA_VISIBLE_DEVICES" in failure.remedy


def test_status_numbers_of_both_numberings() -> None:
    assert status_numbers("cudaErrorIllegalAddress") == (77, 700)
    assert status_numbers("cudaErrorMemoryAllocation") == (2,)


def test_a_number_that_is_no_status_reads_nothing() -> None:
    assert classify_text("Check failed: error == cudaSuccess (30 vs. 0)", torch_version=None) == []


def test_a_power_supply_protection_tripping_told_in_a_body() -> None:
    found = root("psu_protection_diagnosis.log")
    assert (found.cls, found.signature) == ("gpu-hardware", "gpu-hardware/power-supply-told")


@pytest.mark.parametrize(("line", "told"), [
    ("earlier events likely latched PSU OCP/UVP protection", True),
    ("Under full load the card tripped the power supply's over-current protection.", True),
    ("our PSU kept tripping during training", True),
    # any supply, a condition, a possibility, a buying guide, OpenShift's OCP
    ("A PSU's OCP trips when the load is too high.", False),
    ("If the PSU trips, lower the power limit.", False),
    ("Spikes can trip the PSU's OCP on cheap units.", False),
    ("A good PSU with OCP and OVP protection is worth it.", False),
    ("The operator failed to start on OCP 4.10.30", False),
])
def test_power_supply_protection_wordings(line: str, told: bool) -> None:
    assert bool(_PSU.regex.search(line)) is told


def test_paddles_cpu_allocator_is_host_memory() -> None:
    found = root("paddle_cpu_fail_to_alloc.log")
    assert (found.cls, found.signature) == ("host-oom", "host-oom/framework-allocator")
    assert found.numbers["requested_bytes"] == 6 << 30 and found.numbers["error_code"] == 12


def test_paddles_allocation_on_a_gpu_place_stays_the_gpus() -> None:
    (found,) = classify_text("ResourceExhaustedError: Fail to alloc memory of 1048576 size on "
                             "Place(gpu:1)", torch_version=None)
    assert (found.cls, found.numbers["gpu_index"]) == ("cuda-oom", 1)


@pytest.mark.parametrize("name", ["onnxruntime_cpu_arena_verbose.log",
                                  "onnxruntime_cpu_provider_only.log"])
def test_onnx_runtimes_cpu_arena_is_host_memory(name: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == ("host-oom", "host-oom/framework-allocator")
    assert found.title == "Host out of memory (ONNX Runtime)"
    assert "enable_cpu_mem_arena" in found.remedy


_ORT_FAILURE = ("Non-zero status code returned while running MatMul node. Name:'{node}' Status "
                "Message: onnxruntime::BFCArena::AllocateRawInternal Failed to allocate memory "
                "for requested buffer of size 4194304")
_EXTEND = ("[I:onnxruntime:, bfc_arena.cc:347 AllocateRawInternal] Extending BFCArena for {arena}."
           " bin_num:14 (requested) num_bytes: 4194304 (actual) rounded_bytes:{size}")


@pytest.mark.parametrize(("lines", "cls"), [
    # the arena grown by the failing size is the one that failed
    ([_EXTEND.format(arena="Cuda", size=4194304), _EXTEND.format(arena="Cpu", size=1024)],
     "cuda-oom"),
    ([_EXTEND.format(arena="Cuda", size=1024), _EXTEND.format(arena="Cpu", size=4194304)],
     "host-oom"),
    # a session that fell back from a GPU's provider to the CPU's
    (["EP Error when using ['CUDAExecutionProvider', 'CPUExecutionProvider']",
      "Falling back to ['CPUExecutionProvider'] and retrying."], "host-oom"),
    (["Applied providers: ['CUDAExecutionProvider', 'CPUExecutionProvider']"], "cuda-oom"),
    ([], "cuda-oom"),
])
def test_which_arena_failed(lines: list[str], cls: str) -> None:
    text = "\n".join([*lines, _ORT_FAILURE.format(node="m")])
    assert _root_of(text)[0] == cls


def test_a_node_of_the_cpus_nchwc_layout_is_the_cpus() -> None:
    assert _root_of(_ORT_FAILURE.format(node="347_nchwc"))[0] == "host-oom"


def test_a_check_without_the_word_error_is_read_mid_log(tmp_path) -> None:
    from gpu_audit.explain import explain_sources

    log = tmp_path / "train.log"
    log.write_text("epoch 1\nF0101 00:00:00.000000 1 hl_cuda_device.cc:565] Check failed: "
                   "cudaSuccess == cudaStat (0 vs. 39)\n"
                   + "".join(f"step {i}\n" for i in range(9)))
    (found,) = explain_sources([str(log)], workers=1).incidents
    assert (found.signature, found.line_numbers) == ("gpu-hardware/uncorrectable-ecc", [2])
