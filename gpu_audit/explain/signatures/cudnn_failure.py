"""A cuDNN call failed: a ``CUDNN_STATUS_*`` status, or no convolution algorithm that can run.

cuDNN runs the convolutions, RNNs and fused attention of PyTorch, TensorFlow, Caffe and
PaddlePaddle, and reports a failure as a status name. ``CUDNN_STATUS_ALLOC_FAILED`` and "no
valid cuDNN algorithm" are out of memory: cuDNN allocates its workspace outside the framework's
cache. ``CUDNN_STATUS_NOT_INITIALIZED``, ``CUDNN_STATUS_INTERNAL_ERROR`` and
``CUDNN_STATUS_EXECUTION_FAILED`` name no cause, and usually have one of three:

- out of memory: the run got going (the first batches passed) and fails at a larger batch or
  input, the GPU is nearly full (`gpu-audit scan`), and a smaller batch makes it go away;
- a cuDNN/driver mismatch: it fails on the very first convolution even with a tiny input on an
  idle GPU, because the cuDNN loaded was built for a CUDA newer than the driver supports (CUDA
  11.x needs driver 450.80.02 or newer on Linux, CUDA 12.x 525.60.13), for an older GPU
  architecture (a CUDA 10 build on an Ampere GPU, compute capability 8.x, needs CUDA 11.0 and
  cuDNN 8.0), or a system cuDNN on ``LD_LIBRARY_PATH`` shadows the framework's own;
- an earlier fault (``EXECUTION_FAILED``): a kernel before it faulted, and cuDNN's call was the
  first to notice.

``CUDNN_STATUS_NOT_SUPPORTED``, ``CUDNN_STATUS_BAD_PARAM`` and ``CUDNN_STATUS_ARCH_MISMATCH``
are the program's data type, shape or GPU that this cuDNN does not support.

Why it matters: the status names a library, not the cause, so it is easy to chase a cuDNN bug
while the GPU is simply full, or the install does not match the driver.

Example: ``RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED``.

Fix: try the same step with a batch of 1: if it passes, reduce memory use; if it still fails on
an idle GPU, compare ``torch.backends.cudnn.version()`` and ``torch.version.cuda`` with the
driver's CUDA in `nvidia-smi`, and install a build that matches; with
``CUDA_LAUNCH_BLOCKING=1`` an earlier faulting kernel raises at its own call.
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
    fixed,
    named,
    signature,
    with_gpu_field,
)
from gpu_audit.explain.signatures.texts import FIND_FAULTING_KERNEL, REDUCE_MEMORY, SCAN_OTHERS
from gpu_audit.knowledge.cudnn import (
    MEMORY,
    MEMORY_OR_MISMATCH,
    UNSUPPORTED,
    cudnn_status_kind,
    cudnn_status_name,
)
from gpu_audit.model import Severity

CLASS = document_class("cudnn-failure", __doc__)



def _status(match: re.Match[str], line: str) -> dict[str, Any]:
    """The status's full name, also where it was printed as its number or shortened."""
    found = named(match, line)
    code, short = found.pop("code", None), found.pop("short", None)
    if short:
        found["status"] = f"CUDNN_STATUS_{short}"
    elif isinstance(code, int):
        name = cudnn_status_name(code)
        if name:
            found["status"] = name
        else:
            found["status_code"] = code
    return with_gpu_field(found, line)

_HOW_TO_TELL = (
    "To tell which: run the same step with a batch of 1. If it passes, or the run got through "
    "its first batches, it is memory:\n" + REDUCE_MEMORY + "\n" + SCAN_OTHERS + "\nIf it still "
    "fails on the first convolution of an idle GPU, it is the install: compare "
    "`python -c 'import torch; print(torch.version.cuda, torch.backends.cudnn.version())'` with "
    "the driver's CUDA in `nvidia-smi` (CUDA 11.x needs driver 450.80.02 or newer, 12.x "
    "525.60.13; an Ampere GPU needs a CUDA 11 / cuDNN 8 build), unset a LD_LIBRARY_PATH that "
    "puts a system cuDNN before the framework's own, and install a matching build.")


@signature("cudnn-failure/no-engine",
           r"Unable to find a valid cuDNN algorithm to run convolution|(?:GET|FIND) was unable "
           r"to find an engine to execute this computation|"
           # XLA's autotuner (JAX, TensorFlow, EXLA) when no convolution algorithm could run
           r"Failed to determine best cudnn convolution algorithm",
           ("cuDNN algorithm", "unable to find an engine", "best cudnn convolution"),
           "cuDNN found no algorithm it could run (usually no memory left for its workspace)",
           example="RuntimeError: Unable to find a valid cuDNN algorithm to run convolution")
