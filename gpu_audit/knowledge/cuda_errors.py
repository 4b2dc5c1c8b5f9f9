"""The CUDA runtime's error statuses by number, as glog checks print them.

C++ programs built on glog (Caffe, PaddlePaddle's first releases, MXNet) check a CUDA call with
``CHECK_EQ(error, cudaSuccess)`` and print only the status's number when the check fails:
``Check failed: error == cudaSuccess (2 vs. 0)``, or the other way round, ``Check failed:
cudaSuccess == cudaStat (0 vs. 39)``. The message after it is often cut by the writer. The
number says which failure it was. Source: the CUDA runtime's ``driver_types.h``
(``cudaError``); CUDA 10.1 renumbered some statuses, and the numbers they had before are no
status since, so both read as the same status.
"""

from __future__ import annotations

CUDA_RUNTIME_STATUSES: dict[int, str] = {
    2: "cudaErrorMemoryAllocation",
    35: "cudaErrorInsufficientDriver",
    36: "cudaErrorCallRequiresNewerDriver",
    38: "cudaErrorNoDevice",  # before CUDA 10.1
    39: "cudaErrorECCUncorrectable",  # before CUDA 10.1
    48: "cudaErrorNoKernelImageForDevice",  # before CUDA 10.1
    77: "cudaErrorIllegalAddress",  # before CUDA 10.1
    100: "cudaErrorNoDevice",
    209: "cudaErrorNoKernelImageForDevice",
    214: "cudaErrorECCUncorrectable",
    700: "cudaErrorIllegalAddress",
    719: "cudaErrorLaunchFailure",
    802: "cudaErrorSystemNotReady",
    803: "cudaErrorSystemDriverMismatch",
    804: "cudaErrorCompatNotSupportedOnDevice",
    999: "cudaErrorUnknown",
}


def status_numbers(*names: str) -> tuple[int, ...]:
    """The numbers of these statuses (both numberings where CUDA 10.1 changed one)."""
    return tuple(code for code, name in CUDA_RUNTIME_STATUSES.items() if name in names)


def status_check(*names: str, group: str | None = None) -> str:
    """A regex for a failed check that a CUDA call returned ``cudaSuccess`` and got one of these
    statuses: ``cudaSuccess (N vs. 0)`` and ``cudaSuccess == x (0 vs. N)``, spaced and cased as
    people retype them (``(2 VS.0)``). ``group`` names the number's group."""
    numbers = "|".join(str(code) for code in status_numbers(*names))
    if not numbers:
        raise ValueError(f"no CUDA runtime status named {names}")
    code = f"(?P<{group}>{numbers})" if group else f"(?:{numbers})"
    code_ = f"(?P<{group}_>{numbers})" if group else f"(?:{numbers})"
    return (rf"\bcudaSuccess ?\({code} ?(?i:vs)\.? ?0\)|"
            rf"\bcudaSuccess ?== ?[\w.>()-]{{1,40}} ?\(0 ?(?i:vs)\.? ?{code_}\)")
