"""Shapes read since the thirtieth held-out set: reference and platform pages that show an Xid
line as an example, a driver or toolkit failure retyped or told in a title (PTX "complied",
llama.cpp's CUDA initialisation failure mid-log, a new architecture "not supported"), ONNX
Runtime's words for a failed cuBLAS call, nvidia-smi told failing in a title, NCCL's
peer-to-peer transport told failing on consumer cards, a bootstrap that only ever retried, and
a card or a reset told at fault. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain.mentions import explainer_cues
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


@pytest.mark.parametrize("name", ["explainer_xid_reference_page.log",
                                  "explainer_platform_log_format.log"])
def test_pages_that_show_an_xid_line_as_an_example_raise_no_failure(name: str) -> None:
    found = incidents(name)
    assert [i.cls for i in found] == ["gpu-hardware"]
    assert not [i for i in found if i.is_failure]


@pytest.mark.parametrize(("line", "cue"), [
    ("What it means", "error-means"),
    ("Xid 48 means the GPU's memory returned a bad value", "error-means"),
    ("How to diagnose it", "how-to-fix"),
    ("What to do", "how-to-fix"),
    ("Typical kernel-log signature", "log-format"),
    ("These logs are in the following format: [hw] [LEVEL] MESSAGE", "log-format"),
    ("The event log looks like this:", "log-format"),
    ("A classic critical Xid error is the bus one.", "you-have-seen"),
])
def test_reference_page_phrases(line: str, cue: str) -> None:
    assert cue in explainer_cues([line])


@pytest.mark.parametrize("line", ["I don't know what to do", "The error looks like this:",
                                  "this means my run died", "What to do now?"])
def test_the_writers_own_words_are_no_reference_phrase(line: str) -> None:
    assert not explainer_cues([line])


@pytest.mark.parametrize(("name", "signature"), [
    ("ptx_toolchain_slip_title.log", "driver-mismatch/unsupported-ptx"),
    ("llama_server_display_driver_combo.log", "driver-mismatch/cuda-init"),
    ("new_arch_not_supported_title.log", "driver-mismatch/arch-not-compiled"),
    ("onnxruntime_cublas_error_executing.log", "cublas-failure/call-failed"),
])
def test_root_cause(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_the_architecture_a_title_names_is_read() -> None:
    assert root("new_arch_not_supported_title.log").numbers["capability"] == "sm_120"


def test_onnx_runtimes_failed_cublas_call_is_named() -> None:
    assert root("onnxruntime_cublas_error_executing.log").numbers["call"] == "cublasGemmHelper"


@pytest.mark.parametrize(("name", "signature"), [
    ("smi_fails_in_pod_title.log", "nvml-unavailable/smi-fails-told"),
    ("smi_fails_told_in_container.log", "nvml-unavailable/smi-fails-told"),
    ("nvml_mismatch_told_by_link.log", "nvml-unavailable/init-failed"),
])
def test_nvidia_smi_and_nvml_told_failing(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_a_pod_without_the_runtime_class_is_in_the_advice() -> None:
    assert "runtimeClassName: nvidia" in root("smi_fails_in_pod_title.log").remedy


def test_a_mismatch_told_by_a_link_gets_the_reboot() -> None:
    found = root("nvml_mismatch_told_by_link.log")
    assert found.title == "NVML: driver/library version mismatch"
    assert "Reboot" in found.remedy


def test_advice_about_nvidia_smi_failing_raises_nothing() -> None:
    assert not [i for i in incidents("smi_fails_condition_advice.log") if i.is_failure]


@pytest.mark.parametrize("name", ["nccl_p2p_told_consumer_cards.log",
                                  "nccl_p2p_title_two_cards.log"])
def test_peer_to_peer_told_unavailable_is_nccls_p2p_transport(name: str) -> None:
    found = root(name)
    assert found.signature == "nccl/p2p-unsupported"
    assert "NCCL_P2P_DISABLE=1" in found.remedy


def test_a_guide_about_p2p_settings_raises_nothing() -> None:
    assert not [i for i in incidents("nccl_p2p_advice_guide.log") if i.is_failure]


def test_a_log_that_ends_on_nccls_connect_retries_is_a_failed_start() -> None:
    found = root("nccl_connect_refused_until_the_end.log")
    assert found.signature == "nccl/connect-retrying"
    assert found.title == "NCCL could not connect to a peer at start"
    assert "Connection refused" in found.explanation


def test_connect_retries_before_a_start_that_went_on_are_no_failure() -> None:
    assert not [i for i in incidents("nccl_connect_refused_then_started.log") if i.is_failure]


@pytest.mark.parametrize(("name", "signature"), [
    ("gsp_full_chip_reset_title.log", "gpu-hardware/gsp-timeout"),
    ("faulty_card_told_in_a_paragraph.log", "gpu-hardware/card-swap-told"),
])
def test_the_gpu_told_at_fault(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_a_faulty_card_in_a_condition_raises_nothing() -> None:
    assert not [i for i in incidents("faulty_card_condition.log") if i.is_failure]


@pytest.mark.parametrize(("name", "signature"), [
    ("node_gpu_replaced_by_vendor.log", "gpu-hardware/card-swap-told"),
    ("node_back_short_a_gpu_title.log", "gpu-hardware/lost-told"),
    ("card_in_node_died.log", "gpu-hardware/card-dead-told"),
])
def test_a_clusters_card_told_dead_replaced_or_missing(name: str, signature: str) -> None:
    assert root(name).signature == signature


def test_the_temperature_the_crashes_come_at_is_an_overheat() -> None:
    assert root("overheat_told_by_temperature.log").signature == "gpu-hardware/overheat-told"


def test_a_guide_naming_temperatures_raises_nothing() -> None:
    assert not [i for i in incidents("temperature_guide_no_crash.log") if i.is_failure]


def test_rdma_registration_of_expandable_segments_is_the_setting() -> None:
    found = root("expandable_rdma_registration_bad_address.log")
    assert found.signature == "alloc-conf/expandable-rdma-registration"
    assert "expandable_segments:False" in found.remedy


def test_rdma_registration_without_expandable_segments_is_context() -> None:
    found = incidents("rdma_registration_bad_address_alone.log")
    assert [i.signature for i in found] == ["alloc-conf/expandable-rdma-registration"]
    assert not found[0].is_failure
