"""What a matched signature means and what to do: pure functions of its numbers.

Each advisor returns an :class:`Advice` for one signature id (or a whole class). Texts name
the numbers they are based on, and remedies are lines a user can paste.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.explain.oom import complete_oom_numbers, diagnose_oom
from gpu_audit.explain.remedies import (
    LEGACY_VAR,
    UNIFIED_VAR,
    alloc_conf_export,
    alloc_conf_variables,
    fragmentation_remedy,
)
from gpu_audit.explain.signatures import Signature
from gpu_audit.explain.xid import RECOVERY_ACTION_SEVERITY, xid_info
from gpu_audit.model import Severity
from gpu_audit.units import fmt_bytes


@dataclass(frozen=True)
class AdviceContext:
    torch_version: str | None = None  # the torch the remedies are for (None: unknown)


@dataclass(frozen=True)
class Advice:
    title: str
    explanation: str
    remedy: str
    severity: Severity
    tier: float
    diagnosis: str | None = None
    numbers: dict[str, Any] = field(default_factory=dict)


Advisor = Callable[[Signature, dict[str, Any], AdviceContext], Advice]
_ADVISORS: dict[str, Advisor] = {}


def advisor(*keys: str) -> Callable[[Advisor], Advisor]:
    def register(func: Advisor) -> Advisor:
        for key in keys:
            _ADVISORS[key] = func
        return func
    return register


def advise(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    """The advice for ``sig``: its own advisor, else its class's, else its static texts."""
    func = _ADVISORS.get(sig.id) or _ADVISORS.get(sig.cls)
    if func is not None:
        return func(sig, numbers, ctx)
    explanation, remedy = _STATIC.get(sig.id, ("", ""))
    return _advice(sig, numbers, explanation, remedy)


def _advice(sig: Signature, numbers: dict[str, Any], explanation: str, remedy: str,
            **overrides: Any) -> Advice:
    return Advice(
        title=overrides.pop("title", sig.title), explanation=explanation, remedy=remedy,
        severity=overrides.pop("severity", sig.severity), tier=overrides.pop("tier", sig.tier),
        numbers=overrides.pop("numbers", numbers), **overrides)


def _size(numbers: dict[str, Any], key: str) -> str:
    return _size_text(numbers.get(key))


# --- shared remedy texts ------------------------------------------------------------------------

_REDUCE_MEMORY = (
    "Reduce what one step keeps on the GPU:\n"
    "- lower the batch size (keep the effective batch with gradient accumulation) or the "
    "sequence length;\n"
    "- enable activation checkpointing (torch.utils.checkpoint; "
    "model.gradient_checkpointing_enable() in transformers);\n"
    "- compute in bf16/fp16 with torch.autocast(\"cuda\", dtype=torch.bfloat16);\n"
    "- or shard the model and optimizer state across GPUs (FSDP, DeepSpeed ZeRO)."
)
_SCAN_OTHERS = (
    "Run `gpu-audit scan` to see every process holding GPU memory; stop the ones that should "
    "not be there, or give this job a free GPU with CUDA_VISIBLE_DEVICES."
)
_FIND_FAULTING_KERNEL = (
    "Rerun with CUDA_LAUNCH_BLOCKING=1 so the failing kernel raises at its own call site;\n"
    "run a small reproduction under `compute-sanitizer --tool memcheck python train.py`;\n"
    "switch off custom or compiled kernels (torch.compile, Triton, fused/flash attention) one "
    "at a time;\n"
    "check `sudo dmesg -T | grep -i xid`: Xid 48/79/94/95 mean the GPU, not the code."
)
_REBOOT_MISMATCH = (
    "Reboot the node (or stop every GPU process and reload the modules: `sudo rmmod "
    "nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia`); keep unattended "
    "upgrades off the driver (`sudo apt-mark hold 'nvidia-*' 'libnvidia-*'`)."
)
_TORCH_FOR_DRIVER = (
    "Install a torch wheel built for a CUDA version this driver supports (choose it at "
    "https://pytorch.org/get-started/locally/, e.g. `pip install torch --index-url "
    "https://download.pytorch.org/whl/cu118`), or update the NVIDIA driver."
)
_HOST_MEMORY = (
    "Lower DataLoader num_workers and prefetch_factor (every worker holds its own copy of "
    "Python objects: keep datasets in numpy arrays or memory-mapped files); load checkpoints "
    "with torch.load(path, mmap=True); raise the job's memory limit (Slurm --mem, Kubernetes "
    "resources.limits.memory); `gpu-audit scan` shows host memory and swap."
)
_SHM = (
    "Give the container a larger /dev/shm: `docker run --shm-size=16g ...` or `--ipc=host`; in "
    "Kubernetes mount an emptyDir with medium: Memory at /dev/shm; or lower num_workers."
)


# --- CUDA out of memory -------------------------------------------------------------------------

