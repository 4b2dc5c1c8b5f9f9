"""The NVIDIA driver, the CUDA runtime, the torch build and the GPU do not fit together.

A torch wheel is built for one CUDA version and a set of GPU architectures; the driver
supports CUDA up to some version and a range of GPUs. CUDA cannot start when the driver is
older than the CUDA the code was built for (or than the PTX in it), when the build has no
kernels for this GPU's architecture, when the GPU is too old or too new for the driver or for
torch, when CUDA forward-compatibility libraries are used where they do not work, or when no
driver or GPU is visible at all.

Why it matters: no CUDA work runs on the machine until it is fixed; changing the program does
not help, and every job on the node fails the same way.

Example: ``RuntimeError: The NVIDIA driver on your system is too old (found version 11040).``

Fix: these are platform problems: install the right driver or torch build (a torch build for
the driver's CUDA, one whose architecture list includes the GPU, or a driver branch that lists
it); in containers, pass the GPUs through (``docker run --gpus all``).
"""

from __future__ import annotations

import re
from typing import Any

from gpu_audit.explain.signatures.guards import unless_marks, unless_words
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
from gpu_audit.knowledge.cuda_errors import (
    BEFORE_10_1,
    STATUS_WORDS,
    number_needles,
    numbered_before_renumbering,
    reported_number,
    status_check,
)
from gpu_audit.knowledge.torch_builds import build_for_driver, install_command
from gpu_audit.model import Severity
from gpu_audit.visible_devices import hides_every_gpu

CLASS = document_class("driver-mismatch", __doc__)

_TORCH_FOR_DRIVER = (
    "Install a torch wheel built for a CUDA version this driver supports (choose it at "
    "https://pytorch.org/get-started/locally/, e.g. `pip install torch --index-url "
    "https://download.pytorch.org/whl/cu118`), or update the NVIDIA driver."
)


