"""Every signature, in the order they are tried: the first one that matches a line wins.

A signature's regex runs on one cleaned log line (ANSI codes and control characters removed),
and only when one of its needles is in the line, which keeps the cost per candidate line low.
The order goes from specific to general: the NVML assert of the caching allocator is an
out-of-memory before it is an NVML failure; ``Cuda failure 'out of memory'`` is an OOM before
it is an NCCL error; an illegal memory access is named before the cuBLAS or NCCL error that
wraps it. A signature registered in a class module but missing here (or named here but not
registered) stops the import.
"""

from __future__ import annotations

# The class modules register their signatures on import.
from gpu_audit.explain.signatures import (  # noqa: F401
    alloc_conf,
    cublas_failure,
    cuda_oom,
    cudnn_failure,
    device_assert,
    driver_mismatch,
    gpu_hardware,
    host_oom,
    illegal_memory_access,
    nccl,
    nvml_assert_oom,
    nvml_unavailable,
)
from gpu_audit.explain.signatures.registry import Signature, class_docs, in_order

ORDER = (
    # an NVML assert: an OOM when the caching allocator raised it, an NVML failure elsewhere
    "nvml-assert-oom/caching-allocator",
    "nvml-unavailable/nvml-assert",
    # out of memory, before NCCL's "Cuda failure 'out of memory'"
    "cuda-oom/caching-allocator",
    # (before the driver's status: pinned host memory is the host's)
    "host-oom/pinned-host-memory",
    # (before the runtime's words: RAPIDS names cudaErrorMemoryAllocation after its own)
    "cuda-oom/array-library",
    "cuda-oom/serving-engine",
    "cuda-oom/quantized-model-offloaded",
    "cuda-oom/cuda-error",
    "cuda-oom/library-allocation",
    "cuda-oom/tensorrt",
    "cuda-oom/driver-api",
    # (before MXNet's "cudaMalloc failed: out of memory": llama.cpp's says where)
    "cuda-oom/ggml",
    "cuda-oom/framework-allocator",
    "cuda-oom/tensorflow-not-a-failure",
    "cuda-oom/tensorflow",
    "cuda-oom/tensorflow-node",
    "cuda-oom/xla",
    "cuda-oom/xla-peak-buffers",
    "cuda-oom/headless",
    "cuda-oom/message-detail",
    "cuda-oom/caught",
    "cuda-oom/batch-size-search",
    "cuda-oom/smi-processes",
    # (before cuDNN's status: a line that names it and says it was an out-of-memory)
    "cuda-oom/told-cause",
    "nvml-unavailable/init-failed",
    "nvml-unavailable/library-version",
    "nvml-unavailable/nvidia-smi-no-driver",
    "nvml-unavailable/no-gpu-to-monitor",
    "nvml-unavailable/no-devices-found",
    # (before the GPU lost from a bare-metal bus: the same words at a VM's PCI slot)
    "nvml-unavailable/guest-device-handle",
    "nvml-unavailable/call-unknown-error",
    "nvml-unavailable/pynvml",
    "nvml-unavailable/torch-warning",
    "nvml-unavailable/container-cli",
    "nvml-unavailable/library-missing",
    "nvml-unavailable/smi-cannot-execute",
    "nvml-unavailable/smi-missing",
    "nvml-unavailable/nvrm-api-mismatch",
    "nvml-unavailable/nvrm-kernel-version",
    "alloc-conf/deprecated-variable",
    "alloc-conf/unrecognized-option",
    "alloc-conf/value-too-small",
    "alloc-conf/malformed",
    "alloc-conf/backend",
    "alloc-conf/async-unsupported",
    "alloc-conf/ignored-options",
    "alloc-conf/expandable-unsupported",
    "alloc-conf/expandable-assert",
    "alloc-conf/expandable-mapping-assert",
    "alloc-conf/async-assert",
    "alloc-conf/expandable-ipc-kernel",
    "alloc-conf/mempool-expandable",
    "alloc-conf/expandable-told",
    "alloc-conf/no-caching-zero",
    "alloc-conf/driver-vmm",
    "alloc-conf/async-operation-unsupported",
    "alloc-conf/setting",
    # kernel faults, before the cuBLAS and NCCL errors that often wrap them
    "illegal-memory-access/illegal-address",
    "illegal-memory-access/debugger-exception",
    "illegal-memory-access/misaligned-address",
    "illegal-memory-access/illegal-instruction",
    "illegal-memory-access/launch-failure",
    "device-assert/kernel-assertion",
    "device-assert/garbled-assertion",
    "device-assert/unquoted-condition",
    "device-assert/triggered",
    "gpu-hardware/xid",
    "gpu-hardware/device-plugin-xid",
    "gpu-hardware/xid-mention",
    "gpu-hardware/device-handle",
    "gpu-hardware/fallen-off-bus",
    "gpu-hardware/lspci-rev-ff",
    "gpu-hardware/lost-told",
    "gpu-hardware/power-loss-told",
    "gpu-hardware/power-supply-told",
    "gpu-hardware/card-swap-told",
    "gpu-hardware/gsp-timeout",
    "gpu-hardware/reset-required",
    "gpu-hardware/uncorrectable-ecc",
    "gpu-hardware/dcgm-health",
    "gpu-hardware/nvlink-uncorrectable",
    "gpu-hardware/contained",
    "gpu-hardware/rm-init-failed",
    "gpu-hardware/launch-timeout",
    "gpu-hardware/unknown-error",
    "gpu-hardware/pcie-aer",
    "gpu-hardware/pcie-aer-corrected",
    "cublas-failure/cublas-status",
    "cudnn-failure/plan-rejected",
    "cudnn-failure/status",
    "cudnn-failure/no-engine",
    "cudnn-failure/framework-init",
    "cudnn-failure/legacy-runtime-error",
    "cublas-failure/legacy-runtime-error",
    "cublas-failure/cublaslt",
    "cublas-failure/status-code",
    "cublas-failure/status-sentence",
    "cublas-failure/handle-failed",
    "driver-mismatch/driver-too-old",
    "driver-mismatch/driver-older-than-cuda",
    "driver-mismatch/container-driver-release",
    "driver-mismatch/container-requirement",
    "driver-mismatch/insufficient-driver",
    "driver-mismatch/arch-not-compiled",
    "driver-mismatch/supported-capabilities",
    "driver-mismatch/no-kernel-image",
    "driver-mismatch/gpu-too-old",
    "driver-mismatch/gpu-too-old-for-library",
    "driver-mismatch/capability-range",
    "driver-mismatch/gpu-not-supported-by-driver",
    "driver-mismatch/no-driver",
    "driver-mismatch/unsupported-ptx",
    "driver-mismatch/cuda-init",
    # collectives: mostly echoes of a failure named above
    "nccl/watchdog-timeout",
    "nccl/timeout-told",
    "nccl/timeout-progress",
    "nccl/heartbeat",
    "nccl/duplicate-gpu",
    "nccl/no-gpus",
    "nccl/communicator-aborted",
    "nccl/error",
    "nccl/error-kind",
    "nccl/error-text",
    "nccl/shm-segment",
    "nccl/no-interface",
    "nccl/cuda-failure",
    "nccl/network",
    "nccl/operations-failed",
    "nccl/unique-id-fetch",
    "nccl/store-timeout",
    "nccl/gloo-timeout",
    "nccl/gloo-peer-closed",
    "nccl/return-code",
    "nccl/watchdog-terminated",
    "nccl/watchdog-timeout-frame",
    # host memory, last: its needles ("Killed", "MemoryError") are the most general
    "host-oom/kernel-oom-killer",
    "host-oom/killed-process",
    "host-oom/memcg-oom-path",
    "host-oom/task-row",
    "host-oom/slurm-oom-kill",
    "host-oom/slurm-memory-limit",
    "host-oom/batch-memory-limit",
    "host-oom/notebook-session-ram",
    "host-oom/kubernetes-oomkilled",
    "host-oom/kubernetes-evicted",
    "host-oom/memory-limit-told",
    "host-oom/killed-for-memory-told",
    "host-oom/ram-full-told",
    "host-oom/container-exit-137",
    "host-oom/ray-oom-killer",
    "host-oom/dataloader-crashed",
    "host-oom/dataloader-killed",
    "host-oom/shared-memory",
    "host-oom/cpu-allocator",
    "host-oom/model-exceeds-system-memory",
    "host-oom/framework-allocator",
    "host-oom/numpy",
    "host-oom/memory-error",
    "host-oom/sigkill",
    "host-oom/shell-killed",
    # a line that only names the async allocator backend, when nothing else reads it
    "alloc-conf/async-card-warning",
    "alloc-conf/async-backend-named",
    "alloc-conf/async-default-app",
    # ONNX Runtime's arenas and providers: which device an arena's failure was on
    "cuda-oom/onnxruntime-arena",
)

SIGNATURES: tuple[Signature, ...] = in_order(ORDER)
SIGNATURE_BY_ID = {sig.id: sig for sig in SIGNATURES}

# Signature ids that were renamed, and their ids now: a user's notes, scripts and `gpu-audit
# rules OLD-ID` keep working. An id is only ever renamed to one that exists.
RENAMED = {
    # an unspecified launch failure is a kernel's fault on the device first, the GPU's second
    "gpu-hardware/launch-failure": "illegal-memory-access/launch-failure",
}
if stale := {old: new for old, new in RENAMED.items()
             if new not in SIGNATURE_BY_ID or old in SIGNATURE_BY_ID}:
    raise ImportError(f"renamed signature ids that do not resolve: {stale}")
CLASS_DOCS = class_docs()
