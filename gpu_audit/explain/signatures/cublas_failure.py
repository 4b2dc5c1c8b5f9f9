"""A CUDA math library call (cuBLAS, cuBLASLt, cuSOLVER, cuSPARSE, cuFFT) failed.

These libraries allocate their handles and workspaces outside PyTorch's cache, so an
allocation or initialisation failure (``CUBLAS_STATUS_ALLOC_FAILED``,
``CUBLAS_STATUS_NOT_INITIALIZED``) is almost always an out-of-memory in disguise. An unsupported
data type or shape is the program's own fault. An execution failure is usually the first call
to notice an earlier fault in another kernel, so it ranks after that fault. cuDNN's statuses are
their own class, ``cudnn-failure``.

Why it matters: the error names a library, not the cause, so it is easy to chase a library bug
while the GPU is simply full or an earlier kernel has already broken the context.

Example: ``RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling
cublasCreate(handle)``.

Fix: for an allocation failure, see what holds the GPU with `gpu-audit scan` and reduce memory
use; for an unsupported type, check dtype support for this GPU (try float32 to confirm) and
update torch; for an execution failure, look for the earlier fault.
"""

from __future__ import annotations

import re
from typing import Any

from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Signature,
    advice,
    document_class,
    named,
    signature,
    with_gpu_field,
)
from gpu_audit.explain.signatures.texts import FIND_FAULTING_KERNEL, REDUCE_MEMORY, SCAN_OTHERS
from gpu_audit.knowledge.cublas import (
    CUBLAS_STATUS_SENTENCES,
    CUBLAS_STATUS_SHORT_WORDS,
    cublas_status_name,
)

CLASS = document_class("cublas-failure", __doc__)

_MEMORY_STATUSES = {
    "CUBLAS_STATUS_ALLOC_FAILED", "CUBLAS_STATUS_NOT_INITIALIZED", "CUFFT_ALLOC_FAILED",
    "CUSOLVER_STATUS_ALLOC_FAILED", "CUSPARSE_STATUS_ALLOC_FAILED",
}
_UNSUPPORTED_STATUSES = {
    "CUBLAS_STATUS_NOT_SUPPORTED", "CUBLAS_STATUS_ARCH_MISMATCH", "CUBLAS_STATUS_INVALID_VALUE",
}


