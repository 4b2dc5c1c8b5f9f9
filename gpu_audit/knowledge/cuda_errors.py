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
    222: "cudaErrorUnsupportedPtxVersion",
    700: "cudaErrorIllegalAddress",
    719: "cudaErrorLaunchFailure",
    802: "cudaErrorSystemNotReady",
    803: "cudaErrorSystemDriverMismatch",
    804: "cudaErrorCompatNotSupportedOnDevice",
    999: "cudaErrorUnknown",
}


# Numbers CUDA 10.1 gave to another status: what they meant before (``driver_types.h`` of CUDA
# 10.0 and earlier). 36 is cudaErrorCallRequiresNewerDriver since; cudaErrorSetOnActiveProcess
# moved to 708.
BEFORE_10_1: dict[int, str] = {36: "cudaErrorSetOnActiveProcess"}
# The runtime's words for those statuses (cudaGetErrorString), either numbering.
STATUS_WORDS: dict[str, str] = {
    "cudaErrorCallRequiresNewerDriver": "API call is not supported in the installed CUDA driver",
    "cudaErrorSetOnActiveProcess": "cannot set while device is active in this process",
}
RENUMBERED_IN = (10, 1)  # the CUDA release that renumbered them


def numbered_before_renumbering(version: str | None) -> bool | None:
    """Does CUDA ``version`` ("9.2", "10.0.130", "12.4") number its statuses as before 10.1?
    None when the version is missing or unreadable."""
    parts = (version or "").split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return (int(parts[0]), int(parts[1])) < RENUMBERED_IN


def status_numbers(*names: str) -> tuple[int, ...]:
    """The numbers of these statuses (both numberings where CUDA 10.1 changed one)."""
    return tuple(code for code, name in CUDA_RUNTIME_STATUSES.items() if name in names)


def reported_number(*codes: int) -> str:
    """A regex for one of these statuses (numbers of :data:`CUDA_RUNTIME_STATUSES`) printed as
    its number alone (the same in CUDA's driver and runtime APIs): "CUDA error 700", "CUDA error
    (700)", OpenMM's "Error invoking kernel: CUDA error (700)", and a program's check of one CUDA
    call that names the call, not the status: "cuEventRecord failed with error 700",
    "cudaMemcpyAsync failed with error code 700", PyTorch's old "cuda runtime error (700)" cut
    after the number, and the OpenACC runtime's "call to
    cuStreamSynchronize returned error 700: ...". :func:`number_needles` are its words."""
    unknown = [code for code in codes if code not in CUDA_RUNTIME_STATUSES]
    if unknown or not codes:
        raise ValueError(f"no CUDA runtime status numbered {unknown or codes}")
    numbers = "|".join(str(code) for code in codes)
    return (rf"\b(?:CUDA|Cuda|cuda) error:? \(?(?:{numbers})\b(?!\.\d)|"
            # (PyTorch before 1.0, its words cut after the number: "cuda runtime error (77)")
            rf"\b(?:CUDA|Cuda|cuda) runtime error \((?:{numbers})\)|"
            rf"\bError invoking kernel\b[^\n]{{0,80}}?\((?:{numbers})\)|"
            rf"\bcu(?:da)?[A-Z]\w{{1,40}}(?:\(\))? failed with (?:CUDA )?error(?: code)?:? "
            rf"\(?(?:{numbers})\b(?!\.\d)|"
            rf"\bcall to cu(?:da)?[A-Z]\w{{1,40}} returned error (?:{numbers})\b(?!\.\d)")


def number_needles(*codes: int) -> tuple[str, ...]:
    """Words every line :func:`reported_number` reads for these numbers contains."""
    firsts = sorted({str(code)[0] for code in codes})
    return (*(f"rror{sep}{digit}" for digit in firsts
                 for sep in (" ", " (", ": ", " code ", " code: ", " code (")),
            "Error invoking kernel", *(f"returned error {digit}" for digit in firsts))


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
