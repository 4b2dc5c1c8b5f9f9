"""Messages of the GPU software that runs beside PyTorch, in their programs' own formats:
llama.cpp and Ollama, vLLM and SGLang, TensorRT-LLM, Triton, CuPy, RAPIDS RMM, Numba, NCCL's
buffers, bitsandbytes' checks, TensorFlow's and JAX's cuDNN checks; and the messages of those
programs that are no failure of a class (Triton's shared-memory limit, vLLM's context length
larger than its KV cache, XLA's page-locked host memory, llama.cpp's pinned buffer). Synthetic
fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.model import Severity
from tests.explain.helpers import gib, mib
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def _mid_log(line: str) -> str:
    """``line`` inside a log, neither its first line (a title) nor among its last lines (read
    whatever the prefilter says): the prefilter must find it."""
    steps = "\n".join(f"step {n} loss 0.{n:02d}" for n in range(20))
    return f"{steps}\n{line}\n{steps}\n"


def test_llama_cpp_cuda_buffer_out_of_memory() -> None:
    found = incidents("llama_server_cuda0_buffer_oom.log")
    assert [(i.signature, i.role) for i in found] == [("cuda-oom/ggml", "root-cause")]
    oom = found[0]
    assert oom.numbers["requested_bytes"] == mib(6144) and oom.numbers["gpu_index"] == 0
    assert "--n-gpu-layers" in oom.remedy and "num_ctx" in oom.remedy
    assert "MXNet" not in oom.title + oom.explanation


def test_llama_cpp_banner_is_no_commit_title() -> None:
    # its first line, "build: 4410 (...) with cc ...", is not a pull request's "build: ..."
    assert root("llama_server_cuda0_buffer_oom.log").role == "root-cause"


def test_ollama_passes_on_the_backends_cuda0_buffer() -> None:
    oom = root("ollama_runner_cuda0_buffer.log")
    assert oom.signature == "cuda-oom/ggml"
    assert oom.numbers == {"gpu_index": 0, "requested_bytes": 19327352832}


def test_vllm_startup_check_blames_other_processes() -> None:
    oom = root("vllm_startup_gpu_not_free.log")
    assert (oom.signature, oom.diagnosis) == ("cuda-oom/serving-engine", "other-processes")
    assert oom.numbers["free_bytes"] == gib(9.75)
    assert oom.numbers["capacity_bytes"] == gib(47.38)
    assert oom.numbers["requested_bytes"] == gib(42.64)
    assert "--gpu-memory-utilization" in oom.remedy


@pytest.mark.parametrize(("name", "engine", "setting"), [
    ("vllm_no_cache_blocks.log", "vllm", "--gpu-memory-utilization"),
    ("sglang_mem_fraction_static.log", "sglang", "--mem-fraction-static"),
])
def test_serving_engines_with_no_memory_left_for_the_kv_cache(name: str, engine: str,
                                                               setting: str) -> None:
    oom = root(name)
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/serving-engine")
    assert oom.numbers["engine"] == engine and setting in oom.remedy


def test_a_context_length_larger_than_the_kv_cache_is_a_setting_not_read() -> None:
    assert incidents("vllm_max_model_len_larger_than_kv_cache.log") == []


@pytest.mark.parametrize("name", ["vllm_cache_blocks_explainer.log",
                                  "sglang_llama_cpp_memory_guide_zh.log"])
def test_an_explainer_quoting_the_programs_messages_does_not_alarm(name: str) -> None:
    found = incidents(name)
    assert found and not [i for i in found if i.is_failure]


@pytest.mark.parametrize(("name", "library", "numbers"), [
    ("cupy_pool_out_of_memory.log", "cupy",
     {"requested_bytes": 8589934592, "allocated_bytes": 14495514624}),
    # (a MemoryError, but of the GPU's pool: not the host's)
    ("rmm_pool_maximum_exceeded.log", "rmm", {}),
])
def test_gpu_array_libraries_out_of_memory(name: str, library: str,
                                           numbers: dict[str, int]) -> None:
    oom = root(name)
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/array-library")
    assert oom.numbers == {"library": library, **numbers}


@pytest.mark.parametrize("name", ["trtllm_cudamallocasync_out_of_memory.log",
                                  "nccl_calloc_unhandled_cuda_error.log"])
def test_a_runtime_allocation_named_with_its_call_is_an_out_of_memory(name: str) -> None:
    oom = root(name)
    assert (oom.cls, oom.signature) == ("cuda-oom", "cuda-oom/cuda-error")


def test_nccls_buffer_out_of_memory_comes_before_its_unhandled_cuda_error() -> None:
    found = incidents("nccl_calloc_unhandled_cuda_error.log")
    assert found[0].cls == "cuda-oom"
    assert {i.role for i in found if i.cls == "nccl"} == {"consequence"}


@pytest.mark.parametrize(("name", "numbers"), [
    ("tf_cudnn_version_mismatch.log", {"loaded": "8.1.0", "built": "8.6.0"}),
    ("jax_cudnn_built_against_newer.log", {"loaded": 8902, "built": 9100}),
])
def test_cudnn_version_the_framework_was_not_built_with(name: str,
                                                        numbers: dict[str, object]) -> None:
    failure = root(name)
    assert (failure.signature, failure.diagnosis) == ("cudnn-failure/framework-init",
                                                      "version-mismatch")
    assert failure.numbers == numbers


@pytest.mark.parametrize(("line", "signature"), [
    ("RuntimeError: Triton Error [CUDA]: out of memory", "cuda-oom/cuda-error"),
    ("Error out of memory at line 166 in file /src/csrc/ops.cu", "cuda-oom/cuda-error"),
    ("tensorflow.python.framework.errors_impl.InternalError: CUDA runtime implicit "
     "initialization on GPU:0 failed. Status: out of memory", "cuda-oom/cuda-error"),
    ("ggml_gallocr_reserve_n: failed to allocate CUDA1 buffer of size 1610612736",
     "cuda-oom/ggml"),
    ("Error: llama runner process has terminated: cudaMalloc failed: out of memory",
     "cuda-oom/ggml"),
    ("numba.cuda.cudadrv.error.CudaSupportError: Error at driver init: Call to cuInit results "
     "in CUDA_ERROR_NO_DEVICE (100)", "driver-mismatch/cuda-init"),
    ("jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: DNN library initialization "
     "failed. Look at the errors above for more details.", "cudnn-failure/framework-init"),
    ("UnknownError: Failed to get convolution algorithm. This is probably because cuDNN "
     "failed to initialize, so try looking to see if a warning log message was printed above.",
     "cudnn-failure/framework-init"),
])
def test_program_lines(line: str, signature: str) -> None:
    (failure,) = classify_text(_mid_log(line), torch_version=None)
    assert failure.signature == signature and failure.is_failure


def test_ggml_names_the_gpu_of_its_buffer() -> None:
    (oom,) = classify_text("alloc_tensor_range: failed to allocate CUDA1 buffer of size 4096",
                           torch_version=None)
    assert oom.numbers == {"gpu_index": 1, "requested_bytes": 4096}


def test_cudnn_start_failure_without_versions_says_memory_or_mismatch() -> None:
    (failure,) = classify_text("XlaRuntimeError: FAILED_PRECONDITION: DNN library "
                               "initialization failed.", torch_version=None)
    assert failure.diagnosis == "memory-or-mismatch"
    assert "XLA_PYTHON_CLIENT_PREALLOCATE=false" in failure.remedy


@pytest.mark.parametrize("name", ["triton_out_of_resources_shared_memory.log",
                                  "xla_pinned_host_alloc_warning.log"])
def test_limits_that_are_no_gpu_memory_exhaustion_are_not_read(name: str) -> None:
    # Triton's kernel asks for more shared memory than one SM has: a kernel configuration;
    # XLA's page-locked host buffer: host memory, and XLA goes on without it
    assert not [i for i in incidents(name) if i.cls == "cuda-oom" or i.is_failure]


def test_xlas_page_locked_host_memory_is_the_hosts_and_a_warning() -> None:
    (found,) = incidents("xla_pinned_host_alloc_warning.log")
    assert (found.signature, found.severity, found.role) == (
        "host-oom/pinned-host-memory", Severity.WARNING, "context")
    assert found.numbers == {"requested_bytes": 34359738368}


@pytest.mark.parametrize("line", [
    "ggml_cuda_host_malloc: failed to allocate 2048.00 MiB of pinned memory: out of memory",
    "llm_load_tensors:  CUDA_Host  output buffer size =     0.99 MiB",
    "[W] [TRT] Requested amount of GPU memory (4294967296 bytes) could not be allocated. There "
    "may not be enough free memory for allocation to succeed.",
])
def test_program_lines_that_are_no_failure(line: str) -> None:
    assert classify_text(line, torch_version=None) == []
    assert classify_text(_mid_log(line), torch_version=None) == []


def test_dcgm_health_names_a_gpu_memory_fault() -> None:
    fault = root("dcgm_diag_dbe_row_remap_failed.log")
    assert (fault.signature, fault.severity) == ("gpu-hardware/dcgm-health", Severity.CRITICAL)
    assert fault.numbers == {"gpu_index": 3, "fault": "remap_failed"}
    assert "replacing" in fault.remedy


def test_dcgm_rows_remapped_or_pending_are_a_warning() -> None:
    (found,) = incidents("dcgm_rows_remapped_pending.log")
    assert (found.signature, found.severity) == ("gpu-hardware/dcgm-health", Severity.WARNING)
    assert "reset" in found.remedy


@pytest.mark.parametrize(("line", "numbers"), [
    ("Error: Detected 2 volatile double-bit ECC error(s) in GPU 3. Drain the GPU and reset it "
     "or reboot the node.", {"count": 2, "gpu_index": 3, "fault": "dbe"}),
    ("Pending page retirements together with a DBE were detected on GPU 1.",
     {"gpu_index": 1, "fault": "dbe"}),
    ("Found 14 faulty memory elements on GPU 6", {"count": 14, "gpu_index": 6,
                                                  "fault": "faulty_memory"}),
    ("Detected fatal errors on NvSwitch 2 link 17", {"nvswitch": 2, "link": 17,
                                                     "fault": "nvswitch_fatal"}),
])
def test_dcgm_lines(line: str, numbers: dict[str, object]) -> None:
    (fault,) = classify_text(_mid_log(line), torch_version=None)
    assert fault.signature == "gpu-hardware/dcgm-health" and fault.numbers == numbers


def test_nccl_without_a_network_interface_is_the_cause_of_its_invalid_usage() -> None:
    found = incidents("nccl_bootstrap_no_socket_interface.log")
    assert [(i.signature, i.role) for i in found] == [
        ("nccl/no-interface", "root-cause"), ("nccl/error", "consequence")]
    assert "NCCL_SOCKET_IFNAME" in found[0].remedy


def test_nccls_shared_memory_it_could_not_extend() -> None:
    shm = root("nccl_shm_failed_to_extend.log")
    assert shm.signature == "nccl/shm-segment"
    assert shm.numbers["shm_size_bytes"] == 9637892
    assert shm.numbers["shm_path"] == "/dev/shm/nccl-Qx81Lm"


@pytest.mark.parametrize(("line", "signature"), [
    ("tensorflow.python.framework.errors_impl.InternalError: Failed copying input tensor from "
     "/job:localhost/replica:0/task:0/device:CPU:0 to /job:localhost/replica:0/task:0/device:"
     "GPU:0 in order to run _EagerConst: Dst tensor is not initialized.", "cuda-oom/tensorflow"),
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to execute XLA Runtime executable: "
     "run time error: custom call 'xla.gpu.custom_call' failed: jaxlib/gpu/prng_kernels.cc:33: "
     "operation gpuGetLastError() failed: out of memory.", "cuda-oom/cuda-error"),
    ("nvidia-container-cli: initialization error: cuda error: no cuda-capable device is "
     "detected: unknown", "driver-mismatch/cuda-init"),
    ("CUDA error 2 at /src/llama.cpp/ggml-cuda.cu:6246: out of memory", "cuda-oom/cuda-error"),
    ("CUDA Error at src/solver.cu:38 - out of memory", "cuda-oom/cuda-error"),
    ("Cuda error in file 'kernel.cu' in line 55 : out of memory.", "cuda-oom/cuda-error"),
    # (no "error" on the line: the prefilter finds it by its own words)
    ("ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected",
     "driver-mismatch/cuda-init"),
])
def test_more_program_lines(line: str, signature: str) -> None:
    (failure,) = classify_text(_mid_log(line), torch_version=None)
    assert failure.signature == signature and failure.is_failure


def test_a_gpu_too_old_for_torch_compiles_triton() -> None:
    failure = root("inductor_gpu_too_old_for_triton.log")
    assert failure.signature == "driver-mismatch/gpu-too-old-for-library"
    assert failure.numbers == {"gpu_name": "Tesla P40", "minimum": "7.0", "capability": "6.1",
                               "library": "triton"}
    assert "TORCHDYNAMO_DISABLE=1" in failure.remedy


def test_a_gpu_too_old_for_flash_attention_2() -> None:
    failure = root("flash_attention_on_turing.log")
    assert (failure.cls, failure.signature) == ("driver-mismatch",
                                                "driver-mismatch/gpu-too-old-for-library")
    assert failure.numbers["library"] == "flash-attn" and "sdpa" in failure.remedy


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
    "tensorflow.python.framework.errors_impl.InternalError: CUDA runtime implicit "
    "initialization on GPU:0 failed. Status: all CUDA-capable devices are busy or unavailable",
])
def test_gpus_busy_or_unavailable(line: str) -> None:
    (failure,) = classify_text(_mid_log(line), torch_version=None)
    assert failure.signature == "driver-mismatch/cuda-init"
    assert "Exclusive_Process" in failure.explanation and "nvidia-smi -c DEFAULT" in failure.remedy


def test_a_gpu_that_needs_a_reset_outranks_its_busy_or_unavailable() -> None:
    found = classify_text("NVRM: GPU 0000:41:00.0: Reset required [NV_ERR_RESET_REQUIRED]\n"
                          "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or "
                          "unavailable\n", torch_version=None)
    assert [(i.signature, i.role) for i in found] == [
        ("gpu-hardware/reset-required", "root-cause"), ("driver-mismatch/cuda-init", "consequence")]


def test_xla_sees_no_gpu() -> None:
    (failure,) = classify_text("RuntimeError: Unable to initialize backend 'cuda': "
                               "FAILED_PRECONDITION: No visible GPU devices.", torch_version=None)
    assert failure.signature == "driver-mismatch/cuda-init"
    assert "CUDA_VISIBLE_DEVICES" in failure.remedy


def test_bfloat16_on_a_gpu_older_than_ampere() -> None:
    (failure,) = classify_text(
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
        "8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by "
        "explicitly setting the`dtype` flag in CLI, for example: --dtype=half.",
        torch_version=None)
    assert failure.signature == "driver-mismatch/gpu-too-old-for-library"
    assert failure.numbers == {"minimum": "8.0", "gpu_name": "Tesla T4", "capability": "7.5",
                               "library": "bfloat16"}
    assert "--dtype=half" in failure.remedy


@pytest.mark.parametrize("line", [
    "MemoryError: std::bad_alloc: CUDA error at: /opt/conda/include/rmm/mr/device/"
    "cuda_memory_resource.hpp:69: cudaErrorMemoryAllocation out of memory",
    "MemoryError: std::bad_alloc: out_of_memory: RMM failure at:/opt/conda/include/rmm/mr/"
    "device/limiting_resource_adaptor.hpp:143: Exceeded memory limit",
])
def test_rmm_in_other_versions_words(line: str) -> None:
    (oom,) = classify_text(_mid_log(line), torch_version=None)
    assert (oom.signature, oom.numbers) == ("cuda-oom/array-library", {"library": "rmm"})


def test_rmms_other_failures_are_no_out_of_memory() -> None:
    assert classify_text("RuntimeError: RMM failure at: /src/pool_memory_resource_impl.cpp:40: "
                         "Error, Initial pool size required to be a multiple of 256 bytes",
                         torch_version=None) == []


def test_ollamas_refusal_for_host_memory() -> None:
    failure = root("ollama_model_exceeds_system_memory.log")
    assert (failure.cls, failure.signature) == ("host-oom",
                                                "host-oom/model-exceeds-system-memory")
    assert failure.numbers == {"requested_bytes": gib(41.3), "available_bytes": gib(11.8)}
    assert "ollama ps" in failure.remedy


def test_numba_without_a_driver_library() -> None:
    (failure,) = classify_text(_mid_log(
        "numba.cuda.cudadrv.error.CudaSupportError: Error at driver init: CUDA driver library "
        "cannot be found."), torch_version=None)
    assert failure.signature == "driver-mismatch/no-driver"


def test_numbas_system_report_on_a_machine_without_gpu_is_no_failure() -> None:
    assert classify_text(_mid_log("CUDA driver library cannot be found or no CUDA enabled "
                                  "devices are present."), torch_version=None) == []


def test_a_quantised_model_that_accelerate_could_not_fit_on_the_gpu() -> None:
    oom = root("bnb_modules_dispatched_to_cpu.log")
    assert (oom.cls, oom.signature, oom.diagnosis) == (
        "cuda-oom", "cuda-oom/quantized-model-offloaded", "too-large")
    assert "llm_int8_enable_fp32_cpu_offload=True" in oom.remedy


def test_tensorflows_cudnn_launch_failure() -> None:
    (failure,) = classify_text(_mid_log(
        "tensorflow.python.framework.errors_impl.InternalError: cuDNN launch failure : input "
        "shape ([64,4,4,512]) [Op:FusedBatchNormV3]"), torch_version=None)
    assert (failure.signature, failure.diagnosis) == ("cudnn-failure/framework-init",
                                                      "memory-or-mismatch")
    assert failure.explanation.startswith("A cuDNN call") and failure.numbers == {}
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in failure.remedy
