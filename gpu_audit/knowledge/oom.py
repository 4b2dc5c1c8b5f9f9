"""Out-of-memory messages: which kind of OOM an error is, the numbers it states, and the cause.

The one parser behind ``explain``, ``validate``'s OOM handling, ``retry_on_oom`` and the
monitor's snapshot on OOM. PyTorch's caching allocator has printed three shapes of message:

- up to 1.3: ``(GPU 0; T total capacity; A already allocated; F free; C cached)``, where
  "cached" is reserved minus allocated;
- 1.4 to 2.0: ``(GPU 0; T total capacity; A already allocated; F free; [X allowed; ]
  R reserved in total by PyTorch)``;
- 2.1 on: ``GPU 0 has a total capacity of T of which F is free. [Process p has M memory in
  use. | Including non-PyTorch memory, this process has M memory in use.] [X allowed; ] Of the
  allocated memory A is allocated by PyTorch, [with P allocated in private pools (e.g., CUDA
  Graphs), ]and U is reserved by PyTorch but unallocated.`` (2.1 spelled it "capacty"); the
  newest releases open with ``Out of memory. Tried to allocate`` instead of ``CUDA out of
  memory``.

The cudaMallocAsync backend (``PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync``) has its own
message, one number per line (c10/cuda/CUDAMallocAsyncAllocator.cpp, ``mallocAsync``):
``Allocation on device 0 would exceed allowed memory. (out of memory)`` then ``Currently
allocated : A``, ``Requested : R``, ``Device limit : T``, ``Free (according to CUDA): F`` and
``PyTorch limit (set by user-supplied memory fraction)``; it has no cache, so nothing is
reserved beyond what is allocated.

"Tried to allocate" is the segment size the allocator asked the driver for, not the tensor.
Every number uses the key names of :data:`OOM_KEYS`, whoever reports it.

The arithmetic is done once, here (:func:`oom_budget`, told in words by
:func:`budget_sentences`): the shortfall (request minus free), the memory held elsewhere (total
minus free minus this process, when the message states what this process holds), whether
freeing that memory would fit the request, and whether the cache's reserved-but-unallocated
bytes plus the free memory would (what expandable segments can use). ``explain`` (and through it
``validate``'s report) and ``snapshot`` diagnose and explain with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_audit.units import SIZE, pct, size_or_none

# Kinds of out-of-memory, from the most specific evidence to the least.
TORCH_OOM = "torch"  # torch.OutOfMemoryError from the caching allocator
MASKED_OOM = "masked"  # NVML assert raised while PyTorch was writing its OOM report
DEVICE_OOM = "device"  # "CUDA error: out of memory" from a raw cudaMalloc (context, kernels)
LIBRARY_OOM = "library"  # cuBLAS / cuDNN / cuFFT / cuSOLVER workspace allocation failed
HOST_OOM = "host"  # the CPU allocator or Python itself ran out of memory
CUDA_OOM_KINDS = (TORCH_OOM, MASKED_OOM, DEVICE_OOM)  # device memory ran out

# The caching allocator's own message, on every backend it is built for.
TORCH_OOM_PATTERN = (r"\b(?:(?P<backend>CUDA|HIP|XPU|MUSA|NPU) out of memory\b"
                     r"|Out of memory\. Tried to allocate|MPS backend out of memory"
                     r"|would exceed allowed memory\. \(out of memory\))")
# The caching allocator's message retyped, or lower-cased by a logger: its head with the
# request after it, wherever it stands ("cuda out of memory. tried to allocate 30.00 mib (gpu 0;
# ..."); without the rest, the head after its exception's name ("runtimeerror: cuda out of
# memory.", "torch.cuda.outofmemoryerror: cuda out of memory"), or alone on its line, after a log
# level at most ("ERROR cuda out of memory", "cuda out of memory."), and then not on a line that
# asks about it or advises ("how do I fix cuda out of memory?", "if you get runtimeerror: ...").
TORCH_OOM_RETYPED_PATTERN = (
    r"(?P<retyped__>[Cc]uda) [Oo]ut [Oo]f [Mm]emory\. [Tt]ried [Tt]o [Aa]llocate \d|"
    # (the head in lower case somewhere on the line first: a cheap test that spares every other
    # line the checks below)
    r"^(?=[^\n]*?[Cc]uda out of memory)"
    r"(?i:(?![^\n]*\b(?:how|why|what|where|fix\w*|solv\w*|avoid\w*|prevent\w*|if|whether|"
    r"you|your)\b)(?:[^\n]*?(?<![\w.])(?:[a-z_][\w.]*\.)?(?:runtimeerror|outofmemoryerror)\s*:"
    r"\s*(?-i:(?!CUDA\b))(?P<retyped>cuda) out of memory\b|"
    r"(?:>\s*)?[`\"'(\[]*(?:\*\*|__|_)?(?:[^\n]{0,80}?\b(?:error|critical|fatal)\b[\s\]):>|-]*)?"
    r"(?-i:(?!CUDA\b))(?P<retyped_>cuda) out of memory[\s.!`\"'*_)]*$))")
# The NVML assert fires inside reportProcessMemoryInfo, which runs only on the OOM path of the
# caching allocator (the same assert in PeerToPeerAccess.cpp is not an OOM).
MASKED_OOM_PATTERN = (r"NVML_SUCCESS == .{0,120}INTERNAL ASSERT FAILED"
                      r"(?=.{0,200}CUDACachingAllocator)")
# A raw allocation outside the caching allocator: runtime errors from every era of PyTorch,
# the driver API's and NCCL's spellings.
DEVICE_OOM_PATTERN = (r"(?:CUDA|HIP|cuda runtime|cuda) error(?: \(\d+\))?\s*:\s*out of memory"
                      # (the status's number against the word, and a comma: "cuda error(2),
                      # out of memory", as people retype it)
                      r"|\b(?:CUDA|Cuda|cuda) (?:runtime )?error ?\(2\)\s*[:,]\s*out of memory"
                      # CTranslate2 (faster-whisper, ...): "CUDA failed with error out of memory"
                      r"|\bCUDA failed with error out of memory"
                      # a C++ program's own spellings of the runtime's status: "CUDA runtime
                      # error: out of memory" (TurboMind), "Warp CUDA error 2: out of memory",
                      # the CUDA samples' "GPUassert: out of memory", TensorFlow's kernel
                      # launch status "Internal: out of memory"
                      r"|\b(?:CUDA|Cuda) (?:runtime )?[Ee]rror(?: 2)?:\s*out of memory"
                      r"|\bGPUassert: out of memory|\bInternal: out of memory"
                      # (not page-locked host memory: XLA's "failed to alloc N bytes on host:
                      # CUDA_ERROR_OUT_OF_MEMORY", a warning it falls back from)
                      r"|\berror=2 : out of memory|(?<!bytes on host: )CUDA_ERROR_OUT_OF_MEMORY"
                      r"|cudaErrorMemoryAllocation"
                      # ROCm's spellings of the same status (TensorFlow's rocm_driver: "failed
                      # to allocate 890.06M (933298432 bytes) from device: HIP_ERROR_OutOfMemory")
                      r"|HIP_ERROR_OutOfMemory|hipErrorOutOfMemory|hipErrorMemoryAllocation"
                      # a driver API call as PyCUDA names its failure ("cuMemAlloc failed: out
                      # of memory"); page-locked host memory (cuMemHostAlloc) is the host's
                      r"|\bcu(?!MemHost)[A-Z]\w{1,40} failed: out of memory"
                      r"|Cuda failure '?(?:out of memory|cudaErrorMemoryAllocation)"
                      # Caffe's CUDA_CHECK: status 2 is cudaErrorMemoryAllocation
                      r"|cudaSuccess \(2 vs\. 0\)\s+out of memory"
                      # the runtime's status after the call that failed (TensorRT-LLM: "CUDA
                      # runtime error in ::cudaMallocAsync(ptr, n, stream): out of memory"),
                      # Triton's launcher ("Triton Error [CUDA]: out of memory"), the CUDA project
                      # template's check ("Error out of memory at line 166 in file ops.cu"),
                      # TensorFlow's context creation ("... initialization on GPU:0 failed.
                      # Status: out of memory") and NCCL's buffers ("Failed to CUDA calloc 6291456
                      # bytes")
                      r"|\bCUDA runtime error in [\w:]{1,60}\([^\n]{0,160}?\):\s*out of memory"
                      r"|Triton Error \[CUDA\]: out of memory|\bError out of memory at line \d"
                      # (C++ checks that print the status's number or the place first: "CUDA
                      # error 2 at ggml-cuda.cu:6246: out of memory", "CUDA Error at src/x.cu:38 -
                      # out of memory", "Cuda error in file 'k.cu' in line 55 : out of memory.")
                      r"|\bCUDA [Ee]rror (?:2 )?at \S{1,200}?:\d+(?::| -) out of memory"
                      r"|\b(?:CUDA|Cuda) error in file '[^'\n]{1,200}' in line \d+ ?: out of memory"
                      # (miners' checks that name the function: "CUDA error in func init at
                      # line 126 out of memory", "Cuda error in func 'search' at line 365 : out
                      # of memory."; a method's qualified name, ethminer's "CUDA error in func
                      # dev::eth::CUDAMiner::initEpoch_internal at line 123 out of memory on
                      # CUDA device 01:00.0")
                      r"|\b(?:CUDA|Cuda) error in func '?\w{1,80}(?:::\w{1,80}){0,8}'? at line "
                      r"\d+ ?:? out of memory"
                      # (lolMiner's, which names its source file and line, "CUDA error in
                      # CudaProgram.cu line 373 : out of memory", also retyped without them)
                      r"|\b(?:CUDA|Cuda|cuda) error in \w{1,40}(?:\.cuh?)?"
                      r"(?: (?:at )?line \d+)? ?:? out of memory"
                      r"|implicit initialization on GPU:\d+ failed\. Status: out of memory"
                      # (OpenCV's CUDA modules: "error: (-217:Gpu API call) out of memory in
                      # function 'allocate'")
                      r"|\(-217:Gpu API call\) out of memory"
                      # (ONNX Runtime's CUDA provider: "CUDA failure 2: out of memory ; GPU=0";
                      # LightGBM's CUDA build: "[LightGBM] [Fatal] [CUDA] out of memory")
                      r"|\bCUDA failure 2: out of memory|\[CUDA\] out of memory"
                      # (a C++ check that prints the call, then its source file and line and the
                      # runtime's words after an arrow: "kmcuda.cc:456 -> out of memory")
                      r"|\b\w{1,80}\.(?:cu|cuh|cc|cpp|cxx|h|hpp):\d{1,6} -> out of memory\b"
                      r"|\bFailed to CUDA calloc(?: async)? \d+ bytes"
                      # (jaxlib's GPU kernels: "operation gpuGetLastError() failed: out of memory")
                      r"|\boperation gpu\w{1,40}\([^)\n]{0,80}\) failed: out of memory"
                      # (miners' checks that print the function in angle brackets, its line and
                      # the runtime's words quoted: xmrig's CUDA plugin "thread #0 failed with
                      # error <randomx_prepare>:45 \"out of memory\"", xmrig-nvidia's "[CUDA]
                      # Error gpu 1: <cryptonight_extra_cpu_init>:193 \"out of memory\"", and
                      # its exception's text, "[CUDA] Error: out of memory")
                      r"|<\w{1,80}>:\d{1,6} \"out of memory\"|\[CUDA\] Error: out of memory"
                      # (the check of "CUDA by Example" that many C++ programs copied, the
                      # runtime's words, then the file and line: "out of memory in
                      # src/acc/cuda/allocator.cuh at line 436 (error-code 2)"; a CUDA source
                      # or a GPU directory's: a host program may say the same of its malloc)
                      r"|\bout of memory in (?=\S{0,200}?(?i:cuda|gpu|\.cuh? ))"
                      r"\S{1,200}?\.(?:cuh?|cpp|cc|cxx|c|hpp|h) at line \d"
                      # (a program's GPU component named before the runtime's words, with the
                      # step that failed between them or not: "GPUEngine: out of memory",
                      # "CudaWorker: Launch: out of memory")
                      r"|\b(?:GPU|Gpu|CUDA|Cuda)[A-Z][a-z][A-Za-z]{0,30}(?:: [A-Z][A-Za-z]{1,30})?"
                      r": out of memory\b")
LIBRARY_OOM_PATTERN = (r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUFFT_ALLOC_FAILED"
                       r"|CUSOLVER_STATUS_ALLOC_FAILED|CUSPARSE_STATUS_ALLOC_FAILED")
HOST_OOM_PATTERN = r"DefaultCPUAllocator: (?:can't|not enough memory)"

_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (TORCH_OOM, re.compile(TORCH_OOM_PATTERN)),
    (MASKED_OOM, re.compile(MASKED_OOM_PATTERN, re.S)),
    (DEVICE_OOM, re.compile(DEVICE_OOM_PATTERN)),
    (LIBRARY_OOM, re.compile(LIBRARY_OOM_PATTERN)),
    (HOST_OOM, re.compile(HOST_OOM_PATTERN)),
)

# A request that would have fitted into the cache's free bytes plus the device's free bytes,
# while those cached-but-free bytes are at least this share of what PyTorch reserved, is a
# fragmentation failure: defragmenting (expandable segments) gives real headroom. Below it,
# the job is simply at the limit of the GPU and the next allocation would fail anyway.
FRAGMENTATION_MIN_PCT = 10.0
# Other processes worth blaming hold at least this share of the GPU.
OTHER_PROCESSES_MIN_PCT = 5.0
# Without per-process lines (before 2.1), memory outside this process's cache beyond this
# share of the GPU is more than a CUDA context and library workspaces account for.
NON_PYTORCH_MIN_PCT = 20.0

OOM_KEYS = (
    "requested_bytes", "gpu_index", "capacity_bytes", "free_bytes", "allowed_bytes",
    "allocated_bytes", "reserved_bytes", "reserved_unallocated_bytes", "private_pool_bytes",
    "process_bytes", "other_processes", "other_processes_bytes", "non_pytorch_bytes",
    "held_elsewhere_bytes", "shortfall_bytes", "fragmentation_pct",
)

# Case is ignored: people retype a message in lower case ("tried to allocate 30.00 mib (gpu 0;
# 8.00 gib total capacity; ...") and its sizes are still its sizes.
_FIELDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("requested_bytes", rf"Tried to allocate ({SIZE})|\bRequested +: ({SIZE})"),
        ("gpu_index", r"\(GPU (\d+);|\bGPU (\d+) has a total capac"
                      r"|Allocation on device (\d+) would exceed"),
        ("capacity_bytes", rf"({SIZE}) total capacity|has a total capac\w*ty of ({SIZE})"
                           rf"|Device limit +: ({SIZE})"),
        ("free_bytes", rf"({SIZE}) free;|of which ({SIZE}) is free"
                       rf"|Free \(according to CUDA\): ({SIZE})"),
        ("allowed_bytes", rf"({SIZE}) allowed;"),
        ("allocated_bytes",
         rf"({SIZE}) already allocated|Of the allocated memory ({SIZE}) is allocated by PyTorch"
         rf"|Currently allocated +: ({SIZE})"),
        # cudaMallocAsync keeps no cache: what it has allocated is all it holds
        ("reserved_bytes",
         rf"({SIZE}) reserved in total by PyTorch|Currently allocated +: ({SIZE})"),
        ("reserved_unallocated_bytes",
         rf"({SIZE}) is reserved by PyTorch but unallocated|({SIZE}) cached\)"),
        ("private_pool_bytes", rf"with ({SIZE}) allocated in private pools"),
        ("process_bytes", rf"this process has ({SIZE}) memory in use"),
    )
)
_PROCESS = re.compile(rf"\bProcess (\d+) has ({SIZE}) memory in use", re.IGNORECASE)


# --- kinds -----------------------------------------------------------------------------------


def oom_kind(exc: BaseException) -> str | None:
    """The kind of out-of-memory ``exc`` is (``TORCH_OOM``, ``MASKED_OOM``, ...), or ``None``.

    Recognised by class name and message, so torch never has to be imported to ask.
    """
    for cls in type(exc).__mro__:
        if cls.__name__ == "OutOfMemoryError" and cls.__module__.startswith("torch"):
            return TORCH_OOM
    if isinstance(exc, MemoryError):
        return HOST_OOM
    if not isinstance(exc, RuntimeError):
        return None
    return oom_kind_of_text(str(exc))


def oom_kind_of_text(text: str) -> str | None:
    """The kind of out-of-memory an error message describes, or ``None``."""
    for kind, pattern in _KINDS:
        if pattern.search(text):
            return kind
    return None


# --- numbers ---------------------------------------------------------------------------------


def oom_numbers(text: str) -> dict[str, Any]:
    """Every number ``text`` states or implies, under :data:`OOM_KEYS` names (unknown left out)."""
    numbers = complete_oom_numbers(extract_oom_fields(text))
    return {key: value for key, value in numbers.items() if value is not None}


def extract_oom_fields(text: str, fields: Sequence[tuple[str, re.Pattern[str]]] = (),
                       process: re.Pattern[str] | None = None) -> dict[str, Any]:
    """Every OOM number present in ``text`` (a message, or one line of a wrapped message):
    PyTorch's wording, or the ``fields`` and ``process`` patterns given (a translation's)."""
    fields = fields or _FIELDS
    found: dict[str, Any] = {}
    for name, pattern in fields:
        match = pattern.search(text)
        if match is None:
            continue
        raw = next(group for group in match.groups() if group is not None)
        found[name] = int(raw) if name == "gpu_index" else size_or_none(raw)
    processes = [{"pid": int(pid), "used_bytes": size_or_none(size)}
                 for pid, size in (process or _PROCESS).findall(text)]
    if processes:
        found["processes"] = processes
    return found


def complete_oom_numbers(raw: dict[str, Any]) -> dict[str, Any]:
    """All OOM keys (unknown ones None), with the derivable ones derived."""
    numbers: dict[str, Any] = {key: raw.get(key) for key in OOM_KEYS}
    allocated, reserved = numbers["allocated_bytes"], numbers["reserved_bytes"]
    unallocated = numbers["reserved_unallocated_bytes"]
    if reserved is None and allocated is not None and unallocated is not None:
        reserved = numbers["reserved_bytes"] = allocated + unallocated
    if unallocated is None and allocated is not None and reserved is not None:
        unallocated = numbers["reserved_unallocated_bytes"] = max(reserved - allocated, 0)
    if unallocated is not None:
        numbers["fragmentation_pct"] = pct(unallocated, reserved)
    others = _other_processes(raw.get("processes") or [], numbers)
    if raw.get("processes"):
        numbers["other_processes"] = others
        numbers["other_processes_bytes"] = sum(p["used_bytes"] or 0 for p in others)
    capacity, free = numbers["capacity_bytes"], numbers["free_bytes"]
    if capacity is not None and free is not None and reserved is not None:
        numbers["non_pytorch_bytes"] = max(capacity - free - reserved, 0)
    numbers["held_elsewhere_bytes"] = _held_elsewhere(numbers)
    requested = numbers["requested_bytes"]
    if requested is not None and free is not None:
        numbers["shortfall_bytes"] = max(requested - free, 0)
    return numbers


def _held_elsewhere(numbers: dict[str, Any]) -> int | None:
    """Memory of the GPU that neither is free nor belongs to this process.

    With "this process has M memory in use" (2.1 on) it is total - free - M, whatever the other
    processes are called; else the sum of the other processes PyTorch listed."""
    capacity, free = numbers["capacity_bytes"], numbers["free_bytes"]
    process = numbers["process_bytes"]
    if capacity is not None and free is not None and process is not None:
        return max(capacity - free - process, 0)
    return numbers["other_processes_bytes"]


def _other_processes(processes: list[dict[str, Any]], numbers: dict[str, Any]) -> list[dict]:
    """The listed processes minus this one.

    When PyTorch recognises its own PID it prints "this process has ..." and lists only the
    others. In a container NVML reports host PIDs, so the job lists itself as "Process N";
    then the entry holding at least what PyTorch reserved is this process.
    """
    if numbers["process_bytes"] is not None or numbers["reserved_bytes"] is None:
        return list(processes)
    reserved = numbers["reserved_bytes"]
    candidates = [p for p in processes if (p["used_bytes"] or 0) >= reserved]
    if not candidates:
        return list(processes)
    self_entry = min(candidates, key=lambda p: p["used_bytes"])
    return [p for p in processes if p is not self_entry]


# --- cause -----------------------------------------------------------------------------------


# What this process held when the request failed: with none of these nor the free memory, a
# message states no figure that "too-large" could rest on.
HELD_KEYS = ("allocated_bytes", "reserved_bytes", "reserved_unallocated_bytes", "process_bytes")


@dataclass(frozen=True)
class OomBudget:
    """The arithmetic of one out-of-memory, done once for ``explain``, ``validate`` and
    ``snapshot``: what was asked, what was free, what was held elsewhere, what the cache had
    reserved but not allocated, and what each of those would have made fit."""

    requested: int | None
    capacity: int | None
    free: int | None
    reserved: int | None
    unallocated: int | None
    held_elsewhere: int | None  # memory neither free nor this process's
    # True when held_elsewhere is other processes' for sure (2.1's "this process has", or the
    # processes listed); False when it is only "outside this process's cache" (before 2.1)
    elsewhere_is_others: bool = False

    @property
    def shortfall(self) -> int | None:
        if self.requested is None or self.free is None:
            return None
        return max(self.requested - self.free, 0)

    def _fits(self, extra: int | None) -> bool | None:
        if self.requested is None or self.free is None or extra is None:
            return None
        return self.free + extra >= self.requested

    @property
    def fits_if_elsewhere_freed(self) -> bool | None:
        """Would the request have fitted had the memory held elsewhere been free?"""
        return self._fits(self.held_elsewhere)

    @property
    def fits_in_cache_and_free(self) -> bool | None:
        """Would it have fitted into the free memory plus the cache's unallocated bytes (what
        expandable segments can put together)?"""
        return self._fits(self.unallocated)

    @property
    def cache_alone_fits(self) -> bool | None:
        if self.requested is None or self.unallocated is None:
            return None
        return self.unallocated >= self.requested

    @property
    def larger_than_gpu(self) -> bool:
        return bool(self.capacity and self.requested and self.requested > self.capacity)

    def elsewhere_matters(self) -> bool:
        """Is the memory held elsewhere large enough to blame, and would freeing it fit the
        request? (Unknown free memory: large enough is enough.)"""
        if not self.capacity or self.held_elsewhere is None:
            return False
        share = OTHER_PROCESSES_MIN_PCT if self.elsewhere_is_others else NON_PYTORCH_MIN_PCT
        return (self.held_elsewhere >= share / 100.0 * self.capacity
                and self.fits_if_elsewhere_freed is not False)

    def fragmented(self) -> bool:
        """Would defragmenting the cache have made room: free + unallocated covers the request,
        and the unallocated bytes are a real share of what the cache reserved?"""
        return bool(self.fits_in_cache_and_free and self.reserved and self.unallocated
                    and self.unallocated >= FRAGMENTATION_MIN_PCT / 100.0 * self.reserved)


def oom_budget(numbers: dict[str, Any]) -> OomBudget:
    """The arithmetic of the figures ``numbers`` (as :func:`complete_oom_numbers` returns)."""
    exact = numbers.get("held_elsewhere_bytes")
    return OomBudget(
        requested=numbers.get("requested_bytes"), capacity=numbers.get("capacity_bytes"),
        free=numbers.get("free_bytes"), reserved=numbers.get("reserved_bytes"),
        unallocated=numbers.get("reserved_unallocated_bytes"),
        held_elsewhere=exact if exact is not None else numbers.get("non_pytorch_bytes"),
        elsewhere_is_others=exact is not None)


def diagnose_oom(numbers: dict[str, Any]) -> str:
    """fragmentation | too-large | other-processes | memory-fraction | unknown.

    "unknown" when the message states no request, or nothing beside it to judge it by (neither
    the free memory nor what this process held), unless the request exceeds the whole GPU.
    """
    budget = oom_budget(numbers)
    reserved, allowed = budget.reserved, numbers.get("allowed_bytes")
    if budget.requested is None:
        return "unknown"
    if budget.larger_than_gpu:
        return "too-large"
    if allowed is not None and reserved is not None and reserved + budget.requested > allowed:
        return "memory-fraction"
    if budget.elsewhere_matters():
        return "other-processes"
    if budget.fragmented():
        return "fragmentation"
    if budget.free is None and all(numbers.get(key) is None for key in HELD_KEYS):
        # Only the request's size (and perhaps the GPU's): nothing says what did not fit, so
        # fragmentation, other processes and a job too big for the GPU cannot be told apart.
        return "unknown"
    return "too-large"


def budget_sentences(numbers: dict[str, Any], fmt: Callable[[int | None], str]) -> list[str]:
    """The arithmetic of an out-of-memory in words, one sentence per fact, sizes written by
    ``fmt``: the shortfall, the memory held elsewhere and whether freeing it would fit the
    request, and whether the cache's unallocated bytes plus the free memory would."""
    b = oom_budget(numbers)
    out: list[str] = []
    if b.requested is None or b.free is None:
        return out
    out.append(f"The request of {fmt(b.requested)} found {fmt(b.free)} free: "
               f"{fmt(b.shortfall)} short.")
    if b.held_elsewhere is not None and b.capacity is not None and (
            b.fits_if_elsewhere_freed
            or b.held_elsewhere >= OTHER_PROCESSES_MIN_PCT / 100.0 * b.capacity):
        out.append(_elsewhere_sentence(b, numbers, fmt))
    if b.unallocated is not None:
        together = b.free + b.unallocated
        alone = ("on its own enough for the request" if b.cache_alone_fits
                 else "less than the request on its own")
        verdict = ("enough: defragmenting the cache (expandable segments) would make it fit"
                   if b.fits_in_cache_and_free else
                   "still short of the request: defragmenting the cache alone would not help")
        out.append(f"Its cache held {fmt(b.unallocated)} reserved but unallocated, {alone}; "
                   f"with the {fmt(b.free)} free that makes {fmt(together)}, {verdict}.")
    return out


