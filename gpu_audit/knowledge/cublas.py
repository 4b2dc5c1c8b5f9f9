"""cuBLAS's status codes by number.

Programs that check a cuBLAS call themselves print the number of its ``cublasStatus_t``, not its
name (MXNet's ``Check failed: err == CUBLAS_STATUS_SUCCESS (1 vs. 0)``, the CUDA library samples'
``cuBLAS API failed with status 7``). Source: cuBLAS's ``cublas_api.h`` (``cublasStatus_t``).

Others print the status's sentence (``cublasGetStatusString``: llama.cpp's ggml ``CUDA error: an
internal operation failed``, the legacy THC ``cublas runtime error : ...``).
"""

from __future__ import annotations

CUBLAS_STATUSES: dict[int, str] = {
    0: "CUBLAS_STATUS_SUCCESS",
    1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED",
    7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH",
    11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED",
    14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED",
    16: "CUBLAS_STATUS_LICENSE_ERROR",
}


def cublas_status_name(code: int) -> str | None:
    """The ``CUBLAS_STATUS_*`` name of a status number (None: not a cuBLAS status)."""
    return CUBLAS_STATUSES.get(code)


# cublasGetStatusString's sentences (cuSOLVER's status strings share the ones it has).
CUBLAS_STATUS_SENTENCES: dict[str, str] = {
    "the library was not initialized": "CUBLAS_STATUS_NOT_INITIALIZED",
    "the resource allocation failed": "CUBLAS_STATUS_ALLOC_FAILED",
    "an invalid numeric value was used as an argument": "CUBLAS_STATUS_INVALID_VALUE",
    "an absent device architectural feature is required": "CUBLAS_STATUS_ARCH_MISMATCH",
    "an access to GPU memory space failed": "CUBLAS_STATUS_MAPPING_ERROR",
    "the GPU program failed to execute": "CUBLAS_STATUS_EXECUTION_FAILED",
    "an internal operation failed": "CUBLAS_STATUS_INTERNAL_ERROR",
    "the functionality requested is not supported": "CUBLAS_STATUS_NOT_SUPPORTED",
    # the same statuses as other versions, bindings and documents word them
    "the requested functionality is not supported": "CUBLAS_STATUS_NOT_SUPPORTED",
    "the requested feature is not supported": "CUBLAS_STATUS_NOT_SUPPORTED",
    "the feature required is not supported": "CUBLAS_STATUS_NOT_SUPPORTED",
    "an invalid value was used as an argument": "CUBLAS_STATUS_INVALID_VALUE",
    "an invalid numerical value was used as an argument": "CUBLAS_STATUS_INVALID_VALUE",
}


# The short words programs' own cuBLAS checks print after "CUBLAS: " (PaddlePaddle's enforce,
# Chainer-style and GPUmat-style wrappers: "CUBLAS: execution failed, at ..."), lower-cased.
CUBLAS_STATUS_SHORT_WORDS: dict[str, str] = {
    "not initialized": "CUBLAS_STATUS_NOT_INITIALIZED",
    "alloc failed": "CUBLAS_STATUS_ALLOC_FAILED",
    "out of memory": "CUBLAS_STATUS_ALLOC_FAILED",
    "invalid value": "CUBLAS_STATUS_INVALID_VALUE",
    "arch mismatch": "CUBLAS_STATUS_ARCH_MISMATCH",
    "architecture mismatch": "CUBLAS_STATUS_ARCH_MISMATCH",
    "mapping error": "CUBLAS_STATUS_MAPPING_ERROR",
    "memory mapping error": "CUBLAS_STATUS_MAPPING_ERROR",
    "execution failed": "CUBLAS_STATUS_EXECUTION_FAILED",
    "internal error": "CUBLAS_STATUS_INTERNAL_ERROR",
    "not supported": "CUBLAS_STATUS_NOT_SUPPORTED",
    "functionality not supported": "CUBLAS_STATUS_NOT_SUPPORTED",
    "license error": "CUBLAS_STATUS_LICENSE_ERROR",
}
