"""Shapes of logs from the machines gpu-audit audits that are not PyTorch's own: TensorFlow's and
JAX's out-of-memory, NVML missing in macOS's and other tools' words, the cudaMallocAsync
backend's unsupported features; and the ways people paste them: an error quoted inline with
prose after it, a message wrapped at an apostrophe, the OOM killer's task table alone, prose
that explains an error, and a lost GPU logged after the "no device" it causes. Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

from gpu_audit.explain import classify_text
from gpu_audit.model import Severity
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(name: str) -> list:
    return [i for i in incidents(name) if i.severity >= Severity.ERROR]


def test_tensorflow_oom_reads_the_gpu_and_the_bytes_asked() -> None:
    oom = root("tensorflow_oom_gpu1.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/tensorflow")
    assert oom.numbers["gpu_index"] == 1
    assert oom.numbers["requested_bytes"] == 411041792  # the allocator's rounded request
    assert "TF_FORCE_GPU_ALLOW_GROWTH" in oom.remedy
    assert len(incidents("tensorflow_oom_gpu1.log")) == 1


def test_tensorflow_tensor_size_is_its_shape_times_its_dtype() -> None:
    (oom,) = classify_text(
        "ResourceExhaustedError: OOM when allocating tensor with shape[16,112,112,147] and type "
        "half on /job:localhost/replica:0/task:0/device:GPU:2 by allocator GPU_2_bfc",
        torch_version=None)
    assert oom.numbers["requested_bytes"] == 16 * 112 * 112 * 147 * 2
    assert oom.numbers["gpu_index"] == 2


def test_tensorflow_on_the_cpu_is_not_a_gpu_oom() -> None:
    text = ("Resource exhausted: OOM when allocating tensor with shape[1,416,416,3] and type "
            "float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu")
    assert [i.cls for i in classify_text(text, torch_version=None)] != ["cuda-oom"]


def test_tensorflow_allocator_retry_that_is_not_a_failure_stays_quiet() -> None:
    assert failures("tensorflow_bfc_not_a_failure.log") == []


def test_jax_oom_reads_the_bytes() -> None:
    oom = root("jax_xla_oom.log")
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/xla")
    assert oom.numbers["requested_bytes"] == 6442450944
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in oom.remedy


def test_jax_failed_request_names_its_device() -> None:
    (oom,) = classify_text("XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate request for "
                           "9.00GiB (9663676416B) on device ordinal 3", torch_version=None)
    assert (oom.numbers["requested_bytes"], oom.numbers["gpu_index"]) == (9663676416, 3)


def test_macos_dlopen_is_nvml_missing_and_says_macos() -> None:
    nvml = root("macos_pynvml_dlopen.log")
    assert nvml.cls == "nvml-unavailable"
    assert "macOS" in nvml.explanation and "mps" in nvml.remedy


def test_another_tools_words_for_nvml_missing() -> None:
    nvml = root("gpu_monitor_nvml_not_installed.log")
    assert (nvml.cls, nvml.signature) == ("nvml-unavailable", "nvml-unavailable/library-missing")


def test_cuda_malloc_async_unsupported_is_allocator_configuration() -> None:
    conf = root("cuda_malloc_async_record_history.log")
    assert (conf.cls, conf.signature) == ("alloc-conf", "alloc-conf/async-unsupported")
    assert conf.numbers["feature"] == "recordHistory"
    assert "backend:cudaMallocAsync" in conf.explanation


def test_an_inline_quote_the_writer_met_is_reported_despite_prose_after_it() -> None:
    fault = root("inline_quote_then_prose.log")
    assert fault.cls == "illegal-memory-access"


def test_an_inline_quote_offered_as_an_example_stays_a_mention() -> None:
    text = ("On old GPUs the first launch fails with either `CUDA error: no kernel image is "
            "available for execution on the device` or a warning.")
    assert classify_text(text, torch_version=None) == []


def test_a_message_wrapped_at_an_apostrophe_is_joined_and_keeps_its_rank() -> None:
    hung = [i for i in incidents("nccl_watchdog_wrapped_at_apostrophe.log")
            if i.signature == "nccl/heartbeat"]
    assert len(hung) == 1 and hung[0].ranks == [5] and hung[0].role == "root-cause"
    assert "ProcessGroupNCCL's watchdog got stuck" in hung[0].excerpt
    assert hung[0].numbers["stuck_s"] == 480


def test_a_prefixed_line_cut_inside_its_work_fields_keeps_their_numbers() -> None:
    timeout = root("nccl_watchdog_cut_inside_work_fields.log")
    assert timeout.cls == "nccl" and timeout.ranks == [3]
    assert (timeout.numbers["seq_num"], timeout.numbers["timeout_ms"]) == (884217, 900000)
    assert timeout.numbers["op_type"] == "_ALLGATHER_BASE"


def test_the_oom_killers_task_table_alone_is_a_host_oom() -> None:
    oom = root("kernel_oom_task_table_only.log")
    assert oom.cls == "host-oom"
    assert (oom.numbers["pid"], oom.numbers["process_name"]) == (51877, "python3")
    assert oom.title == "The host ran out of RAM (OOM killer)"


def test_the_task_table_header_alone_opens_a_host_oom() -> None:
    (oom,) = classify_text("[ 1.0] Tasks state (memory values in pages):\n", torch_version=None)
    assert oom.cls == "host-oom"


def test_explainers_quoting_errors_raise_no_error_level_incident() -> None:
    for name in ("explainer_post_en.log", "explainer_post_zh.log"):
        assert failures(name) == [], name
        assert all(i.title.startswith("Quoted in an explanation") for i in incidents(name))


def test_an_issue_asking_how_to_fix_its_own_error_is_still_a_failure() -> None:
    assert root("issue_asking_how_to_fix.log").cls == "cuda-oom"


def test_a_lost_gpu_outranks_the_no_device_error_it_causes() -> None:
    lost = root("gpu_lost_after_no_device.log")
    assert lost.cls == "gpu-hardware"
    (init,) = [i for i in incidents("gpu_lost_after_no_device.log")
               if i.signature == "driver-mismatch/cuda-init"]
    assert init.role == "consequence"


def test_no_device_alone_is_still_the_root_cause() -> None:
    (init,) = classify_text("RuntimeError: No CUDA GPUs are available", torch_version=None)
    assert init.role == "root-cause" and init.cls == "driver-mismatch"


def test_a_notebook_traceback_header_names_tensorflows_oom() -> None:
    (oom,) = classify_text("ResourceExhaustedErrorTraceback (most recent call last)\n"
                           "<ipython-input-3> in <module>()\n", torch_version=None)
    assert oom.cls == "cuda-oom"


def test_task_table_rows_alone_are_a_host_oom_without_naming_a_victim() -> None:
    oom = root("kernel_oom_task_rows_only.log")
    assert (oom.cls, oom.signature) == ("host-oom", "host-oom/task-row")
    assert "pid" not in oom.numbers  # a row lists a task; it does not say which one was killed
    assert oom.title == "The host ran out of RAM (OOM killer)"


def test_a_task_row_joins_the_kill_it_precedes() -> None:
    found = incidents("kernel_oom_task_table_only.log")
    assert [i.cls for i in found] == ["host-oom"]


def test_tensorflows_oom_status_in_a_title_without_error_or_memory() -> None:
    oom = root("tensorflow_oom_title_only.log")
    assert (oom.signature, oom.numbers["requested_bytes"]) == (
        "cuda-oom/tensorflow", 64 * 512 * 28 * 28 * 4)


def test_tensorflows_exception_class_alone_as_a_heading() -> None:
    assert root("tensorflow_oom_heading_bfc_dump.log").signature == "cuda-oom/tensorflow"
    assert classify_text("It is a ResourceExhaustedError, I think, from the data pipeline",
                         torch_version=None) == []


def test_nvml_not_supported_on_the_platform_said_in_a_sentence() -> None:
    assert root("nvml_not_supported_macos_prose.log").cls == "nvml-unavailable"


def test_the_toolkits_stub_libnvidia_ml_is_named() -> None:
    nvml = root("nvml_stub_library_loaded.log")
    assert nvml.cls == "nvml-unavailable" and "stub" in nvml.explanation
    assert "stubs directory from LD_LIBRARY_PATH" in nvml.remedy


def test_rusts_nvml_wrapper_errors_are_nvml_failures() -> None:
    found = incidents("nvml_rust_wrapper_error.log")
    assert [i.cls for i in found if i.is_failure] == ["nvml-unavailable"] * len(
        [i for i in found if i.is_failure])
    assert any("Not Supported" in i.explanation for i in found)


def test_a_request_for_an_operation_cuda_malloc_async_lacks() -> None:
    conf = root("cuda_malloc_async_request_title.log")
    assert (conf.signature, conf.numbers["feature"]) == (
        "alloc-conf/async-unsupported", "setCheckpointPoolState")


def test_a_message_quoted_between_triple_quotes_is_a_mention() -> None:
    assert failures("pull_request_quoting_oom_in_triple_quotes.log") == []
    text = 'expected = """\nRuntimeError: CUDA error: out of memory\n"""\n'
    assert classify_text(text, torch_version=None) == []
    opened_only = '"""\nRuntimeError: CUDA error: out of memory\nstep 2\n'
    assert [i.cls for i in classify_text(opened_only, torch_version=None)] == ["cuda-oom"]
