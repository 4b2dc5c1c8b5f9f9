"""A device-side assertion in a CUDA kernel failed.

PyTorch's CUDA kernels check some conditions on the GPU (an index inside its dimension, a
label below the number of classes, a probability between 0 and 1) and raise a device-side
assert when one fails: the GPU's way of raising an IndexError or ValueError. The assertion text
names the condition; `gpu-audit explain` recognises the common ones and says which data is
usually wrong.

Why it matters: like an illegal memory access, it leaves the CUDA context unusable: the run
stops, and later cuBLAS, cuDNN or NCCL errors are its echoes.

Example: ``RuntimeError: CUDA error: device-side assert triggered``, with a line such as
``Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed`` above it.

Fix: run the same step on the CPU (the same op raises a readable error with the offending
value), or rerun with ``CUDA_LAUNCH_BLOCKING=1`` to get the failing op's Python line; then fix
the data (labels, indices) it names.
"""

from __future__ import annotations

import re
from typing import Any

from gpu_audit.explain.signatures.guards import unless_words
from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Signature,
    advice,
    document_class,
    named,
    signature,
)
from gpu_audit.explain.signatures.texts import KERNEL_FAULT

CLASS = document_class("device-assert", __doc__)

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


def _unquoted(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    # (a translated post writes the comparison in full-width signs: "srcIndex ＜ ...")
    found["assertion"] = str(found.get("assertion", "")).translate(_FULL_WIDTH).strip()
    return found


_FULL_WIDTH = str.maketrans({"\uff1c": "<", "\uff1e": ">", "\uff1d": "="})


@signature("device-assert/unquoted-condition",
           # one of PyTorch's indexing or loss conditions, retold without the quotes the kernel
           # prints around it: "Assertion srcIndex < srcSelectDimSize failed." (or with them, but
           # without the kernel's file and block: the line a person kept)
           r"Assertion [`'\"]?(?P<assertion>(?:srcIndex|idx_dim|t >= 0|input_val|target_val)"
           r"[^`'\"\n]{0,120}?)[`'\"]?\s*failed",
           ("Assertion",), "A device-side assertion failed in a CUDA kernel",
           group="device-assert", extract=_unquoted,
           example="Assertion srcIndex < srcSelectDimSize failed.")
# A kernel's assertion told in the writer's words, the message not pasted: "I get a device-side
# assertion when the labels contain -1", "the embedding lookup fails with an index out of bounds
# assertion on the GPU", and CUDA's words inside a sentence of another language with a word of
# happening or failing ("计算loss时触发了device-side assert", "device-side assertが発生します",
# "device-side assert가 발생합니다", "падает с device-side assert", "kommt ein device-side
# assert"). Not a condition, a question or a rule ("if you get a device-side assert, ...",
# "a device-side assert is usually a label out of range").
@signature("device-assert/told",
           unless_words("if|whether|when|how|why|what|you|your|can|could|may|might|would|"
                        "should|usually|often|typically|avoid|prevent")
           + r"(?i:\b(?:get|gets|got|getting|hit|hits|hitting|see|saw|seeing|encounter(?:s|ed|"
           r"ing)?|throws?|threw|raises?|raised|triggers?|triggered|ran into|run into|running "
           r"into|(?:fails?|failed|crash(?:es|ed)?|dies|died|aborts?|aborted|errors? out|errored "
           r"out)(?: \w+){0,2}? (?:with|on)|"
           # (the writer's failure named as one: "it was a device-side assert: my labels ...",
           # "the crash turned out to be a device-side assertion")
           r"(?:it|this|that|the (?:error|crash|problem|issue|failure|cause))(?: really| actually)?"
           r" (?:was|turned out to be)(?: just)?) (?:an? "
           r"|the |random |this )?(?:CUDA )?(?:device[- ]side assert(?:ion)?s?|index(?:ing)? out "
           r"of (?:bounds|range) assert(?:ion)?s?)\b)|"
           r"^(?![^\n]*(?:如果|若|是否|为什么|怎么|如何|もし|場合|만약|경우|[？?]))"
           r"(?!(?i:[^\n]*\b(?:if|если|wenn|falls|si|se (?:o|a)|caso)\b))[^\n]*?"
           r"(?:(?:触发|出现|发生|报|遇到|碰到|原来是|原因是)了?\s?(?i:device[- ]side assert)|"
           r"(?i:device[- ]side assert(?:ion)?)\s?(?:(?:が|エラーが)(?:発生|起き|出)|(?:가|이)? "
           r"?(?:발생|나|떠))|"
           r"(?i:(?:пада\w*|упал\w*|вылета\w*|kommt|stürzt|tritt|falla|fall[óo]|aparece|plante|"
           r"planta|falha|falhou|war|était|era|foi)\b[^\n]{0,30}?device[- ]side assert))",
           ("device-side assert", "device side assert", "Device-side assert",
            "Device side assert", "out of bounds assert", "out of range assert"),
           "A device-side assertion failed in a CUDA kernel (told in the writer's words)",
           group="device-assert",
           yields_to_titles=True,
           example="I get a device-side assertion when the labels contain -1.")
@signature("device-assert/triggered",
           r"device-side assert(?:ion)? triggered|CUDA_ERROR_ASSERT\b|cudaErrorAssert\b",
           ("device-side assert", "CUDA_ERROR_ASSERT", "cudaErrorAssert"),
           "A device-side assertion failed in a CUDA kernel", group="device-assert",
           example="RuntimeError: CUDA error: device-side assert triggered")
@signature("device-assert/garbled-assertion",
           # threads asserting at once interleave their lines; the assertion still stands out
           r"(?m:^)(?=[^\n]*\.cuh?\b)[^\n]*?Assertion `(?P<assertion>[^`']{1,500}?)` failed",
           ("Assertion `",), "A device-side assertion failed in a CUDA kernel",
           group="device-assert",
           example="] Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\""
           ",0/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu` failed.")
@signature("device-assert/kernel-assertion",
           r"(?:(?<![\w./\\-])(?P<source_file>[\w./\\-]{1,300}\.cuh?):(?P<source_line>\d+): "
           r".{0,300}?)?block: "
           r"\[(?P<block>\d+,\s*\d+,\s*\d+)\],?\s*thread: \[(?P<thread>\d+,\s*\d+,\s*\d+)\]\s*"
           # (a terminal or a page that wraps at a fixed width may cut "failed" in two; Lua
           # Torch's THCUNN prints the same words)
           # (a page that renders backticks as code drops them: "thread: [31,0,0] Assertion
           # index >= -sizes[i] && ... failed.")
           r"Assertion (?:`(?P<assertion>.{1,500}?)`|(?P<assertion_>[^`\n]{1,500}?)) "
           r"fail(?:\s{0,2}ed|\s*$)",
           ("Assertion `", "] Assertion "), "A device-side assertion failed in a CUDA kernel",
           group="device-assert",
           example="/pytorch/aten/src/ATen/native/cuda/Loss.cu:92: operator(): block: [33,0,0], "
           "thread: [31,0,0] Assertion `input_val >= zero && input_val <= one` failed.")
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
        "raising an IndexError or ValueError inside a CUDA kernel."
        + (f" Likely: {hint}." if hint else "")
        + " " + KERNEL_FAULT + " Later cuBLAS, cuDNN or NCCL errors are echoes of this one.")
    remedy = ("Run the same step on CPU (the same op raises a readable error with the offending "
              "value), or rerun with CUDA_LAUNCH_BLOCKING=1 to get the failing op's Python line; "
              "then fix the data or labels.")
    return advice(sig, numbers, explanation, remedy)


