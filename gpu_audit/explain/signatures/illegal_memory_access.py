"""A CUDA kernel accessed memory it does not own, or ran an instruction it should not.

An illegal address, a misaligned address, an illegal instruction or an unspecified launch
failure (an exception on the device while a kernel ran) kills the process's CUDA context.
Kernels run asynchronously, so the Python stack trace usually points at a later call. The usual
causes are an out-of-range index in a custom, fused or compiled kernel (Triton, FlashAttention,
torch.compile) or mismatched shapes passed to an extension; rarely, failing hardware (an Xid in
the kernel log tells which).

Why it matters: every later CUDA call fails with the same error, and in distributed training
the other ranks' collectives time out waiting for this one.

Example: ``RuntimeError: CUDA error: an illegal memory access was encountered``.

Fix: rerun with ``CUDA_LAUNCH_BLOCKING=1`` so the failing kernel raises at its own call site;
run a small reproduction under ``compute-sanitizer --tool memcheck``; switch off custom or
compiled kernels one at a time.
"""

from __future__ import annotations

from typing import Any

from gpu_audit.explain.prefixes import LINE_HEAD
from gpu_audit.explain.signatures.guards import unless_words
from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Signature,
    advice,
    document_class,
    fixed,
    signature,
)
from gpu_audit.explain.signatures.texts import FIND_FAULTING_KERNEL, KERNEL_FAULT
from gpu_audit.knowledge.cuda_errors import number_needles, reported_number, status_check
from gpu_audit.model import Severity

CLASS = document_class("illegal-memory-access", __doc__)


# CUDA's driver API statuses in the words of its error strings as the CUDA Extension Wrangler
# spells them (Blender Cycles and the renderers built on it): "CUDA error: Illegal address in
# cuMemcpyDtoH(...)", "CUDA error at cuCtxCreate: Illegal address".
_DRIVER_WORDS = r"\bCUDA error(?: at cu\w{{1,40}})?: {words}\b"


@signature("illegal-memory-access/debugger-exception",
           # cuda-gdb stops at the faulting kernel: "CUDA Exception: Warp Illegal Address",
           # "received signal CUDA_EXCEPTION_14, Warp Illegal Address."
           r"(?:CUDA Exception: |CUDA_EXCEPTION_(?P<exception_code>\d+), )(?P<exception>"
           r"(?:Lane|Warp|Device) (?:Illegal|Misaligned|Out-of-range|Invalid) (?:Address|"
           r"Instruction|PC|Address Space))",
           ("CUDA Exception: ", "CUDA_EXCEPTION_"),
           "cuda-gdb caught a kernel's illegal memory access",
           example='Thread 137 "python" received signal CUDA_EXCEPTION_14, Warp Illegal Address.')
@signature("illegal-memory-access/illegal-instruction",
           r"an illegal instruction was encountered|ILLEGAL_INSTRUCTION|"
           r"(?:cuda|\b)ErrorIllegalInstruction\b",
           ("llegal instruction", "ILLEGAL_INSTRUCTION", "IllegalInstruction"),
           "Illegal instruction in a CUDA kernel",
           example="RuntimeError: CUDA error: an illegal instruction was encountered")
@signature("illegal-memory-access/misaligned-address",
           # (NCCL's "Cuda failure 'misaligned address'"; a program's own check, its label
           # padded with dots: "Cuda failure..........: misaligned address")
           r"(?:error|Error)(?: \[CUDA\])?: misaligned address|"
           r"Cuda failure(?: '|\.{0,40}: )misaligned address|"
           r"\berror=\d+ : misaligned address|"  # THCudaCheck FAIL file=... line=... error=74
           r"cudaSuccess \(\d+ vs\. 0\)\s+misaligned address|"
           r"MISALIGNED_ADDRESS|(?:cuda|\b)ErrorMisalignedAddress\b|"
           # (a driver API call's name before CUDA's words, as hashcat prints its calls'
           # failures: "cuStreamSynchronize(): misaligned address")
           r"\b(?:cu|hip)[A-Z]\w{1,40}\(\): misaligned address",
           ("isaligned",), "Misaligned memory access in a CUDA kernel",
           example="RuntimeError: CUDA error: misaligned address")