@advisor("cuda-oom/caching-allocator")
def _cuda_oom(sig: Signature, raw: dict[str, Any], ctx: AdviceContext) -> Advice:
    numbers = complete_oom_numbers(raw)
    diagnosis = diagnose_oom(numbers)
    req, gpu = _size(numbers, "requested_bytes"), numbers.get("gpu_index")
    on_gpu = f" on GPU {gpu}" if gpu is not None else ""
    if raw.get("requested_over_1eb"):
        diagnosis = "too-large"
    if diagnosis == "fragmentation":
        explanation = (
            f"PyTorch asked the driver for {req} more{on_gpu} and only "
            f"{_size(numbers, 'free_bytes')} was free. Its cache held "
            f"{_size(numbers, 'reserved_unallocated_bytes')} reserved but not allocated "
            f"({numbers['fragmentation_pct']}% of the {_size(numbers, 'reserved_bytes')} it had "
            f"reserved): enough for the request, but in pieces too small to use. This is "
            "fragmentation, not a model that is too big for the GPU.")
        remedy = (fragmentation_remedy(ctx.torch_version) + "\n"
                  "Set it in the job's environment before Python starts. If the job still runs "
                  "out of memory, it is near the limit: " + _REDUCE_MEMORY[0].lower()
                  + _REDUCE_MEMORY[1:])
        title = "CUDA out of memory: fragmentation"
    elif diagnosis == "other-processes":
        others = numbers.get("other_processes") or []
        if others:
            biggest = max(others, key=lambda p: p["used_bytes"] or 0)
            held = (f"Other processes held {_size(numbers, 'other_processes_bytes')} of the "
                    f"GPU's {_size(numbers, 'capacity_bytes')} (the largest, pid {biggest['pid']}, "
                    f"{_size_text(biggest['used_bytes'])})")
        else:
            held = (f"{_size(numbers, 'non_pytorch_bytes')} of the GPU's "
                    f"{_size(numbers, 'capacity_bytes')} was held outside this process's PyTorch "
                    "cache (other processes, or this process's own non-PyTorch allocations)")
        explanation = (
            f"{held}, while this job had {_size(numbers, 'reserved_bytes')} reserved. Its "
            f"request of {req}{on_gpu} failed with {_size(numbers, 'free_bytes')} free: without "
            "that memory it would have fitted.")
        remedy = _SCAN_OTHERS
        title = "CUDA out of memory: other processes hold the GPU"
    elif diagnosis == "memory-fraction":
        explanation = (
            f"A per-process memory fraction caps this process at {_size(numbers, 'allowed_bytes')}"
            f"; with {_size(numbers, 'reserved_bytes')} already reserved, the request of {req} "
            "would exceed it, so PyTorch refused it before asking the driver.")
        remedy = ("Raise or remove torch.cuda.set_per_process_memory_fraction(...) (or "
                  "per_process_memory_fraction in the allocator configuration); otherwise:\n"
                  + _REDUCE_MEMORY)
        title = "CUDA out of memory: per-process memory fraction reached"
    elif diagnosis == "too-large":
        capacity = numbers.get("capacity_bytes")
        requested = numbers.get("requested_bytes")
        if raw.get("requested_over_1eb") or (capacity and requested and requested > capacity):
            what = "more than 1 EB" if raw.get("requested_over_1eb") else req
            explanation = (
                f"A single request of {what} is larger than the whole GPU"
                f" ({_size(numbers, 'capacity_bytes')}). That is rarely a model that is slightly "
                "too big: usually a tensor with a wrong shape (an unbounded sequence length, a "
                "dimension multiplied by mistake) or a model that has to be sharded.")
            remedy = ("Check the shapes of the tensors created just before the failure (the "
                      "Python frames above the error).\n" + _REDUCE_MEMORY)
            title = "CUDA out of memory: one allocation larger than the GPU"
        else:
            unalloc = numbers.get("reserved_unallocated_bytes")
            slack = (f" and only {_size_text(unalloc)} of its cache was unused, so there was "
                     "nothing to defragment" if unalloc is not None else "")
            explanation = (
                f"PyTorch had {_size(numbers, 'allocated_bytes')} allocated to live tensors and "
                f"{_size(numbers, 'reserved_bytes')} reserved on a "
                f"{_size(numbers, 'capacity_bytes')} GPU; the next request of {req} did not fit "
                f"({_size(numbers, 'free_bytes')} free){slack}. The job's working set does not "
                "fit this GPU.")
            remedy = _REDUCE_MEMORY
            title = "CUDA out of memory: the job needs more memory than the GPU has"
    else:
        explanation = (
            "PyTorch's caching allocator ran out of GPU memory; the message in this log carries "
            "no numbers, so gpu-audit cannot tell fragmentation from a job that is too big.")
        remedy = (f"{_SCAN_OTHERS}\nIf the memory is this job's own: "
                  f"{fragmentation_remedy(ctx.torch_version)}\n"
                  f"and if it still fails:\n{_REDUCE_MEMORY}")
        title = "CUDA out of memory"
    return _advice(sig, numbers, explanation, remedy, title=title, diagnosis=diagnosis)


@advisor("cuda-oom/cuda-error")
def _cuda_oom_raw(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "A CUDA allocation outside PyTorch's caching allocator failed: creating the CUDA "
        "context, a cuBLAS/cuDNN/NCCL workspace, or a library's own cudaMalloc. The message "
        "has no numbers. At start-up it usually means the GPU was already full (another "
        "process, or several jobs sharing one GPU); later in a run it is an ordinary "
        "out-of-memory.")
    remedy = (f"{_SCAN_OTHERS}\nIf the memory is this job's own:\n{_REDUCE_MEMORY}\n"
              "If NCCL's buffers are the last straw, NCCL_BUFFSIZE (e.g. 2097152) shrinks them.")
    return _advice(sig, numbers, explanation, remedy, diagnosis="unknown")