@signature("cudnn-failure/legacy-runtime-error",
           r"(?P<library>cudnn|cuDNN) runtime error : (?P<message>.+?)(?: at |$)",
           ("runtime error :",), "cuDNN call failed",
           example="RuntimeError: cuDNN runtime error : resource allocation failed at "
           "/pytorch/aten/src/THC/THCGeneral.cpp:250")
@signature("cudnn-failure/status",
           # (a status called a warning, "the CUDNN_STATUS_NOT_SUPPORTED warning", names the
           # plan-rejected warning below, not a failure; so does one torch closes with
           # "(Triggered internally at ...)", which it writes only after a warning)
           # (its ends are not word boundaries: a Chinese sentence runs on into the name,
           # "报了CUDNN_STATUS_EXECUTION_FAILED错误", and a CJK character is a word character)
           # (nor is its end a date: a paste that lost its line ends runs the next line's
           # timestamp into the name, "CUDNN_STATUS_INTERNAL_ERROR2020-01-05 15:14:13")
           r"(?P<status>CUDNN_STATUS_(?!SUCCESS(?![A-Za-z0-9_]))[A-Z_]+(?![A-Za-z_])"
           r"(?!\d(?!\d{3}-\d\d-\d\d[T ]))"
           r"(?!\s+warnings?\b|\s*\(Triggered internally\b)|"
           r"CUDNN_BACKEND_API_FAILED)|"
           # a check that the status is CUDNN_STATUS_SUCCESS, with the number it got (Caffe's
           # and MXNet's glog "status == CUDNN_STATUS_SUCCESS (4 vs. 0)", Caffe2's
           # "CUDNN_STATUS_SUCCESS. 9 vs 0.", either way round; the name after it, when printed,
           # is the same status)
           r"\bCUDNN_STATUS_SUCCESS ?\)? ?[.(]? ?(?P<code>[1-9]\d{0,3}) ?(?i:vs)\.? ?0\b|"
           r"\bCUDNN_STATUS_SUCCESS ?(?:== ?[\w.>()-]{1,40} ?)?\(0 ?(?i:vs)\.? ?"
           r"(?P<code_>[1-9]\d{0,3})\)|"
           # the status as people shorten it, without its STATUS_: "fails with
           # CUDNN_NOT_SUPPORTED"
           r"(?<![A-Za-z0-9_])CUDNN_(?P<short>NOT_SUPPORTED|BAD_PARAM|EXECUTION_FAILED|"
           r"INTERNAL_ERROR|NOT_INITIALIZED|ALLOC_FAILED|ARCH_MISMATCH|MAPPING_ERROR)"
           r"(?![A-Za-z0-9_])|"
           # cuDNN's frontend could not build a descriptor, raised as the error itself
           # ("RuntimeError: CUDNN_BACKEND_TENSOR_DESCRIPTOR cudnnFinalize failed"); not the
           # warning for one plan turned down ("... cudnnException: ..._PLAN_DESCRIPTOR: ...")
           r"\b(?:RuntimeError|Error): CUDNN_BACKEND_[A-Z_]{1,40}_DESCRIPTOR:? cudnnFinalize "
           r"(?:Descriptor )?[Ff]ailed\b|"
           # ONNX Runtime's (and CNTK's) check of a cuDNN call: "CUDNN failure 4:
           # CUDNN_STATUS_INTERNAL_ERROR ; GPU=0 ; ...", the number alone where a title keeps
           # it; and ONNX Runtime's kernels' "CUDNN error executing cudnnConvolutionForward(...)",
           # which names the call and no status
           r"(?<![A-Za-z0-9_])(?:CUDNN|cuDNN) failure (?P<code__>[1-9]\d{0,3})(?![\d.])|"
           r"(?<![A-Za-z0-9_])CUDNN2? error executing (?P<call>cudnn\w{1,60})\(|"
           # darknet's check, the status on the line after it ("cuDNN status Error in: file:
           # ...convolutional_kernels.cu : backward_convolutional_layer_gpu() : line: 854")
           r"\bcuDNN status Error in: file:",
           ("CUDNN_", "CUDNN failure ", "cuDNN failure ", "CUDNN error executing ",
            "CUDNN2 error executing ", "cuDNN status Error"), "cuDNN call failed",
           key_field="status", extract=_status,
           example="RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED")