@signature("illegal-memory-access/illegal-address",
           # (the runtime's enum, and the driver's as .NET bindings name it, "ErrorIllegalAddress";
           # and CUDA's description of the status, which such bindings print after it)
           r"illegal memory access was encountered|ILLEGAL_ADDRESS|"
           r"(?:cuda|\b)ErrorIllegalAddress\b|"
           r"the device encountered a load or store instruction on an invalid memory address|"
           + status_check("cudaErrorIllegalAddress") + "|" + reported_number(700)
           + "|" + _DRIVER_WORDS.format(words="Illegal address"),
           ("llegal memory access", "ILLEGAL_ADDRESS", "IllegalAddress", "cudaSuccess",
            *number_needles(700), "Illegal address", "load or store instruction"),
           "Illegal memory access in a CUDA kernel",
           example="RuntimeError: CUDA error: an illegal memory access was encountered")
def _illegal(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    exception = str(numbers.get("exception") or "")
    if sig.id.endswith("debugger-exception"):
        what = (f"The debugger stopped a CUDA kernel at its fault ({exception}): the kernel it "
                "names in its backtrace read or wrote memory it does not own, or ran an invalid "
                "instruction; look at the indices and shapes that kernel was given.")
    elif sig.id.endswith("misaligned-address"):
        what = ("A CUDA kernel accessed memory at an address not aligned for its data type "
                "(custom or vectorised kernels given a sliced or offset tensor).")
    elif sig.id.endswith("illegal-instruction"):
        what = ("A CUDA kernel executed an invalid instruction (a miscompiled or corrupted "
                "kernel, or code built for another architecture).")
    else:
        what = ("A CUDA kernel read or wrote an address it does not own: an out-of-range index "
                "in a custom, fused or compiled kernel (Triton, FlashAttention, torch.compile), "
                "mismatched tensor shapes passed to an extension, or, rarely, failing hardware.")
    return advice(sig, numbers, f"{what} {KERNEL_FAULT}", FIND_FAULTING_KERNEL)


# CUDA's "unspecified launch failure" (719, cudaErrorLaunchFailure) is an exception on the device
# while a kernel ran, most often an invalid pointer or an out-of-range shared memory access: the
# program's fault like an illegal address. Failing hardware causes it less often; an Xid in the
# kernel log (48, 79, 94, 95, 109, ...) then sits before it as the root cause.
fixed("illegal-memory-access/launch-failure",
      r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|cudaErrorLaunchFailure|"
      r"\bErrorLaunchFailed\b|"
      + status_check("cudaErrorLaunchFailure") + "|" + reported_number(719)
      + "|" + _DRIVER_WORDS.format(words="Launch failed"),
      ("unspecified launch failure", "LAUNCH_FAILED", "LaunchFailure", "ErrorLaunchFailed",
       "cudaSuccess",
       *number_needles(719), "Launch failed"),
      "Unspecified launch failure: a CUDA kernel crashed", tier=1.2,
      example="RuntimeError: CUDA error: unspecified launch failure",
      explanation="A CUDA kernel raised an exception on the device (the GPU's equivalent of a "
      "segfault): most often it dereferenced an invalid pointer or indexed past a shared or "
      "global buffer, in a custom, fused or compiled kernel or an extension given mismatched "
      "shapes; less often the GPU itself failed, which an Xid in the kernel log at the same "
      f"time tells. {KERNEL_FAULT}",
      remedy=f"{FIND_FAULTING_KERNEL}\nA card that fails again on known-good code, or an Xid "
      "such as 79 or 109 beside it, needs draining, a reset and service.")


# llama.cpp's CUDA backend (ggml) prints, under any CUDA error it checks ("CUDA error: an
# illegal memory access was encountered"), the device the thread had: "  current device: 1, in
# function ggml_cuda_op_mul_mat at ggml-cuda.cu:1234" (-1 when it could not ask). That GPU is
# the one of the error above it, whatever its class.
fixed("illegal-memory-access/ggml-current-device",
      LINE_HEAD + r"current device: (?P<gpu_index>\d+), in function \w+ at ",
      ("current device: ",), "The GPU a llama.cpp (ggml) CUDA error happened on",
      severity=Severity.INFO, tier=5.0, attach="latest", window=3,
      example="  current device: 1, in function ggml_cuda_op_mul_mat at "
      "ggml/src/ggml-cuda/ggml-cuda.cu:1502",
      explanation="The GPU of the CUDA error printed above it.", remedy="Nothing.")


# A kernel's memory faults told in the writer's words, the message itself not pasted ("Running
# it on an H100 I am getting various memory access faults", "we keep seeing illegal memory
# accesses"): the writer's own run (a first-person verb), not a condition or the reader's. It
# ranks before a library's execution failure (tier 2), which such a fault leaves behind, and
# after a printed fault.
fixed("illegal-memory-access/told",
      unless_words("if|whether|you|your|can|could|may|might|would") +
      r"(?i:\b(?:I(?:'m| am|'ve| have| keep)?|we(?:'re| are|'ve| have| keep)?) (?:been )?"
      r"(?:getting|get|got|seeing|see|saw|hit|hitting|encounter(?:ed|ing)?|run into|ran into|"
      r"running into) (?:various |random |intermittent |occasional |several |some |these |"
      r"many |an? )?(?:(?:CUDA|GPU|device|kernel) )?"
      r"(?:(?:illegal|invalid) memory access(?:es)?(?: (?:faults?|violations?|errors?))?|"
      r"memory access (?:faults?|violations?|errors?))\b)|"
      # (the run as the subject: "it fails randomly with an illegal memory access", "training
      # hits an illegal memory access at step 1200", "the kernel crashes with illegal memory
      # access on H100"; not a condition, a question or a rule: "if you hit an illegal memory
      # access, ...", "could an illegal memory access be caused by ...")
      + unless_words("if|whether|when|how|why|you|your|can|could|may|might|would|should|will|"
                     "avoid|prevent|fix|fixes|fixed|usually|often|typically")
      + r"(?i:\b(?:(?:fails?|failed|crash(?:es|ed)?|dies|died|aborts?|aborted|errors? out|"
      r"errored out|stops?|stopped|exits?|exited|breaks?|broke)\b(?: \w+){0,2}? with|"
      r"(?:hits?|hitting|throws?|threw|raises?|raised|triggers?|triggered|produces?|produced|"
      r"reports?|reported|gives?|gave|gets?|got|runs? into|ran into)) (?:an? |the |random |"
      r"occasional |intermittent )?(?:CUDA )?(?:illegal|invalid) memory access(?:es)?\b)|"
      # (and in the languages such reports are written in: "训练几百步后随机出现非法内存访问",
      # "不正なメモリアクセスが発生して落ちます", and CUDA's words inside a sentence of another
      # language with a word of failing: "падает с illegal memory access", "stürzt mit einem
      # illegal memory access ab", "报illegal memory access"; not a condition or a question)
      r"^(?![^\n]*(?:如果|若|是否|为什么|怎么|如何|可能|もし|場合|만약|경우|[？?]))"
      r"(?!(?i:[^\n]*\b(?:if|если|wenn|falls|si|se (?:o|a)|caso)\b))[^\n]*?"
      r"(?:(?:出现|发生|报|遇到|碰到)了?\s?"
      # (and CUDA's words shortened as retyped: "出现illegal memory encounter")
      r"(?:非法内存访问|非法的内存访问|(?i:illegal memory (?:access|encounter(?:ed)?)))|"
      r"不正な?メモリアクセス(?:が|エラーが)?(?:発生|起き|出)|"
      r"(?i:illegal memory access)[^\n]{0,12}?(?:에러|오류)가? (?:나|발생|떠)|"
      r"(?i:(?:пада\w*|упал\w*|вылета\w*|stürzt|bricht|falla|fall[óo]|plante|planta|falha|"
      r"falhou|crasht)\b[^\n]{0,30}?illegal memory access))|"
      # (the fault shortened to "an illegal CUDA error", as a title names whichever of CUDA's
      # "illegal" faults it was: an illegal address, memory access or instruction)
      + unless_words("if|whether|you|your|can|could|may|might|would|avoid|prevent")
      + r"(?i:\billegal (?:CUDA|GPU) errors?\b|\bCUDA illegal errors?\b)",
      ("emory access", "emory encounter", "非法内存访问", "非法的内存访问", "メモリアクセス",
       "llegal CUDA", "llegal Cuda", "llegal cuda", "llegal GPU", "UDA illegal", "uda illegal",
       "UDA Illegal"),
      "Illegal memory access in a CUDA kernel (told in the writer's words)",
      tier=1.5,
      yields_to_titles=True,
      example="Running the new kernel on an H100 I am getting various memory access faults.",
      explanation="The writer says a kernel faulted on memory, without pasting the message: "
      "what CUDA reports as \"an illegal memory access was encountered\". A library call after "
      f"it (a cuBLAS or cuDNN execution failure) is where the fault surfaced. {KERNEL_FAULT}",
      remedy=FIND_FAULTING_KERNEL)
