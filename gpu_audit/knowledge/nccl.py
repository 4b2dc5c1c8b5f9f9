"""NCCL's result codes and the words it prints for them.

NCCL functions return an ``ncclResult_t``; with ``NCCL_DEBUG=INFO`` every function that passes
an error up prints ``file.cc:LINE -> CODE``, so a failure shows as a trail of such lines ending
in the code of the first failure. PyTorch and NCCL's own messages name the same codes in words
(``unhandled system error``) or as enum names (``ncclSystemError``). Source: NCCL's ``nccl.h``
(``ncclResult_t``) and ``ncclGetErrorString``.
"""

from __future__ import annotations

# code -> (enum name, the text ncclGetErrorString gives)
NCCL_RESULTS: dict[int, tuple[str, str]] = {
    1: ("ncclUnhandledCudaError", "unhandled cuda error"),
    2: ("ncclSystemError", "unhandled system error"),
    3: ("ncclInternalError", "internal error"),
    4: ("ncclInvalidArgument", "invalid argument"),
    5: ("ncclInvalidUsage", "invalid usage"),
    6: ("ncclRemoteError", "remote process exited or there was a network error"),
    7: ("ncclInProgress", "NCCL operation in progress"),
}
NCCL_ERROR_TEXTS = {enum: text for enum, text in NCCL_RESULTS.values()}


def nccl_error_text(code: int | str | None) -> str | None:
    """The words NCCL uses for a result code or enum name (``2`` or ``ncclSystemError``)."""
    if code is None:
        return None
    if isinstance(code, int) or str(code).isdigit():
        found = NCCL_RESULTS.get(int(code))
        return found[1] if found else None
    name = str(code) if str(code).startswith("nccl") else f"nccl{code}"
    return NCCL_ERROR_TEXTS.get(name)