def _library_call(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    if isinstance(found.get("call"), str):  # `cublasGemmEx( handle, opa, ...)` -> cublasGemmEx
        found["call"] = found["call"].split("(", 1)[0].strip()
    return with_gpu_field(found, line)


def _status_code(match: re.Match[str], line: str) -> dict[str, Any]:
    """A status printed as its number: its name, for the same advice as the name itself."""
    found = named(match, line)
    code = found.pop("code", None)
    name = cublas_status_name(code) if isinstance(code, int) else None
    if name:
        found["status"] = name
    elif code is not None:
        found["status_code"] = code
    return found


def _status_sentence(match: re.Match[str], line: str) -> dict[str, Any]:
    """A status printed as its sentence: its name, for the same advice as the name itself."""
    if match["sentence"]:
        return {"status": CUBLAS_STATUS_SENTENCES[match["sentence"]]}
    return {"status": CUBLAS_STATUS_SHORT_WORDS[match["words"].lower()]}


def _julia_error(match: re.Match[str], line: str) -> dict[str, Any]:
    """CUDA.jl's exception: its library, and its status by name or by sentence."""
    found = named(match, line)
    sentence = found.pop("sentence", None)
    if "status" not in found and sentence in CUBLAS_STATUS_SENTENCES:
        found["status"] = CUBLAS_STATUS_SENTENCES[sentence]
    return found


_SENTENCES = "|".join(re.escape(sentence) for sentence in CUBLAS_STATUS_SENTENCES)
_SHORT_WORDS = "|".join(re.escape(words) for words in sorted(CUBLAS_STATUS_SHORT_WORDS,
                                                              key=len, reverse=True))


# a status printed as cublasGetStatusString's sentence after the CUDA error checker's words
# (llama.cpp's ggml: "CUDA error: an internal operation failed", then the cuBLAS call;
# Transformer Engine's check of a cuBLAS call: "check_cublas_: CUBLAS Error: the requested
# functionality is not supported")
@signature("cublas-failure/status-sentence",
           # (or quoted after the library's name, Theano's "CUBLAS error 'an access to GPU
           # memory space failed' while copying ..."; and a program's own check that prints its
           # short words, PaddlePaddle's "EnforceNotMet: CUBLAS: execution failed, at ...")
           rf"(?<![A-Za-z0-9_])(?:CUDA|cuBLAS|CUBLAS|cuSOLVER|CUSOLVER) (?:error|Error)"
           rf"(?:: |: ?['\"]| ['\"])(?P<sentence>{_SENTENCES})(?![A-Za-z0-9_])|"
           rf"(?<![A-Za-z0-9_])CUBLAS: (?P<words>(?i:{_SHORT_WORDS}))"
           rf"(?=[,.;!]|$)",
           ("CUDA error: ", "cuBLAS error: ", "CUBLAS error: ", "cuSOLVER error: ",
            "CUSOLVER error: ", "CUDA Error: ", "cuBLAS Error: ", "CUBLAS Error: ",
            "cuSOLVER Error: ", "CUSOLVER Error: ", "CUBLAS error '", "cuBLAS error '",
            'CUBLAS error "', 'cuBLAS error "', "CUBLAS: "),
           "A CUDA math library call failed", extract=_status_sentence, key_field="status",
           example="CUDA error: an internal operation failed")
@signature("cublas-failure/status-code",
           # a check that the status is CUBLAS_STATUS_SUCCESS, with the number it got (MXNet,
           # Caffe; also spaced and cased as people retype it, "==CUBLAS_STATUS_SUCCESS(1 VS.0)",
           # and the other way round, "CUBLAS_STATUS_SUCCESS == stat (0 vs. 1)"), and a
           # program's own "cuBLAS API failed with status 7" (cuBLASLt too)
           # (also with the numbers alone the other way round, "CUBLAS_STATUS_SUCCESS(0 vs 13)",
           # and right after a Chinese word: no word boundary before it)
           r"(?<![A-Za-z0-9_])CUBLAS_STATUS_SUCCESS ?\((?P<code>\d{1,3}) ?(?i:vs)\.? ?0\)|"
           r"(?<![A-Za-z0-9_])CUBLAS_STATUS_SUCCESS ?(?:== ?[\w.>()-]{1,40} ?)?"
           r"\(0 ?(?i:vs)\.? ?(?P<code___>[1-9]\d{0,2})\)|"
           r"(?<![A-Za-z0-9_])(?i:cublas(?:Lt)?) (?:API failed|(?:API |call )?error)[^\n]{0,24}?"
           r"\bstatus(?: code)?[ :=]{1,3}(?P<code_>\d{1,3})(?![A-Za-z0-9_])|"
           # PaddlePaddle's "(External) CUBLAS error(7)."
           r"(?<![A-Za-z0-9_])CUBLAS error\((?P<code__>\d{1,3})\)|"
           # a CUDA project's own check, with the file and line of the call or without them:
           # "cuBLAS error at src/gemm.cu:125 code=15", "cuBLAS error code=15 in fp8_gemm"
           r"(?<![A-Za-z0-9_])(?i:cublas(?:Lt)?) error(?: at [^\s:]{1,300}:\d{1,6})? code ?= ?"
           r"(?P<code____>\d{1,3})(?![A-Za-z0-9_])",
           ("CUBLAS_STATUS_SUCCESS", "status", "CUBLAS error(", "code="),
           "A CUDA math library call failed",
           extract=_status_code, key_field="status",
           example="mshadow/./stream_gpu-inl.h:115: Check failed: err == CUBLAS_STATUS_SUCCESS "
           "(1 vs. 0)")
# DyNet's check of a cuBLAS call: "CUBLAS failure in cublasSgemm(dev.cublas_handle, ...)", its
# status's number on the next line; ONNX Runtime's: "CUBLAS error executing cublasGemmHelper(
# Base::CublasHandle(), ...)" (its CUDA provider's words for any cuBLAS call that failed)
@signature("cublas-failure/call-failed",
           r"\bCUBLAS failure in (?P<call>cublas\w{1,40})\(|"
           r"\b(?:CUBLAS|cuBLAS|CUBLASLT|cuBLASLt) error executing (?P<call_>\w{1,60})\(|"
           # (a benchmark's own check: "cuBLAS call cublasLtMatmulAlgoGetHeuristic(handle, ...)
           # failed at gemm.cc:98 'the requested functionality is not supported'")
           r"\b(?:CUBLAS|cuBLAS|CUBLASLT|cuBLASLt) call (?P<call__>cublas\w{1,60})\("
           r"[^\n]{0,1000}?\) failed\b",
           ("CUBLAS failure in ", "CUBLAS error executing ", "cuBLAS error executing ",
            "CUBLASLT error executing ", "cuBLASLt error executing ", "BLAS call ",
            "BLASLt call ", "BLASLT call "),
           "A CUDA math library call failed", key_field="call",
           example="CUBLAS failure in cublasSgemm(dev.cublas_handle, CUBLAS_OP_N, CUBLAS_OP_N, "
           "m, n, k, one, a, lda, b, ldb, zero, c, ldc)")
# TensorFlow's words when a cuBLAS call could not run: "Blas GEMM launch failed : a.shape=...",
# "Blas xGEMM launch failed", "Attempting to perform BLAS operation using StreamExecutor without
# BLAS support" (cuBLAS has no handle: TensorFlow could not create one)
@signature("cublas-failure/tensorflow-blas",
           # (also right after a Chinese word: no word boundary before it)
           r"(?<![A-Za-z0-9_])Blas (?:x|S|D|C|Z|H)?GEM[MV](?:Batched|StridedBatched)? launch "
           r"failed\b|"
           r"\bAttempting to perform BLAS operation using StreamExecutor without BLAS support\b",
           ("GEMM launch failed", "GEMV launch failed", "GEMMBatched launch failed",
            "GEMMStridedBatched launch failed", "Attempting to perform BLAS operation"),
           "A cuBLAS call could not run under TensorFlow",
           example="tensorflow.python.framework.errors_impl.InternalError: Blas GEMM launch "
           "failed : a.shape=(100, 784), b.shape=(784, 10), m=100, n=10, k=784")
@signature("cublas-failure/handle-failed",
           # the handle cuBLAS could not create, in words: "Create cublas handle failed" (MXNet),
           # "CUBLAS initialization failed" (in this module, no word boundary is asked for before
           # a name: a Chinese sentence runs on into it, "报CUBLAS error(7)")
           r"(?<![A-Za-z0-9_])(?:Create cublas handle|CUBLAS initiali[sz]ation) (?:failed|error)",
           ("Create cublas", "CUBLAS initiali"), "cuBLAS could not create its handle",
           example="# Create cublas handle failed")
# (and TensorRT's assertion on a cuBLAS(Lt) call's status, the status itself not printed:
# "[ltWrapper.cpp::setupHeuristic::349] Error Code 2: Internal Error (Assertion cublasStatus ==
# CUBLAS_STATUS_SUCCESS failed. )")
@signature("cublas-failure/cublaslt",
           r"cublasLt ran into an error|\bAssertion cublasStatus == CUBLAS_STATUS_SUCCESS failed",
           ("cublasLt", "Assertion cublasStatus"),
           "cuBLASLt matrix multiply failed", tier=2.0,
           example="RuntimeError: cublasLt ran into an error!")
@signature("cublas-failure/legacy-runtime-error",
           r"(?P<library>cublas|cuBLAS) runtime error : (?P<message>.+?)(?: at |$)",
           ("runtime error :",), "cuBLAS call failed",
           example="RuntimeError: cublas runtime error : resource allocation failed at "
           "/pytorch/aten/src/THC/THCGeneral.cpp:250")
# Julia's CUDA.jl raises a failed library call as the library's exception type:
# "CUBLASError: the GPU program failed to execute (code 13, CUBLAS_STATUS_EXECUTION_FAILED)"
# (its status sentence first; CUSOLVERError, CUSPARSEError and CUFFTError alike). The status is
# read from its sentence or its name; with its library's debug log turned on, the log's lines
# come between the type and the sentence, and the status is not kept.
@signature("cublas-failure/julia-error",
           rf"(?<![A-Za-z0-9_])(?P<library>CUBLAS|CUSOLVER|CUSPARSE|CUFFT)Error: "
           rf"(?:(?P<sentence>{_SENTENCES})(?![A-Za-z0-9_]))?"
           rf"(?:[^\n]{{0,80}}?\b(?P<status>(?:CUBLAS|CUSOLVER|CUSPARSE)_STATUS_[A-Z_]+|"
           rf"CUFFT_[A-Z_]+))?",
           ("CUBLASError: ", "CUSOLVERError: ", "CUSPARSEError: ", "CUFFTError: "),
           "A CUDA math library call failed", extract=_julia_error, key_field="status",
           example="ERROR: LoadError: CUBLASError: the GPU program failed to execute")
@signature("cublas-failure/cublas-status",
           # (a check that the status is CUBLAS_STATUS_SUCCESS: the number after it, below)
           r"(?P<status>(?:CUBLAS|CUSOLVER|CUSPARSE)_STATUS_(?!SUCCESS(?![A-Za-z0-9_]))[A-Z_]+|CUFFT_(?:"
           r"ALLOC_FAILED|"
           r"INTERNAL_ERROR|EXEC_FAILED|SETUP_FAILED|INVALID_PLAN))"
           r"(?: when calling `(?P<call>[^`]+)`)?",
           ("CUBLAS_STATUS", "CUSOLVER_STATUS", "CUSPARSE_STATUS", "CUFFT_"),
           "A CUDA math library call failed", extract=_library_call, key_field="status",
           example="RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
           "`cublasCreate(handle)`")
def _cublas(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    status = str(numbers.get("status") or "")
    message = str(numbers.get("message") or "").lower()
    memory = (status in _MEMORY_STATUSES or "allocation failed" in message
              or "not initialized" in message or sig.id.endswith("handle-failed"))
    unsupported = status in _UNSUPPORTED_STATUSES
    call = f" in {numbers['call']}" if numbers.get("call") else ""
    if sig.id == "cublas-failure/tensorflow-blas":
        return _tensorflow_blas(sig, numbers)
    if not status and sig.id == "cublas-failure/julia-error":
        return _julia_without_status(sig, numbers)
    if memory:
        explanation = (
            f"The CUDA library could not create its handle or allocate its workspace{call}. "
            "cuBLAS and the other CUDA math libraries "
            "allocate outside PyTorch's cache, so this is almost always an "
            "out-of-memory in disguise (the GPU was already full); less often a broken CUDA "
            "or driver install.")
        remedy = (f"{SCAN_OTHERS}\nThen reduce memory use:\n{REDUCE_MEMORY}\nIf it fails on "
                  "the very first matrix multiply with a free GPU, check the driver and CUDA "
                  "install (`gpu-audit scan`).")
        return advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="out-of-memory")
    if unsupported:
        explanation = (
            f"The call's data type, shape or layout is not supported{call} on this GPU or "
            "library version (for example bf16 before compute capability 8.0, fp8 before 8.9, "
            "or a tensor too large for 32-bit indexing).")
        remedy = ("Check dtype support for this GPU; try float32 to confirm; update torch; "
                  "split very large matrices.")
        return advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="unsupported")
    explanation = (
        f"A CUDA library kernel failed while running{call}. CUDA reports errors "
        "asynchronously, so "
        "this is usually the first call to notice an earlier fault (a device-side assert, an "
        "out-of-range index in an earlier kernel) rather than a bug in the library.")
    return advice(sig, numbers, explanation, FIND_FAULTING_KERNEL, tier=2.0,
                  diagnosis="execution")