def _cudnn(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    status = str(numbers.get("status") or "")
    kind = cudnn_status_kind(status) if status else None
    message = str(numbers.get("message") or "").lower()
    named = f" ({status})" if status else ""
    if (kind == MEMORY or sig.id == "cudnn-failure/no-engine"
            or "allocation failed" in message):
        explanation = (
            f"cuDNN could not allocate the workspace it needs{named}. It allocates outside the "
            "framework's cache, so this is an out-of-memory in disguise: the GPU was already "
            "full.")
        remedy = f"{SCAN_OTHERS}\nThen reduce memory use:\n{REDUCE_MEMORY}"
        return advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="out-of-memory")
    if kind == UNSUPPORTED:
        explanation = (
            f"This cuDNN does not support the call's data type, shape or layout, or this GPU"
            f"{named} (for example bf16 before compute capability 8.0, or a cuDNN built "
            "without this GPU's architecture).")
        remedy = ("Check dtype support for this GPU (try float32 to confirm); install a "
                  "framework build whose cuDNN supports this GPU; or set "
                  "torch.backends.cudnn.enabled = False to confirm cuDNN is the culprit.")
        return advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="unsupported")
    if kind == MEMORY_OR_MISMATCH or "not initialized" in message:
        explanation = (
            f"cuDNN failed{named} without naming a cause. Most often the GPU had no memory left "
            "for cuDNN's handle or workspace (it allocates outside the framework's cache); "
            "otherwise the cuDNN loaded does not match the driver or the GPU.")
        return advice(sig, numbers, explanation, _HOW_TO_TELL, tier=1.0,
                      diagnosis="memory-or-mismatch")
    explanation = (
        f"A cuDNN kernel failed while running{named}. Usually out of memory or a cuDNN/driver "
        "mismatch; or an earlier kernel had already faulted and cuDNN's call was the first to "
        "notice (CUDA reports errors asynchronously).")
    remedy = _HOW_TO_TELL + "\nIf neither: " + FIND_FAULTING_KERNEL
    return advice(sig, numbers, explanation, remedy, tier=2.0, diagnosis="execution")


# PyTorch's cuDNN v8 path asks cuDNN for execution plans and tries them in turn, warning about
# each one cuDNN rejects; the convolution runs with the next plan. Only when none is left does it
# fail ("unable to find an engine", above).
fixed("cudnn-failure/plan-rejected",
      # (up to the status it names: a terminal's cut before it still reads as this warning)
      # (and its last line alone, where the warning was wrapped: the status torch closes with
      # "(Triggered internally at ...)", which it writes only after a warning)
      r"(?:UserWarning: Plan failed with a cudnnException"
      r"|cudnn_status: (?=CUDNN_STATUS_[A-Z_]+ \(Triggered internally\b))"
      r"(?:[^\n]*?(?P<status>CUDNN_STATUS_[A-Z_]+))?", ("CUDNN_",),
      "cuDNN rejected one execution plan; PyTorch went on with the next",
      severity=Severity.INFO, tier=5.0,
      example="conv.py:456: UserWarning: Plan failed with a cudnnException: "
      "CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: cudnnFinalize Descriptor Failed cudnn_status: "
      "CUDNN_STATUS_NOT_SUPPORTED (Triggered internally at ../aten/src/ATen/native/cudnn/"
      "Conv_v8.cpp:919.)",
      explanation="A warning, not a failure: PyTorch tries the execution plans cuDNN offers for "
      "a convolution one by one and says so when cuDNN turns one down; the convolution ran with "
      "a plan cuDNN accepted.",
      remedy="Nothing, unless the run then fails: then the failure after it is the one to "
      "read.")