@advisor("nvml-assert-oom/caching-allocator")
def _nvml_assert_oom(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    call = numbers.get("nvml_call") or "an NVML call"
    explanation = (
        "This RuntimeError is an ordinary CUDA out-of-memory. When PyTorch's caching allocator "
        "runs out of memory it asks NVML which processes use the GPU, to list them in the OOM "
        f"message; {call} failed, and the INTERNAL ASSERT replaced the OOM message. Its "
        "'please report a bug' is misleading, and so is blaming fragmentation or the allocator. "
        "Two things are wrong: the job ran out of GPU memory, and NVML does not work in this "
        "process: typically the NVIDIA driver was upgraded without a reboot (NVML library and "
        "kernel module differ), a container carries a libnvidia-ml that does not match the host "
        "driver, or MIG/restricted containers refuse process queries.")
    remedy = (
        "1. Fix NVML: run `nvidia-smi` (or `gpu-audit scan`); \"Driver/library version "
        "mismatch\" means: " + _REBOOT_MISMATCH + " In a container, use the host's driver "
        "libraries (NVIDIA Container Toolkit) instead of a copy in the image.\n"
        "2. Then treat it as an out-of-memory: rerun to get the real OOM message, and see its "
        "numbers with `gpu-audit explain`, or:\n" + _REDUCE_MEMORY + "\n"
        "PYTORCH_NO_NVML does not exist in PyTorch and changes nothing; "
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1 avoids the NVML call but switches the caching "
        "allocator off (very slow; for diagnosis only).")
    return _advice(sig, numbers, explanation, remedy, diagnosis="unknown")


# --- NVML unavailable ---------------------------------------------------------------------------

_NVML_MISMATCH = (
    "The NVML library (user space, installed with the driver) and the loaded NVIDIA kernel "
    "module have different versions: the driver was upgraded, often by unattended upgrades, "
    "while the old kernel module is still loaded. nvidia-smi and NVML fail until they match, "
    "and CUDA often does too.")


@advisor("nvml-unavailable/init-failed", "nvml-unavailable/container-cli",
         "nvml-unavailable/pynvml", "nvml-unavailable/nvrm-api-mismatch")
def _nvml_init(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    reason = str(numbers.get("reason") or numbers.get("kind") or numbers.get("text") or "")
    low = reason.lower()
    title = sig.title
    if ("mismatch" in low or sig.id == "nvml-unavailable/nvrm-api-mismatch"
            or "LibRmVersionMismatch" in reason):
        explanation, remedy = _NVML_MISMATCH, _REBOOT_MISMATCH
        client, kernel = numbers.get("client_version"), numbers.get("kernel_version")
        library = numbers.get("library_version")
        if client or kernel:
            explanation += (f" Here the user-space side is {client or 'unknown'} and the kernel "
                            f"module {kernel or 'unknown'}.")
        elif library:
            explanation += f" The NVML library here is {library}."
        title = "NVML: driver/library version mismatch"
    elif "unknown" in low:
        explanation = (
            "NVML started but could not talk to the GPUs. Inside a container this usually means "
            "it lost access to /dev/nvidia* (a `systemctl daemon-reload` on the host resets the "
            "device rules of running containers); on the host it points at a driver fault.")
        remedy = ("Restart the container; run `nvidia-smi` on the host; if the host fails too, "
                  "check `sudo dmesg -T | grep -i -e nvrm -e xid` and reboot.")
    elif "permission" in low:
        explanation = "This user cannot open the GPU device files (/dev/nvidia*)."
        remedy = ("Check `ls -l /dev/nvidia*` and the user's groups; in containers pass the "
                  "GPUs with the NVIDIA Container Toolkit (`--gpus all`).")
    elif "librarynotfound" in low or "library not found" in low or numbers.get("library"):
        explanation = ("libnvidia-ml.so.1 (NVML, part of the NVIDIA driver) could not be found: "
                       "no driver is installed, or the container was started without the "
                       "driver's libraries.")
        remedy = ("Install the NVIDIA driver on the host; in containers use the NVIDIA Container "
                  "Toolkit (`docker run --gpus all`) rather than copying driver libraries into "
                  "the image.")
    elif "notloaded" in low or "not loaded" in low:
        explanation = "The NVIDIA kernel module is not loaded, so NVML has no driver to talk to."
        remedy = ("`lsmod | grep nvidia`; reinstall the driver for the running kernel (DKMS) or "
                  "boot the kernel it was built for; Secure Boot can block unsigned modules.")
    else:
        explanation = f"NVML could not be initialised ({reason or 'no reason given'})."
        remedy = "Run `nvidia-smi` and `gpu-audit scan` to see the driver's state."
    return _advice(sig, numbers, explanation, remedy, title=title)


@advisor("nvml-unavailable/nvidia-smi-no-driver")
def _nvidia_smi_no_driver(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("missing"):
        explanation = ("nvidia-smi could not find libnvidia-ml.so: the driver's libraries are "
                       "missing.")
    else:
        explanation = (
            "nvidia-smi found no working NVIDIA driver: the kernel module is not loaded (not built "
            "for the running kernel after a kernel update, blocked by Secure Boot, or failed to "
            "load because the GPU is in a bad state).")
    remedy = ("`lsmod | grep nvidia` and `sudo dmesg -T | grep -i nvrm`; reinstall the driver "
              "for the running kernel (DKMS) or reboot into the kernel it was built for.")
    return _advice(sig, numbers, explanation, remedy)


@advisor("nvml-unavailable/torch-warning")
def _nvml_torch_warning(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "torch could not initialise NVML. Training can still run, but torch.cuda memory and "
        "utilisation queries fail, and if this job runs out of GPU memory the OOM report fails "
        "too: it turns into an NVML INTERNAL ASSERT instead of the real out-of-memory message.")
    remedy = ("Check with `nvidia-smi` or `gpu-audit scan`; a \"Driver/library version mismatch\" "
              "needs a reboot.")
    return _advice(sig, numbers, explanation, remedy)


@advisor("nvml-unavailable/nvml-assert")
def _nvml_assert_other(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    call = numbers.get("nvml_call") or "an NVML call"
    if "PeerToPeer" in str(numbers.get("source_file")):
        explanation = (
            f"With expandable_segments on a CUDA 12.4+ build, PyTorch asks NVML about peer/fabric "
            f"access on the first expandable allocation; {call} failed and the assert fired "
            "without any out-of-memory. NVML does not work in this process (usually a "
            "driver/library version mismatch).")
        remedy = (_REBOOT_MISMATCH + " Until then, expandable_segments can be left off: "
                  + alloc_conf_export("expandable_segments:False", ctx.torch_version))
    else:
        explanation = (f"PyTorch called NVML ({call}) and it failed; NVML does not work in this "
                       "process (usually a driver/library version mismatch after an upgrade).")
        remedy = "Run `nvidia-smi` or `gpu-audit scan`. " + _REBOOT_MISMATCH
    return _advice(sig, numbers, explanation, remedy)


# --- allocator configuration --------------------------------------------------------------------

KNOWN_ALLOC_KEYS = (
    "backend", "max_split_size_mb", "max_non_split_rounding_mb", "roundup_power2_divisions",
    "garbage_collection_threshold", "expandable_segments", "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register", "pinned_num_register_threads",
    "pinned_use_background_threads", "per_process_memory_fraction",
)


def _variables_text(ctx: AdviceContext) -> str:
    return " / ".join(alloc_conf_variables(ctx.torch_version))


@advisor("alloc-conf/deprecated-variable")
def _deprecated_variable(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        f"torch 2.9 and later print this for {LEGACY_VAR}. In 2.9.x the CUDA allocator still "
        f"reads only {LEGACY_VAR} ({UNIFIED_VAR} alone is silently ignored for CUDA there); from "
        f"2.10 {UNIFIED_VAR} is read. The warning itself does not change the run.")
    remedy = (f"Set both names to the same value, which works on every version and silences the "
              f"warning: export {UNIFIED_VAR}=\"${LEGACY_VAR}\"")
    return _advice(sig, numbers, explanation, remedy)


@advisor("alloc-conf/unrecognized-option")
def _unrecognized_option(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    option = str(numbers.get("option") or numbers.get("key") or "?")
    explanation = (f"The allocator configuration contains '{option}', which this torch does "
                   "not know, so it stopped at the first CUDA allocation.")
    if option == "expandable_segments":
        explanation += " expandable_segments needs torch 2.1 or newer."
    close = difflib.get_close_matches(option, KNOWN_ALLOC_KEYS, n=1)
    hint = f" Did you mean '{close[0]}'?" if close and close[0] != option else ""
    remedy = (f"Fix or remove '{option}' in {_variables_text(ctx)}.{hint} Options are "
              "key:value pairs separated by commas, e.g. expandable_segments:True,"
              "garbage_collection_threshold:0.8 (booleans are exactly True/False).")
    return _advice(sig, numbers, explanation, remedy)


@advisor("alloc-conf/value-too-small")
def _value_too_small(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    option = numbers.get("option", "max_split_size_mb")
    explanation = (f"{option} must be {numbers.get('rule', 'above 20')} MiB: torch up to 2.9 "
                   "requires more than 20, 2.10 and later accept 20.")
    remedy = (f"{alloc_conf_export(f'{option}:128', ctx.torch_version)}\n(any value of 21 or "
              "more works on every version; pick one just above your largest frequent "
              "allocation)")
    return _advice(sig, numbers, explanation, remedy)


@advisor("alloc-conf/malformed")
def _malformed(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("gc"):
        explanation = "garbage_collection_threshold must be a number strictly between 0 and 1."
    else:
        explanation = ("The allocator configuration string does not parse: it must be key:value "
                       "pairs separated by commas, booleans exactly True or False, lists in "
                       "brackets, and powers of two where the option asks for them.")
    remedy = (f"Fix {_variables_text(ctx)}, for example:\n"
              + alloc_conf_export("expandable_segments:True,garbage_collection_threshold:0.8",
                                  ctx.torch_version))
    return _advice(sig, numbers, explanation, remedy)


@advisor("alloc-conf/backend")
def _backend(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("backend must be native or cudaMallocAsync, and it is read once, when torch "
                   "loads: changing it later (os.environ after importing torch, or "
                   "_set_allocator_settings) trips an internal assert.")
    remedy = (f"Set {_variables_text(ctx)} in the environment before Python starts, e.g.\n"
              + alloc_conf_export("backend:cudaMallocAsync", ctx.torch_version))
    return _advice(sig, numbers, explanation, remedy)


@advisor("alloc-conf/ignored-options")
def _ignored_options(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("With backend:cudaMallocAsync the driver's stream-ordered allocator manages "
                   "memory, so max_split_size_mb, roundup_power2_divisions and "
                   "garbage_collection_threshold have no effect.")
    remedy = "Remove those options, or drop backend:cudaMallocAsync to use the native allocator."
    return _advice(sig, numbers, explanation, remedy)


@advisor("alloc-conf/expandable-unsupported")
def _expandable_unsupported(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("This platform lacks the CUDA virtual-memory support expandable segments need "
                   "(common on WSL2 and with older drivers), so the setting was ignored and "
                   "fragmentation remedies based on it do not apply here.")
    remedy = ("Use max_split_size_mb instead, or update the driver:\n"
              + alloc_conf_export("max_split_size_mb:128", ctx.torch_version))
    return _advice(sig, numbers, explanation, remedy)


# --- cuBLAS / cuDNN -----------------------------------------------------------------------------

_MEMORY_STATUSES = {
    "CUBLAS_STATUS_ALLOC_FAILED", "CUBLAS_STATUS_NOT_INITIALIZED", "CUDNN_STATUS_ALLOC_FAILED",
    "CUDNN_STATUS_NOT_INITIALIZED", "CUDNN_STATUS_INTERNAL_ERROR", "CUFFT_ALLOC_FAILED",
    "CUSOLVER_STATUS_ALLOC_FAILED", "CUSPARSE_STATUS_ALLOC_FAILED",
}
_UNSUPPORTED_STATUSES = {
    "CUBLAS_STATUS_NOT_SUPPORTED", "CUBLAS_STATUS_ARCH_MISMATCH", "CUBLAS_STATUS_INVALID_VALUE",
    "CUDNN_STATUS_NOT_SUPPORTED", "CUDNN_STATUS_BAD_PARAM", "CUDNN_STATUS_ARCH_MISMATCH",
}


@advisor("cublas-failure")
def _cublas(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    status = str(numbers.get("status") or "")
    message = str(numbers.get("message") or "").lower()
    memory = (status in _MEMORY_STATUSES or sig.id == "cublas-failure/cudnn-no-engine"
              or "allocation failed" in message or "not initialized" in message)
    unsupported = status in _UNSUPPORTED_STATUSES
    call = f" in {numbers['call']}" if numbers.get("call") else ""
    if memory:
        explanation = (
            f"The CUDA library could not create its handle or allocate its workspace{call}. "
            "cuBLAS, cuDNN and the other CUDA math libraries "
            "allocate outside PyTorch's cache, so this is almost always an "
            "out-of-memory in disguise (the GPU was already full); less often a broken CUDA "
            "or driver install.")
        remedy = (f"{_SCAN_OTHERS}\nThen reduce memory use:\n{_REDUCE_MEMORY}\nIf it fails on "
                  "the very first matrix multiply with a free GPU, check the driver and CUDA "
                  "install (`gpu-audit scan`).")
        return _advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="out-of-memory")
    if unsupported:
        explanation = (
            f"The call's data type, shape or layout is not supported{call} on this GPU or "
            "library version (for example bf16 before compute capability 8.0, fp8 before 8.9, "
            "or a tensor too large for 32-bit indexing).")
        remedy = ("Check dtype support for this GPU; try float32 to confirm; update torch; "
                  "split very large matrices.")
        return _advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="unsupported")
    explanation = (
        f"A CUDA library kernel failed while running{call}. CUDA reports errors "
        "asynchronously, so "
        "this is usually the first call to notice an earlier fault (a device-side assert, an "
        "out-of-range index in an earlier kernel) rather than a bug in the library.")
    remedy = _FIND_FAULTING_KERNEL
    return _advice(sig, numbers, explanation, remedy, tier=2.0, diagnosis="execution")


# --- driver, runtime, architecture --------------------------------------------------------------

@advisor("driver-mismatch/driver-too-old", "driver-mismatch/insufficient-driver")
def _driver_too_old(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    supports = (f" (the driver supports CUDA up to {numbers['driver_cuda_version']})"
                if numbers.get("driver_cuda_version") else "")
    explanation = (f"This torch was built for a newer CUDA than the installed NVIDIA driver "
                   f"supports{supports}, so CUDA cannot start.")
    return _advice(sig, numbers, explanation, _TORCH_FOR_DRIVER)


@advisor("driver-mismatch/arch-not-compiled", "driver-mismatch/no-kernel-image")
def _no_kernel(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    capability = numbers.get("capability")
    supported = numbers.get("supported")
    gpu = f"This GPU ({numbers.get('gpu_name') or 'unnamed'}, {capability})" if capability else (
        "This GPU")
    explanation = (f"{gpu} has no compiled kernels in the installed torch (or in an extension or "
                   "Triton kernel): the build is older than the GPU, or the GPU is older than "
                   "the oldest architecture the build supports.")
    if supported:
        explanation += f" This torch supports {supported}."
    remedy = ("Install a torch build that includes this architecture from "
              "https://pytorch.org/get-started/locally/ (recent GPUs need recent CUDA builds: "
              "sm_90 needs cu118 or later, sm_100/sm_120 need cu128 or later); rebuild custom "
              "extensions with TORCH_CUDA_ARCH_LIST set to include it.")
    return _advice(sig, numbers, explanation, remedy)


@advisor("driver-mismatch/gpu-not-supported-by-driver")
def _gpu_not_supported(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    release = (f" ({numbers['driver_version']})" if numbers.get("driver_version") else "")
    explanation = (f"The NVIDIA kernel driver{release} does not support this GPU: the GPU is "
                   "newer than the driver (update the driver), or older than the driver branch "
                   "supports (use a legacy driver branch).")
    remedy = ("Install a driver branch that lists this GPU (`nvidia-smi` stays unusable until "
              "then); check the kernel log (`sudo dmesg -T | grep -i nvrm`) for the PCI ID.")
    return _advice(sig, numbers, explanation, remedy)


@advisor("driver-mismatch/gpu-too-old")
def _gpu_too_old(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    minimum = numbers.get("minimum")
    explanation = (f"{numbers.get('gpu_name', 'This GPU')} has compute capability "
                   f"{numbers.get('capability')}, below the oldest this torch supports"
                   + (f" ({minimum})." if minimum else "."))
    remedy = "Use an older torch release that still supports this GPU, or a newer GPU."
    return _advice(sig, numbers, explanation, remedy)


_CUDA_INIT = {
    "802": ("Fabric Manager is not running (NVSwitch systems such as HGX/DGX): CUDA cannot "
            "initialise until it is.",
            "`sudo systemctl enable --now nvidia-fabricmanager` (its version must match the "
            "driver's)."),
    "803": ("The user-space CUDA driver (libcuda) does not match the kernel module: a "
            "cuda-compat package or a container's libcuda that differs from the host driver, or "
            "a driver upgrade without a reboot.",
            "Remove cuda-compat libraries from LD_LIBRARY_PATH, use the host's libcuda in "
            "containers, or reboot after a driver upgrade."),
    "804": ("CUDA forward-compatibility libraries (cuda-compat) are in use on a GPU that does "
            "not support them (GeForce and most workstation GPUs).",
            "Remove cuda-compat from LD_LIBRARY_PATH, or update the NVIDIA driver instead."),
    "999": ("CUDA failed to start with an unknown error; often the nvidia_uvm module is in a bad "
            "state (for example after suspend/resume).",
            "`sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm`, or reboot."),
    "100": ("CUDA sees no GPU: CUDA_VISIBLE_DEVICES hides them, or the container or job was "
            "given none.",
            "Check `echo $CUDA_VISIBLE_DEVICES` and `nvidia-smi -L`; request GPUs from the "
            "scheduler (Slurm --gpus, Kubernetes nvidia.com/gpu) or `docker run --gpus all`."),
}


@advisor("driver-mismatch/cuda-init", "driver-mismatch/no-driver")
def _cuda_init(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    text = str(numbers.get("text") or numbers.get("message") or "").lower()
    code = str(numbers.get("code") or "")
    if not code:
        code = ("802" if "not yet initialized" in text else "803" if "display driver" in text
                else "804" if "forward compatibility" in text else "100")
    if sig.id == "driver-mismatch/no-driver":
        explanation = ("No NVIDIA driver was found: the kernel module is not loaded, or the "
                       "container has no GPU access.")
        remedy = ("Run `nvidia-smi` on the host; in containers pass the GPUs (`docker run --gpus "
                  "all`, the NVIDIA device plugin in Kubernetes).")
    else:
        explanation, remedy = _CUDA_INIT.get(code, _CUDA_INIT["999"])
    return _advice(sig, numbers, explanation, remedy)


# --- kernel faults ------------------------------------------------------------------------------

_KERNEL_FAULT = (
    "The process's CUDA context is now unusable: every later CUDA call fails with the same "
    "error, and the other ranks' collectives time out waiting for this one. Kernels run "
    "asynchronously, so the Python stack trace usually points at a later call, not the kernel "
    "that faulted.")


@advisor("illegal-memory-access")
def _illegal(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if sig.id.endswith("misaligned-address"):
        what = ("A CUDA kernel accessed memory at an address not aligned for its data type "
                "(custom or vectorised kernels given a sliced or offset tensor).")
    elif sig.id.endswith("illegal-instruction"):
        what = ("A CUDA kernel executed an invalid instruction (a miscompiled or corrupted "
                "kernel, or code built for another architecture).")
    else:
        what = ("A CUDA kernel read or wrote an address it does not own: an out-of-range index "
                "in a custom, fused or compiled kernel (Triton, FlashAttention, torch.compile), "
                "mismatched tensor shapes passed to an extension, or, rarely, failing hardware.")
    return _advice(sig, numbers, f"{what} {_KERNEL_FAULT}", _FIND_FAULTING_KERNEL)


_ASSERT_HINTS = (
    ("n_classes", "a target label is outside [0, num_classes): check the labels against the "
                  "model's number of outputs (and ignore_index)"),
    ("index out of bounds", "an index (often a token id) is outside the dimension it indexes: "
                            "e.g. the tokenizer has more tokens than the embedding matrix "
                            "(model.resize_token_embeddings(len(tokenizer)))"),
    ("srcIndex < srcSelectDimSize", "an index passed to index_select/embedding is out of range "
                                    "(for example token ids beyond the vocabulary size)"),
    ("idx_dim >= 0 && idx_dim < index_size", "a gather/scatter index is out of range"),
    ("index >= -sizes", "an indexing tensor holds a value outside the indexed dimension"),
    ("input_val >= zero && input_val <= one", "BCELoss got inputs outside [0, 1]: apply a "
                                              "sigmoid, or use BCEWithLogitsLoss on logits"),
    ("target_val >= zero", "BCE targets are outside [0, 1]"),
    ("cumdist", "torch.multinomial got invalid probabilities (NaN, inf or negative): check the "
                "logits for NaN before sampling"),
    ("0 <= p", "torch.multinomial/bernoulli got a probability outside [0, 1] (NaN or inf "
               "upstream)"),
)


@advisor("device-assert")
def _device_assert(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    assertion = str(numbers.get("assertion") or "")
    hint = next((text for needle, text in _ASSERT_HINTS if needle in assertion), None)
    numbers = dict(numbers)
    if hint:
        numbers["hint"] = hint
    where = (f" in {numbers['source_file']}:{numbers['source_line']}"
             if numbers.get("source_file") else "")
    failed = f" (`{assertion}`)" if assertion else ""
    explanation = (
        f"A kernel checked a condition on the GPU and it failed{failed}{where}: PyTorch's way of "
        "raising an IndexError or ValueError inside a CUDA kernel." + (f" Likely: {hint}." if hint
                                                                         else "")
        + " " + _KERNEL_FAULT + " Later cuBLAS, cuDNN or NCCL errors are echoes of this one.")
    remedy = ("Run the same step on CPU (the same op raises a readable error with the offending "
              "value), or rerun with CUDA_LAUNCH_BLOCKING=1 to get the failing op's Python line; "
              "then fix the data or labels.")
    return _advice(sig, numbers, explanation, remedy)


# --- GPU hardware -------------------------------------------------------------------------------

_XID_TIER = {"hardware": 0.0, "informational": 0.5, "application": 1.5, "consequence": 2.5}


@advisor("gpu-hardware/xid", "gpu-hardware/xid-mention")
def _xid(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    info = xid_info(int(numbers.get("xid", 0)))
    numbers = dict(numbers, xid_mnemonic=info.mnemonic)
    severity = info.severity
    action = str(numbers.get("recovery_action") or "")
    if info.xid == 154 and action:
        severity = RECOVERY_ACTION_SEVERITY.get(action.lower(), Severity.WARNING)
    where = f" on the GPU at PCI {numbers['pci_bus_id']}" if numbers.get("pci_bus_id") else ""
    name = f", {numbers['process_name']}" if numbers.get("process_name") else ""
    who = f" (pid {numbers['pid']}{name})" if numbers.get("pid") else ""
    explanation = f"The NVIDIA driver logged Xid {info.xid}{where}{who}: {info.meaning}."
    if info.origin == "application":
        explanation += " It usually comes from the program's own kernels, not from the hardware."
    elif info.origin == "consequence":
        explanation += " It follows another failure; on its own it is not the cause."
    if action:
        explanation += f" Required recovery action: {action}."
    title = f"Xid {info.xid}: {info.meaning.split(':')[0]}"
    return _advice(sig, numbers, explanation, info.action, title=title, severity=severity,
                   tier=_XID_TIER.get(info.origin, 0.0))


_STATIC: dict[str, tuple[str, str]] = {
    "gpu-hardware/fallen-off-bus": (
        "The driver can no longer reach the GPU over PCIe (Xid 79): a PCIe link failure, a power "
        "or thermal event, or a failing GPU. Everything running on it died, and it stays unusable "
        "until it is reset, usually by a reboot.",
        xid_info(79).action),
    "gpu-hardware/uncorrectable-ecc": (
        "The GPU's memory returned data its ECC could not correct. Results computed on it since "
        "then cannot be trusted; the GPU needs a reset so the bad row or page is retired.",
        "Drain the node and reset the GPU or reboot; check `nvidia-smi -q -d "
        "ECC,ROW_REMAPPER,PAGE_RETIREMENT`; repeated uncorrectable errors mean replacing the GPU."),
    "gpu-hardware/nvlink-uncorrectable": (
        "An uncorrectable error on an NVLink connection between GPUs aborted the work using it.",
        xid_info(74).action),
    "gpu-hardware/rm-init-failed": (
        "The NVIDIA driver could not initialise a GPU (RmInitAdapter failed): failed hardware, a "
        "GPU that fell off the bus earlier, insufficient power, or a driver/firmware problem.",
        "Check `sudo dmesg -T | grep -i -e nvrm -e xid` around it; reboot; reseat the GPU and "
        "check its power cables; if it persists, the GPU or board needs service."),
    "gpu-hardware/launch-failure": (
        "A CUDA kernel crashed (the GPU's equivalent of a segfault): a bug in a kernel, often a "
        "custom or compiled one, or a hardware fault. An Xid in the kernel log at the same time "
        "tells which.",
        "Check `sudo dmesg -T | grep -i xid`: Xid 13/31/43 point at the program "
        "(CUDA_LAUNCH_BLOCKING=1, compute-sanitizer), Xid 48/79/94/95 and others at the GPU "
        "(drain the node and reset it)."),
    "gpu-hardware/launch-timeout": (
        "A kernel ran longer than the display watchdog allows: this GPU also drives a display.",
        "Run on a GPU with no display attached (stop the desktop/X server on it), or split the "
        "work into shorter kernels."),
    "gpu-hardware/unknown-error": (
        "CUDA reported an unspecified error. It usually follows a driver reset, a GPU that fell "
        "off the bus, or a crash of another process on the same GPU.",
        "Look for an Xid at the same time (`sudo dmesg -T | grep -i xid`) and run `gpu-audit "
        "scan`; if the GPU is missing or unusable, reset it or reboot."),
    # host memory
    "host-oom/slurm-oom-kill": (
        "Slurm's cgroup memory enforcement killed a task of the job: the job's --mem or "
        "--mem-per-cpu limit for host RAM was reached (not GPU memory).",
        "Raise --mem (or --mem-per-gpu) for the job, or use less host memory: " + _HOST_MEMORY),
    "host-oom/kubernetes-oomkilled": (
        "Kubernetes killed the container for exceeding its memory limit (exit code 137). A "
        "memory-backed /dev/shm counts toward that limit too.",
        "Raise resources.limits.memory for the pod, or use less host memory: " + _HOST_MEMORY),
    "host-oom/shared-memory": (
        "DataLoader workers pass batches to the main process through shared memory (/dev/shm), "
        "and it ran out; in containers /dev/shm is 64 MB unless configured. When the same worker "
        "was also reported 'killed by signal: Killed', the limit actually hit was RAM, and this "
        "hint is PyTorch's generic guess.",
        _SHM),
    "host-oom/cpu-allocator": (
        "PyTorch could not allocate host memory for a CPU tensor.", _HOST_MEMORY),
    "host-oom/numpy": ("NumPy could not allocate host memory for an array.", _HOST_MEMORY),
    "host-oom/memory-error": ("Python raised MemoryError: a host memory allocation failed.",
                              _HOST_MEMORY),
}


@advisor("host-oom/kernel-oom-killer", "host-oom/killed-process")
def _oom_killer(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    who = f"{numbers.get('process_name', 'a process')} (pid {numbers.get('pid', '?')}"
    if numbers.get("anon_rss_bytes") is not None:
        who += f", {_size_text(numbers['anon_rss_bytes'])} resident"
    who += ")"
    cgroup = "cgroup" in str(numbers.get("scope", "")).lower()
    where = ("The memory limit of its cgroup (container or job) was reached"
             if cgroup else "The host ran out of RAM")
    explanation = (
        f"{where} and the kernel's OOM killer killed {who}. This is host memory, not GPU memory: "
        "in training it usually comes from DataLoader workers (each holds its own copy of the "
        "dataset's Python objects), pinned-memory buffers, loading a whole checkpoint into RAM, "
        "or a leak that grows every step.")
    title = "The cgroup memory limit was hit (OOM killer)" if cgroup else (
        "The host ran out of RAM (OOM killer)")
    return _advice(sig, numbers, explanation, _HOST_MEMORY, title=title)


@advisor("host-oom/dataloader-killed")
def _dataloader_killed(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    signal = str(numbers.get("signal") or "")
    if signal == "Bus error":
        explanation = ("A DataLoader worker got SIGBUS writing to shared memory: /dev/shm is too "
                       "small (Docker's default is 64 MB).")
        return _advice(sig, numbers, explanation, _SHM,
                       title="A DataLoader worker ran out of shared memory")
    if signal == "Killed":
        explanation = (
            "A DataLoader worker was killed with SIGKILL, almost always by the kernel's OOM "
            "killer or the container's memory limit: the workers together used more host RAM "
            "than allowed. PyTorch's nearby hint about shared memory is a generic guess; with "
            "'Killed' the limit hit is RAM.")
        return _advice(sig, numbers, explanation, _HOST_MEMORY,
                       title="A DataLoader worker was killed for memory")
    explanation = ("A DataLoader worker died without an error of its own: usually the kernel OOM "
                   "killer (check `sudo dmesg -T | grep -i 'killed process'`), otherwise a crash "
                   "in a native library used by the dataset.")
    return _advice(sig, numbers, explanation, _HOST_MEMORY)


@advisor("host-oom/sigkill", "host-oom/shell-killed")
def _sigkill(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "The process was killed with SIGKILL (signal 9), which it cannot catch or report. It "
        "comes from outside: most often the kernel's OOM killer, otherwise the scheduler (a time "
        "or memory limit, preemption) or a manual `kill -9`.")
    remedy = ("Confirm with `sudo dmesg -T | grep -i 'killed process'` and the scheduler's job "
              "record (`sacct -j <job> -o State,MaxRSS,ReqMem`); if it was memory: " + _HOST_MEMORY)
    return _advice(sig, numbers, explanation, remedy)


# --- NCCL and collectives -----------------------------------------------------------------------

_COLLECTIVE_ECHO = (
    "A collective completes only when every rank joins it, so a timeout means some rank never "
    "got there: it crashed (look for an earlier error on that rank: an out-of-memory, an "
    "illegal memory access), it hung (a deadlock, slow data loading, rank 0 writing a "
    "checkpoint while the others wait), or the ranks issued different collectives. The rank "
    "that reports the timeout is usually the victim, not the culprit.")
_COLLECTIVE_REMEDY = (
    "Find the first error on any rank before the timeout: run `gpu-audit explain` on all ranks' "
    "logs together. If there is none, rerun with TORCH_NCCL_DESYNC_DEBUG=1 and "
    "TORCH_NCCL_TRACE_BUFFER_SIZE=2000 to see which rank is behind; raise the timeout "
    "(init_process_group(timeout=...)) only for steps that are legitimately long, such as "
    "checkpointing.")


@advisor("nccl/watchdog-timeout")
def _nccl_timeout(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    ranks = numbers.get("_ranks")
    if ranks:
        shown = ", ".join(str(r) for r in ranks[:8]) + (", …" if len(ranks) > 8 else "")
        rank = f"Ranks {shown}: the"
    else:
        rank = f"Rank {numbers['rank']}'s" if "rank" in numbers else "A"
    op = numbers.get("op_type", "collective")
    seq = f" (sequence number {numbers['seq_num']})" if "seq_num" in numbers else ""
    waited = (f" waited {numbers['ran_for_ms']} ms" if "ran_for_ms" in numbers else " timed out")
    limit = f", past its {numbers['timeout_ms']} ms timeout," if "timeout_ms" in numbers else ""
    explanation = (f"{rank} {op}{seq}{waited}{limit} and the NCCL watchdog aborted the job. "
                   + _COLLECTIVE_ECHO)
    title = f"NCCL {op} timed out" if op != "collective" else sig.title
    return _advice(sig, numbers, explanation, _COLLECTIVE_REMEDY, title=title)


_NCCL_KINDS = {
    "unhandled cuda error": (3.0, "A CUDA call inside NCCL failed. NCCL reports it after the "
                             "fact: the real cause is that CUDA error (a 'Cuda failure' line, or "
                             "an earlier out-of-memory or illegal memory access on this or "
                             "another rank).", _COLLECTIVE_REMEDY),
    "unhandled system error": (2.0, "A system call or external library inside NCCL failed: "
                               "network or socket setup (wrong interface, firewall), "
                               "InfiniBand/RDMA, or shared memory (/dev/shm too small in a "
                               "container).",
                               "Rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the "
                               "failing call; in Docker use --ipc=host or a large --shm-size; "
                               "choose the network with NCCL_SOCKET_IFNAME / NCCL_IB_HCA."),
    "remote process exited or there was a network error": (
        3.0, "A peer rank went away (or the network between them failed): this rank's error is an "
        "echo of a failure elsewhere.", _COLLECTIVE_REMEDY),
    "internal error": (2.0, "NCCL's internal check failed, often because nodes run different "
                       "NCCL versions or the topology is unusual.",
                       "Make NCCL (torch) versions identical on all nodes; rerun with "
                       "NCCL_DEBUG=INFO for the failing check."),
    "invalid usage": (1.0, "The program used NCCL incorrectly: two ranks on one GPU, "
                      "collectives or tensor sizes that differ between ranks, or a communicator "
                      "used after an abort.",
                      "Give every rank its own GPU (torch.cuda.set_device(local_rank)); make "
                      "every rank issue the same collectives in the same order."),
    "invalid argument": (1.0, "NCCL was called with an invalid argument (a tensor on the wrong "
                         "device, an unsupported dtype or reduction).",
                         "Check the devices and dtypes of the tensors passed to the collective."),
}


@advisor("nccl/error")
def _nccl_error(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    kind = str(numbers.get("kind") or "").lower()
    detail_kind = str(numbers.get("kind_detail") or "")
    tier, explanation, remedy = _NCCL_KINDS.get(kind, (
        3.0, "An NCCL call failed; NCCL errors usually follow a failure elsewhere (a crashed "
        "rank, a CUDA error) or a network problem.", _COLLECTIVE_REMEDY))
    if numbers.get("shm_path"):
        explanation = (
            f"NCCL could not create its shared-memory segment {numbers['shm_path']} "
            f"({_size_text(numbers.get('shm_size_bytes'))}): /dev/shm is too small or full, "
            "as in containers with Docker's 64 MB default.")
        remedy = ("Give the container a larger /dev/shm (`docker run --ipc=host` or "
                  "`--shm-size=16g`; in Kubernetes an emptyDir with medium: Memory at /dev/shm); "
                  "NCCL_SHM_DISABLE=1 avoids shared memory at some speed cost.")
        tier = 1.0
    if detail_kind:
        explanation += f" (NCCL: {detail_kind})"
    title = f"NCCL error: {kind}" if kind else sig.title
    return _advice(sig, numbers, explanation, remedy, tier=tier, title=title)


@advisor("nccl/heartbeat")
def _nccl_heartbeat(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("The NCCL watchdog thread itself stopped making progress, usually stuck in a "
                   "CUDA call on a hung GPU or behind a deadlocked collective; PyTorch kills the "
                   "process rather than hang forever.")
    remedy = _COLLECTIVE_REMEDY + " Check the GPUs for Xid errors (`sudo dmesg -T | grep -i xid`)."
    return _advice(sig, numbers, explanation, remedy)


@advisor("nccl/duplicate-gpu")
def _duplicate_gpu(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (f"Ranks {numbers.get('rank_a', '?')} and {numbers.get('rank_b', '?')} both run "
                   "on the same GPU; NCCL needs one GPU per rank.")
    remedy = ("Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before "
              "init_process_group (or pass device_id=...), and check CUDA_VISIBLE_DEVICES per "
              "process.")
    return _advice(sig, numbers, explanation, remedy)


@advisor("nccl/no-gpus")
def _nccl_no_gpus(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    return _advice(sig, numbers,
                   "The NCCL backend needs a GPU in every process; this one saw none.",
                   "Check CUDA_VISIBLE_DEVICES and the scheduler's GPU request; use "
                   "backend='gloo' for CPU-only runs.")


@advisor("nccl")
def _nccl_other(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    texts = {
        "nccl/shm-segment": (
            f"NCCL could not create a shared-memory segment ({numbers.get('shm_path', '?')}): "
            "/dev/shm is too small or full.",
            "Give the container a larger /dev/shm (`docker run --ipc=host` or "
            "`--shm-size=16g`); NCCL_SHM_DISABLE=1 avoids shared memory at some speed cost."),
        "nccl/cuda-failure": (
            f"A CUDA call inside NCCL failed with '{numbers.get('cuda_error', '?')}'.",
            _COLLECTIVE_REMEDY),
        "nccl/network": (
            "NCCL lost a connection between ranks. Either a peer process died (its own log has "
            "the first error) or the network failed (an InfiniBand link down or flapping, an "
            "RDMA error).",
            "Check the other ranks' logs first; then the links (`ibstat`, port error counters) "
            "and NCCL_DEBUG=INFO output; set NCCL_IB_HCA / NCCL_SOCKET_IFNAME if the wrong "
            "interface is used."),
        "nccl/communicator-aborted": (
            "The communicator was aborted because of an earlier failure"
            + (f" ({numbers['reason']})" if numbers.get("reason") else "") + ": an echo.",
            _COLLECTIVE_REMEDY),
        "nccl/operations-failed": (
            "After a failed or timed-out collective PyTorch takes the process down, since later "
            "GPU work could run on incomplete data: an echo of the failure reported before it.",
            _COLLECTIVE_REMEDY),
        "nccl/unique-id-fetch": (
            f"A rank could not get the NCCL id from rank {numbers.get('from_rank', 0)}: that rank "
            "died or hung before creating it (look at its log), or the store at "
            "MASTER_ADDR:MASTER_PORT is unreachable.",
            _COLLECTIVE_REMEDY),
        "nccl/store-timeout": (
            f"Only {numbers.get('joined', '?')} of {numbers.get('world_size', '?')} ranks reached "
            f"the rendezvous within {numbers.get('timeout_s', '?')} s: the others crashed on "
            "start-up, are still queued, or point at a different MASTER_ADDR/MASTER_PORT.",
            "Check the logs of the ranks that did not join; make MASTER_ADDR/MASTER_PORT and "
            "WORLD_SIZE identical everywhere."),
        "nccl/gloo-timeout": (
            f"A Gloo {numbers.get('operation', '')} waited {numbers.get('timeout_ms', '?')} ms for "
            "a peer. " + _COLLECTIVE_ECHO, _COLLECTIVE_REMEDY),
        "nccl/gloo-peer-closed": (
            "A peer process closed its connection, most likely because it crashed: look at its "
            "log.", _COLLECTIVE_REMEDY),
    }
    explanation, remedy = texts.get(sig.id, ("An NCCL failure.", _COLLECTIVE_REMEDY))
    return _advice(sig, numbers, explanation, remedy)


def _size_text(n: int | None) -> str:
    """Sizes written as PyTorch writes them, so numbers quoted from a log read the same."""
    return fmt_bytes(n, precision=2, missing="unknown")
