"""Every failure class, in the message formats PyTorch, CUDA, NCCL, cuBLAS, the driver and
Linux have printed over the years; and logs that only look alarming, which must stay quiet."""

from __future__ import annotations

import pytest

from gpu_audit.explain import CLASSES, classify_text
from gpu_audit.explain.signatures import SIGNATURES
from gpu_audit.model import Severity
from tests.explain.helpers import FIXTURES, fixture_incidents

# fixture log -> the incidents it must yield, root cause first: (class, signature)
FIXTURE_INCIDENTS = {
    # torch 2.11 on an H200 (tests/explain/test_torch211_real_shapes.py)
    "torch211_h200_oom_twice.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "torch211_nccl_duplicate_gpu_rank0.log": [("nccl", "nccl/duplicate-gpu"),
                                              ("nccl", "nccl/error")],
    "torch211_nvml_init_assert_oom.log": [
        ("nvml-assert-oom", "nvml-assert-oom/caching-allocator"),
        ("nvml-unavailable", "nvml-unavailable/torch-warning")],
    "a100_fragmented_oom_torch23.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "gtx1650_oom_too_big_torch113.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "k80_oom_torch10_cached.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "gtx1650_three_uvicorn_oom.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "oom_memory_fraction_torch20.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "oom_unified_allocator_newest.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "oom_message_wrapped_by_logger.log": [("cuda-oom", "cuda-oom/caching-allocator")],
    "qodo_encoder_nvml_assert.log": [("nvml-assert-oom", "nvml-assert-oom/caching-allocator")],
    "nvidia_smi_driver_library_mismatch.log": [
        ("nvml-unavailable", "nvml-unavailable/init-failed")],
    "container_without_driver_libraries.log": [
        ("nvml-unavailable", "nvml-unavailable/container-cli")],
    "dmesg_nvrm_api_mismatch.log": [("nvml-unavailable", "nvml-unavailable/nvrm-api-mismatch")],
    "nvml_library_lacks_function_first_allocation.log": [
        ("nvml-unavailable", "nvml-unavailable/library-function-missing"),
        ("nvml-unavailable", "nvml-unavailable/torch-warning")],
    "torch29_deprecated_alloc_conf_healthy.log": [
        ("alloc-conf", "alloc-conf/deprecated-variable")],
    "torch201_expandable_segments_unknown.log": [
        ("alloc-conf", "alloc-conf/unrecognized-option")],
    "torch210_unknown_alloc_key.log": [("alloc-conf", "alloc-conf/unrecognized-option")],
    "torch29_max_split_too_small.log": [("alloc-conf", "alloc-conf/value-too-small")],
    "wsl2_expandable_segments_unsupported.log": [
        ("alloc-conf", "alloc-conf/expandable-unsupported")],
    "cublas_handle_alloc_failed.log": [("cublas-failure", "cublas-failure/cublas-status")],
    "cudnn_not_initialized.log": [("cudnn-failure", "cudnn-failure/status")],
    "thc_cublas_runtime_error_torch04.log": [
        ("cublas-failure", "cublas-failure/legacy-runtime-error")],
    "rtx5090_torch26_cu124_no_kernel_image.log": [
        ("driver-mismatch", "driver-mismatch/arch-not-compiled")],
    "old_driver_cu121_wheel.log": [("driver-mismatch", "driver-mismatch/driver-too-old")],
    "geforce_cuda_compat_error_804.log": [("driver-mismatch", "driver-mismatch/cuda-init")],
    "hgx_fabric_manager_down_802.log": [("driver-mismatch", "driver-mismatch/cuda-init")],
    "k80_gpu_too_old_torch2.log": [("driver-mismatch", "driver-mismatch/gpu-too-old")],
    "ddp8_rank3_illegal_access_nccl_timeouts.log": [
        ("illegal-memory-access", "illegal-memory-access/illegal-address"),
        ("nccl", "nccl/watchdog-timeout"),
        ("nccl", "nccl/operations-failed")],
    "llama_embedding_index_device_assert.log": [
        ("device-assert", "device-assert/kernel-assertion"),
        ("cublas-failure", "cublas-failure/cublas-status")],
    "torch04_nll_loss_assert.log": [("device-assert", "device-assert/kernel-assertion")],
    "dmesg_xid79_fallen_off_bus.log": [("gpu-hardware", "gpu-hardware/xid")],
    "dmesg_xid48_dbe_xid45.log": [("gpu-hardware", "gpu-hardware/xid")] * 3,
    "dmesg_xid31_mmu_fault_2012_format.log": [("gpu-hardware", "gpu-hardware/xid")] * 2,
    "dmesg_xid119_gsp_xid154.log": [("gpu-hardware", "gpu-hardware/xid")] * 2,
    "uncorrectable_ecc_cuda_error.log": [("gpu-hardware", "gpu-hardware/uncorrectable-ecc")],
    "nvidia_smi_gpu_is_lost.log": [("gpu-hardware", "gpu-hardware/device-handle")],
    "unspecified_launch_failure_torch17.log": [("illegal-memory-access",
                                              "illegal-memory-access/launch-failure")],
    "nccl_unhandled_system_error_shm.log": [("nccl", "nccl/error")],
    "nccl_torch17_caught_timeout.log": [("nccl", "nccl/watchdog-timeout"),
                                        ("nccl", "nccl/operations-failed")],
    "nccl_torch113_timeout_seqnum.log": [("nccl", "nccl/watchdog-timeout")],
    "nccl_ib_completion_error.log": [("nccl", "nccl/network")],
    "ddp_duplicate_gpu.log": [("nccl", "nccl/duplicate-gpu"), ("nccl", "nccl/error")],
    "rendezvous_store_timeout.log": [("nccl", "nccl/store-timeout")],
    "dmesg_oom_killer_kernel5.log": [("host-oom", "host-oom/kernel-oom-killer")],
    "dmesg_oom_killer_kernel3.log": [("host-oom", "host-oom/kernel-oom-killer")],
    "slurm_dataloader_killed_oom.log": [("host-oom", "host-oom/dataloader-killed"),
                                        ("host-oom", "host-oom/shared-memory"),
                                        ("host-oom", "host-oom/slurm-oom-kill")],
    "docker_default_shm_bus_error.log": [("host-oom", "host-oom/dataloader-killed")],
    "torchrun_worker_sigkill.log": [("host-oom", "host-oom/sigkill")],
    "k8s_pod_oomkilled.log": [("host-oom", "host-oom/kubernetes-oomkilled")],
    "healthy_run_with_alarming_lines.log": [],
    # an out-of-memory told without saying whose, in a thread about a GPU
    "oom_told_unnamed_gpu_thread.log": [("cuda-oom", "cuda-oom/oom-told-unnamed")],
}


