"""The catalogue of known failure messages: one :class:`Signature` per message shape.

A signature's regex runs on one cleaned log line (ANSI codes and control characters removed),
and only when one of its ``needles`` (plain substrings) is in the line, which keeps the cost per
candidate line low. The first signature that matches a line wins, so the list is ordered from
specific to general (``Cuda failure 'out of memory'`` is an OOM before it is an NCCL error).

Formats were collected across releases: PyTorch from the THC era (``cuda runtime error (2) :
out of memory``) to the unified allocator (``Out of memory. Tried to allocate``), NCCL's
watchdog messages before and after ``SeqNum``/``NumelIn`` were added, the kernel's OOM killer
before and after ``Kill process`` became ``Killed process``, nvidia-smi, pynvml and
nvidia-container-cli NVML failures, cuBLAS/cuDNN status codes and NVRM Xid lines.

``tier`` orders incidents by causality (lower comes first): 0 the platform (hardware, driver,
broken configuration), 1 the program's own fault, 2 errors that usually follow an earlier fault,
3 collective timeouts and errors that echo a failure on another rank, 5 context.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpu_audit.explain.oom import extract_oom_fields
from gpu_audit.model import Severity
from gpu_audit.units import SIZE, size_or_none

CLASSES = (
    "cuda-oom", "nvml-assert-oom", "nvml-unavailable", "alloc-conf", "cublas-failure",
    "driver-mismatch", "illegal-memory-access", "device-assert", "gpu-hardware", "nccl",
    "host-oom",
)

Extractor = Callable[[re.Match[str], str], dict[str, Any]]


@dataclass(frozen=True)
class Signature:
    id: str  # stable: "<class>/<message kind>"
    cls: str
    regex: re.Pattern[str]
    needles: tuple[str, ...]
    title: str
    severity: Severity = Severity.ERROR
    tier: float = 1.0
    extract: Extractor | None = None
    group: str | None = None  # occurrences merge into one incident per (cls, group); default id
    # "only": a continuation line that adds numbers to the latest incident of its class within
    # ``window`` lines (ignored otherwise); "prefer": attach if possible, else a new incident.
    attach: str | None = None
    window: int = 8
    key_field: str | None = None  # occurrences with different values of this number stay apart


def _named(match: re.Match[str], _line: str) -> dict[str, Any]:
    """The regex's named groups that matched, digits as ints."""
    out: dict[str, Any] = {}
    for key, value in match.groupdict().items():
        if value is None:
            continue
        value = value.strip().rstrip(".,;:")
        out[key] = int(value) if value.isdigit() else value
    return out


def _sig(sig_id: str, pattern: str, needles: tuple[str, ...], title: str, **kw: Any) -> Signature:
    cls = sig_id.split("/", 1)[0]
    if cls not in CLASSES:
        raise ValueError(f"signature {sig_id!r} has an unknown class")
    return Signature(sig_id, cls, re.compile(pattern), needles, title,
                     extract=kw.pop("extract", _named), **kw)


# --- extractors -------------------------------------------------------------------------------

def _oom(match: re.Match[str], line: str) -> dict[str, Any]:
    found = extract_oom_fields(line)
    backend = match.groupdict().get("backend")
    if backend:
        found["backend"] = backend
    if match.groupdict().get("over_1eb"):
        found["requested_over_1eb"] = True
    return found


def _oom_detail(_match: re.Match[str], line: str) -> dict[str, Any]:
    return extract_oom_fields(line)


def _nvml_assert(match: re.Match[str], _line: str) -> dict[str, Any]:
    call = match["call"].strip()
    if "nvmlInit" in call:
        nvml_call = "nvmlInit_v2"
    elif "HandleByPciBusId" in call:
        nvml_call = "nvmlDeviceGetHandleByPciBusId_v2"
    elif call == "r":
        nvml_call = "nvmlDeviceGetComputeRunningProcesses"
    else:
        nvml_call = call
    return {"nvml_call": nvml_call, "source_file": match["file"].rsplit("/", 1)[-1],
            "source_line": int(match["source_line"]) if match["source_line"] else None}


