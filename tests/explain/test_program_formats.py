"""Formats read from the programs' own format strings: NCCL's socket transport, DCGM's NVSwitch
and NVLink checks, llama.cpp's (ggml's) device line, Docker's missing GPU driver, and CUDA's
status 36 read by the numbering of the CUDA the log states."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_audit.explain import Incident, classify_text
from gpu_audit.knowledge.cuda_errors import numbered_before_renumbering
from tests.explain.test_grep_engine import assert_same, needs_grep


def _root(text: str) -> Incident:
    found = [i for i in classify_text(text, torch_version=None) if i.role == "root-cause"]
    assert found, f"no failure in {text!r}"
    return found[0]


# NCCL: the peer's address (host<port>) reaches the evidence, in each release's words.
@pytest.mark.parametrize("line", [
    "gpu3:811:902 [1] misc/socket.cc:523 NCCL WARN Net : Connection closed by remote peer "
    "10.8.1.4<51234>",
    "gpu3:811:902 [1] NCCL WARN socketProgress: Connection closed by remote peer "
    "10.8.1.4<51234>",
    "gpu3:811:902 [1] NCCL WARN ncclSocketConnect: connect to 10.8.1.4<51234> failed : "
    "Connection refused",
    "gpu3:811:902 [1] NCCL WARN ncclSocketConnect: connect to 10.8.1.4<51234> returned "
    "Connection refused, exceeded error retry count after 35 attempts",
    "gpu3:811:902 [1] NCCL WARN ncclOsSocketPollConnect to 10.8.1.4<51234> failed with error "
    "Connection refused",
    "gpu3:811:902 [1] NCCL WARN socketStartConnect: Connect to 10.8.1.4<51234> failed : "
    "No route to host",
    "[rank1]: gpu3:811:902 [1] NCCL WARN Net : Connect to 10.8.1.4<51234> failed : "
    "Connection timed out",
])
def test_an_nccl_socket_failure_names_the_peer(line: str) -> None:
    root = _root(line + "\n")
    assert (root.cls, root.signature) == ("nccl", "nccl/network")
    assert root.numbers.get("peer") == "10.8.1.4<51234>"


def test_a_peer_named_by_its_host_name() -> None:
    root = _root("n1:5:6 [0] NCCL WARN socketProgress: Connection closed by remote peer "
                 "trainer-node-07.cluster<48211>\n")
    assert root.numbers.get("peer") == "trainer-node-07.cluster<48211>"


def test_an_nccl_connect_retry_is_no_failure() -> None:
    line = ("gpu3:811:902 [1] NCCL INFO ncclSocketConnect: connect to 10.8.1.4<51234> returned "
            "Connection refused, retrying (3/34) after sleep for 300 msec\n")
    assert not [i for i in classify_text(line, torch_version=None) if i.is_failure]


@pytest.mark.parametrize("line,received,expected,peer", [
    ("gpu7:3141:3207 [2] NCCL WARN NET/Socket : peer 10.4.0.9<40411> message truncated : "
     "receiving 524288 bytes instead of 131072. If you believe your socket network is in a "
     "healthy state, there may be a mismatch", 524288, 131072, "10.4.0.9<40411>"),
    ("gpu7:3141:3207 [2] NCCL WARN Message truncated : received 16 bytes instead of 8",
     16, 8, None),
])
def test_an_nccl_message_truncated(line: str, received: int, expected: int,
                                   peer: str | None) -> None:
    root = _root(line + "\n")
    assert (root.cls, root.signature) == ("nccl", "nccl/message-truncated")
    assert (root.numbers.get("received_bytes"), root.numbers.get("expected_bytes"),
            root.numbers.get("peer")) == (received, expected, peer)
    assert "NCCL_" in root.remedy


# DCGM's health and diagnostic messages for the NVLink fabric.
def test_dcgm_fatal_nvswitch_sxid() -> None:
    root = _root("Error: Detected fatal NvSwitch SXID 12028\n")
    assert (root.cls, root.signature) == ("gpu-hardware", "gpu-hardware/dcgm-health")
    assert (root.numbers.get("sxid"), root.numbers.get("fault")) == (12028, "sxid_fatal")
    assert "SXID 12028" in root.explanation and root.severity.value == "critical"


def test_dcgm_nvlink_replay_errors_that_should_be_zero() -> None:
    root = _root("Health: Detected 7 nvlink_replay_error_count_total NvLink errors on GPU 3's "
                 "NVLink (should be 0)\n")
    assert root.numbers.get("fault") == "nvlink_critical"
    assert (root.numbers.get("gpu_index"), root.numbers.get("count")) == (3, 7)
    assert root.numbers.get("nvlink_counter") == "nvlink_replay_error_count_total"
    assert "nvidia-smi nvlink -e" in root.remedy


def test_dcgm_nvlink_crc_errors_above_the_limit() -> None:
    root = _root("Health: 412.5 nvlink_flit_crc_error_count_total NvLink errors found occuring "
                 "per second on GPU 5, exceeding the limit of 100 per second.\n")
    assert root.numbers.get("fault") == "nvlink_crc"
    assert (root.numbers.get("gpu_index"), root.numbers.get("per_second")) == (5, "412.5")


def test_dcgm_nvlink_errors_over_the_threshold_are_a_warning() -> None:
    incidents = classify_text("Health: Detected 12 nvlink_flit_crc_error_count_total NvLink "
                              "errors on GPU 1's NVLink which exceeds threshold of 10\n",
                              torch_version=None)
    assert [(i.signature, i.severity.value, i.numbers.get("threshold")) for i in incidents] == [
        ("gpu-hardware/dcgm-health", "warning", 10)]


# llama.cpp's CUDA backend names the device under any CUDA error it checks.
@pytest.mark.parametrize("error,signature", [
    ("CUDA error: an illegal memory access was encountered",
     "illegal-memory-access/illegal-address"),
    ("CUDA error: out of memory", "cuda-oom/cuda-error"),
    ("CUDA error: no kernel image is available for execution on the device",
     "driver-mismatch/no-kernel-image"),
])
def test_ggml_current_device_is_the_gpu_of_the_error(error: str, signature: str) -> None:
    log = (f"{error}\n  current device: 2, in function ggml_cuda_mul_mat at "
           "ggml/src/ggml-cuda/ggml-cuda.cu:1790\n  cublasGemmEx(handle, ...)\n"
           "ggml/src/ggml-cuda/ggml-cuda.cu:75: CUDA error\n")
    root = _root(log)
    assert (root.signature, root.numbers.get("gpu_index")) == (signature, 2)


def test_ggml_device_unknown_or_far_away_names_no_gpu() -> None:
    unknown = ("CUDA error: an illegal memory access was encountered\n  current device: -1, in "
               "function ggml_cuda_mul_mat at ggml-cuda.cu:1790\n")
    assert "gpu_index" not in _root(unknown).numbers
    far = ("CUDA error: an illegal memory access was encountered\n" + "step\n" * 10
           + "  current device: 1, in function ggml_cuda_mul_mat at ggml-cuda.cu:1790\n")
    assert "gpu_index" not in _root(far).numbers


# Docker without the NVIDIA Container Toolkit.
@pytest.mark.parametrize("line", [
    'docker: Error response from daemon: could not select device driver "" with capabilities: '
    "[[gpu]].",
    'Error response from daemon: could not select device driver "nvidia" with capabilities: '
    "[[compute utility gpu]]",
    'could not select device driver "" with capabilities: [[gpu]]',  # a title
])
def test_docker_without_a_gpu_device_driver(line: str) -> None:
    root = _root(line + "\n")
    assert (root.cls, root.signature) == ("nvml-unavailable",
                                          "nvml-unavailable/docker-no-gpu-driver")
    assert "nvidia-container-toolkit" in root.remedy and "nvidia-ctk runtime configure" in (
        root.remedy)


def test_another_device_capability_is_not_the_gpu_toolkit() -> None:
    line = 'could not select device driver "" with capabilities: [[fpga]]\n'
    assert not classify_text(line, torch_version=None)


# CUDA status 36: cudaErrorCallRequiresNewerDriver since CUDA 10.1, cudaErrorSetOnActiveProcess
# before.
CHECK_36 = ("F0304 10:11:12.345678  4242 common.cpp:171] Check failed: error == cudaSuccess "
            "(36 vs. 0)")


@pytest.mark.parametrize("stated", [
    "Cuda compilation tools, release 9.2, V9.2.148",
    '-- Found CUDA: /usr/local/cuda (found version "10.0")',
    "CUDA Version 9.0.176",
    "| NVIDIA-SMI 410.79       Driver Version: 410.79       CUDA Version: 10.0     |",
])
def test_status_36_from_a_cuda_before_10_1(stated: str) -> None:
    root = _root(f"{stated}\nstarting\n{CHECK_36}\n")
    assert root.signature == "driver-mismatch/driver-older-than-cuda"
    assert root.numbers.get("cuda_status_name") == "cudaErrorSetOnActiveProcess"
    assert "cannot set while device is active" in root.explanation
    assert "Update the NVIDIA driver" not in root.remedy


def test_status_36_named_by_its_old_words_on_the_line() -> None:
    root = _root(CHECK_36 + " cannot set while device is active in this process\n")
    assert root.numbers.get("cuda_numbering") == "before 10.1"


@pytest.mark.parametrize("stated", ["CUDA used to build PyTorch: 11.8",
                                    "Cuda compilation tools, release 10.1, V10.1.243"])
def test_status_36_from_a_cuda_since_10_1(stated: str) -> None:
    root = _root(f"{stated}\n{CHECK_36}\n")
    assert "cuda_status_meaning" not in root.numbers
    assert "Update the NVIDIA driver" in root.remedy


def test_status_36_without_a_cuda_version_says_the_number_changed() -> None:
    root = _root(CHECK_36 + "\n")
    assert "Update the NVIDIA driver" in root.remedy
    assert "cudaErrorSetOnActiveProcess" in root.numbers.get("cuda_status_meaning", "")
    assert "before 10.1" in root.explanation


@pytest.mark.parametrize("version,before", [("9.2", True), ("10.0.130", True), ("10.1", False),
                                            ("12.4", False), (None, None), ("x", None)])
def test_which_numbering_a_cuda_version_uses(version: str | None, before: bool | None) -> None:
    assert numbered_before_renumbering(version) is before


@needs_grep
def test_both_engines_hand_over_these_formats(tmp_path: Path) -> None:
    path = tmp_path / "formats.log"
    path.write_text(
        "Cuda compilation tools, release 9.2, V9.2.148\n"
        '-- Found CUDA: /usr/local/cuda (found version "10.0")\n'
        "gpu3:811:902 [1] NCCL WARN socketProgress: Connection closed by remote peer "
        "10.8.1.4<51234>\n"
        "gpu7:3141:3207 [2] NCCL WARN Message truncated : received 16 bytes instead of 8\n"
        "Error: Detected fatal NvSwitch SXID 12028\n"
        "Health: Detected 7 nvlink_replay_error_count_total NvLink errors on GPU 3's NVLink "
        "(should be 0)\n"
        "  current device: 2, in function ggml_cuda_mul_mat at ggml-cuda.cu:1790\n"
        'could not select device driver "" with capabilities: [[gpu]]\n')
    assert_same(path)
