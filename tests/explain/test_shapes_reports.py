"""Failures as reports and applications print them: PyTorch's out-of-memory cut to its head in
an error report, the cudaMallocAsync backend on a GPU that cannot run it, Kubernetes' OOMKilled
asked about, a question in Chinese without its mark, the device plugin's verdict on an Xid, an
Xid that is all a report shows, and a DataLoader worker stopped with SIGTERM. Synthetic fixtures
in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.model import Severity
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root

# --- PyTorch's out-of-memory exception, cut after its head ---------------------------------------

@pytest.mark.parametrize("name", [
    "error_report_allocation_on_device.log",  # "Exception Message: Allocation on device "
    "error_report_oom_type_translated.log",  # the type alone, the message translated
    "processing_log_allocation_on_device.log",  # an application's log line, cut the same way
])
def test_the_out_of_memory_exception_cut_to_its_head_is_a_cuda_oom(name: str) -> None:
    oom = root(name)
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/caching-allocator")


def test_the_exception_type_alone_in_prose_or_a_heading_is_not_read() -> None:
    assert classify_text("torch.cuda.OutOfMemoryError\n") == []
    assert classify_text("Allocation on device tensors is fast.\n") == []


# --- the cudaMallocAsync backend on a GPU that cannot run it -------------------------------------

@pytest.mark.parametrize("name", [
    "async_backend_operation_not_supported.log",  # the startup line names the backend
    "async_flag_named_operation_not_supported.log",  # the application's option for it
])
def test_operation_not_supported_where_the_log_names_the_async_backend(name: str) -> None:
    conf = root(name)
    assert (conf.cls, conf.signature) == ("alloc-conf", "alloc-conf/async-operation-unsupported")
    assert "backend:cudaMallocAsync" in conf.remedy


def test_the_async_backend_in_the_allocator_configuration_counts_too() -> None:
    found = classify_text("export PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync\n"
                          "RuntimeError: CUDA error: operation not supported\n")
    assert [(i.cls, i.role) for i in found] == [("alloc-conf", "root-cause")]


def test_operation_not_supported_alone_is_context_not_a_failure() -> None:
    found = incidents("operation_not_supported_alone.log")
    assert [(i.signature, i.severity) for i in found] == [
        ("alloc-conf/async-operation-unsupported", Severity.INFO)]
    assert all(i.role == "context" for i in found)


def test_cudamalloc_without_async_names_no_backend() -> None:
    found = classify_text("cudaMalloc failed while copying\n"
                          "RuntimeError: CUDA error: operation not supported\n")
    assert all(not i.is_failure for i in found)


# --- host memory: a question about OOMKilled, a question in Chinese ------------------------------

def test_oomkilled_quoted_in_the_writers_own_question_is_theirs() -> None:
    killed = root("pod_reason_oomkilled_question.log")
    assert (killed.cls, killed.signature) == ("host-oom", "host-oom/kubernetes-oomkilled")


def test_a_chinese_question_without_its_mark_is_no_explainer_cue() -> None:
    found = incidents("quoted_question_then_slurm_oom_kill_zh.log")
    assert [(i.cls, i.role) for i in found][:1] == [("host-oom", "root-cause")]
    assert any(i.signature == "host-oom/slurm-oom-kill" and i.is_failure for i in found)


def test_a_dataloader_worker_terminated_is_a_host_memory_death() -> None:
    died = root("dataloader_worker_terminated.log")
    assert (died.cls, died.signature) == ("host-oom", "host-oom/dataloader-killed")
    assert died.numbers["signal"] == "Terminated" and died.numbers["pids"] == [52114]
    assert "SIGTERM" in died.explanation


def test_a_dataloader_worker_segfault_is_still_its_own_crash() -> None:
    found = classify_text("RuntimeError: DataLoader worker (pid 7) is killed by signal: "
                          "Segmentation fault.\n")
    assert all(i.cls != "host-oom" or not i.is_failure for i in found)


# --- the GPU: the device plugin's verdict, an Xid alone in a report -------------------------------

def test_the_device_plugin_marking_a_gpu_unhealthy() -> None:
    xid = root("device_plugin_xid_unhealthy.log")
    assert (xid.cls, xid.signature) == ("gpu-hardware", "gpu-hardware/device-plugin-xid")
    assert xid.numbers["xid"] == 48
    assert xid.numbers["device"] == "GPU-0b1c2d3e-aaaa-bbbb-cccc-000000000001"
    assert xid.severity >= Severity.ERROR


def test_an_unknown_xid_from_the_device_plugin_is_still_a_failure() -> None:
    found = classify_text("XidCriticalError: Xid=999 on Device=GPU-1; marking device as "
                          "unhealthy.\n")
    assert [(i.cls, i.role, i.numbers["xid"]) for i in found] == [
        ("gpu-hardware", "root-cause", 999)]


def test_an_xid_warning_alone_in_a_report_is_its_root_cause() -> None:
    xid = root("report_xid31_alone.log")
    assert (xid.cls, xid.numbers["xid"]) == ("gpu-hardware", 31)
    assert "Nothing else in the log is a failure" in xid.explanation


def test_an_xid_warning_alone_in_a_plain_log_stays_a_warning() -> None:
    found = incidents("plain_log_xid31_alone.log")
    assert [(i.numbers["xid"], i.severity, i.role) for i in found] == [
        (31, Severity.WARNING, "context")]


# --- an absurd request after a collective failed --------------------------------------------------

def test_a_request_of_more_than_1eb_after_a_collective_timeout_is_its_consequence() -> None:
    found = incidents("collective_timeout_then_1eb_oom.log")
    assert [(i.cls, i.role) for i in found] == [("nccl", "root-cause"),
                                                ("cuda-oom", "consequence")]
    assert "collective failure comes first" in found[1].explanation


def test_a_request_of_more_than_1eb_alone_is_still_the_root_cause() -> None:
    found = classify_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more "
                          "than 1EB memory.\n")
    assert [(i.cls, i.role) for i in found] == [("cuda-oom", "root-cause")]


def test_a_kernel_accessing_memory_illegally_named_in_a_title() -> None:
    fault = root("title_kernel_accesses_memory_illegally.log")
    assert (fault.cls, fault.signature) == ("illegal-memory-access",
                                            "illegal-memory-access/illegal-address")


def test_an_insufficient_driver_cut_before_its_last_word_is_the_root_cause() -> None:
    # the CUDA runtime's message kept up to "CUDA runtime" (a title, an inline quote) is the
    # failure; the NVML mismatch met while reinstalling the driver comes after it
    first, second = incidents("caffe_insufficient_driver_cut_zh.log")[:2]
    assert (first.signature, first.role) == ("driver-mismatch/insufficient-driver", "root-cause")
    assert second.cls == "nvml-unavailable"
    (status,) = classify_text("F1201 solver.cpp:54] Check failed: error == cudaSuccess (35 vs. 0)",
                              torch_version=None)
    assert status.signature == "driver-mismatch/insufficient-driver"