_WORK_FIELDS = {
    "seq_num": re.compile(r"SeqNum=(\d+)"),
    "op_type": re.compile(r"OpType=(\w+)"),
    "numel_in": re.compile(r"NumelIn=(\d+)"),
    "numel_out": re.compile(r"NumelOut=(\d+)"),
    "timeout_ms": re.compile(r"Timeout\(ms\)=(\d+)"),
    "ran_for_ms": re.compile(r"ran for (\d+) milliseconds"),
    "tensor_shape": re.compile(r"TensorShape=\[([^\]]*)\]"),
    "rank": re.compile(r"\bRank (\d+)\]"),
    "process_group": re.compile(r"\[PG (?:ID )?(\d+)\b"),
}


def _nccl_work(_match: re.Match[str], line: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, pattern in _WORK_FIELDS.items():
        match = pattern.search(line)
        if match:
            found[key] = int(match[1]) if match[1].isdigit() else match[1]
    return found


def _driver_too_old(match: re.Match[str], line: str) -> dict[str, Any]:
    found = _named(match, line)
    version = found.get("found_version")
    if isinstance(version, int):  # 10010 -> the driver supports CUDA up to 10.1
        found["driver_cuda_version"] = f"{version // 1000}.{version % 1000 // 10}"
    return found


def _xid(match: re.Match[str], line: str) -> dict[str, Any]:
    found = _named(match, line)
    rest = found.pop("rest", "") or ""
    if pid := re.search(r"\bpid=['\"]?(\d+)", rest):
        found["pid"] = int(pid[1])
    name = re.search(r"\bname=([^,\s]+)", rest)
    if name and not name[1].startswith("<"):  # "<unknown>" is no name
        found["process_name"] = name[1]
    if action := re.search(r"recovery action changed from \S+ \(([^)]*)\) to \S+ \(([^)]*)\)",
                           line):
        found["recovery_action"] = action[2]
    detail = re.sub(r"\b(?:pid|name)=[^,]*,\s*", "", rest).strip(" ,.")
    if detail:
        found["detail"] = detail[:200]
    return found


def _sizes_to_bytes(*keys: str) -> Extractor:
    def extract(match: re.Match[str], line: str) -> dict[str, Any]:
        found = _named(match, line)
        for key in keys:
            if isinstance(found.get(key), str):
                found[key + "_bytes"] = size_or_none(found.pop(key))
        return found
    return extract


def _kernel_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    found = _named(match, line)
    for field in ("total-vm", "anon-rss", "file-rss", "shmem-rss"):
        kb = re.search(rf"{field}:(\d+)kB", line)
        if kb:
            found[field.replace("-", "_") + "_bytes"] = int(kb[1]) * 1024
    return found


def _library_call(match: re.Match[str], line: str) -> dict[str, Any]:
    found = _named(match, line)
    if isinstance(found.get("call"), str):  # `cublasGemmEx( handle, opa, ...)` -> cublasGemmEx
        found["call"] = found["call"].split("(", 1)[0].strip()
    return found


def _capability_range(match: re.Match[str], line: str) -> dict[str, Any]:
    found = _named(match, line)
    if "minimum_" in found:  # the two message versions name the same number
        found["minimum"] = found.pop("minimum_")
    return found


def _pids(match: re.Match[str], line: str) -> dict[str, Any]:
    found = _named(match, line)
    if isinstance(found.get("pids"), str):
        found["pids"] = [int(p) for p in re.findall(r"\d+", found["pids"])]
    elif isinstance(found.get("pids"), int):
        found["pids"] = [found["pids"]]
    return found


# --- the catalogue ------------------------------------------------------------------------------

_E, _W, _C, _I = Severity.ERROR, Severity.WARNING, Severity.CRITICAL, Severity.INFO

SIGNATURES: tuple[Signature, ...] = (
    # ---- NVML assert in the caching allocator: an OOM whose report failed ----
    _sig("nvml-assert-oom/caching-allocator",
         r"NVML_SUCCESS == (?P<call>.+?) INTERNAL ASSERT FAILED at \"?(?P<file>[^\"\s:]*"
         r"CUDACachingAllocator\.cpp)\"?:?(?P<source_line>\d+)?",
         ("NVML_SUCCESS",), "Out of memory, hidden behind an NVML INTERNAL ASSERT",
         extract=_nvml_assert, tier=1.0),
    _sig("nvml-unavailable/nvml-assert",
         r"NVML_SUCCESS == (?P<call>.+?) INTERNAL ASSERT FAILED at \"?(?P<file>[^\"\s:]+)\"?"
         r":?(?P<source_line>\d+)?",
         ("NVML_SUCCESS",), "NVML failed inside PyTorch (INTERNAL ASSERT)",
         extract=_nvml_assert, tier=0.5),

    # ---- CUDA out of memory ----
    _sig("cuda-oom/caching-allocator",
         r"\b(?:(?P<backend>CUDA|HIP|XPU|MUSA|NPU) out of memory\b|Out of memory\. Tried to "
         r"allocate)(?:.*?Tried to allocate (?P<over_1eb>more than 1EB))?",
         ("out of memory", "Out of memory. Tried"),
         "CUDA out of memory", extract=_oom, group="cuda-oom"),
    _sig("cuda-oom/cuda-error",
         r"(?:CUDA|HIP|cuda runtime|cuda) error(?: \(\d+\))?\s*:\s*out of memory|"
         r"\berror=2 : out of memory|"
         r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|"
         r"Cuda failure '?(?:out of memory|cudaErrorMemoryAllocation)",
         ("out of memory", "OUT_OF_MEMORY", "MemoryAllocation"),
         "CUDA out of memory (outside PyTorch's allocator)", group="cuda-oom-raw"),
    _sig("cuda-oom/message-detail",
         rf"Tried to allocate {SIZE}|has a total capac\w*ty of|total capacity;|is allocated by "
         r"PyTorch|reserved by PyTorch|memory in use|already allocated;",
         ("Tried to allocate", "total capac", "by PyTorch", "memory in use", "already allocated"),
         "CUDA out of memory (continued)", extract=_oom_detail, attach="only", window=8),

    # ---- NVML unavailable ----
    _sig("nvml-unavailable/init-failed", r"Failed to initialize NVML: (?P<reason>[^\n]+)",
         ("initialize NVML",), "NVML could not be initialised", tier=0.0),
    _sig("nvml-unavailable/library-version", r"NVML library version: (?P<library_version>[\d.]+)",
         ("NVML library version",), "NVML library version", attach="only", window=4),
    _sig("nvml-unavailable/nvidia-smi-no-driver",
         r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver|"
         r"NVIDIA-SMI couldn't find (?P<missing>libnvidia-ml\.so)",
         ("NVIDIA-SMI",), "nvidia-smi cannot talk to the NVIDIA driver", tier=0.0),
    _sig("nvml-unavailable/pynvml",
         r"NVMLError_?(?P<kind>LibraryNotFound|DriverNotLoaded|LibRmVersionMismatch|NoPermission|"
         r"Uninitialized|Unknown)\b|(?P<text>NVML Shared Library Not Found|RM has detected an "
         r"NVML/RM version mismatch)",
         ("NVML",), "NVML is not usable (pynvml)", tier=0.0),
    _sig("nvml-unavailable/torch-warning", r"Can't initialize NVML",
         ("initialize NVML",), "PyTorch could not initialise NVML", severity=_W, tier=0.5),
    _sig("nvml-unavailable/container-cli",
         r"nvidia-container-cli: initialization error: (?:nvml error: (?P<reason>[^:]+)|"
         r"load library failed: (?P<library>libnvidia-ml[^:]*))",
         ("nvidia-container-cli",), "The container runtime could not initialise NVML", tier=0.0),
    _sig("nvml-unavailable/nvrm-api-mismatch",
         r"NVRM: API mismatch: the client has the version (?P<client_version>[\d.]+)",
         ("API mismatch",), "NVIDIA driver user-space and kernel module versions differ",
         tier=0.0, attach="prefer", window=4),
    _sig("nvml-unavailable/nvrm-kernel-version",
         r"NVRM: this kernel module has the version (?P<kernel_version>[\d.]+)",
         ("this kernel module has",), "NVIDIA kernel module version", attach="only", window=4),

    # ---- allocator configuration ----
    _sig("alloc-conf/deprecated-variable",
         r"(?P<variable>PYTORCH_(?:CUDA|HIP)_ALLOC_CONF) is deprecated, use PYTORCH_ALLOC_CONF",
         ("is deprecated",), "PYTORCH_CUDA_ALLOC_CONF is deprecated in this torch",
         severity=_W, tier=5.0),
    _sig("alloc-conf/unrecognized-option",
         r"Unrecognized CachingAllocator option: (?P<option>[^\s,]+)|Unrecognized key "
         r"'(?P<key>[^']+)' in (?P<scope>\w+) allocator config",
         ("Unrecognized",), "The allocator configuration names an option this torch does not know",
         tier=0.0),
    _sig("alloc-conf/value-too-small",
         r"CachingAllocator option (?P<option>\w+) too small, must be (?P<rule>[<>]=?\s*\d+)",
         ("too small",), "An allocator option value is below its minimum", tier=0.0),
    _sig("alloc-conf/malformed",
         r"Error parsing CachingAllocator settings, expected (?P<expected>\S+)|Index out of bounds "
         r"in ConfigTokenizer|Expected a single True/False argument for (?P<option>\w+)|For "
         r"roundups, the (?:divisions|intervals) ha(?:s|ve) to be power of 2|"
         r"(?P<gc>garbage_collect(?:ion)?_threshold) (?:too small|too big|is invalid)|Number of "
         r"register threads has to be power of 2",
         ("CachingAllocator", "ConfigTokenizer", "True/False", "roundups", "garbage_collect",
          "register threads"),
         "The allocator configuration string is malformed", tier=0.0),
    _sig("alloc-conf/backend",
         r"Unknown allocator backend|Allocator backend parsed at runtime != allocator backend "
         r"parsed at load time",
         ("llocator backend",), "The allocator backend setting is invalid or was set too late",
         tier=0.0),
    _sig("alloc-conf/ignored-options",
         r"backend:cudaMallocAsync ignores (?P<options>[^.(]+)", ("cudaMallocAsync ignores",),
         "Allocator options ignored under backend:cudaMallocAsync", severity=_W, tier=5.0),
    _sig("alloc-conf/expandable-unsupported", r"expandable_segments not supported on this platform",
         ("expandable_segments not supported",),
         "expandable_segments is not supported here and was ignored", severity=_W, tier=4.0),

    # ---- illegal memory access (before cuBLAS/NCCL, which often wrap it) ----
    _sig("illegal-memory-access/illegal-address",
         r"illegal memory access was encountered|ILLEGAL_ADDRESS|cudaErrorIllegalAddress",
         ("llegal memory access", "ILLEGAL_ADDRESS", "IllegalAddress"),
         "Illegal memory access in a CUDA kernel"),
    _sig("illegal-memory-access/misaligned-address",
         r"(?:error|Error)(?: \[CUDA\])?: misaligned address|Cuda failure 'misaligned address|"
         r"MISALIGNED_ADDRESS|cudaErrorMisalignedAddress",
         ("isaligned",), "Misaligned memory access in a CUDA kernel"),
    _sig("illegal-memory-access/illegal-instruction",
         r"an illegal instruction was encountered|ILLEGAL_INSTRUCTION|cudaErrorIllegalInstruction",
         ("llegal instruction", "ILLEGAL_INSTRUCTION", "IllegalInstruction"),
         "Illegal instruction in a CUDA kernel"),

    # ---- device-side assert ----
    _sig("device-assert/kernel-assertion",
         r"(?:(?P<source_file>[\w./\\-]+\.cuh?):(?P<source_line>\d+): .*?)?block: "
         r"\[(?P<block>\d+,\s*\d+,\s*\d+)\],?\s*thread: \[(?P<thread>\d+,\s*\d+,\s*\d+)\]\s*"
         r"Assertion `(?P<assertion>.+?)` failed",
         ("Assertion `",), "A device-side assertion failed in a CUDA kernel",
         group="device-assert"),
    _sig("device-assert/triggered",
         r"device-side assert(?:ion)? triggered|CUDA_ERROR_ASSERT\b|cudaErrorAssert\b",
         ("device-side assert", "CUDA_ERROR_ASSERT", "cudaErrorAssert"),
         "A device-side assertion failed in a CUDA kernel", group="device-assert"),

    # ---- GPU hardware, Xid ----
    _sig("gpu-hardware/xid",
         r"NVRM: Xid \((?:PCI:)?(?P<pci_bus_id>[0-9A-Fa-f:.]+)\):\s*(?P<xid>\d+)"
         r"(?:,\s*(?P<rest>.*))?",
         ("Xid",), "GPU Xid event", extract=_xid, key_field="xid"),
    _sig("gpu-hardware/xid-mention",
         r"(?<![\w-])X[Ii][Dd](?:\s+error)?[\s:=#]+(?P<xid>\d{1,3})\b(?P<rest>.*)",
         ("Xid", "XID"), "GPU Xid event", extract=_xid, key_field="xid"),
    _sig("gpu-hardware/fallen-off-bus",
         r"(?:GPU (?P<pci_bus_id>[0-9A-Fa-f:.]+): )?GPU has fallen off the bus|GPU is lost|"
         r"NVMLError_GpuIsLost|GPUIsLost",
         ("fallen off the bus", "GPU is lost", "IsLost"), "GPU has fallen off the bus",
         severity=_C, tier=0.0, group="off-the-bus"),
    _sig("gpu-hardware/uncorrectable-ecc",
         r"uncorrectable ECC error encountered|CUDA_ERROR_ECC_UNCORRECTABLE|"
         r"cudaErrorECCUncorrectable",
         ("ECC error", "ECC_UNCORRECTABLE", "ECCUncorrectable"),
         "Uncorrectable ECC error in GPU memory", severity=_C, tier=0.0),
    _sig("gpu-hardware/nvlink-uncorrectable",
         r"uncorrectable NVLink error was detected|CUDA_ERROR_NVLINK_UNCORRECTABLE|"
         r"cudaErrorNvlinkUncorrectable",
         ("NVLink error", "NVLINK_UNCORRECTABLE", "NvlinkUncorrectable"),
         "Uncorrectable NVLink error", severity=_C, tier=0.0),
    _sig("gpu-hardware/rm-init-failed",
         r"RmInitAdapter failed!?(?: \((?P<code>[^)]+)\))?", ("RmInitAdapter",),
         "The NVIDIA driver failed to initialise a GPU", severity=_C, tier=0.0),
    _sig("gpu-hardware/launch-failure",
         r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|cudaErrorLaunchFailure",
         ("unspecified launch failure", "LAUNCH_FAILED", "LaunchFailure"),
         "Unspecified launch failure: a CUDA kernel crashed", tier=1.2),
    _sig("gpu-hardware/launch-timeout",
         r"launch timed out and was terminated|CUDA_ERROR_LAUNCH_TIMEOUT|cudaErrorLaunchTimeout",
         ("launch timed out", "LAUNCH_TIMEOUT", "LaunchTimeout"),
         "A CUDA kernel was killed by the display watchdog", tier=1.2),
    _sig("gpu-hardware/unknown-error",
         r"CUDA error: unknown error|(?:cuda runtime error \(\d+\)|\berror=\d+) : unknown error|"
         r"CUDA_ERROR_UNKNOWN\b|cudaErrorUnknown\b",
         ("unknown error", "CUDA_ERROR_UNKNOWN", "cudaErrorUnknown"),
         "CUDA reported an unknown error", tier=2.0),

    # ---- cuBLAS / cuDNN ----
    _sig("cublas-failure/cublas-status",
         r"(?P<status>(?:CUBLAS|CUSOLVER|CUSPARSE)_STATUS_[A-Z_]+|CUFFT_(?:ALLOC_FAILED|"
         r"INTERNAL_ERROR|EXEC_FAILED|SETUP_FAILED|INVALID_PLAN))"
         r"(?: when calling `(?P<call>[^`]+)`)?",
         ("CUBLAS_STATUS", "CUSOLVER_STATUS", "CUSPARSE_STATUS", "CUFFT_"),
         "A CUDA math library call failed", extract=_library_call, key_field="status"),
    _sig("cublas-failure/cudnn-status",
         r"(?P<status>CUDNN_STATUS_[A-Z_]+|CUDNN_BACKEND_API_FAILED)",
         ("CUDNN_",), "cuDNN call failed", key_field="status"),
    _sig("cublas-failure/cudnn-no-engine",
         r"Unable to find a valid cuDNN algorithm to run convolution|(?:GET|FIND) was unable to "
         r"find an engine to execute this computation",
         ("cuDNN algorithm", "unable to find an engine"),
         "cuDNN found no algorithm it could run (usually no memory left for its workspace)"),
    _sig("cublas-failure/legacy-runtime-error",
         r"(?P<library>cublas|cudnn|cuDNN) runtime error : (?P<message>.+?)(?: at |$)",
         ("runtime error :",), "cuBLAS/cuDNN call failed"),
    _sig("cublas-failure/cublaslt", r"cublasLt ran into an error", ("cublasLt",),
         "cuBLASLt matrix multiply failed", tier=2.0),

    # ---- driver, runtime and architecture mismatches ----
    _sig("driver-mismatch/driver-too-old",
         r"NVIDIA driver on your system is too old(?: \(found version (?P<found_version>\d+)\))?",
         ("driver on your system is too old",), "The NVIDIA driver is too old for this PyTorch",
         extract=_driver_too_old, tier=0.0),
    _sig("driver-mismatch/insufficient-driver",
         r"CUDA driver version is insufficient for CUDA runtime version|"
         r"cudaErrorInsufficientDriver",
         ("insufficient", "InsufficientDriver"),
         "The NVIDIA driver is older than the CUDA runtime PyTorch was built with", tier=0.0),
    _sig("driver-mismatch/arch-not-compiled",
         r"(?P<gpu_name>[^:\n]*?)\s*with CUDA capability (?P<capability>sm_\d+a?) is not "
         r"compatible "
         r"with the current PyTorch installation(?:.*?supports CUDA capabilities "
         r"(?P<supported>(?:sm_\d+a?\s*)+))?",
         ("is not compatible with the current PyTorch",),
         "This PyTorch build has no kernels for this GPU's architecture", tier=0.0,
         group="no-kernel-image"),
    _sig("driver-mismatch/supported-capabilities",
         r"The current PyTorch install supports CUDA capabilities (?P<supported>(?:sm_\d+a?\s*)+)",
         ("supports CUDA capabilities",), "Architectures this PyTorch supports",
         attach="only", window=4),
    _sig("driver-mismatch/no-kernel-image",
         r"no kernel image is available for execution on the device|"
         r"cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU",
         ("no kernel image", "NoKernelImage", "NO_BINARY_FOR_GPU"),
         "No kernel image for this GPU in the installed PyTorch/CUDA build", tier=0.0,
         group="no-kernel-image"),
    _sig("driver-mismatch/gpu-too-old",
         r"Found GPU(?P<gpu_index>\d+) (?P<gpu_name>.+?) which is of cuda capability "
         r"(?P<capability>\d+\.\d+)",
         ("which is of cuda capability",), "This GPU is too old for this PyTorch", tier=0.0),
    _sig("driver-mismatch/capability-range",
         r"minimum cuda capability supported by this library is (?P<minimum>\d+\.\d+)|supported "
         r"by this version of PyTorch is\s*\((?P<minimum_>\d+\.\d+)\) - \((?P<maximum>\d+\.\d+)\)",
         ("minimum cuda capability", "supported by this version of PyTorch"),
         "Architectures this PyTorch supports", extract=_capability_range, attach="only",
         window=4),
    _sig("driver-mismatch/gpu-not-supported-by-driver",
         r"installed in this system is\s*not supported by the(?:\s*NVRM:)?\s*(?:NVIDIA "
         r"(?P<driver_version>[\d.]+) driver release)?",
         ("not supported by the",), "The installed NVIDIA driver does not support this GPU",
         tier=0.0),
    _sig("driver-mismatch/no-driver", r"Found no NVIDIA driver on your system",
         ("Found no NVIDIA driver",), "No NVIDIA driver is loaded", tier=0.0),
    _sig("driver-mismatch/unsupported-ptx",
         r"the provided PTX was compiled with an unsupported toolchain|"
         r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION|cudaErrorUnsupportedPtxVersion",
         ("unsupported toolchain", "UNSUPPORTED_PTX", "UnsupportedPtx"),
         "Code was compiled for a newer CUDA than the driver supports", tier=0.0),
    _sig("driver-mismatch/cuda-init",
         r"Error (?P<code>80[234]|999|100): (?P<message>[^(\n]+)|(?P<text>system has unsupported "
         r"display driver / cuda driver combination|forward compatibility was attempted on non "
         r"supported HW|system not yet initialized|No CUDA GPUs are available|no CUDA-capable "
         r"device is detected)",
         ("Error 80", "Error 999", "Error 100", "unsupported display driver",
          "forward compatibility", "not yet initialized", "No CUDA GPUs", "no CUDA-capable"),
         "CUDA could not initialise", tier=0.0),

    # ---- NCCL and other collectives ----
    _sig("nccl/watchdog-timeout",
         r"(?:Watchdog caught|Caught) collective operation timeout",
         ("collective operation timeout",),
         "NCCL collective timed out", extract=_nccl_work, tier=3.0, group="nccl-timeout"),
    _sig("nccl/timeout-progress",
         r"Timeout at NCCL work: (?P<timed_out_seq>\d+), last enqueued NCCL work: "
         r"(?P<last_enqueued_seq>\d+), last completed NCCL work: (?P<last_completed_seq>\d+)",
         ("Timeout at NCCL work",), "NCCL work progress", attach="only", window=20),
    _sig("nccl/heartbeat",
         r"Heartbeat monitor timed out|watchdog got stuck for (?P<stuck_s>\d+) seconds",
         ("Heartbeat monitor timed out", "watchdog got stuck"),
         "The NCCL watchdog itself hung", tier=3.0),
    _sig("nccl/duplicate-gpu",
         r"Duplicate GPU detected\s*:\s*rank (?P<rank_a>\d+) and rank (?P<rank_b>\d+) both on "
         r"CUDA device (?P<device>\w+)",
         ("Duplicate GPU",), "Two ranks use the same GPU", tier=0.5),
    _sig("nccl/no-gpus", r"ProcessGroupNCCL is only supported with GPUs, no GPUs found",
         ("only supported with GPUs",), "NCCL was asked to run without a GPU", tier=0.5),
    _sig("nccl/error",
         r"NCCL [Ee]rror(?: in: (?P<location>[^,]+),| (?P<code>\d+):) "
         r"(?P<kind>[a-z][a-z /]*?[a-z])(?=\s*\(run with|,|"
         r"\.|\s*$)(?:.*?NCCL version (?P<nccl_version>\d+(?:\.\d+)+(?:\+\w+(?:\.\d+)*)?))?",
         ("NCCL error", "NCCL Error"), "NCCL call failed", tier=3.0, key_field="kind"),
    _sig("nccl/error-kind",
         r"\bnccl(?P<kind_detail>SystemError|UnhandledCudaError|InternalError|InvalidUsage|"
         r"InvalidArgument|RemoteError)\b",
         ("nccl",), "NCCL error detail", attach="only", window=6),
    _sig("nccl/shm-segment",
         r"Error while creating shared memory segment (?P<shm_path>\S+) "
         r"\(size (?P<shm_size_bytes>\d+)\)",
         ("shared memory segment",), "NCCL could not create a shared-memory segment",
         attach="prefer", window=8, tier=2.0),
    _sig("nccl/cuda-failure", r"Cuda failure '(?P<cuda_error>[^']+)'", ("Cuda failure",),
         "A CUDA call inside NCCL failed", tier=2.5),
    _sig("nccl/network",
         r"NCCL WARN .*?(?:Got completion (?:from peer (?P<peer>\S+) )?with (?:error|status=)\s*"
         r"(?P<status>\d+)|(?P<closed>Connection closed by remote peer|Connection reset by peer)|"
         r"Call to (?P<call>ibv_\w+) failed|(?P<socket>socketProgress\w*|socketStartConnect)[^\n]*"
         r"(?:fail|closed|refused|abort))",
         ("NCCL WARN",), "NCCL network failure between ranks", tier=2.0),
    _sig("nccl/communicator-aborted",
         r"NCCL communicator was aborted(?: on rank (?P<rank>\d+))?(?:\.\s*Original reason for "
         r"failure was: (?P<reason>.+))?",
         ("communicator was aborted",), "NCCL communicator aborted", tier=3.5),
    _sig("nccl/operations-failed",
         r"Some NCCL operations have failed or timed out", ("NCCL operations have failed",),
         "NCCL took the process down after failed collectives", tier=3.5),
    _sig("nccl/unique-id-fetch",
         r"is setting up NCCL communicator and retrieving ncclUniqueId from \[(?P<from_rank>\d+)\]"
         r".*?(?:got error|error): (?P<reason>.+)",
         ("retrieving ncclUniqueId",), "A rank could not get the NCCL id from another rank",
         tier=3.0),
    _sig("nccl/store-timeout",
         r"Timed out after (?P<timeout_s>\d+) seconds waiting for clients\.\s*(?P<joined>\d+)/"
         r"(?P<world_size>\d+) clients joined",
         ("waiting for clients",), "Rendezvous timed out: not every rank joined", tier=3.0),
    _sig("nccl/gloo-timeout",
         r"Timed out waiting (?P<timeout_ms>\d+)ms for (?P<operation>\w+) operation to complete",
         ("Timed out waiting",), "Gloo collective timed out", tier=3.0),
    _sig("nccl/gloo-peer-closed", r"gloo.*?Connection closed by peer(?: \[(?P<peer>[^\]]+)\])?",
         ("Connection closed by peer",), "A peer process went away (Gloo)", tier=3.0),

    # ---- host memory ----
    _sig("host-oom/kernel-oom-killer",
         r"(?P<scope>Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?)"
         r": [Kk]ill(?:ed)? process (?P<pid>\d+) \((?P<process_name>[^)]*)\)",
         ("out of memory: Kill", "Out of memory: Kill", "Out of memory: kill",
          "oom_kill_allocating"),
         "The kernel's OOM killer killed a process", extract=_kernel_oom, group="oom-killer"),
    _sig("host-oom/killed-process",
         r"Killed process (?P<pid>\d+) \((?P<process_name>[^)]*)\)", ("Killed process",),
         "The kernel's OOM killer killed a process", extract=_kernel_oom, group="oom-killer",
         attach="prefer", window=4),
    _sig("host-oom/slurm-oom-kill",
         r"Detected (?P<events>\d+) oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )?"
         r"(?P<step>[\w.]+)|task (?P<task>\d+): Out Of Memory",
         ("oom-kill", "oom_kill", "Out Of Memory"), "Slurm's cgroup OOM handler killed the job"),
    _sig("host-oom/kubernetes-oomkilled", r"\bOOMKilled\b", ("OOMKilled",),
         "The container was OOMKilled"),
    _sig("host-oom/dataloader-killed",
         r"DataLoader worker \(pids?(?:\(s\))? (?P<pids>[\d, ]+)\)\s*(?:is killed by signal: "
         r"(?P<signal>Killed|Bus error)|exited unexpectedly)",
         ("DataLoader worker",), "A DataLoader worker process died", extract=_pids),
    _sig("host-oom/shared-memory",
         r"Unexpected bus error encountered in worker|insufficient shared memory \(shm\)|unable to "
         r"(?:write to file|open shared memory object) </?torch_[^>]*>|out of shared memory",
         ("bus error", "shared memory", "unable to write to file"),
         "Shared memory (/dev/shm) ran out for DataLoader workers", group="shm"),
    _sig("host-oom/cpu-allocator",
         r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to "
         r"allocate (?P<requested_bytes>\d+) bytes",
         ("DefaultCPUAllocator",), "PyTorch could not allocate host memory"),
    _sig("host-oom/numpy",
         rf"Unable to allocate (?P<requested>{SIZE}) for an array with shape (?P<shape>\([^)]*\))",
         ("Unable to allocate",), "NumPy could not allocate host memory",
         extract=_sizes_to_bytes("requested")),
    _sig("host-oom/memory-error", r"(?:^|[\]>]\s*|:\s)MemoryError(?::\s|\s*$)", ("MemoryError",),
         "Python ran out of host memory"),
    _sig("host-oom/sigkill",
         r"Signal 9 \(SIGKILL\) received by PID (?P<pid>\d+)", ("SIGKILL",),
         "A worker was killed with SIGKILL", tier=1.5),
    _sig("host-oom/shell-killed",
         r"^\s*Killed\s*$|line \d+:\s+(?P<pid>\d+) Killed\s+(?P<command>.+)", ("Killed",),
         "The job was killed (SIGKILL)", tier=1.5),
)

SIGNATURE_BY_ID = {s.id: s for s in SIGNATURES}
if len(SIGNATURE_BY_ID) != len(SIGNATURES):
    raise ValueError("duplicate signature id")