def _thrown(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    if found.get("exception") == "exception":  # (the kernel was built without the type's name)
        del found["exception"]
    return found


@signature("device-assert/julia-kernel-exception",
           # Julia's CUDA.jl: a kernel that threw prints, from the GPU, "ERROR: a BoundsError was
           # thrown during kernel execution on thread (513, 1, 1) in block (3, 1, 1)." ("a
           # exception" where the kernel was compiled without the type's name), and the host then
           # raises "KernelException: exception thrown during kernel execution on device <name>"
           r"\ban? (?P<exception>\w{1,60}) was thrown during kernel execution(?: on thread "
           r"\((?P<thread>\d+, ?\d+, ?\d+)\) in block \((?P<block>\d+, ?\d+, ?\d+)\))?|"
           r"\bKernelException: exception thrown during kernel execution(?: on device "
           r"(?P<gpu_name>[^\n]{1,80}?))?\s*$",
           ("thrown during kernel execution",),
           "A GPU kernel threw an exception (Julia)", group="device-assert",
           extract=_thrown,
           example="ERROR: a BoundsError was thrown during kernel execution on thread (513, 1, 1) "
           "in block (3, 1, 1).")
def _julia_kernel_exception(sig: Signature, numbers: dict[str, Any],
                            ctx: AdviceContext) -> Advice:
    exception = str(numbers.get("exception") or "")
    named_type = exception if exception and exception != "exception" else ""
    what = (f"a {named_type}" if named_type else "an exception")
    likely = (" A BoundsError is an index outside the array it reads: usually an index computed "
              "from the thread and block numbers that runs past the array's end, or a launch "
              "with more threads than elements and no bounds check in the kernel."
              if named_type == "BoundsError" else "")
    explanation = (
        f"Code running on the GPU threw {what}; CUDA.jl stopped the kernel and raised it on the "
        f"host as a KernelException, Julia's form of a device-side assertion.{likely} The "
        "kernel ends in a trap, which leaves the process's CUDA context unusable: later GPU "
        "calls fail too, and the host's stack trace points at the call that waited for the "
        "kernel, not the line that threw.")
    remedy = ("Rerun with `julia -g2` to have the kernel print the exception's type and the "
              "line that threw it; run the same function on CPU arrays (Array instead of "
              "CuArray) for a readable error with the offending index; then guard the kernel's "
              "indices against the array's length or fix the launch size.")
    return advice(sig, numbers, explanation, remedy)