# cuDNN's frontend (PyTorch's cuDNN attention and its v9 convolutions) turning down the whole
# graph PyTorch built: "RuntimeError: cuDNN Frontend error: [cudnn_frontend] Error: No execution
# plans support the graph." No plan of any engine takes that shape, data type or GPU; unlike the
# warning above, nothing is left to try and the call fails.
fixed("cudnn-failure/frontend-no-plan",
      r"\[cudnn_frontend\] Error: \w"
      r"|\bNo execution plans? supports? the graph\b",
      ("cudnn_frontend] Error", "execution plans support", "execution plan supports"),
      "cuDNN's frontend found no execution plan for the operation",
      tier=1.0,
      example="RuntimeError: cuDNN Frontend error: [cudnn_frontend] Error: No execution plans "
      "support the graph.",
      explanation="cuDNN's frontend, which PyTorch uses for its cuDNN attention (scaled dot "
      "product attention's cuDNN backend) and newer convolution paths, found no engine that "
      "runs the graph it was given: a head size, sequence layout, data type or mask this cuDNN "
      "does not support, or this GPU's architecture. Not a memory problem.",
      remedy="Take the cuDNN path out of the failing call: for attention, "
      "`torch.backends.cuda.enable_cudnn_sdp(False)` (or run it under "
      "`torch.nn.attention.sdpa_kernel([SDPBackend.FLASH_ATTENTION, "
      "SDPBackend.EFFICIENT_ATTENTION])`); for a convolution, "
      "`torch.backends.cudnn.enabled = False` to confirm. Then install a PyTorch build with a "
      "newer cuDNN (`python -c 'import torch; print(torch.backends.cudnn.version())'`).")


# TensorFlow and JAX checking the cuDNN they load against the one they were built with
# ("Loaded runtime CuDNN library: 8.1.0 but source was compiled with: 8.6.0", "Found cuDNN
# version 8600, but JAX was built against version 8900"), and their words when cuDNN would not
# start ("DNN library initialization failed", "Failed to get convolution algorithm. This is
# probably because cuDNN failed to initialize").
@signature("cudnn-failure/framework-init",
           r"Loaded runtime CuDNN library: (?P<loaded>[\d.]{1,12}) but source was compiled "
           r"with: (?P<built>[\d.]{1,12})|Found cuDNN version (?P<loaded_>\d{1,6}), but JAX was "
           r"built against version (?P<built_>\d{1,6})|(?P<init>DNN library initialization "
           r"failed|Failed to get convolution algorithm(?:\. This is probably because cuDNN "
           # (cut after its first sentence, as a title quotes it)
           r"failed to initialize|(?=\.?[\"'`]|\.?\s*$)))|"
           # (TensorFlow's kernels when a cuDNN call would not launch: "cuDNN launch failure :
           # input shape ([64,4,4,512])")
           r"(?P<launch>cuDNN launch failure : input shape ?\()",
           ("CuDNN library", "Found cuDNN version", "DNN library initialization",
            "Failed to get convolution algorithm", "cuDNN launch failure"),
           "cuDNN could not start under TensorFlow or JAX",
           example="E tensorflow/stream_executor/cuda/cuda_dnn.cc:361] Loaded runtime CuDNN "
           "library: 8.1.0 but source was compiled with: 8.6.0.")
def _framework_init(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("init") or numbers.get("launch"):
        what = ("A cuDNN call (a convolution, a batch normalisation) failed to launch under "
                "TensorFlow" if numbers.get("launch") else
                "cuDNN could not start under TensorFlow or JAX")
        numbers = {key: value for key, value in numbers.items() if key not in ("init", "launch")}
        explanation = (
            f"{what}. Most often the framework had already "
            "taken the GPU's memory for itself (both preallocate most of it at start, and a "
            "second process does the same), leaving none for cuDNN's handle or workspace; "
            "otherwise the "
            "cuDNN installed is not the one the framework was built for (an earlier line says "
            "which versions).")
        remedy = (f"{SCAN_OTHERS}\nLet the framework allocate as it goes: export "
                  "TF_FORCE_GPU_ALLOW_GROWTH=true (TensorFlow) or "
                  "XLA_PYTHON_CLIENT_PREALLOCATE=false (JAX). If it still fails on an idle GPU, "
                  "install the cuDNN the framework's release was built with (pip's "
                  "nvidia-cudnn-cu12 wheel, or jax[cuda12] / tensorflow[and-cuda]), and unset "
                  "a LD_LIBRARY_PATH that puts another cuDNN first.")
        return advice(sig, numbers, explanation, remedy, tier=1.0,
                      diagnosis="memory-or-mismatch")
    loaded, built = numbers.get("loaded"), numbers.get("built")
    explanation = (
        f"The framework was built against cuDNN {built} but loaded cuDNN {loaded}: the major "
        "version must match and the minor be at least the one it was built with, so every "
        "convolution fails.")
    remedy = ("Install the cuDNN the framework's release was built with (pip's "
              "nvidia-cudnn-cu12 wheel, or jax[cuda12] / tensorflow[and-cuda]), and unset a "
              "LD_LIBRARY_PATH or conda package that puts an older cuDNN first.")
    return advice(sig, numbers, explanation, remedy, tier=1.0, diagnosis="version-mismatch",
                  title="cuDNN version does not match the framework's build")
