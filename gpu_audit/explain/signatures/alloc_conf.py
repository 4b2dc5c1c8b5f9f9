"""The allocator configuration is wrong, or torch ignores part of it.

``PYTORCH_CUDA_ALLOC_CONF`` (and, from torch 2.9, ``PYTORCH_ALLOC_CONF``) configures PyTorch's
caching allocator. torch refuses a string it cannot parse, an option it does not know, or a
value below its minimum; it warns about options that do nothing under the chosen backend or
platform, and about the deprecated variable name. `gpu-audit scan` checks the same settings
before a job starts.

Why it matters: a refused string stops the run at its first CUDA allocation, after the model
has loaded; an ignored option leaves the run without the setting someone relied on.

Example: ``RuntimeError: Unrecognized CachingAllocator option: expandable_segments``
(a torch older than the option).

Fix: the remedies name the variable(s) the torch in question reads (``--torch-version``, else
the installed one) and give the corrected ``export`` line; for the deprecation warning, set
both names to the same value.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from gpu_audit.explain.signatures.guards import unless_words
from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Signature,
    advice,
    document_class,
    fixed,
    named,
    signature,
)
from gpu_audit.knowledge.allocator import (
    CUDA_VAR,
    EXPANDABLE_CONFLICTS,
    EXPANDABLE_CONFLICTS_FIXED_IN,
    HIP_VAR,
    KEYS,
    NEW_VAR,
    NO_CACHING_VAR,
    alloc_conf_export,
    alloc_conf_variables,
    deprecation_alias_release,
    deprecation_warning_releases,
    expandable_conflicts,
    raw_settings,
    with_settings,
)
from gpu_audit.model import Severity

CLASS = document_class("alloc-conf", __doc__)
# The variables' names, from their one declaration: the old ones torch deprecates, and all.
_OLD_VARS = f"{re.escape(CUDA_VAR)}|{re.escape(HIP_VAR)}"
_ANY_VAR = f"{_OLD_VARS}|{re.escape(NEW_VAR)}"


def _variables_text(ctx: AdviceContext) -> str:
    return " / ".join(alloc_conf_variables(ctx.torch_version))


@signature("alloc-conf/deprecated-variable",
           rf"(?P<variable>{_OLD_VARS}) is deprecated, use {re.escape(NEW_VAR)}",
           ("is deprecated",), "PYTORCH_CUDA_ALLOC_CONF is deprecated in this torch",
           severity=Severity.WARNING, tier=5.0,
           example="[W1122 08:00:01 AllocatorConfig.cpp:28] Warning: PYTORCH_CUDA_ALLOC_CONF is "
           "deprecated, use PYTORCH_ALLOC_CONF instead (function operator())")
def _deprecated_variable(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        f"torch {deprecation_warning_releases()} print this once per process when only "
        f"{CUDA_VAR} is set; from {deprecation_alias_release()} the old name is an alias "
        f"again, with no warning. In 2.9.x the CUDA allocator still reads only {CUDA_VAR} "
        f"({NEW_VAR} alone is silently ignored for CUDA there); from 2.10 {NEW_VAR} is read. "
        "The warning itself does not change the run.")
    remedy = (f"Set both names to the same value, which works on every version and silences the "
              f"warning: export {NEW_VAR}=\"${CUDA_VAR}\"")
    return advice(sig, numbers, explanation, remedy)


@signature("alloc-conf/unrecognized-option",
           r"Unrecognized CachingAllocator option: (?P<option>[^\s,]+)|Unrecognized key "
           r"'(?P<key>[^']+)' in (?P<scope>\w+) allocator config",
           ("Unrecognized",),
           "The allocator configuration names an option this torch does not know", tier=0.0,
           example="RuntimeError: Unrecognized CachingAllocator option: expandable_segments")
def _unrecognized_option(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    option = str(numbers.get("option") or numbers.get("key") or "?")
    explanation = (f"The allocator configuration contains '{option}', which this torch does "
                   "not know, so it stopped at the first CUDA allocation.")
    if option == "expandable_segments":
        explanation += " expandable_segments needs torch 2.1 or newer."
    close = difflib.get_close_matches(option, list(KEYS), n=1)
    hint = f" Did you mean '{close[0]}'?" if close and close[0] != option else ""
    remedy = (f"Fix or remove '{option}' in {_variables_text(ctx)}.{hint} Options are "
              "key:value pairs separated by commas, e.g. expandable_segments:True,"
              "garbage_collection_threshold:0.8 (booleans are exactly True/False).")
    return advice(sig, numbers, explanation, remedy)


@signature("alloc-conf/value-too-small",
           r"CachingAllocator option (?P<option>\w+) too small, must be (?P<rule>[<>]=?\s*\d+)",
           ("too small",), "An allocator option value is below its minimum", tier=0.0,
           example="RuntimeError: CachingAllocator option max_split_size_mb too small, must be "
           "> 20")
def _value_too_small(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    option = numbers.get("option", "max_split_size_mb")
    explanation = (f"{option} must be {numbers.get('rule', 'above 20')} MiB: torch up to 2.9 "
                   "requires more than 20, 2.10 and later accept 20.")
    remedy = (f"{alloc_conf_export(f'{option}:128', ctx.torch_version)}\n(any value of 21 or "
              "more works on every version; pick one just above your largest frequent "
              "allocation)")
    return advice(sig, numbers, explanation, remedy)


@signature("alloc-conf/malformed",
           r"Error parsing (?:CachingAllocator settings, expected (?P<expected>\S+)|the allocator "
           r"config)|Index out of "
           r"bounds in ConfigTokenizer|Expected a single True/False argument for (?P<option>\w+)|"
           r"For roundups, the (?:divisions|intervals) ha(?:s|ve) to be power of 2|"
           r"(?P<gc>garbage_collect(?:ion)?_threshold) (?:too small|too big|is invalid)|Number "
           r"of register threads has to be power of 2",
           ("CachingAllocator", "ConfigTokenizer", "True/False", "roundups", "garbage_collect",
            "register threads", "allocator config"),
           "The allocator configuration string is malformed", tier=0.0,
           example="RuntimeError: Error parsing CachingAllocator settings, expected :")
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
    return advice(sig, numbers, explanation, remedy)


@signature("alloc-conf/backend",
           r"Unknown allocator backend|Allocator backend parsed at runtime != allocator backend "
           r"parsed at load time",
           ("llocator backend",), "The allocator backend setting is invalid or was set too late",
           tier=0.0,
           example="RuntimeError: Unknown allocator backend, options are native and "
           "cudaMallocAsync")
def _backend(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("backend must be native or cudaMallocAsync, and it is read once, when torch "
                   "loads: changing it later (os.environ after importing torch, or "
                   "_set_allocator_settings) trips an internal assert.")
    remedy = (f"Set {_variables_text(ctx)} in the environment before Python starts, e.g.\n"
              + alloc_conf_export("backend:cudaMallocAsync", ctx.torch_version))
    return advice(sig, numbers, explanation, remedy)


@signature("alloc-conf/async-unsupported",
           r"cudaMallocAsync does not (?:yet )?support (?P<feature>[A-Za-z_][\w:]*)|"
           # a request (an issue's title) for the operation the backend lacks, by its API name
           r"cudaMallocAsync support for (?P<feature_>[a-z]+[A-Z]\w*)|"
           # (... in the other order: "support checkPoolLiveAllocations for cudaMallocAsync")
           r"\bsupport (?P<feature__>[a-z]+[A-Z]\w*) (?:for|in|with|on) cudaMallocAsync\b",
           ("cudaMallocAsync does not", "cudaMallocAsync support for", " cudaMallocAsync"),
           "A feature the cudaMallocAsync allocator backend does not have", tier=0.0,
           example="RuntimeError: cudaMallocAsync does not yet support recordHistory. If you "
           "need it, please file an issue describing your use case.")
def _async_unsupported(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    feature = numbers.get("feature") or "this feature"
    explanation = (
        f"The job runs PyTorch's allocator with backend:cudaMallocAsync, which does not "
        f"implement {feature}. The program (or a library it calls: memory history for "
        "snapshots, CUDA graphs' private pools, memory fractions) asked for it, and the "
        "allocator configuration made that impossible.")
    remedy = (f"Drop backend:cudaMallocAsync from {_variables_text(ctx)} (the native allocator "
              "supports it), e.g.\n" + alloc_conf_export("expandable_segments:True",
                                                         ctx.torch_version)
              + f"\nor stop calling {feature} while the async backend is in use.")
    return advice(sig, numbers, explanation, remedy)


# Julia's CUDA.jl picks its memory pool (JULIA_CUDA_MEMORY_POOL) when the package is
# precompiled, and refuses at start a run whose variable names another: "Cannot use memory pool
# 'binned' when CUDA.jl was precompiled for memory pool 'split'."
@signature("alloc-conf/julia-memory-pool",
           r"\bCannot use memory pool '(?P<pool>\w{1,30})' when CUDA\.jl was precompiled for "
           r"memory pool '(?P<precompiled_pool>\w{1,30})'",
           ("when CUDA.jl was precompiled",),
           "CUDA.jl refused a memory pool other than the one it was precompiled for", tier=0.0,
           extract=named,
           example="ERROR: InitError: Cannot use memory pool 'binned' when CUDA.jl was "
           "precompiled for memory pool 'split'.")
def _julia_memory_pool(sig: Signature, numbers: dict[str, Any],
                       ctx: AdviceContext) -> Advice:
    pool, built = numbers.get("pool", "another pool"), numbers.get("precompiled_pool")
    explanation = (
        f"JULIA_CUDA_MEMORY_POOL asks CUDA.jl for the '{pool}' memory pool, but the package was "
        f"precompiled with {f'the {built!r} pool' if built else 'another pool'} and fixes its "
        "choice then: the run stops while CUDA.jl loads, before any GPU work.")
    remedy = (f"Set JULIA_CUDA_MEMORY_POOL={built or '<the precompiled pool>'} (or unset it) to "
              f"run as precompiled; to use '{pool}', remove CUDA.jl's precompiled cache "
              "(~/.julia/compiled/v1.*/CUDA) and precompile again with the variable set "
              "(`julia -e 'using Pkg; Pkg.precompile()'`).")
    return advice(sig, numbers, explanation, remedy)


# PyTorch's refusal of the backend in a build that has none: built with CUDA before 11.4, or for
# ROCm, whose HIP build says the same in its own source (HIPMallocAsyncAllocator.cpp).
@signature("alloc-conf/async-backend-missing",
           r"\bCannot use (?:cuda|hip)MallocAsyncAllocator with (?:cuda|hip|CUDA|HIP) < "
           r"(?P<needs>\d+\.\d+)",
           ("MallocAsyncAllocator with",),
           "This torch build has no cudaMallocAsync allocator backend", tier=0.0, extract=named,
           example="  what():  Cannot use cudaMallocAsyncAllocator with cuda < 11.4.")
def _async_backend_missing(sig: Signature, numbers: dict[str, Any],
                           ctx: AdviceContext) -> Advice:
    explanation = (
        "The job asked for PyTorch's cudaMallocAsync allocator backend (backend:cudaMallocAsync "
        "in the allocator configuration, or an application's option that sets it, such as "
        "ComfyUI's cuda-malloc), but this torch build has no such backend: it was built with "
        f"CUDA older than {numbers.get('needs', '11.4')}, or for ROCm. The process stops at its "
        "first GPU allocation.")
    return advice(sig, numbers, explanation, _ASYNC_REMEDY)


@signature("alloc-conf/ignored-options",
           r"backend:cudaMallocAsync ignores (?P<options>[^.(]+)", ("cudaMallocAsync ignores",),
           "Allocator options ignored under backend:cudaMallocAsync", severity=Severity.WARNING,
           tier=5.0, alone_root=True,
           example="[W CUDAAllocatorConfig.cpp:29] Warning: backend:cudaMallocAsync ignores "
           "max_split_size_mb,roundup_power2_divisions, and garbage_collect_threshold. "
           "(function parseArgs)")
def _ignored_options(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("With backend:cudaMallocAsync the driver's stream-ordered allocator manages "
                   "memory, so max_split_size_mb, roundup_power2_divisions and "
                   "garbage_collection_threshold have no effect.")
    remedy = "Remove those options, or drop backend:cudaMallocAsync to use the native allocator."
    return advice(sig, numbers, explanation, remedy)


@signature("alloc-conf/expandable-unsupported",
           r"(?P<option>expandable_segments) not supported on this platform",
           ("expandable_segments not supported",),
           "expandable_segments is not supported here and was ignored",
           severity=Severity.WARNING, tier=4.0, alone_root=True,
           example="[W1120 11:02:12.000000000 CUDACachingAllocator.cpp:823] Warning: "
           "expandable_segments not supported on this platform (function operator())")
def _expandable_unsupported(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("This platform lacks the CUDA virtual-memory support expandable segments need "
                   "(common on WSL2 and with older drivers), so the setting was ignored and "
                   "fragmentation remedies based on it do not apply here.")
    remedy = ("Use max_split_size_mb instead, or update the driver:\n"
              + alloc_conf_export("max_split_size_mb:128", ctx.torch_version))
    return advice(sig, numbers, explanation, remedy)


@signature("alloc-conf/expandable-ipc-kernel",
           r"kernel on this machine does not support the (?P<syscall>pidfd_getfd) syscall"
           r"(?:[^\n]{0,80}?\b(?P<option>expandable_segments)\b)?",
           ("pidfd_getfd",),
           "expandable_segments needs a system call this kernel lacks", tier=0.0,
           example="RuntimeError: The kernel on this machine does not support the pidfd_getfd "
           "syscall needed to use IPC for CUDA tensors when expandable_segments:True is set. "
           "Consider using expandable_segments:False via torch.cuda.memory._set_allocator_settings"
           "('expandable_segments:False') for this allocation.")
def _expandable_ipc_kernel(sig: Signature, numbers: dict[str, Any],
                           ctx: AdviceContext) -> Advice:
    explanation = (
        "Sharing a CUDA tensor with another process (IPC: a serving engine's workers, "
        "torch.multiprocessing) from memory in expandable segments needs the pidfd_getfd "
        "system call, which Linux has from 5.6 on; this machine's kernel is older. The setting "
        "may come from the program itself (a framework that sets expandable_segments:True in "
        "its code overrides the environment).")
    remedy = ("Turn expandable segments off for the processes that share tensors (and in any "
              "code that sets them), or run on a kernel 5.6 or newer, e.g.\n"
              + alloc_conf_export("expandable_segments:False", ctx.torch_version))
    return advice(sig, numbers, explanation, remedy)


# An RDMA library registering GPU memory with the network adapter and failing with EFAULT
# ("RDMA buffer MR registration failed: Bad address", "ibv_reg_mr failed: Bad address"): memory
# that expandable segments map through CUDA's virtual memory API cannot be pinned through the
# older peer-memory path, only through DMA-BUF. An error where the log sets expandable segments;
# without them it is context (a buffer on the host, a driver without GPUDirect RDMA).
@signature("alloc-conf/expandable-rdma-registration",
           r"\b(?:(?:RDMA )?(?:buffer )?MR registration|memory registration|ibv_reg_(?:dmabuf_)?"
           r"mr(?:\(\))?)[^\n]{0,60}?\b(?:failed|error)\b[^\n]{0,40}?\bBad address\b",
           ("MR registration", "memory registration", "ibv_reg_"),
           "RDMA could not register GPU memory from expandable segments", tier=0.0,
           example="RDMA buffer MR registration failed: Bad address")
def _expandable_rdma(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if "expandable_segments:true" not in str(ctx.facts.get("alloc_conf") or "").lower():
        return advice(sig, numbers, (
            "Registering a buffer with the RDMA adapter failed with 'Bad address' (EFAULT): the "
            "adapter's driver could not pin that memory. For GPU memory this means no "
            "GPUDirect RDMA path to it (nvidia-peermem not loaded, no DMA-BUF support), or "
            "memory the older peer-memory path cannot pin, such as PyTorch's expandable "
            "segments; the log does not set those."),
            "Load nvidia-peermem or use a stack with DMA-BUF registration; if the job sets "
            "expandable_segments:True anywhere, turn it off for the buffers it registers.",
            title="RDMA memory registration failed (Bad address)", severity=Severity.INFO,
            tier=5.0)
    explanation = (
        "The job sets expandable_segments:True, and registering a GPU buffer with the RDMA "
        "adapter failed with 'Bad address': expandable segments map memory through CUDA's "
        "virtual memory API, which the peer-memory path (nvidia-peermem) cannot pin; only "
        "DMA-BUF registration can. Communication libraries that allocate their RDMA buffers with "
        "torch (torch.zeros, torch.empty) fail this way while the setting is on.")
    remedy = ("Turn expandable segments off while the library allocates its RDMA buffers (or "
              "for the job), or use a library and driver that register through DMA-BUF:\n"
              + alloc_conf_export("expandable_segments:False", ctx.torch_version))
    return advice(sig, numbers, explanation, remedy)


# The log names the cudaMallocAsync backend: its name (a startup line that prints the device
# with its allocator, "... : cudaMallocAsync"), or an application's option for it ("cuda-malloc",
# "--disable-cuda-malloc"; "cudaMalloc" alone is the plain CUDA call, not the backend).
_ASYNC_NAMED = (r"\b(?:cudaMallocAsync|cuda-malloc)\b|"
                # an application's setting for it in words ("Use CUDA malloc for memory
                # allocation", "disable cuda malloc")
                r"(?i:\b(?:use|using|disabled?|disabling|enabled?|enabling)\s+cuda[ -]malloc\b)")
_ASYNC_NAMED_RE = re.compile(_ASYNC_NAMED)


def _async_named_on_line(_match: re.Match[str], line: str) -> dict[str, Any]:
    """The backend's name anywhere on the error's line, before it too ("the cuda-malloc
    default causes CUDA error: operation not supported"); outside the match, so that a quote
    of the error alone is still a quote."""
    named = _ASYNC_NAMED_RE.search(line)
    return {"async_named": named[0]} if named else {}


def _async_named(numbers: dict[str, Any], ctx: AdviceContext) -> bool:
    """Does the log say the job runs the cudaMallocAsync backend (on the error's own line, in
    another line, or in the allocator configuration it set)?"""
    return bool(numbers.get("async_named") or ctx.facts.get("async_allocator")
                or ctx.facts.get("async_default_app")
                or "cudaMallocAsync" in str(ctx.facts.get("alloc_conf") or ""))


@signature("alloc-conf/async-operation-unsupported",
           r"CUDA error: operation not supported", ("CUDA error: operation not supported",),
           "The GPU or its driver cannot run the cudaMallocAsync allocator backend", tier=0.0,
           extract=_async_named_on_line,
           example="RuntimeError: CUDA error: operation not supported")
def _async_operation_unsupported(sig: Signature, numbers: dict[str, Any],
                                 ctx: AdviceContext) -> Advice:
    if not _async_named(numbers, ctx):
        # the same error has other causes (a call the platform lacks): context, not a verdict
        return advice(sig, numbers, (
            "A CUDA call failed with 'operation not supported'. With PyTorch the usual cause is "
            "the cudaMallocAsync allocator backend on a GPU or driver without stream-ordered "
            "allocation (older cards, some virtualised GPUs); the log does not name that "
            "backend."), _ASYNC_REMEDY, title="CUDA error: operation not supported",
            severity=Severity.INFO, tier=5.0)
    explanation = (
        f"The job runs PyTorch's allocator with the cudaMallocAsync backend ({_async_where(ctx)}), "
        "and a CUDA call failed with 'operation not supported': this GPU or its driver cannot "
        "do the stream-ordered allocation that backend is built on (older cards, some "
        "virtualised GPUs and drivers). The native allocator works there.")
    return advice(sig, numbers, explanation, _ASYNC_REMEDY)


_ASYNC_REMEDY = (
    "Turn the async backend off: remove backend:cudaMallocAsync from PYTORCH_CUDA_ALLOC_CONF "
    "(or set backend:native), and turn off any option of the application that selects it "
    "(for example a --disable-cuda-malloc flag); then restart the process.")


def _async_where(ctx: AdviceContext) -> str:
    """How the log says the job runs the async backend."""
    if ctx.facts.get("async_allocator") or not ctx.facts.get("async_default_app"):
        return "the log names it"
    return (f"{ctx.facts['async_default_app']} selects it by default, with its cuda-malloc "
            "option")


# An application's own warning that the card it runs on cannot do the backend it turned on
# (ComfyUI's "this card most likely does not support cuda-malloc"): before any CUDA call fails.
@signature("alloc-conf/async-card-warning",
           r"\b(?:this|the|your) (?:card|GPU|device) (?:most likely |probably |may |might )?"
           r"(?:does not|doesn't|do not|don't|cannot|can't|might not|may not) support "
           r"(?P<async_named>cuda-malloc|cudaMallocAsync)\b",
           ("cuda-malloc", "cudaMallocAsync"),
           "The application warns that this GPU cannot run the cudaMallocAsync backend it uses",
           severity=Severity.WARNING, tier=4.0, alone_root=True, extract=named,
           example='WARNING: this card most likely does not support cuda-malloc, if you get "CUDA '
           'error" please run ComfyUI with: --disable-cuda-malloc')
def _async_card_warning(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "The application turned PyTorch's cudaMallocAsync allocator backend on (its cuda-malloc "
        "option) and warns that this GPU most likely cannot run it (older cards, some "
        "data-centre and virtualised GPUs): the first allocation that needs it fails with "
        "'CUDA error: operation not supported' or another CUDA error.")
    return advice(sig, numbers, explanation, _ASYNC_REMEDY)


# The writer's words for a program, or an extension of it, that stopped working once the
# cudaMallocAsync backend was on, by its name or by the option applications turn it on with
# ("with --cuda-malloc parameter the face-swap extension not works", "cudaMallocAsync breaks
# the upscaler"); not the option that turns it off, nor a condition or advice to the reader.
ASYNC_FAILS_TOLD = (
    unless_words("if|whether|unless|you|your|should|try|make sure") + r"(?:"
    r"(?:(?<!disable-)(?<!disable )(?<!disabling )(?<!no-)\bcuda-malloc\b|\bcudaMallocAsync\b)"
    r"[^\n]{0,100}?\b(?i:not work(?:s|ing)?|(?:does|do|did)(?: not|n'?t) work|won'?t work|"
    r"stop(?:s|ped)? working|no longer works?|breaks?|broke|crash(?:es|ed)?|fails?|failed)\b"
    # ... and the same told from the other side: the program ran only once the option that
    # turns the backend off was there ("Did not work until I added --disable-cuda-malloc",
    # "passing --disable-cuda-malloc fixed it")
    r"|\b(?i:(?:did|does|would|could)(?: not|n'?t) (?:work|run|start|load)|(?:was|kept) "
    r"(?:failing|crashing)|failed|crashed)\b[^\n]{0,60}?\b(?i:until|till|unless) [^\n]{0,40}?"
    r"(?:--|\b)disable-cuda-malloc\b"
    r"|(?:--|\b)disable-cuda-malloc\b`?(?: (?:flag|option|argument|parameter))?"
    r"[^\n.?]{0,30}?\b(?i:fixed|solved|resolved|fixes|solves) (?:it|this|that|the (?:issue|"
    r"problem|errors?|crash(?:es)?))\b)")


fixed("alloc-conf/async-fails-told", ASYNC_FAILS_TOLD, ("cuda-malloc", "cudaMallocAsync"),
      "The program fails with the cudaMallocAsync allocator backend on (told in the writer's "
      "words)", tier=3.0,
      example="After I added --cuda-malloc to the launch options the face-swap extension "
      "stopped working.",
      explanation="The writer says the program, or an extension of it, stopped working once "
      "PyTorch's cudaMallocAsync allocator backend was turned on (an application's cuda-malloc "
      "option sets backend:cudaMallocAsync). That backend hands allocation to the driver's "
      "stream-ordered allocator: older GPUs and some drivers cannot run it, and code that "
      "relies on the native caching allocator (CUDA graphs, its memory statistics and "
      "snapshots, libraries with their own memory handling such as ONNX Runtime next to "
      "torch) fails under it.",
      remedy="Run without it: drop the application's --cuda-malloc option (or pass its "
      "--disable-cuda-malloc, where it turns the backend on by default), and remove "
      "backend:cudaMallocAsync from PYTORCH_CUDA_ALLOC_CONF; then restart the process.")


@signature("alloc-conf/async-backend-named", _ASYNC_NAMED,
           ("cudaMallocAsync", "cuda-malloc", "CUDA malloc", "cuda malloc", "CUDA Malloc"),
           "The log names the cudaMallocAsync allocator backend", severity=Severity.INFO,
           tier=5.0, fact=True, extract=lambda match, _line: {"async_allocator": match[0]},
           example="Device: cuda:0 NVIDIA GeForce GTX 970 : cudaMallocAsync")
def _async_backend_named(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    return advice(sig, numbers, "The log names the cudaMallocAsync allocator backend; failures "
                  "that depend on it say so.", "Nothing to do by itself.")


@signature("alloc-conf/setting",
           rf"(?:{_ANY_VAR})[\"']?\]?\s*=\s*[\"']?(?P<alloc_conf>\w+:[^\s\"'`]+)",
           ("ALLOC_CONF",), "The allocator configuration this job set",
           severity=Severity.INFO, tier=5.0, fact=True,
           example='export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True,max_split_size_mb:32"')
def _setting(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (f"The log sets the allocator configuration "
                   f"{numbers.get('alloc_conf', '?')}; failures that depend on it name it.")
    return advice(sig, numbers, explanation, "Nothing to do by itself.")


@signature("alloc-conf/expandable-assert",
           r"(?<![\w>.-])(?P<assertion>!?[\w>.-]{0,200}expandable_segment\w*[^\n]{0,40}?)"
           r" INTERNAL ASSERT FAILED"
           r"(?: at \"?(?P<source_file>[^\"\s:]+)\"?:?(?P<source_line>\d+)?)?",
           ("expandable_segment",),
           "expandable_segments conflicts with other allocator options", tier=0.0,
           example='RuntimeError: !block->expandable_segment_ INTERNAL ASSERT FAILED at '
           '"../c10/cuda/CUDACachingAllocator.cpp":2814, please report a bug to PyTorch.')
def _expandable_assert(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    numbers = dict(numbers)
    conf = ctx.facts.get("alloc_conf")
    conflicts = expandable_conflicts(raw_settings(conf)) if conf else []
    if isinstance(numbers.get("source_file"), str):
        numbers["source_file"] = numbers["source_file"].rsplit("/", 1)[-1]
    fixed_in = ".".join(str(n) for n in EXPANDABLE_CONFLICTS_FIXED_IN)
    if conflicts:
        numbers["alloc_conf"] = conf
        numbers["conflicting_options"] = conflicts
        named = " and ".join(conflicts)
        explanation = (
            f"The log sets {conf}: expandable_segments together with {named}. Before torch "
            f"{fixed_in} the caching allocator then treats expandable segments like ordinary "
            "ones when it frees or splits blocks near the memory limit, and this internal "
            "assert fires: a configuration conflict, not a bug to report, usually at a moment "
            "when memory was nearly full.")
        kept = with_settings(conf, dict.fromkeys(conflicts))
        remedy = (f"Drop {named} (expandable segments already avoid the fragmentation they "
                  f"fight), or upgrade to torch {fixed_in} or newer:\n"
                  + alloc_conf_export(kept, ctx.torch_version))
    else:
        listed = " or ".join(EXPANDABLE_CONFLICTS)
        explanation = (
            "An internal assert about expandable segments fired in the caching allocator. In "
            f"torch before {fixed_in} it fires when expandable_segments:True is combined with "
            f"{listed} and memory runs nearly full; the log does not show which options were "
            "set.")
        remedy = (f"Check {_variables_text(ctx)}: remove {listed} when expandable_segments is "
                  f"on, or upgrade to torch {fixed_in} or newer, e.g.\n"
                  + alloc_conf_export("expandable_segments:True", ctx.torch_version))
    return advice(sig, numbers, explanation, remedy)


def _file_name(numbers: dict[str, Any]) -> dict[str, Any]:
    """``numbers`` with the source file's path cut to its name."""
    numbers = dict(numbers)
    if isinstance(numbers.get("source_file"), str):
        numbers["source_file"] = numbers["source_file"].rsplit("/", 1)[-1]
    return numbers


# The expandable segment's own record of which of its pages hold physical memory (handles_):
# an assert on it says a mapping failed part-way and left the segment inconsistent.
@signature("alloc-conf/expandable-mapping-assert",
           r"(?P<assertion>!?handles_(?:\.at\(\w+\)|\[\w+\])) INTERNAL ASSERT FAILED"
           r"(?: at [\"'`]?(?P<source_file>[^\"'`\s:]+)[\"'`]?:?(?P<source_line>\d+)?)?",
           ("handles_",),
           "An expandable segment was left half-mapped after a failed mapping", tier=0.0,
           example='RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at '
           '"../c10/cuda/CUDACachingAllocator.cpp":487, please report a bug to PyTorch.')
def _expandable_mapping_assert(sig: Signature, numbers: dict[str, Any],
                               ctx: AdviceContext) -> Advice:
    explanation = (
        "An internal assert on the pages of an expandable segment fired in the caching "
        "allocator. With expandable_segments:True the allocator maps physical memory into a "
        "reserved address range piece by piece (cuMemCreate, cuMemMap, cuMemSetAccess); when "
        "one of those calls fails part-way (the GPU nearly full, or a driver that refuses them: "
        "WSL2, Windows' WDDM, some virtual GPUs), the segment is left with pages it believes "
        "mapped and others it does not, and the next allocation in that range trips this "
        "assert. It then repeats until the process restarts.")
    remedy = ("Turn expandable segments off on this platform and restart the process, or leave "
              "more GPU memory free:\n"
              + alloc_conf_export("expandable_segments:False", ctx.torch_version))
    return advice(sig, _file_name(numbers), explanation, remedy)


@signature("alloc-conf/async-assert",
           r"(?:free_upper_bound \+ pytorch_used_bytes\[device\] <= device_total )?"
           r"INTERNAL ASSERT FAILED at [\"'`]?(?P<source_file>[^\"'`\s:]*"
           r"CUDAMallocAsyncAllocator\.cpp)[\"'`]?:?(?P<source_line>\d+)?|"
           # the backend's own condition, without the file (a title, a line cut short)
           r"free_upper_bound \+ pytorch_used_bytes\[device\] <= device_total INTERNAL ASSERT|"
           # (or cut sooner, after the exception's name: a title keeps only the condition's
           # start, "RuntimeError: free_upper_bound + pytorch_used_bytes[device]")
           r"\b(?:RuntimeError|Error): free_upper_bound \+ pytorch_used_bytes\[device\]"
           r"(?! <= device_total INTERNAL)",
           ("CUDAMallocAsyncAllocator", "free_upper_bound"),
           "The cudaMallocAsync allocator backend failed an internal check", tier=0.0,
           example='RuntimeError: free_upper_bound + pytorch_used_bytes[device] <= device_total '
           'INTERNAL ASSERT FAILED at "../c10/cuda/CUDAMallocAsyncAllocator.cpp":527, please '
           'report a bug to PyTorch.')
def _async_assert(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "The job runs PyTorch's allocator with backend:cudaMallocAsync (the assert is in that "
        "backend's source), and the backend's own accounting failed a consistency check, such "
        "as the memory it holds plus what the driver reports free exceeding the GPU's total. "
        "That backend leaves memory to the driver's stream-ordered pool, whose figures it "
        "cannot always reconcile (memory taken outside torch, virtual or shared GPUs, some "
        "releases); the native allocator has no such check.")
    return advice(sig, _file_name(numbers), explanation, _ASYNC_REMEDY)


@signature("alloc-conf/driver-vmm",
           r"CUDA driver error: (?P<driver_error>[a-z][a-z ]*[a-z])",
           ("CUDA driver error",),
           "The CUDA driver refused the virtual-memory calls of expandable segments", tier=0.0,
           example="RuntimeError: CUDA driver error: operation not supported")
def _driver_vmm(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    numbers = dict(numbers)
    conf = ctx.facts.get("alloc_conf")
    if conf:
        numbers["alloc_conf"] = conf
    setting = f" (the log sets {conf})" if conf else ""
    explanation = (
        f"A CUDA driver API call failed with '{numbers.get('driver_error', '?')}'. In PyTorch "
        "these calls come from expandable segments" + setting + ", which map GPU memory with "
        "the driver's virtual-memory functions (cuMemCreate, cuMemMap, cuMemSetAccess); WSL2, "
        "vGPU, Jetson and old drivers lack them or refuse them.")
    kept = with_settings(conf, {"expandable_segments": "False"}) if conf else (
        "expandable_segments:False")
    remedy = ("Switch expandable segments off on this platform (or update the driver):\n"
              + alloc_conf_export(kept, ctx.torch_version))
    return advice(sig, numbers, explanation, remedy)


_INCOMPATIBLE = (
    "Expandable segments (expandable_segments:True) map GPU memory with the CUDA virtual-memory "
    "API. Code that manages GPU memory itself does not work with them in every torch release: "
    "torch.cuda.MemPool (a serving engine's memory pools, vLLM's sleep mode), CUDA graph "
    "capture into private pools, and loaders that place a model across several GPUs; the job "
    "fails at start-up or while the model loads, with no out-of-memory.")


def _expandable_remedy(ctx: AdviceContext) -> str:
    return ("Turn expandable segments off for this program (also where its code sets them), or "
            "upgrade torch and the program to releases that support them together:\n"
            + alloc_conf_export("expandable_segments:False", ctx.torch_version))


@signature("alloc-conf/mempool-expandable",
           r"(?P<feature>torch\.cuda\.MemPool|MemPool) (?:doesn't|does not) (?:currently |yet )?"
           r"support (?P<option>expandable_segments)|"
           # (vLLM's own check before it pools memory for its sleep mode)
           r"\bExpandable segments are not compatible with memory pool",
           ("MemPool", "are not compatible with memory pool"),
           "torch.cuda.MemPool does not support expandable_segments", tier=0.0,
           example="RuntimeError: torch.cuda.MemPool doesn't currently support "
           "expandable_segments.")
def _mempool_expandable(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    return advice(sig, numbers, _INCOMPATIBLE, _expandable_remedy(ctx))


# vLLM's sleep mode freeing nothing while gigabytes stay in use: the memory was not allocated
# through the pool that sleep mode releases (vLLM's CuMemAllocator), which is what expandable
# segments do to it in the releases before vLLM refused the combination outright.
@signature("alloc-conf/sleep-freed-nothing",
           r"\bSleep mode freed (?P<freed_gib>0(?:\.0+)?) GiB(?: of)? memory, "
           r"(?P<in_use_gib>[1-9]\d*(?:\.\d+)?) GiB(?: of)? memory is still in use",
           ("Sleep mode freed",),
           "vLLM's sleep mode freed no GPU memory", severity=Severity.WARNING, tier=4.0,
           alone_root=True, extract=lambda match, _line: {
               key: float(match[key]) for key in ("freed_gib", "in_use_gib")},
           example="INFO 03-01 10:00:00 worker.py:133] Sleep mode freed 0.00 GiB memory, "
           "41.20 GiB memory is still in use.")
def _sleep_freed_nothing(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        f"vLLM's sleep mode released nothing while {numbers.get('in_use_gib', '?')} GiB stay in "
        "use. Sleep mode frees only what vLLM's own memory pool allocated (the weights and the "
        "KV cache); with PyTorch's expandable segments on (expandable_segments:True, set in the "
        "environment or by a framework) those allocations land in the caching allocator's own "
        "segments instead, and the pool has nothing to release. Newer vLLM releases refuse the "
        "combination at start-up instead.")
    return advice(sig, numbers, explanation, _expandable_remedy(ctx))


# A writer who says that turning expandable segments on makes the program fail ("...:True`
# crashes on model loading", "loading crashes when using `...expandable_segments:True`",
# "`expandable_segments=True` is incompatible with ..."); not in a condition, a question or
# advice to the reader ("if expandable_segments:True crashes, ...").
# ... and "fails with expandable_segments", "doesn't work when PYTORCH_CUDA_ALLOC_CONF is set to
# expandable_segments:True" (also read in a thread's title)
EXPANDABLE_FAILS_TOLD = (
    r"\b(?:fails?|failed|crash(?:es|ed)?|breaks?|errors?) (?:with|when using|when enabling) "
    r"[`\"']?(?:PYTORCH_(?:CUDA_)?ALLOC_CONF=)?(?P<option__>expandable_segments)\b|"
    r"\b(?:doesn't|does not|didn't|won't) (?:work|function)(?: properly| correctly| well)? "
    r"(?:when|with|if)\b[^\n]{0,60}?"
    r"\b(?P<option___>expandable_segments)\s*[:=]\s*True\b|"
    # ... and the setting as the subject: "expandable_segments does not work for
    # CUDAPluggableAllocator + MemPool", "expandable_segments:True doesn't work with ..."
    # (and as a title says it: "expandable_segments not working on Windows")
    r"\b(?P<option____>expandable_segments)(?:\s*[:=]\s*True)?[`\"']? (?:(?:doesn't|does not|"
    r"didn't|did not|won't) (?:work|function)|(?:is |are )?not working|isn't working)"
    r"(?: properly| correctly)? (?:for|with|on|in|under|when)\b|"
    # ... and the setting as the condition of a failure that happened, in the past: "When
    # enabling expandable_segments, the RDMA registration of the buffers failed"
    r"\b(?i:when|after|once) (?:I |we )?(?:enabl(?:e|ed|ing)|us(?:e|ed|ing)|set(?:ting)?|"
    r"turn(?:ed|ing)? on) [`\"']?(?:PYTORCH_(?:CUDA_)?ALLOC_CONF=)?(?P<option_____>"
    r"expandable_segments)\b[^\n,;.]{0,20}[,;]?[^\n.;]{0,60}?\b(?:failed|crashed|broke|"
    r"errored|aborted)\b|"
    # ... and a crash met, as a noun, with the setting: "We ran into a segfault when loading
    # models with `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`"
    r"\b(?:(?i:segfaults?|segmentation faults?|crash(?:es)?|core dumps?)|SIGSEGV)\b[^\n]{0,60}?"
    r"\b(?:with|when using|when enabling|while using|under) [`\"']?(?:PYTORCH_(?:CUDA_)?ALLOC_CONF="
    r")?(?P<option______>expandable_segments)\s*[:=]\s*True\b|"
    # ... and the setting as the cause of a failure: "expandable_segments causes crash on
    # startup", "expandable_segments:True leads to a segfault"
    r"\b(?P<option_______>expandable_segments)(?:\s*[:=]\s*True)?[`\"']? (?:causes?|caused|"
    r"leads? to|led to|triggers?|triggered|results? in) (?:an? |the )?(?:crash\w*|segfaults?|"
    r"segmentation faults?|errors?|failures?|hangs?|illegal memory access)\b")


@signature("alloc-conf/expandable-told",
           unless_words("if|whether|you|your|should|might|may|does not|doesn't") +
           r"(?:" + EXPANDABLE_FAILS_TOLD + r"|"
           r"(?:(?:\bcrash(?:es|ed)?|\bfails?|\bfailed|\baborts?|\bbreaks?) (?:on \w+ )?"
           r"(?:when|while) (?:using|setting|enabling) [`\"']?(?:(?:PYTORCH_(?:CUDA_)?ALLOC_CONF)"
           r"=)?(?P<option>expandable_segments)\s*[:=]\s*True\b|"
           r"(?P<option_>expandable_segments)\s*[:=]\s*True\b[`\"']*\)?\s*(?:(?:causes|makes)\b"
           r"[^\n]{0,60}?\b(?:to )?(?:fail|crash|abort)|crash(?:es|ed)?\b|fails\b|breaks\b|"
           r"is incompatible with\b|aborts\b)))",
           ("expandable_segments",),
           "expandable_segments:True makes this program fail (told in the writer's words)",
           tier=3.0,
           example="Loading the model crashes when using "
           "`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True` on the second GPU.")
def _expandable_told(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    return advice(sig, numbers, "The writer says the program fails with expandable segments "
                  "on and works without them. " + _INCOMPATIBLE, _expandable_remedy(ctx))


# The allocator's options with an underscore in their names ("backend" is an ordinary word),
# longest first, so that "expandable_segments_reserve" is not read as "expandable_segments".
_OPTION_NAMES = "|".join(re.escape(key) for key in sorted(KEYS, key=len, reverse=True)
                         if "_" in key)
# A writer who says torch ignores an allocator option it was given ("`roundup_power2_divisions`
# ignores the value of 1", "it silently ignores `expandable_segments:True` set via ...",
# "max_split_size_mb has no effect"); not in a condition or advice ("if ... is ignored", "note
# that ... is ignored"), and not torch's own warning for the cudaMallocAsync backend, which
# has its signature (also read in a thread's title). A whole setting told ignored,
# "PYTORCH_ALLOC_CONF=expandable_segments:True silently ignored", is about which variable this
# torch reads (alloc-conf/deprecated-variable says it), not an option's value.
OPTION_IGNORED_TOLD = (
    unless_words("if|whether|unless|you|your|should|note|make sure",
                 start=r"^(?![^\n]*\bcudaMallocAsync\b)") +
    rf"(?:(?<!ALLOC_CONF=)(?P<option>{_OPTION_NAMES})\b(?:\s*[:=]\s*[^\s`\"',]{{1,24}})?[`\"']?"
    r"(?: (?:option|setting|value|flag))? (?:is |are |was |were |gets |got |being )?"
    r"(?:(?:silently|completely|just|always|still) )?(?:ignored|ignores)\b|"
    r"\b(?:silently |completely )?ignor(?:es|ed|ing) (?:the )?[`\"']?"
    rf"(?P<option_>{_OPTION_NAMES})\b|"
    rf"(?P<option__>{_OPTION_NAMES})\b[^\n]{{0,60}}?\b(?:(?:has|had|takes|took) no effect|"
    r"(?:is|was|are|were) not (?:being )?(?:applied|honou?red|respected))\b)")


@signature("alloc-conf/option-ignored-told", OPTION_IGNORED_TOLD,
           ("ignore", "no effect", "not applied", "not honored", "not honoured",
            "not respected", "not being"),
           "torch did not apply an allocator option it was given (told in the writer's words)",
           # (after torch's own warning of a setting without effect, which classify raises to
           # 3.0 when it is there: the warning says why)
           tier=3.1,
           example="With torch 2.9 the allocator silently ignores `expandable_segments:True` "
           "when it is set through the new variable.")
def _option_ignored_told(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    option = numbers.get("option") or "the option"
    explanation = (
        f"The writer says torch ran as if {option} were not set. An allocator option is lost "
        f"when the variable is one this torch does not read (2.9.x reads only {CUDA_VAR} for "
        "CUDA; older releases never read the new name), when it is set after torch has "
        "initialised CUDA (os.environ in the program after the first CUDA call), under the "
        "cudaMallocAsync backend (which ignores the native allocator's options), where the "
        "platform lacks what the option needs (expandable segments on Windows), or for "
        "values a release mishandles.")
    remedy = (f"Set {_variables_text(ctx)} in the environment before Python starts (both names "
              "to the same value works on every release), check the effect with "
              "torch.cuda.memory_summary(), and upgrade torch if one value is still not "
              f"applied:\nexport {CUDA_VAR}=\"$SETTINGS\" {NEW_VAR}=\"$SETTINGS\"")
    return advice(sig, numbers, explanation, remedy)


# The caching allocator's switch set to 0: torch's C++ side checks only that the variable
# exists, so 0 turns the cache off as 1 does (the job then allocates with cudaMalloc every time).
@signature("alloc-conf/no-caching-zero",
           rf"(?P<variable>{re.escape(NO_CACHING_VAR)})\s*=\s*[\"'`]?(?P<value>0)\b(?![.\d])",
           (NO_CACHING_VAR,), f"{NO_CACHING_VAR}=0 turns the caching allocator off",
           severity=Severity.WARNING, tier=4.0, alone_root=True,
           example=f"export {NO_CACHING_VAR}=0")
def _no_caching_zero(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        f"{NO_CACHING_VAR} is set to 0, which reads as 'keep caching', but PyTorch's allocator "
        "checks only whether the variable exists: any value, 0 included, turns the caching "
        "allocator off. Every allocation and free then goes to the driver (cudaMalloc/cudaFree): "
        "training slows down, memory fragments, out-of-memory errors come earlier, and the "
        "allocator settings (PYTORCH_CUDA_ALLOC_CONF) are not used.")
    return advice(sig, numbers, explanation,
                  f"Remove the variable instead of setting it to 0: `unset {NO_CACHING_VAR}` "
                  "(and in launch scripts, job files and container environments).")


# ComfyUI turns the cudaMallocAsync backend on by default (its cuda-malloc option) where its
# torch supports it, and so does Fooocus, built on its code; a traceback through their files
# says the job runs that backend.
@signature("alloc-conf/async-default-app",
           r"(?P<async_default_app>ComfyUI|Fooocus)[/\\](?:[\w.-]{1,200}[/\\]){0,32}[\w.-]{1,200}"
           r"\.py\b|\bcomfy[/\\]model_management\.py\b",
           ("ComfyUI", "comfy", "Fooocus"),
           "The job runs ComfyUI or Fooocus, which select cudaMallocAsync by default",
           severity=Severity.INFO, tier=5.0, fact=True,
           extract=lambda match, _line: {
               "async_default_app": match["async_default_app"] or "ComfyUI"},
           example='  File "/home/user/ComfyUI/execution.py", line 151, in recursive_execute')
def _async_default_app(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    return advice(sig, numbers, f"The job runs {numbers.get('async_default_app', 'ComfyUI')}, "
                  "which turns the cudaMallocAsync backend on by default; failures that depend "
                  "on it say so.", "Nothing to do by itself.")