@pytest.mark.parametrize("name", sorted(FIXTURE_INCIDENTS))
def test_fixture_log_yields_its_incidents_root_cause_first(name: str) -> None:
    found = [(i.cls, i.signature) for i in fixture_incidents(name)]
    assert found == FIXTURE_INCIDENTS[name]


def test_every_fixture_log_is_covered_and_every_class_has_one() -> None:
    assert {p.name for p in FIXTURES.glob("*.log")} == set(FIXTURE_INCIDENTS)
    seen = {cls for expected in FIXTURE_INCIDENTS.values() for cls, _ in expected}
    assert seen == set(CLASSES)


# One line each, in the formats of different releases: (log text, class, signature).
SINGLE_LINES = [
    ("ERROR [[Health]] Detected a WARNING in health system Thermal: 'Detected clocks event due "
     "to thermal violation in GPU 2. Verify that the cooling on this machine is functional.'",
     "gpu-hardware", "gpu-hardware/thermal-violation"),
    ("[TRT] [E] 2: [ltWrapper.cpp::setupHeuristic::349] Error Code 2: Internal Error (Assertion "
     "cublasStatus == CUBLAS_STATUS_SUCCESS failed. )", "cublas-failure",
     "cublas-failure/cublaslt"),
    ("[E 04/13/26 14:57:31.839] [cuda_context.cpp:CUDAContext@14] Cuda Error CUDA_ERROR_UNKNOWN: "
     "unknown error", "driver-mismatch", "driver-mismatch/cuda-init"),
    ("[E 07/25/26 21:32:02.308 106374] [cuda_driver.h:operator()@92] CUDA Error :  while "
     "calling init (cuInit)", "driver-mismatch", "driver-mismatch/cuda-init"),
    ("[1612302] [ThreadPoolExecutor-1_0] [INFO] (app.tasks:83) - Return code: -9", "host-oom",
     "host-oom/sigkill"),
    ("CUDA platform error: Error compiling program: nvrtc: error: invalid value for "
     "--gpu-architecture (-arch)", "driver-mismatch", "driver-mismatch/runtime-compiler"),
    ("jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: Couldn't get ptxas version "
     "string: INTERNAL: Couldn't invoke ptxas --version", "driver-mismatch",
     "driver-mismatch/runtime-compiler"),
    ("CUDA backend failed to initialize: jaxlib/cuda/versions_helpers.cc:90: operation cuInit(0) "
     "failed: CUDA_ERROR_NOT_INITIALIZED", "driver-mismatch", "driver-mismatch/jax-backend"),
    ("[NVINFER LOG]: 6: The engine plan file is generated on an incompatible device, expecting "
     "compute 8.9 got compute 8.6, please rebuild.", "driver-mismatch",
     "driver-mismatch/tensorrt-engine-device"),
    ("RuntimeError: cuda runtime error (2)", "cuda-oom", "cuda-oom/cuda-error"),
    ("RuntimeError: cuda runtime error (100)", "driver-mismatch", "driver-mismatch/cuda-init"),
    ("After several computations every use of the GPU raises RMM_ERROR_OUT_OF_MEMORY.",
     "cuda-oom", "cuda-oom/array-library"),
    ("ERROR (nnet3-train[5.5]:AllocateNewRegion():cu-allocator.cc:519) Failed to allocate a "
     "memory region of 8088715264 bytes.  Possibly this is due to sharing the GPU.", "cuda-oom",
     "cuda-oom/kaldi-region"),
    ("RuntimeError: Distributed package doesn't have NCCL built in", "nccl",
     "nccl/not-built-in"),
    ("AssertionError: Torch not compiled with CUDA enabled", "driver-mismatch",
     "driver-mismatch/cpu-only-build"),
    ("RuntimeError: Not compiled with GPU support", "driver-mismatch",
     "driver-mismatch/cpu-only-build"),
    ("OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
     "driver-mismatch", "driver-mismatch/no-driver"),
    ("System is out of GPU and shared host memory", "cuda-oom", "cuda-oom/application-message"),
    ("cuDNN status Error in: file: ./src/convolutional_kernels.cu : "
     "backward_convolutional_layer_gpu() : line: 854 : build time: Jan  6 2026 - 10:11:12",
     "cudnn-failure", "cudnn-failure/status"),
    ("RuntimeError: The detected CUDA version (11.8) mismatches the version that was used to "
     "compile PyTorch (12.4). Please make sure to use the same CUDA versions.",
     "driver-mismatch", "driver-mismatch/extension-cuda-mismatch"),
    ("ERROR: Insufficient memory on accelerator (src/GPU/gpu_extra.h:38)", "cuda-oom",
     "cuda-oom/application-message"),
    ("node07:2231:2290 [0] bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed "
     "(segment 0, fd 130)", "nccl", "nccl/remote-allocation"),
    ("call to cuStreamSynchronize returned error 700: Illegal address during kernel execution",
     "illegal-memory-access", "illegal-memory-access/illegal-address"),
    ("simtk.openmm.OpenMMException: Error loading CUDA module: CUDA_ERROR_INVALID_PTX (218)",
     "driver-mismatch", "driver-mismatch/unsupported-ptx"),
    ("[rank2]:[E1103 11:02:17.402211 ProcessGroupNCCL.cpp:1772] [PG ID 0 PG GUID 0(default_pg) "
     "Rank 2] Received a dump signal due to a collective timeout from this local rank and we "
     "will try our best to dump the debug info. Last enqueued NCCL work: 812, last completed "
     "NCCL work: 811.", "nccl", "nccl/dump-signal"),
    ("OSError: libcublasLt.so.12: cannot open shared object file: No such file or directory",
     "driver-mismatch", "driver-mismatch/cuda-library-missing"),
    ("Could not locate cudnn_ops_infer64_8.dll. Please make sure it is in your library path!",
     "driver-mismatch", "driver-mismatch/cuda-library-missing"),
    ("[W:onnxruntime:Default, onnxruntime_pybind_state.cc:965 CreateExecutionProviderInstance] "
     "Failed to create CUDAExecutionProvider. Please reference the requirements page.",
     "driver-mismatch", "driver-mismatch/cuda-library-missing"),
    ("[1,3]<stderr>:HorovodAllreduce_grads_dense_1_0 [missing ranks: 7]", "nccl",
     "nccl/horovod-missing-ranks"),
    ("[2026-06-04 16:49:19.737850: W horovod/common/stall_inspector.cc:105] One or more tensors "
     "were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
     "for remainder of ranks for more than 60 seconds.", "nccl", "nccl/horovod-stall"),
    ("Mismatch in versions between nvidia-smi and NVML.", "nvml-unavailable",
     "nvml-unavailable/smi-nvml-mismatch"),
    ("After the reinstall torch.cuda.is_available() still returns False.", "driver-mismatch",
     "driver-mismatch/cuda-unavailable-told"),
    ("gpu-b2:4410:4490 [0] init.cc:640 NCCL WARN Mismatched NCCL version detected : rank 0 "
     "version 21903 rank 8 version 21805", "nccl", "nccl/version-mismatch"),
    # out of memory in the other frameworks people run on the same GPUs
    ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
     "tensor with shape[32,512,56,56] and type float on /job:localhost/replica:0/task:0/device:"
     "GPU:1 by allocator GPU_1_bfc", "cuda-oom", "cuda-oom/tensorflow"),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
     "allocate 2147483648 bytes.", "cuda-oom", "cuda-oom/xla"),
    ("W tensorflow/core/common_runtime/bfc_allocator.cc:360] Allocator (GPU_0_bfc) ran out of "
     "memory trying to allocate 1.10GiB with freed_by_count=0. The caller indicates that this "
     "is not a failure, but this may mean that there could be performance gains if more memory "
     "were available.", "cuda-oom", "cuda-oom/tensorflow-not-a-failure"),
    ("RuntimeError: cudaMallocAsync does not yet support recordHistory. If you need it, please "
     "file an issue describing your use case.", "alloc-conf", "alloc-conf/async-unsupported"),
    ("  what():  Cannot use cudaMallocAsyncAllocator with cuda < 11.4.", "alloc-conf",
     "alloc-conf/async-backend-missing"),
    # CUDA out of memory, THC era to the unified allocator
    ("RuntimeError: cuda runtime error (2) : out of memory at "
     "/pytorch/aten/src/THC/generic/THCStorage.cu:58", "cuda-oom", "cuda-oom/cuda-error"),
    ("RuntimeError: CUDA error: out of memory", "cuda-oom", "cuda-oom/cuda-error"),
    ("node2:4410:4462 [1] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'",
     "cuda-oom", "cuda-oom/cuda-error"),
    ("cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
     "cuda-oom", "cuda-oom/cuda-error"),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
     "capacity of 63.98 GiB of which 1.20 GiB is free.", "cuda-oom", "cuda-oom/caching-allocator"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory.",
     "cuda-oom", "cuda-oom/caching-allocator"),
    # NVML
    ('NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":838, '
     "please report a bug to PyTorch.", "nvml-assert-oom", "nvml-assert-oom/caching-allocator"),
    ('RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at '
     '"/pytorch/c10/cuda/PeerToPeerAccess.cpp":131, please report a bug to PyTorch.',
     "nvml-unavailable", "nvml-unavailable/nvml-assert"),
    ("/usr/lib/python3/dist-packages/torch/cuda/__init__.py:654: UserWarning: Can't initialize "
     "NVML", "nvml-unavailable", "nvml-unavailable/torch-warning"),
    ("pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found", "nvml-unavailable",
     "nvml-unavailable/pynvml"),
    ("pynvml.nvml.NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.",
     "nvml-unavailable", "nvml-unavailable/pynvml"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
     "that the latest NVIDIA driver is installed and running.", "nvml-unavailable",
     "nvml-unavailable/nvidia-smi-no-driver"),
    ("Failed to initialize NVML: Unknown Error", "nvml-unavailable",
     "nvml-unavailable/init-failed"),
    ("nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: "
     "unknown", "nvml-unavailable", "nvml-unavailable/container-cli"),
    ('docker: Error response from daemon: could not select device driver "" with capabilities: '
     "[[gpu]].", "nvml-unavailable", "nvml-unavailable/docker-no-gpu-driver"),
    ("runner: no NVIDIA GPU device is present: /dev/nvidia0 does not exist", "nvml-unavailable",
     "nvml-unavailable/no-device-node"),
    # allocator configuration
    ("RuntimeError: Error parsing CachingAllocator settings, expected :", "alloc-conf",
     "alloc-conf/malformed"),
    ("RuntimeError: garbage_collect_threshold too small, set it 0.0~1.0", "alloc-conf",
     "alloc-conf/malformed"),
    ("RuntimeError: For roundups, the divisions has to be power of 2", "alloc-conf",
     "alloc-conf/malformed"),
    ("RuntimeError: Unknown allocator backend, options are native and cudaMallocAsync",
     "alloc-conf", "alloc-conf/backend"),
    ("[W CUDAAllocatorConfig.cpp:29] Warning: backend:cudaMallocAsync ignores "
     "max_split_size_mb,roundup_power2_divisions, and garbage_collect_threshold. (function "
     "parseArgs)", "alloc-conf", "alloc-conf/ignored-options"),
    ("ValueError: CachingAllocator option max_non_split_rounding_mb too small, must be >= 20",
     "alloc-conf", "alloc-conf/value-too-small"),
    # cuBLAS, cuDNN and the other CUDA libraries
    ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling "
     "`cublasGemmStridedBatchedExFix(handle, opa, opb, m, n, k)`", "cublas-failure",
     "cublas-failure/cublas-status"),
    ("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED", "cudnn-failure",
     "cudnn-failure/status"),
    ("RuntimeError: Unable to find a valid cuDNN algorithm to run convolution",
     "cudnn-failure", "cudnn-failure/no-engine"),
    ("RuntimeError: GET was unable to find an engine to execute this computation",
     "cudnn-failure", "cudnn-failure/no-engine"),
    ("RuntimeError: cuDNN runtime error : resource allocation failed at "
     "/pytorch/aten/src/THC/THCGeneral.cpp:250", "cudnn-failure",
     "cudnn-failure/legacy-runtime-error"),
    # PyTorch's cuDNN v8 path warns about a plan cuDNN turned down, then runs the next one
    ("/opt/env/lib/python3.10/site-packages/torch/nn/modules/conv.py:456: UserWarning: Plan "
     "failed with a cudnnException: CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize "
     "Descriptor Failed cudnn_status: CUDNN_STATUS_NOT_SUPPORTED (Triggered internally at "
     "../aten/src/ATen/native/cudnn/Conv_v8.cpp:919.)", "cudnn-failure",
     "cudnn-failure/plan-rejected"),
    # Caffe's glog check names the status it wanted first, then the one it got
    ("F0301 09:12:44.120000  4711 cudnn_conv_layer.cu:28] Check failed: status == "
     "CUDNN_STATUS_SUCCESS (8 vs. 0)  CUDNN_STATUS_EXECUTION_FAILED", "cudnn-failure",
     "cudnn-failure/status"),
    ("OSError: (External) Cudnn error, CUDNN_STATUS_EXECUTION_FAILED (at "
     "/work/ops/conv_cudnn_op.cu:402)", "cudnn-failure", "cudnn-failure/status"),
    ("RuntimeError: cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling "
     "`cusolverDnCreate(handle)`", "cublas-failure", "cublas-failure/cublas-status"),
    ("RuntimeError: cublasLt ran into an error!", "cublas-failure", "cublas-failure/cublaslt"),
    # driver, runtime and architecture
    ("RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA "
     "runtime version at /pytorch/aten/src/THC/THCGeneral.cpp:74", "driver-mismatch",
     "driver-mismatch/insufficient-driver"),
    ("UserWarning: CUDA initialization: CUDA driver version is insufficient for CUDA runtime "
     "version (Triggered internally at ../c10/cuda/CUDAFunctions.cpp:108.)", "driver-mismatch",
     "driver-mismatch/insufficient-driver"),
    ("RuntimeError: cuda runtime error (48) : no kernel image is available for execution on the "
     "device at /pytorch/aten/src/THC/generic/THCTensorMath.cu:35", "driver-mismatch",
     "driver-mismatch/no-kernel-image"),
    ("RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA "
     "GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
     "driver-mismatch", "driver-mismatch/no-driver"),
    ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
     "driver-mismatch", "driver-mismatch/unsupported-ptx"),
    ("RuntimeError: No CUDA GPUs are available", "driver-mismatch", "driver-mismatch/cuda-init"),
    ("RuntimeError: CUDA error: invalid device function", "driver-mismatch",
     "driver-mismatch/invalid-device-function"),
    # kernel faults
    ("RuntimeError: cuda runtime error (77) : an illegal memory access was encountered at "
     "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265", "illegal-memory-access",
     "illegal-memory-access/illegal-address"),
    ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to execute XLA Runtime executable: "
     "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
     "illegal-memory-access", "illegal-memory-access/illegal-address"),
    ("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
     "illegal-memory-access", "illegal-memory-access/illegal-address"),
    ("node1:812:930 [2] NCCL WARN Cuda failure 'an illegal memory access was encountered'",
     "illegal-memory-access", "illegal-memory-access/illegal-address"),
    ("RuntimeError: CUDA error: misaligned address", "illegal-memory-access",
     "illegal-memory-access/misaligned-address"),
    ("RuntimeError: CUDA error: an illegal instruction was encountered",
     "illegal-memory-access", "illegal-memory-access/illegal-instruction"),
    ("/pytorch/aten/src/ATen/native/cuda/Loss.cu:92: operator(): block: [33,0,0], thread: "
     "[31,0,0] Assertion `input_val >= zero && input_val <= one` failed.", "device-assert",
     "device-assert/kernel-assertion"),
    ("RuntimeError: CUDA error: device-side assert triggered", "device-assert",
     "device-assert/triggered"),
    # an indexing condition retold without the kernel's quotes (full-width signs in a
    # translated post)
    ("训练一会就出现 Assertion srcIndex \uff1c srcSelectDimSize failed.", "device-assert",
     "device-assert/unquoted-condition"),
    # cuda-gdb stopped at the fault
    ('Thread 12 "pt_autograd_0" received signal CUDA_EXCEPTION_14, Warp Illegal Address.',
     "illegal-memory-access", "illegal-memory-access/debugger-exception"),
    ("CUDA Exception: Warp Misaligned Address", "illegal-memory-access",
     "illegal-memory-access/debugger-exception"),
    # libraries that allocate GPU memory themselves
    ("PxgCudaDeviceMemoryAllocator fail to allocate memory 268435456 bytes!! Result = 2",
     "cuda-oom", "cuda-oom/library-allocation"),
    ("RuntimeError indice_cuda.cu 124 cuda execution failed with error 2", "cuda-oom",
     "cuda-oom/library-allocation"),
    # nvtop without NVML
    ("No GPU to monitor.", "nvml-unavailable", "nvml-unavailable/no-gpu-to-monitor"),
    ("No devices were found", "nvml-unavailable", "nvml-unavailable/no-devices-found"),
    ("Error: nvmlDeviceGetHandleByIndex(): Unknown Error", "nvml-unavailable",
     "nvml-unavailable/call-unknown-error"),
    # Slurm's accounting over the job's --mem
    ("slurmstepd: error: Job 311 exceeded memory limit (70254592 > 67108864), being killed",
     "host-oom", "host-oom/slurm-memory-limit"),
    ("slurmstepd: error: Exceeded job memory limit", "host-oom", "host-oom/slurm-memory-limit"),
    # torch.distributed.elastic's error record cut after the signal (a title)
    ("Crash while evaluating (traceback : Signal 9 (SIGKILL))", "host-oom", "host-oom/sigkill"),
    # GPU hardware
    ("gpu-health: node07 GPU 3 reported XID 79 at 02:41", "gpu-hardware",
     "gpu-hardware/xid-mention"),
    ("RuntimeError: CUDA error: an uncorrectable NVLink error was detected during the execution",
     "gpu-hardware", "gpu-hardware/nvlink-uncorrectable"),
    ("[  30.112100] NVRM: RmInitAdapter failed! (0x26:0xffff:1401)", "gpu-hardware",
     "gpu-hardware/rm-init-failed"),
    ("RuntimeError: CUDA error: the launch timed out and was terminated", "gpu-hardware",
     "gpu-hardware/launch-timeout"),
    ("RuntimeError: CUDA error: unknown error", "gpu-hardware", "gpu-hardware/unknown-error"),
    ("pynvml.NVMLError_GpuIsLost: GPU is lost", "gpu-hardware", "gpu-hardware/fallen-off-bus"),
    ("RuntimeError: cuda runtime error (4) : unspecified launch failure at "
     "/pytorch/aten/src/THC/generic/THCStorage.c:36", "illegal-memory-access",
     "illegal-memory-access/launch-failure"),
    # NCCL and other collectives, PyTorch 1.x to today
    ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:514, unhandled "
     "system error, NCCL version 2.4.8", "nccl", "nccl/error"),
    ("RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1614378083779/work/torch/lib/c10d/"
     "ProcessGroupNCCL.cpp:825, unhandled cuda error, NCCL version 2.7.8", "nccl", "nccl/error"),
    ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
     "NCCLUtils.hpp:219, remote process exited or there was a network error, NCCL version "
     "2.19.3", "nccl", "nccl/error"),
    ("[rank0]:[E1122 03:00:00.000000 ProcessGroupNCCL.cpp:1316] [PG ID 0 PG GUID 0(default_pg) "
     "Rank 0] Heartbeat monitor timed out! Process will be terminated after dumping debug info. "
     "workMetaList_.size()=1", "nccl", "nccl/heartbeat"),
    ("[E ProcessGroupNCCL.cpp:1150] ProcessGroupNCCL's watchdog got stuck for 480 seconds "
     "without making progress in monitoring enqueued collectives.", "nccl", "nccl/heartbeat"),
    ("RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: "
     "NCCL error: unhandled system error, NCCL version 2.14.3", "nccl",
     "nccl/communicator-aborted"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] Timed out "
     "waiting 1800000ms for recv operation to complete", "nccl", "nccl/gloo-timeout"),
    ("RuntimeError: [/opt/conda/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
     "closed by peer [10.1.1.2]:62581", "nccl", "nccl/gloo-peer-closed"),
    ("torch.distributed.DistBackendError: [1] is setting up NCCL communicator and retrieving "
     "ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: "
     "Connection reset by peer", "nccl", "nccl/unique-id-fetch"),
    ("RuntimeError: Connection reset by peer", "nccl", "nccl/store-connection"),
    ("gpu7:3141:3207 [2] NCCL WARN NET/Socket : peer 10.4.0.9<40411> message truncated : "
     "receiving 524288 bytes instead of 131072.", "nccl", "nccl/message-truncated"),
    ("RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", "nccl",
     "nccl/no-gpus"),
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingAllocator.cpp line=510 error=30 : "
     "unknown error", "gpu-hardware", "gpu-hardware/unknown-error"),
    ("[   12.8842] NVRM: installed in this system is not supported by the NVIDIA 460.91.03 "
     "driver release.", "driver-mismatch", "driver-mismatch/gpu-not-supported-by-driver"),
    ("THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 error=2 : out of "
     "memory", "cuda-oom", "cuda-oom/cuda-error"),
    ("RuntimeError: NCCL Error 2: unhandled system error", "nccl", "nccl/error"),
    ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:290, unhandled "
     "cuda error", "nccl", "nccl/error"),
    # host memory
    ("[ 214.100021] Out of memory: kill process 3310 (python) score 861 or a child", "host-oom",
     "host-oom/kernel-oom-killer"),
    ("[ 301.772100] Memory cgroup out of memory: Killed process 5512 (python3) "
     "total-vm:30000000kB, anon-rss:20000000kB, file-rss:0kB, shmem-rss:0kB", "host-oom",
     "host-oom/kernel-oom-killer"),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough "
     "memory: you tried to allocate 3355443200 bytes.", "host-oom", "host-oom/cpu-allocator"),
    ("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.20 GiB for an array with "
     "shape (1000, 1000, 430) and data type float64", "host-oom", "host-oom/numpy"),
    ("MemoryError", "host-oom", "host-oom/memory-error"),
    ("srun: error: node17: task 3: Out Of Memory", "host-oom", "host-oom/slurm-oom-kill"),
    ("./train.sh: line 12: 48211 Killed                  python train.py --epochs 10",
     "host-oom", "host-oom/shell-killed"),
    ("Killed", "host-oom", "host-oom/shell-killed"),
    ("RuntimeError: DataLoader worker (pid(s) 1234, 1235) exited unexpectedly", "host-oom",
     "host-oom/dataloader-killed"),
    ("RuntimeError: unable to write to file </torch_18692_1954506449>: No space left on device "
     "(28)", "host-oom", "host-oom/shared-memory"),
    # other tools' words for the same failures, and messages that lost their first words
    ("Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB already allocated; "
     "2.88 MiB free; 1.25 GiB reserved in total by PyTorch)", "cuda-oom", "cuda-oom/headless"),
    ("WARN: Can't load NVML library, dlopen(25): failed to load libnvidia-ml.so",
     "nvml-unavailable", "nvml-unavailable/library-missing"),
    ("sh: 1: nvidia-smi: not found", "nvml-unavailable", "nvml-unavailable/smi-missing"),
    ("It is a hardware PSU issue: the card trips the supply's limiter at full load.",
     "gpu-hardware", "gpu-hardware/power-supply-told"),
    ("[runner] CUDA error: an internal operation failed", "cublas-failure",
     "cublas-failure/status-sentence"),
    ("bash: /usr/bin/nvidia-smi: cannot execute: required file not found",
     "nvml-unavailable", "nvml-unavailable/smi-cannot-execute"),
    ("Error relocating /usr/lib/libnvidia-ml.so.1: __isnan: symbol not found",
     "nvml-unavailable", "nvml-unavailable/smi-cannot-execute"),
    ("WARNING: this card most likely does not support cuda-malloc, if you get \"CUDA error\" "
     "please run with: --disable-cuda-malloc", "alloc-conf", "alloc-conf/async-card-warning"),
    ("RuntimeError: torch.cuda.MemPool doesn't currently support expandable_segments.",
     "alloc-conf", "alloc-conf/mempool-expandable"),
    ("With --cuda-malloc on, the upscaler extension no longer works.", "alloc-conf",
     "alloc-conf/async-fails-told"),
    ("Loading the model crashes when using `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`",
     "alloc-conf", "alloc-conf/expandable-told"),
    ("With our build the allocator silently ignores `max_split_size_mb:64` on every run",
     "alloc-conf", "alloc-conf/option-ignored-told"),
    ("At 1024x1024 the card runs out of VRAM halfway through and the program closes.",
     "cuda-oom", "cuda-oom/memory-told"),
    ("distributed.nanny.memory - WARNING - Worker tcp://10.0.0.9:40001 (pid=311) exceeded 95% "
     "memory budget. Restarting...", "host-oom", "host-oom/dask-nanny-restart"),
    ("INFO 03-01 10:05:12 worker.py:133] Sleep mode freed 0.00 GiB memory, 41.20 GiB memory is "
     "still in use.", "alloc-conf", "alloc-conf/sleep-freed-nothing"),
    ("export PYTORCH_NO_CUDA_MEMORY_CACHING=0", "alloc-conf", "alloc-conf/no-caching-zero"),
    ("My PC shuts down during training with the new card", "gpu-hardware",
     "gpu-hardware/power-loss-told"),
    ("FileNotFoundError: [Errno 2] No such file or directory: 'nvidia-smi'",
     "nvml-unavailable", "nvml-unavailable/smi-missing"),
    ("The host is fine, but nvidia-smi doesn't work inside the container.",
     "nvml-unavailable", "nvml-unavailable/smi-fails-told"),
    ("node1:812:930 [2] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 "
     "peer access is not supported between these two devices", "nccl", "nccl/p2p-unsupported"),
    ("node1:16:63 [0] NCCL INFO Call to connect returned Connection refused, retrying", "nccl",
     "nccl/connect-retrying"),
    ("RDMA buffer MR registration failed: Bad address", "alloc-conf",
     "alloc-conf/expandable-rdma-registration"),
    ("RuntimeError: !block->expandable_segment_ INTERNAL ASSERT FAILED at "
     '"../c10/cuda/CUDACachingAllocator.cpp":2814, please report a bug to PyTorch.',
     "alloc-conf", "alloc-conf/expandable-assert"),
    ("RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at "
     '"/build/c10/cuda/CUDACachingAllocator.cpp":455, please report a bug to PyTorch.',
     "alloc-conf", "alloc-conf/expandable-mapping-assert"),
    ("RuntimeError: free_upper_bound + pytorch_used_bytes[device] <= device_total INTERNAL "
     'ASSERT FAILED at "/build/c10/cuda/CUDAMallocAsyncAllocator.cpp":512, please report a bug '
     "to PyTorch.", "alloc-conf", "alloc-conf/async-assert"),
    ("RuntimeError: CUDA driver error: operation not supported", "alloc-conf",
     "alloc-conf/driver-vmm"),
    ("训练到第12个epoch卡住，30分钟后报NCCL超时错误", "nccl", "nccl/timeout-told"),
    ("The NCCL all-reduce in our mirrored strategy crashes on 8 GPUs.", "nccl",
     "nccl/allreduce-fails-told"),
    ("|   2  ERR!                 On  | 00000000:3B:00.0 Off |                 ERR! |",
     "gpu-hardware", "gpu-hardware/smi-unreadable"),
    ("RuntimeError: The kernel on this machine does not support the pidfd_getfd syscall needed "
     "to use IPC for CUDA tensors when expandable_segments:True is set.", "alloc-conf",
     "alloc-conf/expandable-ipc-kernel"),
    ("] Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\",0/pytorch/"
     "aten/src/ATen/native/cuda/ScatterGatherKernel.cu` failed.", "device-assert",
     "device-assert/garbled-assertion"),
    ("Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
     "gpu-hardware", "gpu-hardware/device-handle"),
    ("[   84.300490] NVRM: GPU6 _kgspLogRpcTimeout: ********************* GSP Timeout "
     "*********************", "gpu-hardware", "gpu-hardware/gsp-timeout"),
    ("[ 4410.902113] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required "
     "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2827",
     "gpu-hardware", "gpu-hardware/reset-required"),
    ("pcieport 0000:00:03.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction "
     "Layer, (Requester ID)", "gpu-hardware", "gpu-hardware/pcie-aer"),
    ("what():  unhandled system error", "nccl", "nccl/error-text"),
    ("pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0", "gpu-hardware",
     "gpu-hardware/pcie-aer-corrected"),
    ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
     "device error.", "nccl", "nccl/error-kind"),
    ("node01:4101:4188 [0] NCCL INFO misc/socket.cc:484 -> 2", "nccl", "nccl/return-code"),
    ("After the reboot we lost 1 GPU on node7, and slurmd does not start.", "gpu-hardware",
     "gpu-hardware/lost-told"),
    ("It turned out to be a faulty GPU: the job runs on its replacement.", "gpu-hardware",
     "gpu-hardware/card-swap-told"),
    ("cuBLAS API failed with status 13", "cublas-failure", "cublas-failure/status-code"),
    ("# Create cublas handle failed", "cublas-failure", "cublas-failure/handle-failed"),
    # a framework's own words for a failed cuBLAS call: DyNet's check, TensorFlow's launch
    ("CUBLAS failure in cublasDgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, n, k, one, x, k, y, k, "
     "zero, z, n)", "cublas-failure", "cublas-failure/call-failed"),
    ("InternalError: Blas GEMV launch failed:  m=512, n=64 [Op:MatMul]", "cublas-failure",
     "cublas-failure/tensorflow-blas"),
    ("On the A100 we keep getting illegal memory accesses after the first epoch.",
     "illegal-memory-access", "illegal-memory-access/told"),
    ("[TRT] [E] 1: [defaultAllocator.cpp::allocate::20] Error Code 1: Cuda Runtime (out of "
     "memory)", "cuda-oom", "cuda-oom/tensorrt"),
    ("RuntimeError: CUDA driver error: out of memory", "cuda-oom", "cuda-oom/driver-api"),
    ("Out of memory error on GPU 0. Cannot allocate 1.5GB memory on GPU 0, available memory "
     "is only 512MB.", "cuda-oom", "cuda-oom/framework-allocator"),
    ("ERROR: This container was built for NVIDIA Driver Release 535.104 or later, but version "
     "470.82.01 was detected and compatibility mode is UNAVAILABLE.", "driver-mismatch",
     "driver-mismatch/container-driver-release"),
    ("Error: your nvidia driver is too old or missing.  If you have a CUDA GPU please upgrade",
     "driver-mismatch", "driver-mismatch/driver-older-than-cuda"),
    ("c10::DistBackendError: [PG 0 Rank 3] Process group watchdog thread terminated with "
     "exception", "nccl", "nccl/watchdog-terminated"),
    ("  Warning  Evicted  3m  kubelet  The node was low on resource: memory.", "host-oom",
     "host-oom/kubernetes-evicted"),
    ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
     "host-oom", "host-oom/ray-oom-killer"),
    ("[ 9001.118220] [   4012]  1000  4012 17530751  7527750 60694528        0             0 "
     "python", "host-oom", "host-oom/task-row"),
    ("        XLA Label: fusion", "cuda-oom", "cuda-oom/xla-peak-buffers"),
    ("[ 4410.2] NVRM: nvAssertOkFailedNoLog: Assertion failed: GPU lost from the bus "
     "[NV_ERR_GPU_IS_LOST] (0x0000000F) returned from rmStatus @ kernel_ce_gv100.c:106",
     "gpu-hardware", "gpu-hardware/fallen-off-bus"),
    ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update "
     "your driver to a newer version", "driver-mismatch", "driver-mismatch/container-requirement"),
    # Caffe's CUDA_CHECK, under its glog prefix: status 2 is cudaErrorMemoryAllocation
    ("F0412 10:22:31.118240  4242 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 vs. 0)"
     "  out of memory", "cuda-oom", "cuda-oom/cuda-error"),
    # lspci's line for a GPU whose configuration space answers all ones
    ("0000:41:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev ff)",
     "gpu-hardware", "gpu-hardware/lspci-rev-ff"),
    # the NVIDIA device plugin takes a GPU out of service after an Xid
    ("XidCriticalError: Xid=79 on Device=GPU-5c3a1e2b; marking device as unhealthy.",
     "gpu-hardware", "gpu-hardware/device-plugin-xid"),
    # (alone, without the async backend named, it is context; see test_shapes_reports)
    ("RuntimeError: CUDA error: operation not supported", "alloc-conf",
     "alloc-conf/async-operation-unsupported"),
    # batch schedulers over a job's memory request: Torque, Moab, LSF
    ("=>> PBS: job killed: vmem 12582912kb exceeded limit 8388608kb", "host-oom",
     "host-oom/batch-memory-limit"),
    ("job 1187 exceeded MEM usage hard limit (9000 > 8192)", "host-oom",
     "host-oom/batch-memory-limit"),
    ("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", "host-oom",
     "host-oom/batch-memory-limit"),
    ("Your session crashed after using all available RAM.", "host-oom",
     "host-oom/notebook-session-ram"),
    # a cuDNN status that names no cause, told on its line to be an out-of-memory
    ("that was just OOM, the card was full: CUDNN_STATUS_INTERNAL_ERROR", "cuda-oom",
     "cuda-oom/told-cause"),
    # nvidia-smi in a virtual machine: the GPU at an emulated PCI slot, not 00.0
    ("Unable to determine the device handle for GPU 0000:00:07.0: Unknown Error",
     "nvml-unavailable", "nvml-unavailable/guest-device-handle"),
    # CUDA 12's status for a hardware error contained to the contexts it touched
    ("RuntimeError: CUDA driver error: CUDA_ERROR_CONTAINED", "gpu-hardware",
     "gpu-hardware/contained"),
    ("failed: Invalid access of peer GPU memory over nvlink or a hardware error", "gpu-hardware",
     "gpu-hardware/contained"),
    # the CUDA runtime's status 36, a call the installed driver is too old for
    ("RuntimeError: [XX][ERROR] CUDA runtime error: API call is not supported in the installed "
     "CUDA driver /src/alloc.h:12", "driver-mismatch", "driver-mismatch/driver-older-than-cuda"),
    # runc when a memory limit killed the container's first process as it started
    ('Error: container create failed: msg="runc create failed: unable to start container '
     'process: container init was OOM-killed (memory limit too low?)"', "host-oom",
     "host-oom/kubernetes-oomkilled"),
    # PaddlePaddle's CPU allocator: host memory, though its words name no device
    ("MemoryError: (ResourceExhausted) Fail to alloc memory of 1073741824 size, error code is 12.",
     "host-oom", "host-oom/framework-allocator"),
    # Kubernetes' last state of a container, and a memory limit told exceeded
    ("        exitCode: 137", "host-oom", "host-oom/container-exit-137"),
    ("Our worker pod exceeded its memory limit twice last night.", "host-oom",
     "host-oom/memory-limit-told"),
    ("Message:  Pod The node had condition: [MemoryPressure].", "host-oom",
     "host-oom/kubernetes-evicted"),
    # other programs' GPU memory: llama.cpp's CUDA buffers, an LLM server's share of the GPU,
    # CuPy's pool; TensorFlow's cuDNN check of its build
    ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 512.00 MiB on device 1: "
     "cudaMalloc failed: out of memory", "cuda-oom", "cuda-oom/ggml"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
     "cuda-oom", "cuda-oom/serving-engine"),
    ("cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 2,048 bytes (allocated so "
     "far: 4,096 bytes).", "cuda-oom", "cuda-oom/array-library"),
    ("Loaded runtime CuDNN library: 7.6.5 but source was compiled with: 8.1.0.",
     "cudnn-failure", "cudnn-failure/framework-init"),
    # XLA's page-locked host buffer: the host's memory, not the GPU's
    ("W external/xla/xla/stream_executor/integrations/device_host_allocator.h:52] could not "
     "allocate pinned host memory of size: 4294967296", "host-oom",
     "host-oom/pinned-host-memory"),
    # DCGM's health check; NCCL without a network interface
    ("GPU 5 had uncorrectable memory errors and row remapping failed.", "gpu-hardware",
     "gpu-hardware/dcgm-health"),
    ("node01:4101:4101 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface found",
     "nccl", "nccl/no-interface"),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "driver-mismatch",
     "driver-mismatch/gpu-too-old-for-library"),
    ("Error: model requires more system memory (8.1 GiB) than is available (7.3 GiB)",
     "host-oom", "host-oom/model-exceeds-system-memory"),
    ("ValueError: Some modules are dispatched on the CPU or the disk. Make sure you have enough "
     "GPU RAM to fit the quantized model.", "cuda-oom", "cuda-oom/quantized-model-offloaded"),
    # the NVIDIA kernel module that would not load; an NVML query refused (a MIG slice); a card
    # told dead or overheating by its owner
    ("modprobe: ERROR: could not insert 'nvidia': Required key not available",
     "nvml-unavailable", "nvml-unavailable/kernel-module"),
    ("Device probe: NVML: Failed to get device count", "nvml-unavailable",
     "nvml-unavailable/query-failed"),
    ("Quick note: my GPU is dead since the weekend.", "gpu-hardware",
     "gpu-hardware/card-dead-told"),
    ("In the end it was an overheating problem.", "gpu-hardware", "gpu-hardware/overheat-told"),
    # a program's own words for the GPU's heat and its memory: a cracker, a miner
    ("Temperature limit on GPU #2 reached, aborting", "gpu-hardware",
     "gpu-hardware/temperature-abort"),
    ("Unrecoverable memory error by GPU 1.", "gpu-hardware", "gpu-hardware/miner-memory-error"),
    # host memory told in the writer's words; the NCCL watchdog's timeout in its stack trace
    ("Our array jobs on the big nodes were killed due to OOM during the merge step.", "host-oom",
     "host-oom/killed-for-memory-told"),
    ("By epoch 9 the system RAM was completely full and the trainer crashed.", "host-oom",
     "host-oom/ram-full-told"),
    ("With six workers the host OOM came back at epoch 4.", "host-oom",
     "host-oom/host-memory-told"),
    # the operating system refusing memory: ENOMEM, Windows' commit limit
    ("OSError: [Errno 12] Cannot allocate memory", "host-oom", "host-oom/os-allocation"),
    # systemd's kill lines, OpenCV's allocator, a dataset cache told filling RAM
    ("Jun 02 11:40:07 gpu-host systemd[1]: trainer.service: Failed with result 'oom-kill'.",
     "host-oom", "host-oom/systemd-oom-kill"),
    ("cv2.error: OpenCV(4.8.0) alloc.cpp:73: error: (-4:Insufficient memory) Failed to allocate "
     "1228800 bytes in function 'OutOfMemoryError'", "host-oom", "host-oom/opencv-allocator"),
    ("With --cache ram the val images take all the remaining memory and the training crashes.",
     "host-oom", "host-oom/dataset-cache-told"),
    ("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::"
     "duration<long, std::ratio<1l, 1000l> > >) + 0x282 (0x7f6a in libtorch_cuda.so)", "nccl",
     "nccl/watchdog-timeout-frame"),
    ("One GPU on node4 is unusable due to an uncorrectable ECC error.", "gpu-hardware",
     "gpu-hardware/uncorrectable-ecc-told"),
    ("It turned out the card's factory OC mode was the cause; at stock clocks it renders fine.",
     "gpu-hardware", "gpu-hardware/overclock-told"),
    # a native program's host allocation; a board found at fault; a GPU told to need a newer CUDA
    ("terminate called after throwing an instance of 'std::bad_alloc'", "host-oom",
     "host-oom/native-allocation"),
    ("We replaced the mainboard and now it works, no more launch failures.", "gpu-hardware",
     "gpu-hardware/board-swap-told"),
    ("The card is an RTX 3090 and it only supports CUDA 11.0 or newer.", "driver-mismatch",
     "driver-mismatch/gpu-needs-newer-cuda-told"),
    ("The error was a mismatch of the CUDA_ARCH_BIN value; the board needs 8.7.",
     "driver-mismatch", "driver-mismatch/wrong-arch-told"),
    ("[error] This program needs a CUDA-Enabled GPU (with at least compute capability 2.0).",
     "driver-mismatch", "driver-mismatch/no-usable-cuda-gpu"),
    ("The ncclShmOpen error shows the container's /dev/shm was too small for NCCL.", "nccl",
     "nccl/shm-open-told"),
    ("Every rank of the job gets stuck in NCCL all-gather after the second epoch.", "nccl",
     "nccl/hang-told"),
    ("The tokenizer job ran out of host memory on the login node.", "host-oom",
     "host-oom/out-of-ram-told"),
    ("Since the firmware update GPU 6 vanishes from nvidia-smi every night.", "gpu-hardware",
     "gpu-hardware/vanished-told"),
    ("Our GPU driver was outdated for the CUDA 12.4 image.", "driver-mismatch",
     "driver-mismatch/driver-too-old-told"),
    ("The sampler hit a device-side assert with the new vocabulary.", "device-assert",
     "device-assert/told"),
    ("Once I put both cards in the x16 slots it works fine, no more hangs.", "gpu-hardware",
     "gpu-hardware/slot-told"),
    ("[I 10:14:07.212 NotebookApp] KernelRestarter: restarting kernel (2/5), keep random ports",
     "host-oom", "host-oom/notebook-kernel-restarted"),
    ("The four cards froze at the first step; setting NCCL_P2P_DISABLE=1 fixed it.", "nccl",
     "nccl/cure-told"),
    ("The merge died at 60% with no message; adding 32 GB of swap fixed it.", "host-oom",
     "host-oom/cure-told"),
    ("The decode step crashed on the 6 GB card; --medvram did the trick.", "cuda-oom",
     "cuda-oom/cure-told"),
    ("RuntimeError: cuDNN Frontend error: [cudnn_frontend] Error: No execution plans support "
     "the graph.", "cudnn-failure", "cudnn-failure/frontend-no-plan"),
    ("Container [pid=4242,containerID=container_1_0001_01_000002] is running beyond physical "
     "memory limits. Current usage: 8.1 GB of 8 GB physical memory used. Killing container.",
     "host-oom", "host-oom/yarn-memory-limit"),
    ("ERROR: a BoundsError was thrown during kernel execution on thread (33, 1, 1) in block "
     "(4, 1, 1).", "device-assert", "device-assert/julia-kernel-exception"),
    ("ERROR: LoadError: CUBLASError: the GPU program failed to execute", "cublas-failure",
     "cublas-failure/julia-error"),
    ("ERROR: InitError: Cannot use memory pool 'split' when CUDA.jl was precompiled for memory "
     "pool 'binned'.", "alloc-conf", "alloc-conf/julia-memory-pool"),
    ("The rig kept crashing on its riser; setting the slot to gen2 fixed it.", "gpu-hardware",
     "gpu-hardware/pcie-link-cure-told"),
    ("ERROR: Out of GPU memory trying to allocate 512.000 MiB", "cuda-oom",
     "cuda-oom/julia-out-of-gpu-memory"),
    ("EXCEPTION occurred: cuDNN failure 2: CUDNN_STATUS_ALLOC_FAILED ; GPU=0 ; "
     "expr=finder(algo, perf)", "cuda-oom", "cuda-oom/cudnn-alloc-failed"),
]