def _elsewhere_sentence(b: OomBudget, numbers: dict[str, Any],
                        fmt: Callable[[int | None], str]) -> str:
    assert b.held_elsewhere is not None and b.free is not None
    if b.elsewhere_is_others and numbers.get("process_bytes") is not None:
        where = (f"held outside this process (the GPU's {fmt(b.capacity)} minus "
                 f"{fmt(b.free)} free minus this process's {fmt(numbers['process_bytes'])})")
    elif b.elsewhere_is_others:
        where = "held by the other processes PyTorch listed"
    else:
        where = (f"held outside this process's PyTorch cache (the GPU's {fmt(b.capacity)} "
                 f"minus {fmt(b.free)} free minus {fmt(b.reserved)} reserved): other processes, "
                 "or this process's CUDA context and libraries")
    named = holders_list(numbers.get("other_processes") or numbers.get("gpu_processes") or [],
                         fmt)
    # The holders follow the arithmetic's parenthesis as a clause, not a second parenthesis.
    held = f"{fmt(b.held_elsewhere)} was {where}" + (f", by {named}" if named else "")
    if b.fits_if_elsewhere_freed:
        return f"{held}; with it freed the request would have fitted."
    return f"{held}; even with it freed the request would not have fitted."


def holders_text(processes: list[dict[str, Any]], fmt: Callable[[int | None], str],
                 most: int = 4) -> str:
    """``" (pid 12 python 1.20 GiB, ...)"``: the processes a log or a scan names as holding
    the GPU, largest first; empty when none is named."""
    listed = holders_list(processes, fmt, most)
    return f" ({listed})" if listed else ""


def holders_list(processes: list[dict[str, Any]], fmt: Callable[[int | None], str],
                 most: int = 4) -> str:
    """``"pid 12 python 1.20 GiB, ..."`` (see :func:`holders_text`); empty when none."""
    if not processes:
        return ""
    ranked = sorted(processes, key=lambda p: -(p.get("used_bytes") or 0))
    parts = []
    for p in ranked[:most]:
        name = f" {p['name']}" if p.get("name") else ""
        size = f" {fmt(p['used_bytes'])}" if p.get("used_bytes") is not None else ""
        parts.append(f"pid {p['pid']}{name}{size}")
    more = f", and {len(ranked) - most} more" if len(ranked) > most else ""
    return f"{', '.join(parts)}{more}"