def _driver_cuda_version(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    version = found.get("found_version")
    if isinstance(version, int):  # 10010 -> the driver supports CUDA up to 10.1
        found["driver_cuda_version"] = f"{version // 1000}.{version % 1000 // 10}"
    return found


def _capability_range(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    if "minimum_" in found:  # the two message versions name the same number
        found["minimum"] = found.pop("minimum_")
    return found


@signature("driver-mismatch/insufficient-driver",
           # (also cut before its last word, as titles and quotes often keep it, and lower-cased
           # by a writer who retyped it; and Caffe's check with the status's number, 35, as
           # TensorRT's start-up also prints it)
           # (also with "run time" in two words, as a writer retypes it)
           r"(?i:CUDA driver version is insufficient for CUDA run ?time)(?: version|\b)|"
           # (CUDA's description of the status, as libraries' hints print it, PaddlePaddle's
           # "This indicates that the installed NVIDIA CUDA driver is older than the CUDA
           # runtime library", and as a writer retells it, "it told me that gpu driver is older
           # than gpu runtime version"; not a condition or advice: "if your driver is older")
           + unless_words("if|whether|you|your|when|unless|check") +
           r"(?i:\b(?:GPU|CUDA|NVIDIA|display) driver(?: version)? is older than (?:the )?"
           r"(?:GPU |CUDA )?run ?time\b)|"
           r"cudaErrorInsufficientDriver|\bCUDA initiali[sz]ation failure with error:? ?35\b|"
           + status_check("cudaErrorInsufficientDriver"),
           ("insufficient", "InsufficientDriver", "cudaSuccess", "failure with error",
            "is older than "),
           "The NVIDIA driver is older than the CUDA runtime PyTorch was built with", tier=0.0,
           example="RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient "
           "for CUDA runtime version at /pytorch/aten/src/THC/THCGeneral.cpp:74")
@signature("driver-mismatch/driver-too-old",
           r"NVIDIA driver on your system is too old"
           r"(?: ?\(found version (?P<found_version>\d+)\))?",
           ("driver on your system is too old",), "The NVIDIA driver is too old for this PyTorch",
           extract=_driver_cuda_version, tier=0.0,
           example="RuntimeError: The NVIDIA driver on your system is too old (found version "
           "11040). Please update your GPU driver by downloading and installing a new version.")
def _driver_too_old(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    supports = (f" (the driver supports CUDA up to {numbers['driver_cuda_version']})"
                if numbers.get("driver_cuda_version") else "")
    explanation = (f"This torch was built for a newer CUDA than the installed NVIDIA driver "
                   f"supports{supports}, so CUDA cannot start.")
    driver_cuda = numbers.get("driver_cuda_version")
    if build_for_driver(driver_cuda) is None:
        return advice(sig, numbers, explanation, _TORCH_FOR_DRIVER)
    command = install_command(None, driver_cuda)
    return advice(sig, numbers, explanation,
                  f"Install a torch wheel built for this driver: {command}, or update the NVIDIA "
                  "driver.")


@signature("driver-mismatch/driver-older-than-cuda",
           # other programs' words for it: Ollama's "your nvidia driver is too old or missing",
           # Julia's CUDA packages' "CUDA 10.0 is not supported by your driver (which supports up
           # to 9.0)" (cut after "by" where a logger wrapped it)
           r"(?i:your nvidia driver is too old)|CUDA (?P<required_cuda>\d+\.\d+) is not "
           r"supported by(?:\s*your driver(?:\s*\(which supports up to "
           r"(?P<driver_cuda_version>\d+\.\d+)\))?|\s*$)|"
           # ... and the writer's retelling of it: "the msg is that my Nvidia version is too old"
           r"\b(?:my|our) (?i:nvidia) (?:driver|version) is too old\b|"
           # (or as not supported by the framework's build: "My Nvidia driver is not supported
           # for the pytorch-gpu version", "our driver doesn't support the CUDA torch needs")
           # (not a condition or a guess: "if my driver is not supported by torch, ...")
           + unless_words("if|whether|maybe|might|may|perhaps|possibly") +
           r"\b(?i:my|our) (?i:nvidia )?(?i:GPU )?driver(?: version)? (?:(?:is not|isn't|was not|"
           r"wasn't) (?:supported|compatible) (?:for|by|with)|(?:does not|doesn't|did not|"
           r"didn't) support) (?:the |this )?(?i:pytorch|torch|tensorflow|cuda|jax)\b|"
           # (or told as the cause: "an error that turned out to be caused by the nvidia driver
           # being too old", "it failed because our NVIDIA driver was too old")
           # (not a condition or a guess: "if it is caused by the driver being too old")
           + unless_words("if|whether|you|your|may|might|could|maybe|possibly") +
           r"\b(?:caused by|due to|because(?: of)?) (?:the|my|our) (?i:nvidia )?(?i:GPU )?"
           r"driver(?:'s version)? (?:being|is|was) too old\b|"
           # the CUDA runtime's own words for a call the driver is too old to run
           # (cudaErrorCallRequiresNewerDriver, status 36)
           r"API call is not supported in the installed CUDA driver|"
           # a driver API function the driver's library does not have (it came with a newer
           # CUDA): cuda-python's 'Function "cuMemAllocAsync" not found', the loader's
           # "libcuda.so.1: undefined symbol: cuMemAllocAsync" (or a library's that calls it,
           # "cuda_utils.so: undefined symbol: cuTensorMapEncodeTiled": only the driver's
           # library has the cu[A-Z]... functions; cublas..., cudnn..., cuda... are others')
           r"\bFunction \"(?P<function>cu[A-Z]\w{2,60})\" not found\b|"
           r"\.so[.\d]{0,12}: undefined symbol: (?P<function_>cu[A-Z]\w{2,60})|"
           # (torch's lookup of the driver functions it needs, in c10/cuda/driver_api.cpp:
           # 'r.cuMemCreate_ INTERNAL ASSERT FAILED at ".../driver_api.cpp":15, ... Can't find
           # cuMemCreate', with dlerror's words after it in older releases, without in newer)
           # (the "r." and "_" around the name are that file's; a log may cut the rest)
           r"\br\.(?P<function__>cu[A-Z]\w{2,60}?)_ INTERNAL ASSERT FAILED\b|"
           r"cudaErrorCallRequiresNewerDriver|"
           # Julia's CUDA.jl, whose toolkits all need a newer driver than the one found: "CUDA
           # driver 8.0.0 is not compatible with any supported CUDA toolkit (11.4.4, ...)", "CUDA.jl
           # only supports NVIDIA drivers for CUDA 11.0 or higher (yours is for CUDA 10.2)"
           r"\bCUDA driver (?P<driver_cuda_version_>\d{1,2}\.\d)(?:\.\d{1,3})? is not "
           r"compatible with any (?:supported |known |available )?CUDA toolkit|"
           r"\bonly supports NVIDIA drivers for CUDA (?P<required_cuda_>\d{1,2}\.\d) or "
           r"higher \(yours is for CUDA (?P<driver_cuda_version__>\d{1,2}\.\d)|"
           # a program's own check of the driver against the CUDA it was built with, naming the
           # newest CUDA the driver supports as cudaDriverGetVersion gives it (ethminer's
           # "Insufficient CUDA driver: 9010": CUDA 9.1)
           r"\bInsufficient CUDA driver: (?P<found_version_>\d{4,6})\b|"
           + status_check("cudaErrorCallRequiresNewerDriver", group="cuda_status"),
           ("driver is too old", "driver being too old", "driver was too old",
            "is not supported by", "version is too old",
            "API call is not supported in the installed", "cudaErrorCallRequiresNewerDriver",
            "cudaSuccess", 'Function "cu', "undefined symbol: cu", "_ INTERNAL ASSERT",
            "Insufficient CUDA driver: ", "is not compatible with any",
            "only supports NVIDIA drivers for CUDA", "driver is not", "driver isn't",
            "driver was not", "driver wasn't", "driver does", "driver doesn't", "driver did",
            "driver version is", "driver version was", "driver version does", "driver version did"),
           "The NVIDIA driver is older than the CUDA the program needs", tier=0.0,
           extract=lambda match, line: _status_numbering(_driver_cuda_version(match, line),
                                                         line),
           example="ERROR: LoadError: CUDA 10.0 is not supported by your driver (which supports "
           "up to 9.0)")
def _driver_older_than_cuda(sig: Signature, numbers: dict[str, Any],
                            ctx: AdviceContext) -> Advice:
    if numbers.get("cuda_status") in BEFORE_10_1:
        before = _numbered_before_10_1(numbers, ctx)
        if before:
            return _status_before_10_1(sig, numbers)
        if before is None:
            numbers = dict(numbers, cuda_status_meaning=_RENUMBERED_NOTE)
    needs = (f"CUDA {numbers['required_cuda']}, newer than" if numbers.get("required_cuda")
             else "a newer CUDA than")
    supports = (f" (it supports CUDA up to {numbers['driver_cuda_version']})"
                if numbers.get("driver_cuda_version") else "")
    explanation = (f"The program (or a library or container it runs in) needs {needs} the "
                   f"installed NVIDIA driver supports{supports}, so CUDA cannot start.")
    if numbers.get("function"):
        explanation = (f"The NVIDIA driver's library (libcuda) has no function "
                       f"{numbers['function']}: it came with a newer CUDA than this driver "
                       "supports, and the program (or its CUDA bindings) calls it.")
    if numbers.get("cuda_status_meaning"):
        explanation += (" (Read by CUDA 10.1's numbering: before 10.1, status 36 was "
                        f"{BEFORE_10_1[36]}, \"{STATUS_WORDS[BEFORE_10_1[36]]}\"; the log does "
                        "not say which CUDA the program was built with.)")
    remedy = ("Update the NVIDIA driver (the \"CUDA Version\" in `nvidia-smi`'s header is the "
              "newest CUDA it supports), or use a build or container image of the program made "
              "for that CUDA.")
    return advice(sig, numbers, explanation, remedy)


_RENUMBERED_NOTE = ("cudaErrorCallRequiresNewerDriver since CUDA 10.1; cudaErrorSetOnActiveProcess "
                    "before 10.1")


def _status_numbering(found: dict[str, Any], line: str) -> dict[str, Any]:
    """A status number's numbering, where the line names the status by either era's name or
    words (a check's message after the number: "(36 vs. 0) cannot set while device is ...")."""
    old = BEFORE_10_1.get(found.get("cuda_status", -1))
    if old is None:
        return found
    if old in line or STATUS_WORDS[old] in line:
        found["cuda_numbering"] = "before 10.1"
    elif "cudaErrorCallRequiresNewerDriver" in line or STATUS_WORDS[
            "cudaErrorCallRequiresNewerDriver"] in line:
        found["cuda_numbering"] = "10.1 and later"
    return found


def _numbered_before_10_1(numbers: dict[str, Any], ctx: AdviceContext) -> bool | None:
    """Whether the log's CUDA numbers its statuses as before 10.1: the line's own words, else
    the CUDA the log states (a driver that supports only CUDA 10.0 or older runs no later
    runtime); None when the log does not say."""
    if numbers.get("cuda_numbering"):
        return numbers["cuda_numbering"] == "before 10.1"
    before = numbered_before_renumbering(ctx.facts.get("cuda_version"))
    if before is None and numbered_before_renumbering(ctx.facts.get("driver_cuda_version")):
        return True
    return before


def _status_before_10_1(sig: Signature, numbers: dict[str, Any]) -> Advice:
    """Status 36 from a CUDA before 10.1: cudaErrorSetOnActiveProcess, no driver problem."""
    old = BEFORE_10_1[36]
    numbers = dict(numbers, cuda_numbering="before 10.1", cuda_status_name=old)
    explanation = (f"The CUDA call returned status 36, which before CUDA 10.1 (this log's CUDA) "
                   f"is {old}: \"{STATUS_WORDS[old]}\". The program set the device or its "
                   "flags (cudaSetDevice, cudaSetDeviceFlags) after the CUDA context on that "
                   "thread was already in use; the driver is not at fault.")
    remedy = ("Set the device and its flags before the first CUDA call on each thread (or "
              "accept the status where the program sets them again, clearing it with "
              "cudaGetLastError()); since CUDA 10.1 the same failure is status 708.")
    return advice(sig, numbers, explanation, remedy, tier=1.0,
                  title="CUDA status 36 before CUDA 10.1: cannot set while the device is active")


# torch told finding no CUDA ("torch.cuda.is_available() is false", "is_available() returns
# False even after installing the driver"; not a condition, a check to run or advice: "if
# torch.cuda.is_available() is False, ...", "check that torch.cuda.is_available() returns True")
fixed("driver-mismatch/cuda-unavailable-told",
      unless_words(r"if|whether|when|unless|you|your|should|check|make sure|to see|ensure|"
                   r"verify|test|assert", start=r"(?:^|(?<=[.!?;:] ))", stop=r"\n.!?;")
      + r"(?i:\b(?:torch\.)?cuda\.is_available\(\)\)?[`'\"]?:? ?(?:(?:still|always|only|just) )?"
      r"(?:is|was|returns?|returned|"
      r"gives?|gave|prints?|printed|shows?|showed|outputs?|=|==|-+>|=+>|→|:)? ?"
      r"(?:always |still |only |just )?[`'\"]?false\b"
      # (or told turning False, in Chinese: "之前print(torch.cuda.is_available())为True 安装之后
      # 变成了False")
      r"|\b(?:torch\.)?cuda\.is_available\(\)\)?[^\n]{0,40}?(?:变成了?|变为|又变成了?)\s?[`'\"]?"
      r"false\b"
      # (not a rule about machines in general: "... returns False when no GPU is present")
      r"(?![^\n.]{0,40}?\b(?:if|when|whenever|unless|on (?:a |any |machines?|systems?|hosts?|"
      r"CPU))\b))",
      ("is_available",),
      # (the weakest reading: a symptom of every cause a text may name beside it)
      "PyTorch finds no CUDA (told in the writer's words)", tier=4.0, yields_to_titles=True,
      example="After installing the drivers torch.cuda.is_available() is still False.",
      explanation="The writer says torch.cuda.is_available() returns False: this PyTorch cannot "
      "use a GPU. Most often the wheel is a CPU-only build (torch.version.cuda is None; pip picked "
      "it from PyPI or a CPU index), the driver is older than the CUDA the wheel was built for, "
      "no driver or device is visible (a container started without GPUs, a hiding "
      "CUDA_VISIBLE_DEVICES), or the machine has no NVIDIA GPU.",
      remedy="`python -c \"import torch; print(torch.__version__, torch.version.cuda)\"` (None: a "
      "CPU-only wheel: install the CUDA build from https://pytorch.org/get-started/locally/), "
      "`nvidia-smi` (the driver, and the newest CUDA it supports), `echo $CUDA_VISIBLE_DEVICES`; "
      "in a container, start it with `--gpus all`.")


# CUDA_VISIBLE_DEVICES set in the log: a shell's assignment or export, a notebook's %env, a
# Python script's os.environ (a fact: read with CUDA's "No CUDA GPUs are available").
@signature("driver-mismatch/visible-devices-set",
           r"(?:(?<![\w$])(?:export\s+|%env\s+|-e\s+|--env[ =])?CUDA_VISIBLE_DEVICES\s?=|"
           r"\bos\.environ\[\s?[\"']CUDA_VISIBLE_DEVICES[\"']\s?\]\s?=|"
           r"\bos\.environ\.setdefault\(\s?[\"']CUDA_VISIBLE_DEVICES[\"'],)"
           # (a shell's value follows the sign: "CUDA_VISIBLE_DEVICES= python" sets it empty)
           r"(?:\s?\"(?P<double>[^\"\n]{0,60})\"|\s?'(?P<single>[^'\n]{0,60})'|"
           r"(?P<bare>[^\s\"';&|)$`]{0,60})(?![^\s;&|)]))",
           ("CUDA_VISIBLE_DEVICES",),
           "CUDA_VISIBLE_DEVICES as the log sets it", severity=Severity.INFO, tier=5.0,
           fact=True, extract=lambda match, _line: {"visible_devices": [
               next(value for value in match.group("double", "single", "bare")
                    if value is not None)]},
           example='os.environ["CUDA_VISIBLE_DEVICES"] = "1"')
def _visible_devices_set(sig: Signature, numbers: dict[str, Any],
                         ctx: AdviceContext) -> Advice:
    return advice(sig, numbers, "The log sets CUDA_VISIBLE_DEVICES: the GPUs CUDA may use.",
                  "Nothing to do by itself.")


# The CUDA a log states: nvcc's version, PyTorch's build, CMake's search, the toolkit's
# version.txt, and nvidia-smi's header (the newest CUDA the driver supports). A fact: the
# numbering a status number is read by (CUDA 10.1 renumbered some).
@signature("driver-mismatch/cuda-version-stated",
           r"\bCuda compilation tools, release (?P<cuda_version>\d+\.\d+)|"
           r"\bCUDA used to build PyTorch: (?P<cuda_version_>\d+\.\d+)|"
           r"\bFound CUDA: \S+ \(found (?:suitable )?(?:exact )?version "
           r"\"(?P<cuda_version__>\d+\.\d+)|"
           r"\bCUDA Version (?P<cuda_version___>\d+\.\d+)\.\d+|"
           r"\bDriver Version: [\d.]+ +CUDA Version: (?P<driver_cuda_version>\d+\.\d+)",
           ("Cuda compilation tools", "CUDA used to build", "Found CUDA: ", "CUDA Version"),
           "The CUDA version the log states", severity=Severity.INFO, tier=5.0, fact=True,
           example="Cuda compilation tools, release 9.0, V9.0.176")
def _cuda_version_stated(sig: Signature, numbers: dict[str, Any],
                         ctx: AdviceContext) -> Advice:
    # a fact: it says how to read a status number elsewhere in the log, it opens nothing
    return advice(sig, numbers, "The CUDA version the log states.", "Nothing.")


@signature("driver-mismatch/container-driver-release",
           # an NGC container's start-up banner
           r"This container was built for NVIDIA Driver Release (?P<required_driver>[\d.]+) or "
           r"later, but version (?P<driver_version>[\d.]+) was detected(?P<unavailable> and "
           r"compatibility mode is UNAVAILABLE)?",
           ("NVIDIA Driver Release",),
           "The container needs a newer NVIDIA driver than the host has", tier=0.0,
           example="ERROR: This container was built for NVIDIA Driver Release 535.104 or later, "
           "but version 470.82.01 was detected and compatibility mode is UNAVAILABLE.")
def _container_driver_release(sig: Signature, numbers: dict[str, Any],
                              ctx: AdviceContext) -> Advice:
    explanation = (f"The container was built for NVIDIA driver {numbers.get('required_driver')} "
                   f"or later and the host runs {numbers.get('driver_version')}.")
    if numbers.get("unavailable"):
        explanation += (" CUDA's forward compatibility, which would bridge that on data-centre "
                        "GPUs, is not available here, so CUDA cannot start in it.")
    else:
        explanation += (" It runs in forward-compatibility mode, which works only on data-centre "
                        "GPUs; CUDA fails on the others.")
    remedy = ("Update the host's NVIDIA driver to that release or later, or use an older image "
              "built for the host's driver (NGC's support matrix lists each release's driver).")
    return advice(sig, dict(numbers, unavailable=bool(numbers.get("unavailable"))), explanation,
                  remedy, severity=Severity.ERROR if numbers.get("unavailable")
                  else Severity.WARNING)


@signature("driver-mismatch/container-requirement",
           r"requirement error: unsatisfied condition: cuda ?>= ?(?P<required_cuda>\d+\.\d+)",
           ("unsatisfied condition",),
           "The container needs a newer CUDA than the host's NVIDIA driver supports", tier=0.0,
           example="nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, "
           "please update your driver to a newer version, or use an earlier cuda container")
def _container_requirement(sig: Signature, numbers: dict[str, Any],
                           ctx: AdviceContext) -> Advice:
    cuda = numbers.get("required_cuda")
    explanation = (f"The image declares that it needs CUDA {cuda} or newer "
                   "(NVIDIA_REQUIRE_CUDA), and the host's NVIDIA driver supports an older CUDA, "
                   "so nvidia-container-cli refused to start the container.")
    remedy = ("Use an image tag built for the CUDA version the host driver supports (`nvidia-smi` "
              "on the host prints it as 'CUDA Version'), or update the host's NVIDIA driver. "
              "NVIDIA_DISABLE_REQUIRE=1 skips the check, but the CUDA inside still needs a driver "
              "that can run it.")
    return advice(sig, numbers, explanation, remedy)


@signature("driver-mismatch/invalid-device-function",
           # CUDA's words for a kernel launched on a GPU it was not compiled for
           # (cudaErrorInvalidDeviceFunction: "the requested device function does not exist or is
           # not compiled for the proper device architecture"), printed after a kernel's or a
           # call's name ("filterH: invalid device function") or as a CUDA or HIP error
           r"(?<![A-Za-z0-9_])[Ii]nvalid device function\b|"
           r"(?:cuda|hip)ErrorInvalidDeviceFunction\b|"
           # (a program's own check before its first kernel, ggml's "ERROR: ggml-cuda was
           # compiled without support for the current GPU architecture")
           r"\bcompiled without support for the current GPU architecture\b",
           ("invalid device function", "Invalid device function", "InvalidDeviceFunction",
            "compiled without support for the current GPU"),
           "A kernel was not compiled for this GPU's architecture", tier=0.0,
           group="no-kernel-image",
           example="RuntimeError: CUDA error: invalid device function")
def _invalid_device_function(sig: Signature, numbers: dict[str, Any],
                             ctx: AdviceContext) -> Advice:
    explanation = ("A CUDA kernel was launched on a GPU whose architecture the program (or a "
                   "library or extension it loads) was not compiled for: the binary holds "
                   "kernels for other GPUs only, and no PTX the driver could compile for this "
                   "one. A program built on one machine and run on a GPU of another generation "
                   "(a laptop's, a newer card) fails this way on its first kernel.")
    remedy = ("Rebuild with this GPU's architecture in the list (`nvidia-smi --query-gpu="
              "compute_cap --format=csv` shows it): CMake's CMAKE_CUDA_ARCHITECTURES (or the "
              "project's multi-architecture option), nvcc's -gencode flags, TORCH_CUDA_ARCH_LIST "
              "for PyTorch extensions; or install a prebuilt release made for it.")
    return advice(sig, numbers, explanation, remedy)


@signature("driver-mismatch/no-kernel-image",
           # (also capitalised, where a title or a sentence starts with it; and cut after
           # "available" where a title or a terminal kept only that much, at the line's end;
           # and retyped "on this device", a program's own check's wording or a title's)
           r"[Nn]o kernel image is available(?: for execution on (?:the|this) device|[.!]?\s*$)|"
           # (and as a title shortens it: "no kernel image available on RTX 5090")
           r"\b[Nn]o kernel image (?:is )?available (?=(?:on|for|with) )|"
           # (the runtime's status 200 as a launcher prints it: Triton's "Triton Error [CUDA]:
           # device kernel image is invalid", CUDA's cudaErrorInvalidKernelImage)
           r"\bdevice kernel image is invalid\b|cudaErrorInvalidKernelImage|"
           r"CUDA_ERROR_INVALID_IMAGE\b|"
           # (PaddlePaddle's check of its wheel's architectures against the GPU's: "The GPU
           # architecture in your current machine is Ampere, which is not compatible with Paddle
           # installation with arch: 35 50 52 60 61 70 75")
           r"\bGPU architecture in your current machine is [\w ]{1,30}, which is not compatible "
           r"with Paddle installation with arch\b|"
           r"cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU|"
           + status_check("cudaErrorNoKernelImageForDevice"),
           ("no kernel image", "No kernel image", "NoKernelImage", "NO_BINARY_FOR_GPU",
            "cudaSuccess", "kernel image is invalid", "InvalidKernelImage", "INVALID_IMAGE",
            "Paddle installation with arch"),
           "No kernel image for this GPU in the installed PyTorch/CUDA build", tier=0.0,
           group="no-kernel-image",
           example="torch.AcceleratorError: CUDA error: no kernel image is available for "
           "execution on the device")
@signature("driver-mismatch/supported-capabilities",
           r"The current PyTorch install supports CUDA capabilities "
           r"(?P<supported>(?:sm_\d+a?\s*)+)",
           ("supports CUDA capabilities",), "Architectures this PyTorch supports",
           attach="only", window=4,
           example="The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 "
           "sm_75 sm_80 sm_86 sm_90.")
@signature("driver-mismatch/arch-not-compiled",
           r"(?<![^\s:])(?P<gpu_name>[^:\n]{0,120}?)\s*with CUDA capability "
           r"(?P<capability>sm_\d+a?) is not compatible with the current PyTorch installation"
           r"(?:[^\n]{0,400}?supports CUDA capabilities "
           r"(?P<supported>(?:sm_\d+a?\s*)+))?",
           ("is not compatible with the current PyTorch",),
           "This PyTorch build has no kernels for this GPU's architecture", tier=0.0,
           group="no-kernel-image",
           example="NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with "
           "the current PyTorch installation.")
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
    return advice(sig, numbers, explanation, remedy)


# A GPU told to need a newer CUDA than the build the program runs on: "the gpu I use is a 3090
# while it only supports cuda 11.0 or newer", "an RTX 4090 requires CUDA 11.8 or later". The
# build has no kernels for the card's architecture, and its first kernels fail in whatever
# library runs them (cuDNN's causeless statuses, an illegal access). Not a condition, a question
# or advice ("does the 3090 only support cuda 11?", "you need CUDA 11 or newer").
fixed("driver-mismatch/gpu-needs-newer-cuda-told",
      unless_words(r"if|whether|you|your|may|might|maybe|should|would|could|does|do|is it") +
      r"(?i:\b(?:GPUs?|cards?|RTX ?\d{4}(?: ?Ti)?|GTX ?\d{3,4}(?: ?Ti)?|[2-5]0[5-9]0(?: ?Ti)?|A100|"
      r"H100|H200|L40S?)\b[^\n.?]{0,40}?\b(?:only )?(?:supports?|needs?|requires?) (?:only )?"
      r"(?:CUDA|cuda)(?: version)? ?(?:=|>=|≥)? ?(?P<required_cuda>\d{1,2}(?:\.\d)?)"
      r"(?: or (?:newer|later|above|higher)|\+| and (?:newer|later|above|up)))",
      ("upport", "need", "equire"),
      "The GPU needs a newer CUDA than the build (told in the writer's words)", tier=0.0,
      group="no-kernel-image",
      example="The gpu I use is a 3090, and it only supports cuda 11.0 or newer.",
      explanation="The writer says this GPU needs a newer CUDA than the one the program was "
      "built for: a build for an older CUDA has no kernels for the card's architecture (an "
      "Ampere card needs CUDA 11, Ada 11.8, Blackwell 12.8), so its first kernels fail, often "
      "as a library's status that names no cause (cuDNN's CUDNN_STATUS_EXECUTION_FAILED or "
      "_INTERNAL_ERROR) or an illegal access, not as 'no kernel image'.",
      remedy="Install the framework built for a CUDA this GPU supports (PyTorch: the cu118 or "
      "newer wheels from https://pytorch.org/get-started/locally/; the matching TensorFlow or "
      "cuDNN), with a driver new enough for it (`nvidia-smi` shows the CUDA it supports), and "
      "rebuild custom extensions against it.")


# A build for the wrong GPU architecture told as the cause, in the writer's words: "the error was
# the mismatch of the CUDA_ARCH_BIN index; for the Jetson TX2 it must be 6.2", "the problem was
# a wrong compute capability in the build", "we had compiled it for the wrong arch". Kernels
# built for another architecture do not load, and the first CUDA call fails as whatever the
# library reports (OpenCV's "Gpu API call (unknown error)", "invalid device function"). Not a
# condition, a guess or advice ("check that CUDA_ARCH_BIN matches", "if the arch is wrong ...").
# (the writer's card, by its kind, its architecture or its name)
_MY_CARD = (r"(?:[\w'().-]+ ){0,3}?(?:cards?|GPUs?|graphics cards?|compute capabilit(?:y|ies)|"
            r"arch(?:itecture)?s?|sm_\d{2,3}|(?:GTX|GT|Quadro|Tesla) ?\w+|K\d{2}s?|Kepler|"
            r"Maxwell)\b")
fixed("driver-mismatch/wrong-arch-told",
      # (nor a question: "has PyTorch dropped support for my K40 yet?")
      unless_words(r"if|whether|you|your|may|might|maybe|should|could|check|make sure|possibly|"
                   r"(?:has|have|did|does|do|will) (?:pytorch|torch|tensorflow|nvidia|cuda|the|"
                   r"it|they)") +
      r"(?i:\b(?:error|problem|issue|cause|crash|failure|it)\b[^\n.?]{0,20}?\b(?:was|is|were)"
      r"\b (?:(?:the|a|an|because of|due to|caused by) )?(?:the |a |an )?(?:mismatch\w*|wrong|"
      r"incorrect|bad)\b[^\n.?]{0,30}?(?:\bcuda[_ ]arch(?:_bin|_ptx|_list|itecture)?\b|"
      r"\bcompute capabilit(?:y|ies)\b|\bTORCH_CUDA_ARCH_LIST\b|\bsm_\d{2,3}\b|"
      r"\b(?:GPU )?arch(?:itecture)? (?:flags?|settings?|index|numbers?|values?)\b)|"
      r"\b(?:I|we) (?:had |have )?(?:compiled|built)\b[^\n.?]{0,40}?\bfor (?:the |a )?"
      r"(?:wrong|incorrect) (?:CUDA |GPU )?(?:arch(?:itecture)?|compute capability|sm)\b|"
      # (or the build told to have dropped the writer's card: "the new wheels dropped support
      # for my card's compute capability 3.0", "PyTorch no longer supports our K80s", "my GTX
      # 760 is no longer supported"; the writer's own card, not a release note's "support for
      # compute capability 3.5 was dropped")
      r"\b(?:dropped|drops|removed|ended) (?:the )?support for (?:my|our) " + _MY_CARD + r"|"
      r"\bno longer supports? (?:my|our) " + _MY_CARD + r"|"
      r"\b(?:my|our) " + _MY_CARD + r"[^\n.?]{0,40}?\b(?:is|are|was|were) no longer supported\b)",
      ("arch", "ARCH", "Arch", "capabilit", "sm_", "support"),
      "The program was built for another GPU architecture (told in the writer's words)",
      tier=0.0, group="no-kernel-image",
      example="The error was the mismatch of the CUDA_ARCH_BIN index: for this Jetson the "
      "library has to be compiled with 7.2.",
      explanation="The writer says the program (or a library it uses, such as OpenCV built with "
      "CUDA) was compiled for another GPU architecture than the card's. Its kernels then do not "
      "load on this GPU, and the first CUDA call fails as whatever the library reports: an "
      "'unknown error' from OpenCV's GpuMat, 'invalid device function', 'no kernel image'.",
      remedy="Rebuild for the card's compute capability (`nvidia-smi --query-gpu=compute_cap "
      "--format=csv`; a Jetson's is listed by NVIDIA: TX2 6.2, Xavier 7.2, Orin 8.7): OpenCV's "
      "CUDA_ARCH_BIN, CMake's CMAKE_CUDA_ARCHITECTURES, nvcc's -gencode, PyTorch extensions' "
      "TORCH_CUDA_ARCH_LIST.")


# The NVIDIA driver told too old for the CUDA the program needs, in the writer's words and in
# the languages such reports are written in: "the error says my driver is too old for CUDA
# 12.1", "it complains that the driver version is insufficient for the CUDA runtime", "my driver
# only supports CUDA 11.4 and torch was built with 12.1", "the container needs a newer driver",
# "驱动版本太低", "ドライバーが古すぎて", "드라이버 버전이 너무 낮아서", "драйвер слишком старый",
# "der Treiber ist zu alt", "el driver es demasiado antiguo", "le pilote est trop ancien", "o
# driver é muito antigo". Not a condition, a question or advice ("if your driver is too old,
# ...", "is my driver too old?", "make sure the driver is not too old", "驱动版本太低怎么办").
_OLD_DRIVER_EN = (
    unless_words(r"if|whether|you|your|may|might|maybe|perhaps|possibly|should|could|would|"
                 r"check|make sure|ensure|is it|when|unless|or|either")
    + r"(?i:\b(?:my|our|the|this|host'?s?) (?:(?:nvidia|GPU|CUDA|graphics|display|host|"
    r"installed|current|v?\d{3}(?:\.\d{1,3}){0,2}) ){0,2}driver(?: version)?"
    r"(?: on (?:the|this|our|my|each|every) \w+)? "
    # (its version between: "my driver is 470 which is too old", "the driver (470.82) was")
    r"(?:(?:is |was )?(?:only )?\(?v?\d{3}(?:\.\d{1,3}){0,2}\)?,? (?:which |that |and it )?)?"
    r"(?:is|was|'s|seems|seemed|appears) (?:to be )?"
    r"(?:too old|too low|outdated|out of date|insufficient|not new enough)\b"
    r"(?![^\n]{0,40}\?)|"
    r"\bdriver(?: version)? is (?:insufficient|too old|too low) for (?:the )?(?:CUDA|PyTorch|"
    r"torch|TensorFlow)\b|"
    r"\b(?:my|our|the) (?:(?:nvidia|GPU|installed|current) )?driver (?:only )?supports (?:up to "
    r")?CUDA (?P<driver_cuda_version>\d{1,2}\.\d)\b[^\n]{0,60}?\b(?:built (?:with|for)|"
    r"compiled (?:with|for)|needs|requires|wants)\b[^\n]{0,20}?\bCUDA "
    r"(?P<required_cuda>\d{1,2}\.\d)\b|"
    r"\b(?:needs|requires|needed|required|asks for|asked for) a newer (?:NVIDIA |GPU |CUDA )?"
    r"driver\b)")
_OLD_DRIVER_OTHER = (
    unless_marks("如何|怎么|怎样|如果|若|是否|为什么|可能|会不会|もし|場合|方法|만약|경우|방법")
    # (also with its version between: "驱动是470，版本太低", "ドライバーが470で古すぎて")
    + r"(?:驱动(?:程序)?(?:版本)?(?:(?:是|为)?\s?\d{3}(?:\.\d{1,3}){0,2}[，,]?\s?(?:版本)?)?"
    r"(?:太低|过低|太旧|过旧|太老|不够新)|"
    r"ドライ(?:バー|バ)(?:の|のバージョン)?(?:が|は)?(?:\s?\d{3}(?:\.\d{1,3}){0,2}\s?(?:で|と)?)?"
    r"(?:古すぎ|古い|低すぎ)|"
    r"드라이버(?: 버전)?(?:이|가)? (?:너무 )?(?:낮아|낮습|낮다|오래되|오래돼))"
    r"(?![^\n]*?(?:怎么办|怎么解决|吗|ですか|나요|까요|[？?]))"
    # (not a rule: "驱动版本过低会导致 ... 错误", a version that would cause an error)
    r"(?![^\n]{0,6}?(?:会|可能|将|就会|则)(?:导致|引起|造成|引发|出现))|"
    r"^(?!(?i:[^\n]*\b(?:если|как|чтобы|wenn|falls|wie|si|cómo|para evitar|comment|"
    r"pour éviter|se (?:a|o|seu|o seu)|caso|como)\b))(?i:[^\n]*?(?:"
    r"\bдрайвер\w*(?: NVIDIA| nvidia)? (?:\w+ )?(?:слишком )?(?:старый|устарел\w*)|"
    r"Treiber(?:version)?(?: \d{3}(?:\.\d{1,3}){0,2})? (?:ist|war) (?:\w+ )?(?:zu alt|"
    r"veraltet)\b|"
    r"\b(?:driver|controlador)(?: de NVIDIA| NVIDIA)?(?: \d{3}(?:\.\d{1,3}){0,2})? (?:es|está) "
    r"(?:demasiado )?(?:antiguo|viejo|desactualizado)\b|"
    r"\bpilote(?: NVIDIA)?(?: \d{3}(?:\.\d{1,3}){0,2})? (?:est )?(?:trop )?(?:ancien|vieux|"
    r"obsolète)\b|"
    r"\bdriver(?: da NVIDIA| NVIDIA)? (?:é|está) (?:muito )?(?:antigo|velho|desatualizado)\b))")
fixed("driver-mismatch/driver-too-old-told",
      f"{_OLD_DRIVER_EN}|{_OLD_DRIVER_OTHER}",
      ("river", "驱动", "ドライバ", "드라이버", "драйвер", "Treiber", "pilote", "controlador"),
      "The NVIDIA driver is too old for the CUDA the program needs (told in the writer's words)",
      tier=0.0,
      yields_to_titles=True,
      example="The error says my driver is too old for CUDA 12.1; I have 470 installed.",
      explanation="The writer says the installed NVIDIA driver is too old for the CUDA the "
      "program (or its container) was built with, without pasting the message: each CUDA "
      "release needs a minimum driver (CUDA 11.8: 520, 12.x: 525 or newer), and `nvidia-smi` "
      "shows the newest CUDA the installed one supports.",
      remedy=_TORCH_FOR_DRIVER)


@signature("driver-mismatch/capability-range",
           r"minimum cuda capability supported by this library is (?P<minimum>\d+\.\d+)|"
           r"supported by this version of PyTorch is\s*\((?P<minimum_>\d+\.\d+)\) - "
           r"\((?P<maximum>\d+\.\d+)\)",
           ("minimum cuda capability", "supported by this version of PyTorch"),
           "Architectures this PyTorch supports", extract=_capability_range, attach="only",
           window=4,
           example="    The minimum cuda capability supported by this library is 5.0.")
@signature("driver-mismatch/gpu-too-old",
           r"Found GPU(?P<gpu_index>\d+) (?P<gpu_name>.{1,120}?) which is of cuda capability "
           r"(?P<capability>\d+\.\d+)",
           ("which is of cuda capability",), "This GPU is too old for this PyTorch", tier=0.0,
           example="Found GPU0 Tesla K80 which is of cuda capability 3.7.")
def _gpu_too_old(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    minimum = numbers.get("minimum")
    capability = numbers.get("capability")
    has = (f"has compute capability {capability}, below" if capability
           else "is older than")
    explanation = (f"{numbers.get('gpu_name', 'This GPU')} {has} the oldest this torch supports"
                   + (f" ({minimum})." if minimum else "."))
    remedy = "Use an older torch release that still supports this GPU, or a newer GPU."
    return advice(sig, numbers, explanation, remedy)


@signature("driver-mismatch/gpu-not-supported-by-driver",
           r"installed in this system is\s*not supported by(?: the)?(?:\s*NVRM:)?\s*(?:NVIDIA "
           r"(?P<driver_version>[\d.]+) driver release|(?P<open_module>open nvidia\.ko))?|"
           # a GPU only a legacy branch supports (the kernel prints it over several lines)
           r"installed in this system[^\n]{0,6}?supported through the NVIDIA "
           r"(?P<legacy_branch>\S+) Legacy drivers(?:[^\n]*?The (?P<driver_version_>[\d.]+) "
           r"NVIDIA driver will ignore)?",
           ("not supported by", "Legacy drivers"),
           "The installed NVIDIA driver does not support this GPU",
           tier=0.0,
           example="[   12.8842] NVRM: installed in this system is not supported by the NVIDIA "
           "460.91.03 driver release.")
def _gpu_not_supported(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    release = (f" ({numbers['driver_version']})" if numbers.get("driver_version") else "")
    explanation = (f"The NVIDIA kernel driver{release} does not support this GPU: the GPU is "
                   "newer than the driver (update the driver), or older than the driver branch "
                   "supports (use a legacy driver branch).")
    if numbers.get("legacy_branch"):
        explanation = (f"This GPU is supported only by the NVIDIA {numbers['legacy_branch']} "
                       f"legacy driver branch; the installed driver{release} ignores it, so no "
                       "GPU is usable (nvidia-smi and CUDA find none).")
    elif numbers.get("open_module"):
        explanation = ("The open NVIDIA kernel module (nvidia.ko from open-gpu-kernel-modules) "
                       "supports only GPUs with a GPU System Processor (Turing and newer); this "
                       "older GPU needs the proprietary module.")
    remedy = ("Install a driver branch that lists this GPU (`nvidia-smi` stays unusable until "
              "then); check the kernel log (`sudo dmesg -T | grep -i nvrm`) for the PCI ID.")
    return advice(sig, numbers, explanation, remedy)


@signature("driver-mismatch/unsupported-ptx",
           # (retyped without its first word in a title: "CUDA Error 222 - provided PTX ...";
           # or its number alone, 222)
           # (and retyped with "compiled" slipped to "complied")
           r"(?:\b[Tt]he )?\b[Pp]rovided PTX was comp(?:iled|lied) with an unsupported "
           r"toolchain|"
           r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION|cudaErrorUnsupportedPtxVersion|"
           # (and 218, the driver's JIT failing on the PTX, as OpenMM names the status loading
           # its kernels: "Error loading CUDA module: CUDA_ERROR_INVALID_PTX (218)"; a driver
           # older than the toolkit that generated it, most often)
           r"CUDA_ERROR_INVALID_PTX\b|cudaErrorInvalidPtx\b|"
           + status_check("cudaErrorUnsupportedPtxVersion") + "|" + reported_number(222),
           ("unsupported toolchain", "UNSUPPORTED_PTX", "UnsupportedPtx", "INVALID_PTX",
            "InvalidPtx", "cudaSuccess",
            *number_needles(222)),
           "Code was compiled for a newer CUDA than the driver supports", tier=0.0,
           example="RuntimeError: CUDA error: the provided PTX was compiled with an unsupported "
           "toolchain.")
def _unsupported_ptx(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "The PTX in this program (in torch, an extension, or a Triton or other JIT-compiled "
        "kernel) was generated by a newer CUDA toolkit than the installed NVIDIA driver "
        "supports, so the driver cannot compile it for the GPU. Every CUDA driver runs code "
        "built by toolkits up to its own CUDA version, not newer.")
    remedy = (
        "Run `nvidia-smi`: the \"CUDA Version\" in its header is the newest CUDA this driver "
        "supports. Then either update the NVIDIA driver to one that supports the CUDA version "
        "the code was built with, or install a torch wheel (and extensions) built for the "
        "driver's CUDA version (choose it at https://pytorch.org/get-started/locally/); rebuild "
        "custom extensions with a CUDA toolkit no newer than the driver's.")
    return advice(sig, numbers, explanation, remedy)


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
    "46": ("Every GPU this process may use is busy or unavailable: a GPU in Exclusive_Process "
           "compute mode that another process already uses, or a GPU left in a bad state (after "
           "an Xid, a failed reset).",
           "Look at the GPUs' compute mode and processes (`nvidia-smi --query-gpu=index,"
           "compute_mode --format=csv`, `gpu-audit scan`): stop the other process, or set "
           "`sudo nvidia-smi -c DEFAULT` if exclusive mode is not on purpose; a GPU in a bad "
           "state needs a reset (`sudo nvidia-smi -r -i N`) or a reboot."),
    "100": ("CUDA sees no GPU: CUDA_VISIBLE_DEVICES hides them, or the container or job was "
            "given none.",
            "Check `echo $CUDA_VISIBLE_DEVICES` and `nvidia-smi -L`; request GPUs from the "
            "scheduler (Slurm --gpus, Kubernetes nvidia.com/gpu) or `docker run --gpus all`."),
}


def _visible_devices_named(match: re.Match[str], line: str) -> dict[str, Any]:
    """The status's numbers, and whether its line names CUDA_VISIBLE_DEVICES: "setting
    CUDA_VISIBLE_DEVICES='1' in train.py gives `No CUDA GPUs are available`" tells the cause."""
    found = named(match, line)
    if "CUDA_VISIBLE_DEVICES" in line:
        found["visible_devices_named"] = True
    return found


NO_DEVICE_TIER = 0.5
# A status told in words or by its name (lower case), and its number.
_INIT_WORDS = (
    ("802", ("not yet initialized", "system_not_ready", "systemnotready")),
    ("803", ("display driver", "system_driver_mismatch", "systemdrivermismatch",
             "does not match dso version")),
    ("804", ("forward compatibility", "compat_not_supported", "compatnotsupported")),
    ("999", ("cuda unknown error", "cuda_error_unknown", "(cuinit)")),
    ("46", ("busy or unavailable", "devicesunavailable")),
)


@signature("driver-mismatch/cuda-init",
           r"Error (?P<code>80[234]|999|100): (?P<message>[^(\n]+)|(?P<text>system has "
           r"unsupported display driver / cuda driver combination|forward compatibility was "
           r"attempted on non supported HW|system not yet initialized|No CUDA GPUs are "
           r"available|(?i:no CUDA-capable device is detected)|"
           # status 46 (also TensorFlow's "implicit initialization on GPU:0 failed. Status: all
           # CUDA-capable devices are busy or unavailable"), and XLA's words for 100
           r"(?:all CUDA-capable devices are|CUDA-capable device\(s\) is/are) busy or "
           r"unavailable|cudaErrorDevicesUnavailable|No visible GPU devices|"
           # the same statuses by their names (802, 803, 804), and torch's warning for 999
           r"CUDA_ERROR_SYSTEM_NOT_READY|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|"
           r"cudaErrorSystemDriverMismatch|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE|"
           r"cudaErrorCompatNotSupportedOnDevice|CUDA unknown error - this may be due to|"
           # (100 by name, as Numba's driver binding reports cuInit: "Call to cuInit results in
           # CUDA_ERROR_NO_DEVICE (100)")
           r"CUDA_ERROR_NO_DEVICE|cudaErrorNoDevice|"
           # (999 where a context is created or the driver initialised, as Taichi reports it:
           # "[cuda_context.cpp:CUDAContext@14] Cuda Error CUDA_ERROR_UNKNOWN: unknown error",
           # "CUDA Error : while calling init (cuInit)")
           r"\bCUDAContext@\d{1,5}\] Cuda Error (?P<text_>CUDA_ERROR_UNKNOWN)|"
           r"\b(?P<text__>while calling init \(cuInit\))|"
           # (PyTorch's THC status 100 with its words cut off: "cuda runtime error (100)")
           r"\b(?:CUDA|Cuda|cuda) runtime error \((?P<code__>100)\)|"
           # (and 999 when cuInit returns it: the driver could not start, most often its UVM
           # module after a suspend, not a fault of a running GPU)
           r"cuInit results in CUDA_ERROR_UNKNOWN \((?P<code_>999)\)|"
           # TensorFlow's diagnosis of libcuda against the kernel module (what 803 says)
           r"kernel version (?P<kernel_version>[\d.]+) does not match DSO version "
           r"(?P<dso_version>[\d.]+))|"
           # a glog check that names the status by its number alone
           + status_check("cudaErrorNoDevice", "cudaErrorSystemNotReady",
                          "cudaErrorSystemDriverMismatch", "cudaErrorCompatNotSupportedOnDevice",
                          "cudaErrorUnknown", group="status_code"),
           ("cudaSuccess", "Error 80", "Error 999", "Error 100", "unsupported display driver",
            "forward compatibility", "not yet initialized", "No CUDA GPUs", "no CUDA-capable",
            "No CUDA-capable", "no cuda-capable",
            "SYSTEM_NOT_READY", "SystemNotReady", "SYSTEM_DRIVER_MISMATCH", "SystemDriverMismatch",
            "COMPAT_NOT_SUPPORTED", "CompatNotSupported", "CUDA unknown error",
            "does not match DSO version", "CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice",
            "cuInit results in", "runtime error (100)", "Cuda Error CUDA_ERROR_UNKNOWN",
            "(cuInit)",
            "busy or unavailable", "DevicesUnavailable", "No visible GPU devices"),
           "CUDA could not initialise", tier=0.0, extract=_visible_devices_named,
           example="RuntimeError: No CUDA GPUs are available")
@signature("driver-mismatch/no-driver",
           # (and Numba's: "CudaSupportError: Error at driver init: CUDA driver library cannot
           # be found."; not its system report's "... cannot be found or no CUDA enabled devices
           # are present", printed on any machine without a GPU)
           r"Found no NVIDIA driver on your system|"
           r"\bCUDA driver library cannot be found(?! or no CUDA)|"
           # (the driver's own library, libcuda, missing where a program loads it: "OSError:
           # libcuda.so.1: cannot open shared object file", "`libcuda.so.1` is not found")
           r"\blibcuda\.so(?:\.1)?[`'\"]?:? (?:cannot open shared object file|(?:is |was )?not "
           r"found)",
           ("Found no NVIDIA driver", "CUDA driver library cannot be found", "libcuda.so"),
           "No NVIDIA driver is loaded", tier=0.0,
           example="RuntimeError: Found no NVIDIA driver on your system. Please check that you "
           "have an NVIDIA GPU and installed a driver from "
           "http://www.nvidia.com/Download/index.aspx")
def _cuda_init(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    text = str(numbers.get("text") or numbers.get("message") or "").lower()
    if (sig.id == "driver-mismatch/no-driver" or _code(numbers, text) == "100") and (
            ctx.facts.get("no_nvidia_gpu")):
        return _no_nvidia_gpu(sig, numbers)
    if numbers.get("visible_devices_named") and _code(numbers, text) == "100":
        return _hidden_by_visible_devices(sig, numbers)
    hidden = _hiding_setting(ctx.facts.get("visible_devices"))
    if hidden is not None and _code(numbers, text) == "100":
        return _hidden_by_visible_devices(sig, numbers, hidden)
    code = _code(numbers, text)
    if sig.id == "driver-mismatch/no-driver":
        explanation = ("No NVIDIA driver was found: the kernel module is not loaded, or the "
                       "container has no GPU access.")
        remedy = ("Run `nvidia-smi` on the host; in containers pass the GPUs (`docker run --gpus "
                  "all`, the NVIDIA device plugin in Kubernetes).")
    else:
        explanation, remedy = _CUDA_INIT.get(code, _CUDA_INIT["999"])
    # "No device" is what CUDA says after a GPU was lost or fell off the bus: a platform fault
    # the log names outranks it (tier 0.5, after the tier-0 hardware and driver faults).
    tier = NO_DEVICE_TIER if code in ("100", "46") else sig.tier
    return advice(sig, numbers, explanation, remedy, tier=tier)


def _hiding_setting(values: Any) -> tuple[str, str] | None:
    """The CUDA_VISIBLE_DEVICES value the log sets and why it hides every GPU, where every
    value it sets would (one that may name a GPU leaves the cause open)."""
    if not values:
        return None
    reasons = [(value, hides_every_gpu(value)) for value in values]
    if any(reason is None for _, reason in reasons):
        return None
    value, reason = reasons[-1]
    return value, str(reason)


def _hidden_by_visible_devices(sig: Signature, numbers: dict[str, Any],
                               setting: tuple[str, str] | None = None) -> Advice:
    """No device, told with the CUDA_VISIBLE_DEVICES setting that hid them (on the error's
    line, or set in the log to a value that hides every GPU): the job's configuration, not the
    driver or the GPU (a warning: nothing on the machine failed)."""
    if setting is None:
        explanation = ("CUDA found no GPU because CUDA_VISIBLE_DEVICES, named with the error, "
                       "hides them: it lists an index this machine (or this job) does not have, "
                       "or none. The driver and the GPUs are not at fault.")
    else:
        value, reason = setting
        explanation = (f"CUDA found no GPU, and the log sets CUDA_VISIBLE_DEVICES={value!r}: "
                       f"{reason}. The driver and the GPUs are not at fault unless the job "
                       "had GPUs that setting names (`nvidia-smi -L` in the job lists them).")
    remedy = ("Remove the hard-coded CUDA_VISIBLE_DEVICES from the script (or set it to GPUs "
              "that exist: `nvidia-smi -L` lists them); under a scheduler, let it set the "
              "variable (Slurm --gpus, Kubernetes nvidia.com/gpu).")
    return advice(sig, {key: value for key, value in numbers.items()
                        if key != "visible_devices_named"}, explanation, remedy,
                  severity=Severity.WARNING, title="CUDA_VISIBLE_DEVICES hides the GPUs")


def _code(numbers: dict[str, Any], text: str) -> str:
    """The CUDA status a start-up failure names: by number, or by its words (100 when none)."""
    code = str(numbers.get("code") or "")
    if numbers.get("status_code"):  # (38: no device, before CUDA 10.1)
        code = "100" if numbers["status_code"] == 38 else str(numbers["status_code"])
    if not code:
        code = next((code for code, words in _INIT_WORDS if any(w in text for w in words)), "100")
    return code


def _no_nvidia_gpu(sig: Signature, numbers: dict[str, Any]) -> Advice:
    """No driver or no device on a machine its owner says has no NVIDIA GPU: the program asked
    for CUDA where there is none. A warning, not a GPU failure: nothing is broken."""
    explanation = ("The program asked for CUDA on a machine the text says has no NVIDIA GPU (it "
                   "runs on the CPU, or on an Intel, AMD or Apple GPU, which CUDA cannot use): "
                   "no driver or GPU failed, CUDA simply has nothing to run on.")
    remedy = ("Run on the CPU: pass the program's device option (`--device cpu`), use "
              "`device = 'cuda' if torch.cuda.is_available() else 'cpu'` instead of `.cuda()`, "
              "and load checkpoints with `torch.load(path, map_location='cpu')`; or run it on a "
              "machine with an NVIDIA GPU.")
    return advice(sig, numbers, explanation, remedy, severity=Severity.WARNING,
                  title="CUDA was asked for on a machine without an NVIDIA GPU")


# AliceVision's (Meshroom's) check before its depth maps: "This program needs a CUDA-Enabled GPU
# (with at least compute capability 2.0)", with "No CUDA-Enabled GPU." and "Can't find
# CUDA-Enabled GPU." before it. CUDA found no device it can use: on a machine with an NVIDIA
# card, a driver too old for the program's CUDA (cudaGetDeviceCount fails); on one without, no
# failure at all (a warning, where the text says so).
@signature("driver-mismatch/no-usable-cuda-gpu",
           r"\b[Tt]his program needs a CUDA-Enabled GPU\b|\bCan't find CUDA-Enabled GPU\b",
           ("CUDA-Enabled GPU",),
           "The program found no CUDA GPU it can use", tier=0.5,
           example="[error] This program needs a CUDA-Enabled GPU (with at least compute "
           "capability 2.0).")
def _no_usable_cuda_gpu(sig: Signature, numbers: dict[str, Any],
                        ctx: AdviceContext) -> Advice:
    if ctx.facts.get("no_nvidia_gpu"):
        return _no_nvidia_gpu(sig, numbers)
    explanation = ("The program asked CUDA for a GPU and got none it can use. On a machine "
                   "with an NVIDIA card this is most often a driver older than the CUDA the "
                   "program was built with (CUDA's device count fails with 'CUDA driver version "
                   "is insufficient for CUDA runtime version'), or no NVIDIA driver at all (a "
                   "laptop running on its integrated GPU, a driver removed by an update).")
    remedy = ("Install the latest NVIDIA driver for the card from "
              "https://www.nvidia.com/Download/index.aspx (on a laptop, also make the program "
              "run on the NVIDIA GPU), then check that `nvidia-smi` lists the card and shows a "
              "CUDA version at least the program's.")
    return advice(sig, numbers, explanation, remedy)


# The owner saying the machine has no NVIDIA GPU: "I don't have any NVIDIA adapter on my
# laptop", "my laptop only has an Intel GPU", "I'm using the CPU", "on a CPU-only server",
# "我使用的是cpu", "电脑没有显卡". Not a condition or advice ("if you don't have an NVIDIA GPU").
_NOT_TOLD = unless_words("if|whether|you|your|when|unless", also="如果")
_MACHINE = r"(?:laptop|notebook|computer|PC|machine|server|desktop|mac ?book|mac|system)"
NO_NVIDIA_GPU_TOLD = (
    _NOT_TOLD + r"(?i:"
    r"\b(?:I|we) (?:do not|don't|dont|didn't|did not) have (?:an? |any )?(?:NVIDIA |CUDA[- ]"
    r"(?:capable |enabled )?|dedicated |discrete )?(?:GPUs?|graphics cards?|cards?|adapters?)\b|"
    r"\b(?:I|we) (?:do not|don't|dont) have (?:an? |any )?NVIDIA\b|"
    r"\b(?:my|our|this|the) " + _MACHINE + r" (?:only )?(?:has|have|supports|uses|comes with) "
    r"(?:only )?(?:an? )?(?:Intel|AMD|Radeon|integrated|Apple|M[1-4])\b|"
    r"\b(?:my|our|this|the) " + _MACHINE + r" (?:has|have) no (?:NVIDIA |dedicated |discrete )?"
    r"(?:GPU|graphics card)\b|"
    r"\b(?:I|we)(?: am|'m| are|'re) (?:only )?(?:using|running (?:it |this |the code )?on) "
    r"(?:the |a |my )?CPU(?: only)?\b(?! (?:RAM|memory|cores?|threads?|offload))|"
    r"\bon (?:a|my|our) CPU[- ]only " + _MACHINE + r"\b)|"
    r"(?:我|我们)(?:使用|用|跑)的是\s?(?i:cpu)|只有\s?(?i:cpu)|(?:没有|无)(?:NVIDIA|英伟达|N卡|独立显卡|独显|显卡|"
    r"(?i:gpu))|"
    # (and an answer that tells the writer to get one: "You need a NVIDIA graphic card or have
    # to wait for the next release"; not one with more of something, "... with more memory")
    + unless_words("if|whether|when|unless", also="如果") +
    r"\b(?i:you(?:'ll| will)? (?:need|have to (?:get|buy|use)|must (?:get|buy|use)) (?:an? )?"
    r"NVIDIA (?:graphics? card|GPU|card|video card)s?)\b(?! with\b)")


@signature("driver-mismatch/no-nvidia-gpu-told", NO_NVIDIA_GPU_TOLD,
           ("have", "has", "CPU", "cpu", "没有", "无", "need", "must"),
           "The text says the machine has no NVIDIA GPU", severity=Severity.INFO, tier=5.0,
           fact=True, extract=lambda match, _line: {"no_nvidia_gpu": match[0].strip()[-80:]},
           example="I don't have any NVIDIA card on my laptop, it only has an Intel GPU.")
def _no_nvidia_gpu_told(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    return advice(sig, numbers, "The text says this machine has no NVIDIA GPU; a missing driver "
                  "or device there is no failure.", "Nothing to do by itself.")


# Libraries that need a newer GPU than this one, in their words: torch.compile's Triton backend
# ("Found Tesla P100-PCIE-16GB which is too old to be supported by the triton GPU compiler ...
# Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA capability
# 6.0") and FlashAttention 2 ("FlashAttention only supports Ampere GPUs or newer.").
@signature("driver-mismatch/gpu-too-old-for-library",
           r"\bFound (?P<gpu_name>[^\n]{1,120}?) which is too old to be supported by the triton "
           r"GPU compiler(?P<triton>)(?:[^\n]{0,200}?CUDA Capability >= (?P<minimum>\d+\.\d+), "
           r"but your device is of CUDA capability (?P<capability>\d+\.\d+))?"
           r"|\bFlashAttention only supports Ampere GPUs or newer(?P<flash_attn>)"
           # (vLLM's check of bfloat16: "Bfloat16 is only supported on GPUs with compute
           # capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5.")
           r"|\bBfloat16 is only supported on GPUs with compute capability of at least "
           r"(?P<minimum_>\d+\.\d+)(?P<bfloat16>)(?:\.\s+Your (?P<gpu_name_>[^\n]{1,120}?) GPU has "
           r"compute capability (?P<capability_>\d+\.\d+))?",
           ("too old to be supported by the triton", "FlashAttention only supports",
            "Bfloat16 is only supported"),
           "This GPU is too old for a library the program uses", tier=0.5,
           example="RuntimeError: Found Tesla P100-PCIE-16GB which is too old to be supported by "
           "the triton GPU compiler, which is used as the backend. Triton only supports devices "
           "of CUDA Capability >= 7.0, but your device is of CUDA capability 6.0")
def _gpu_too_old_for_library(sig: Signature, numbers: dict[str, Any],
                             ctx: AdviceContext) -> Advice:
    kind = next((key for key in ("bfloat16", "flash_attn", "triton") if key in numbers),
                "triton")
    numbers = {key: value for key, value in numbers.items()
               if value != "" and key not in ("bfloat16", "flash_attn", "triton")}
    if kind == "bfloat16":
        numbers["library"] = "bfloat16"
        explanation = (f"The model runs in bfloat16, which needs a GPU of compute capability "
                       f"{numbers.get('minimum', '8.0')} or newer; "
                       f"{numbers.get('gpu_name', 'this GPU')} is older.")
        remedy = ("Run in float16 instead: --dtype=half (vLLM), torch_dtype=torch.float16 "
                  "(transformers), fp16 in place of bf16 in a training configuration; or use "
                  "an Ampere or newer GPU.")
    elif kind == "flash_attn":
        numbers = {"library": "flash-attn", "minimum": "8.0"}
        explanation = ("FlashAttention 2 runs only on GPUs of compute capability 8.0 (Ampere) "
                       "or newer; this GPU is older (a T4, V100 or GeForce 20-series is 7.x).")
        remedy = ("Use PyTorch's own attention instead: attn_implementation=\"sdpa\" (or "
                  "\"eager\") when loading a transformers model, or turn the program's "
                  "flash-attention option off; or run on an Ampere or newer GPU.")
    else:
        numbers["library"] = "triton"
        capability = numbers.get("capability")
        explanation = (
            f"torch.compile's default backend (inductor) generates Triton kernels, and Triton "
            f"needs compute capability {numbers.get('minimum', '7.0')} or newer; "
            f"{numbers.get('gpu_name', 'this GPU')} "
            f"{f'has {capability}' if capability else 'is older'}.")
        remedy = ("Run without compiling (drop torch.compile, the program's compile option, or "
                  "export TORCHDYNAMO_DISABLE=1), or compile with a backend that does not use "
                  "Triton (torch.compile(model, backend=\"aot_eager\")); or use a GPU of compute "
                  "capability 7.0 or newer.")
    return advice(sig, numbers, explanation, remedy)


# A CUDA library the program needs could not be found or loaded: the CUDA runtime, cuBLAS,
# cuDNN, cuFFT... of the version the program (or ONNX Runtime's CUDA provider) was built for is
# not installed where the loader looks, or another version is. "ImportError: libcudart.so.11.0:
# cannot open shared object file", faster-whisper's "Could not locate cudnn_ops_infer64_8.dll",
# ONNX Runtime's "CUDA_PATH is set but CUDA wasn't able to be loaded", its "LoadLibrary failed
# with error 126 ... onnxruntime_providers_cuda.dll" and "Failed to create
# CUDAExecutionProvider". (Not NVML's library, nvml-unavailable; not TensorFlow's "Could not
# load dynamic library" warning, which a CPU-only machine prints at every start.)
_CUDA_LIBRARY = (r"(?:lib)?(?:cudart|cublas(?:Lt)?|cufft|curand|cusolver|cusparse|"
                 r"cudnn(?:_\w{1,30})?|nvrtc|nvJitLink|cupti)")


def _cuda_library_file(group: str) -> str:
    """A CUDA library's file name, Linux's or Windows', as the named group ``group``."""
    return (rf"(?P<{group}>{_CUDA_LIBRARY}(?:\.so(?:\.\d+){{0,3}}|64_\d{{1,3}}\.dll|"
            r"\d{0,3}\.dll))")


@signature("driver-mismatch/cuda-library-missing",
           # (not after TensorFlow's "dlerror: ", its warning's own reason)
           rf"(?<!dlerror: )\b{_cuda_library_file('library')}: cannot open shared object file|"
           rf"\bCould not (?:locate|load|find) (?:library )?{_cuda_library_file('library_')}|"
           r"\bCUDA_PATH is set but CUDA wasn'?t able to be loaded(?P<onnxruntime>)|"
           r"\bLoadLibrary failed with error \d{1,6}[^\n]{0,40}? when trying to load [\"']?"
           r"[^\"'\n]{0,200}?(?P<provider>onnxruntime_providers_(?:cuda|tensorrt))\.dll|"
           r"\bFailed to (?:create|load) (?P<provider_>CUDA|TensorRT)ExecutionProvider\b",
           ("cannot open shared object file", "Could not locate", "Could not load",
            "Could not find", "CUDA wasnt able", "CUDA wasn't able", "LoadLibrary failed",
            "ExecutionProvider"),
           "A CUDA library could not be loaded", tier=0.2,
           example="ImportError: libcudart.so.11.0: cannot open shared object file: No such file "
           "or directory")
def _cuda_library_missing(sig: Signature, numbers: dict[str, Any],
                          ctx: AdviceContext) -> Advice:
    library = numbers.get("library")
    onnxruntime = "onnxruntime" in numbers or "provider" in numbers
    numbers = {key: value for key, value in numbers.items()
               if value != "" and key not in ("onnxruntime",)}
    if onnxruntime:
        numbers.setdefault("provider", "CUDA")
        title = "ONNX Runtime could not load its CUDA execution provider"
        explanation = ("ONNX Runtime could not load its CUDA execution provider: the CUDA and "
                       "cuDNN libraries of the major versions this onnxruntime-gpu release was "
                       "built for are not installed where it looks (PATH or CUDA_PATH on "
                       "Windows, the loader's path on Linux), or other versions are. It falls "
                       "back to the CPU, so the job runs there, many times slower.")
        remedy = ("Install the CUDA and cuDNN versions the onnxruntime-gpu release lists "
                  "(https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html"
                  "#requirements), or the onnxruntime-gpu build for the CUDA you have; `pip "
                  "install nvidia-cudnn-cu12 nvidia-cublas-cu12` puts them beside it, and "
                  "`import torch` before onnxruntime loads torch's copies.")
    else:
        named_lib = f"{library}" if library else "A CUDA library"
        title = f"{named_lib} could not be loaded"
        explanation = (f"{named_lib} could not be found or loaded: the program (or a library it "
                       "uses) was built against a CUDA or cuDNN version that is not installed "
                       "where the loader looks, or a different version is. No GPU work runs "
                       "until it loads.")
        remedy = ("Install the CUDA runtime and cuDNN versions the package was built for (its "
                  "name says which: cu118, cu121...), e.g. `pip install nvidia-cudnn-cu12 "
                  "nvidia-cublas-cu12`, or install the package's build for the CUDA you have; "
                  "`ldconfig -p | grep -E 'cudart|cudnn|cublas'` lists the versions the loader "
                  "finds, and LD_LIBRARY_PATH (PATH on Windows) must include their folder.")
    return advice(sig, numbers, explanation, remedy, title=title)


# A build of the framework (or of an extension) without CUDA, asked to use the GPU: PyTorch's
# CPU-only wheel ("AssertionError: Torch not compiled with CUDA enabled"), an extension built
# without its CUDA kernels ("RuntimeError: Not compiled with GPU support", detectron2's and
# torchvision's ops), PaddlePaddle's CPU package.
fixed("driver-mismatch/cpu-only-build",
      r"\b(?:Torch|PyTorch|Paddle(?:Paddle)?|MXNet|This (?:build|binary)) (?:is )?not compiled "
      r"with (?:CUDA|GPU)\b|\bNot compiled with (?:GPU|CUDA) support\b",
      ("not compiled with", "Not compiled with"),
      "The framework (or an extension) was built without CUDA", tier=0.0,
      example="AssertionError: Torch not compiled with CUDA enabled",
      explanation="The program asked for the GPU, but the framework it runs (or one of its "
      "compiled extensions) was built for the CPU only: pip installed PyTorch's CPU wheel (the "
      "default on Windows and macOS from PyPI, or a CPU index), or an extension was compiled "
      "where no CUDA toolkit was found. The driver and the GPU are not at fault.",
      remedy="Check the build: `python -c \"import torch; print(torch.__version__, "
      "torch.version.cuda)\"` (None, or a version ending in +cpu: a CPU wheel). Install the "
      "CUDA build for your driver from https://pytorch.org/get-started/locally/ (e.g. `pip "
      "install torch --index-url https://download.pytorch.org/whl/cu121`), and rebuild an "
      "extension where nvcc and CUDA_HOME are set.")


# A CUDA toolkit older than the GPU, found where code is compiled at run time: NVRTC (OpenMM, CuPy,
# PyTorch's fusers) given an architecture it does not know ("nvrtc: error: invalid value for
# --gpu-architecture (-arch)"), and XLA (JAX, TensorFlow) finding no usable ptxas ("Couldn't get
# ptxas version string: INTERNAL: Couldn't invoke ptxas --version").
fixed("driver-mismatch/runtime-compiler",
      r"\bnvrtc: error: invalid value for --gpu-architecture\b|"
      r"\bCouldn'?t (?:get ptxas version string|invoke ptxas\b)",
      ("--gpu-architecture", "ptxas version string", "invoke ptxas"),
      "The CUDA compiler the program runs is missing or too old for this GPU", tier=0.2,
      example="CUDA platform error: Error compiling program: nvrtc: error: invalid value for "
      "--gpu-architecture (-arch)",
      explanation="The program compiles its GPU kernels when it runs, and the CUDA compiler it "
      "found cannot build them for this GPU: NVRTC from a CUDA toolkit older than the GPU's "
      "architecture does not know it, and XLA (JAX, TensorFlow) needs ptxas from a CUDA toolkit "
      "at least as new as the one jaxlib was built for, on PATH. The driver and the GPU are not "
      "at fault.",
      remedy="Install a CUDA toolkit that knows this GPU and put it first: for NVRTC, the "
      "package built for that CUDA (e.g. OpenMM's or CuPy's build for cuda-version=12); for XLA, "
      "`pip install \"jax[cuda12]\"` (which brings its own ptxas) or a CUDA 12 toolkit's bin/ "
      "first on PATH; `nvcc --version` and `ptxas --version` show what is found.")


# A TensorRT engine built on a GPU of another architecture ("The engine plan file is generated
# on an incompatible device, expecting compute 8.9 got compute 8.6, please rebuild."): engines
# are compiled for one compute capability.
@signature("driver-mismatch/tensorrt-engine-device",
           r"\bThe engine plan file is generated on an incompatible device, expecting compute "
           r"(?P<built_for>\d{1,2}\.\d) got compute (?P<capability>\d{1,2}\.\d)",
           ("engine plan file is generated on an incompatible device",),
           "The TensorRT engine was built for another GPU", tier=0.2,
           example="[NVINFER LOG]: 6: The engine plan file is generated on an incompatible "
           "device, expecting compute 8.9 got compute 8.6, please rebuild.")
def _tensorrt_engine_device(sig: Signature, numbers: dict[str, Any],
                            ctx: AdviceContext) -> Advice:
    explanation = (f"The TensorRT engine was built on a GPU of compute capability "
                   f"{numbers.get('built_for', 'another')} and this GPU is "
                   f"{numbers.get('capability', 'different')}: an engine holds kernels for the "
                   "one architecture it was built on, so it cannot be loaded here.")
    remedy = ("Rebuild the engine on this GPU (trtexec --onnx=model.onnx --saveEngine="
              "model.engine, or the project's export step) from the ONNX model, or run it on a "
              "GPU of the architecture it was built for.")
    return advice(sig, numbers, explanation, remedy)


# JAX could not start its CUDA backend and carries on on the CPU ("CUDA backend failed to
# initialize: jaxlib/cuda/versions_helpers.cc:90: operation cuInit(0) failed:
# CUDA_ERROR_NOT_INITIALIZED"): a jaxlib CUDA plugin that does not fit the driver or the CUDA
# libraries installed, or no GPU visible to the process.
fixed("driver-mismatch/jax-backend",
      r"\bCUDA backend failed to initialize\b",
      ("CUDA backend failed to initialize",),
      "JAX could not initialise its CUDA backend", tier=0.3,
      example="An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not "
      "installed. Falling back to cpu. CUDA backend failed to initialize: jaxlib/cuda/"
      "versions_helpers.cc:90: operation cuInit(0) failed: CUDA_ERROR_NOT_INITIALIZED",
      explanation="JAX could not start its CUDA backend and runs on the CPU instead: its CUDA "
      "plugin (jax-cuda12-plugin, jaxlib's CUDA build) does not fit the NVIDIA driver or the "
      "CUDA and cuDNN libraries it finds, or the process sees no GPU (CUDA_VISIBLE_DEVICES, a "
      "container without GPUs).",
      remedy="`python -c \"import jax; print(jax.devices())\"` shows what JAX finds; install the "
      "CUDA build that matches the driver (`pip install -U \"jax[cuda12]\"`, which pins its "
      "CUDA libraries; `nvidia-smi` shows the newest CUDA the driver supports), and keep no "
      "older CUDA libraries first on LD_LIBRARY_PATH.")


# torch.utils.cpp_extension, building a CUDA extension (a project's own kernels, apex,
# flash-attn, pytorch3d...), compares the CUDA toolkit it found (nvcc, CUDA_HOME) with the one
# torch was built with: "RuntimeError: The detected CUDA version (11.8) mismatches the version
# that was used to compile PyTorch (12.4). Please make sure to use the same CUDA versions."
# The major versions differ: the build stops. Only the minor one ("has a minor version mismatch
# ... Most likely this shouldn't be a problem."): a warning, and the build goes on.
@signature("driver-mismatch/extension-cuda-mismatch",
           r"\bThe detected CUDA version \((?P<detected_cuda>\d{1,3}\.\d{1,3})\) (?:(?P<minor>has "
           r"a minor version mismatch with)|mismatches) the version that was used to compile"
           r"(?:\s+PyTorch \((?P<torch_cuda>\d{1,3}\.\d{1,3})\))?",
           ("The detected CUDA version",),
           "The CUDA toolkit does not match the CUDA torch was built with", tier=0.2,
           example="RuntimeError: The detected CUDA version (11.8) mismatches the version that "
           "was used to compile PyTorch (12.4). Please make sure to use the same CUDA versions.")
def _extension_cuda_mismatch(sig: Signature, numbers: dict[str, Any],
                             ctx: AdviceContext) -> Advice:
    minor = "minor" in numbers
    numbers = {key: value for key, value in numbers.items() if key != "minor"}
    found = numbers.get("detected_cuda", "another version")
    built = numbers.get("torch_cuda")
    torch_cuda = f"CUDA {built}" if built else "another CUDA"
    if minor:
        explanation = (f"Building a CUDA extension, torch found the CUDA toolkit {found} where "
                       f"it was built with {torch_cuda}: only the minor versions differ, so the "
                       "build goes on and usually works.")
        return advice(sig, numbers, explanation, "Nothing to do unless the extension fails to "
                      "load; then build it with the toolkit torch was built with.",
                      severity=Severity.WARNING, title="The CUDA toolkit's minor version differs "
                      "from torch's")
    explanation = (f"Building a CUDA extension (the project's own kernels, or a package such as "
                   f"apex, flash-attn or pytorch3d compiled from source), torch found the CUDA "
                   f"toolkit {found} (nvcc, CUDA_HOME) but was itself built with {torch_cuda}: "
                   "an extension must be compiled with the same major CUDA version as torch, so "
                   "the build stops. The driver and the GPU are not at fault.")
    remedy = ("Make the two match: install the torch build for the toolkit you have (e.g. `pip "
              "install torch --index-url https://download.pytorch.org/whl/cu118` for CUDA 11.8), "
              "or install the toolkit torch was built with and point the build at it "
              "(`export CUDA_HOME=/usr/local/cuda-12.4` and its bin/ first on PATH); "
              "`python -c 'import torch; print(torch.version.cuda)'` and `nvcc --version` show "
              "the two.")
    return advice(sig, numbers, explanation, remedy)