@pytest.mark.parametrize(("line", "cls", "signature"), SINGLE_LINES,
                         ids=[s for _, _, s in SINGLE_LINES])
def test_single_line_formats(line: str, cls: str, signature: str) -> None:
    incidents = classify_text(line, torch_version="2.3.1")
    assert [(i.cls, i.signature) for i in incidents] == [(cls, signature)]
    assert incidents[0].line_numbers == [1]
    assert incidents[0].excerpt


def test_every_signature_that_opens_an_incident_is_exercised() -> None:
    exercised = {s for _, _, s in SINGLE_LINES}
    exercised |= {sig for expected in FIXTURE_INCIDENTS.values() for _, sig in expected}
    # Continuation signatures only add numbers; their tests are in test_oom_numbers and
    # test_ordering. Folded ones appear under the incident they merge into.
    folded = {"gpu-hardware/fallen-off-bus", "host-oom/killed-process",
              "driver-mismatch/no-kernel-image", "nccl/network", "nccl/shm-segment",
              "nccl/cuda-failure", "nccl/operations-failed"}
    # facts (a setting the log states) and handlers (a failure caught) open no incident
    openers = {s.id for s in SIGNATURES
               if s.attach not in ("only", "latest") and not s.fact and not s.handles}
    assert openers - exercised - folded == set()


