"""GPU memory in data libraries' words (NVIDIA DALI's decoder and device allocator, nvJPEG's
allocator status), NCCL's socket connect named by its function, a GPU's device node missing, a
misaligned address named in a title, CUDA's contained-error status quoted after the log verb
that held it, and a thermal shutdown given as a terse answer. Synthetic fixtures in
fixtures/shapes/."""

from __future__ import annotations

from pathlib import Path

from tests.explain.helpers import shape_incidents, shape_root, text_incidents


def _failures(folder: Path, text: str) -> list[str]:
    return [i.signature for i in text_incidents(folder, text) if i.is_failure]


def test_dalis_exception_under_an_operators_failure() -> None:
    oom = shape_root("dali_decoder_cuda_allocation_failed.log")
    assert (oom.cls, oom.signature, oom.title) == (
        "cuda-oom", "cuda-oom/framework-allocator", "GPU out of memory (DALI)")
    assert "num_threads" in oom.remedy


def test_dalis_device_allocator_states_size_and_device() -> None:
    oom = shape_root("dali_cant_allocate_on_device.log")
    assert oom.title == "GPU out of memory (DALI)"
    assert oom.numbers["requested_bytes"] == 256 << 20
    assert oom.numbers["gpu_index"] == 1


def test_dalis_pinned_host_buffer_is_not_the_gpus(tmp_path: Path) -> None:
    text = ("reader ready\nCan't allocate 268435456 bytes on host.\nstep 1\nstep 2\nstep 3\n"
            "step 4\nstep 5\nstep 6\nstep 7\nstep 8\n")
    assert "cuda-oom/framework-allocator" not in _failures(tmp_path, text)


def test_a_program_exiting_on_cuda_allocation_failed_in_a_condition_is_no_failure(
        tmp_path: Path) -> None:
    text = "setup\nthe retry loop runs if the CUDA allocation failed once\nstep 1\nstep 2\n"
    assert _failures(tmp_path, text) == []


def test_nvjpegs_allocator_status_on_a_line_without_error() -> None:
    oom = shape_root("nvjpeg_allocator_failure_status.log")
    assert (oom.cls, oom.title) == ("cuda-oom", "GPU out of memory (nvJPEG)")


def test_nccls_socket_connect_named_by_its_function_in_a_title() -> None:
    net = shape_root("nccl_socket_connect_title.log")
    assert (net.cls, net.signature) == ("nccl", "nccl/network")
    assert net.numbers["peer"] == "10.8.0.21<41277>"


def test_nccls_socket_connect_mid_log(tmp_path: Path) -> None:
    text = ("rank 3 starting\n"
            "socketStartConnect: Connect to 10.8.0.21<41277> failed : Connection refused\n"
            + "".join(f"waiting {n}\n" for n in range(10)))
    assert "nccl/network" in _failures(tmp_path, text)


def test_a_missing_device_node_in_a_title() -> None:
    node = shape_root("no_device_node_title.log")
    assert (node.cls, node.signature) == ("nvml-unavailable", "nvml-unavailable/no-device-node")
    assert "--gpus" in node.remedy


def test_a_misaligned_address_named_in_a_title() -> None:
    fault = shape_root("misaligned_address_title.log")
    assert (fault.cls, fault.signature) == ("illegal-memory-access",
                                            "illegal-memory-access/misaligned-address")


def test_a_contained_error_the_writers_rank_logged() -> None:
    fault = shape_root("contained_logged_in_prose.log")
    assert (fault.cls, fault.signature) == ("gpu-hardware", "gpu-hardware/contained")


def test_a_contained_error_logged_in_a_condition_is_quoted(tmp_path: Path) -> None:
    text = ("# Fabric faults\n\nSome background first.\n\n"
            "If the driver logged `CUDA_ERROR_CONTAINED: Invalid access of peer GPU memory over "
            "nvlink or a hardware error` (from a free), you should drain the node.\n\nMore text.\n")
    assert _failures(tmp_path, text) == []


def test_a_thermal_shutdown_given_as_a_terse_answer() -> None:
    hot = shape_root("thermal_shutdown_terse_reply.log")
    assert (hot.cls, hot.signature) == ("gpu-hardware", "gpu-hardware/overheat-told")


def test_a_guides_thermal_shutdown_heading_is_no_telling() -> None:
    assert not [i for i in shape_incidents("thermal_shutdown_explained.log") if i.is_failure]