def _tensorflow_blas(sig: Signature, numbers: dict[str, Any]) -> Advice:
    explanation = (
        "TensorFlow could not run a matrix multiply on the GPU: most often cuBLAS could not "
        "create its handle because the GPU's memory was already taken (TensorFlow preallocates "
        "most of it at start, and a second process, or a second TensorFlow session, does the "
        "same); otherwise the cuBLAS installed is not the one this TensorFlow was built for (an "
        "earlier \"failed to create cublas handle\" or library-loading line says which).")
    remedy = (f"{SCAN_OTHERS}\nLet TensorFlow allocate as it goes: export "
              "TF_FORCE_GPU_ALLOW_GROWTH=true (or tf.config.experimental.set_memory_growth), "
              "and run one TensorFlow process per GPU. If it still fails on an idle GPU, "
              "install the CUDA libraries this TensorFlow release was built with "
              "(tensorflow[and-cuda]).")
    return advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="out-of-memory")


def _julia_without_status(sig: Signature, numbers: dict[str, Any]) -> Advice:
    library = str(numbers.get("library") or "CUBLAS")
    explanation = (
        f"A {library} call failed under Julia's CUDA.jl, and the status it returned is not in "
        "the log (a debug log was printed in its place). Most such failures are an earlier "
        "kernel's fault that the library's call noticed first, or the library's workspace not "
        "fitting in the GPU's memory; less often the library release itself.")
    remedy = (f"Rerun without JULIA_DEBUG for {library} so the error keeps its status; check "
              "what else holds the GPU's memory (`gpu-audit scan`); run a small reproduction "
              "under `compute-sanitizer julia script.jl` to find a kernel that faulted first; "
              "update CUDA.jl and the CUDA toolkit it downloads (a library bug of one release is "
              "fixed in a later one).")
    return advice(sig, numbers, explanation, remedy, tier=2.0, diagnosis="execution")