QUIET_LINES = [
    "    except MemoryError:",
    "    # a negative stride here used to cause an illegal memory access in the kernel",
    "    check_alignment(t)  # misaligned address otherwise",
    "except torch.cuda.OutOfMemoryError as exc:  # retry with a smaller batch",
    "KeyError: 'labels'",
    "ValueError: too many values to unpack (expected 2)",
    "node01:4101:4188 [0] NCCL INFO comm 0x55d3c0 rank 0 nranks 8 cudaDev 0 - Init COMPLETE",
    "node01:4101:4101 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "Xidian University dataset loaded (XID-2019 split)",
    "Killed two birds with one stone",
    "    if (err == cudaErrorMemoryAllocation) {",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    "Token indices sequence length is longer than the specified maximum sequence length for "
    "this model (600 > 512). Running this sequence through the model will result in indexing "
    "errors",
    "UserWarning: TensorFloat32 tensor cores for float32 matrix multiplication available but "
    "not enabled. Consider setting `torch.set_float32_matmul_precision('high')` for better "
    "performance.",
    "You are using a CUDA device ('NVIDIA A100-SXM4-80GB') that has Tensor Cores.",
    "[W reducer.cpp:1346] Warning: find_unused_parameters=True was specified in DDP constructor",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, "
    "Hardware limit: 65536.",
    "RuntimeError: DataLoader worker (pid 2831817) is killed by signal: Segmentation fault.",
    # the message in a string literal of code that tests, logs or raises it
    '        if "CUDA out of memory" in str(exc):',
    '            logger.warning("CUDA out of memory at batch %d, halving it", size)',
    '    raise RuntimeError("CUDA error: out of memory") from exc',
    "    assert err != 'CUDA error: out of memory'",
    # lspci: a GPU that answers (its revision), and a non-GPU device reading ff
    "0000:41:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",
    "03:00.0 Ethernet controller: Intel Corporation I350 Gigabit Network Connection (rev ff)",
    # a check in code that names only the status it wants
    "CHECK(status == CUDNN_STATUS_SUCCESS) << cudnnGetErrorString(status);",
]


@pytest.mark.parametrize("line", QUIET_LINES)
def test_lines_that_only_look_alarming_yield_no_gpu_finding(line: str) -> None:
    assert classify_text(line, torch_version=None) == []


def test_healthy_log_has_no_incident_at_all() -> None:
    assert fixture_incidents("healthy_run_with_alarming_lines.log") == []


def test_warnings_do_not_count_as_failures() -> None:
    (deprecated,) = fixture_incidents("torch29_deprecated_alloc_conf_healthy.log")
    assert deprecated.severity is Severity.WARNING
    assert deprecated.role == "context"
    assert not deprecated.is_failure
