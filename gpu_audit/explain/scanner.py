"""Streaming a log in constant memory and picking out the few lines worth classifying.

The log is read in blocks of a few MiB. A cheap prefilter runs over each whole block in C: a
handful of byte patterns, each starting with one literal character, so the regex engine can
skip ahead with a plain character search instead of trying every position (measured: one
literal-prefix pattern runs at about 1.5-2 GB/s here, one alternation of differently starting
words at 15-20 MB/s). Every failure signature's line contains at least one of these keys; only
lines with a hit are decoded and run through the detailed signatures.

Each key (:data:`KEYS`) declares beside its pattern its anchors: literals, one of which the line
of each of its hits contains. Where the keys hit comes from a :data:`Prefilter`: by default
:func:`python_prefilter` (each key's pattern over the whole block); for a plain file, GNU grep's
search for the anchors (:mod:`gpu_audit.explain.grepscan`), after which
:func:`keyed_on_lines` runs each key only over its anchors' lines and finds the same positions.
Everything after that (segments, context, tables, the tail) is this module's one code path.

Lines end at ``\\n``; a ``\\r`` also ends a segment for matching (progress bars redraw with
``\\r``, and a traceback often lands after the last redraw) without changing line numbers. A line
longer than :data:`MAX_CARRY` is scanned in pieces, and a candidate is cut to a window around
its hit, so one enormous line costs neither memory nor quadratic time.

Each candidate carries its neighbouring segments (up to :data:`CONTEXT_LINES` each side, within
:data:`LOOKBEHIND` / :data:`LOOKAHEAD` bytes), so that a message wrapped over several lines can
be joined again (:mod:`gpu_audit.explain.joining`) without decoding the lines nobody needs; a
segment that neighbours several candidates is decoded once. A block is scanned only up to
:data:`LOOKAHEAD` bytes before its end, so the context a candidate gets never depends on how the
stream was cut into blocks. The last :data:`TAIL_LINES` lines of a stream are candidates
whatever the prefilter says: how a job ended (a shell's ``Killed`` in the shell's language) is
written there. Every search around a hit stays within its windows, so a log where every line
matches costs a constant time per line.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import methodcaller

from gpu_audit.bounds import MAX_PROCESSES
from gpu_audit.explain.prefixes import LOG_PREFIXES
from gpu_audit.knowledge.signals import KILLED_WORDS

BLOCK_SIZE = 4 << 20
MAX_CARRY = 1 << 20  # a line longer than this is scanned in pieces
WINDOW_BEFORE = 2048  # bytes of a long line kept before a hit
WINDOW_AFTER = 6144  # ... and after it (a full OOM message with a process list fits)
_KEY_OVERLAP = 256  # longer than any prefilter match
LOOKBEHIND = 4096  # bytes of context before a candidate's segment
LOOKAHEAD = 4096  # ... and after it
CONTEXT_LINES = 8  # segments of context kept on each side
CONTEXT_CHARS = 1024  # a context segment longer than this is cut
TAIL_LINES = 6  # the stream's last lines, always candidates ...
TAIL_BYTES = 2048  # ... within this many bytes of its end
# The rows of a boxed table (nvidia-smi's process list: a line starting with "|" after its
# "Processes:" header) are candidates up to the table's end, at most this many per table.
MAX_TABLE_ROWS = MAX_PROCESSES

# Keys grouped by their first character: each pattern has a literal prefix, so each pass is a
# fast scan. Together they cover every signature in :mod:`gpu_audit.explain.signatures`
# (tests/explain checks each fixture line through this path). Each key also names its anchors:
# literals, one of which the line of each of its hits contains (tests/explain checks that too),
# so that a multi-literal search can find the few lines worth running the pattern over.
_OTHER_KILLED = sorted(set(KILLED_WORDS.values()) - {"Killed"}, key=len, reverse=True)
_OTHER_KILLED_WORDS = b"|".join(re.escape(word.encode()) for word in _OTHER_KILLED)
# the bytes those words start with, as a character class
_KILLED_FIRST_BYTES = b"".join(sorted({re.escape(word.encode()[:1]) for word in _OTHER_KILLED}))


# the lines that tell a cure ("fixed it", "solved the issue", "did the trick"): the stems of the
# signatures' needles (CURED_NEEDLES), as fewer anchors search faster; the key's pattern then
# picks the lines
CURED_ANCHORS = (b"ixed ", b"olved ", b"the trick", b"worked", b"made it work")


@dataclass(frozen=True)
class Key:
    """One prefilter pass: its pattern, and the anchors that find its lines without it."""

    pattern: bytes
    # literals: the line holding each hit (its "at" group's start, else the match's start)
    # contains one of them
    anchors: tuple[bytes, ...]
    then_not: bytes = b""  # ... followed by none of these bytes (or by the line's end)
    next_line: bool = False  # a hit may go on into the next line (a wrapped number)

    def found(self) -> tuple[bytes, ...]:
        """Every text a search for the anchors can find (an anchor, and with ``then_not`` the
        anchor followed by each byte it allows)."""
        if not self.then_not:
            return self.anchors
        allowed = [bytes([byte]) for byte in range(256) if byte not in self.then_not + b"\n"]
        return self.anchors + tuple(anchor + byte for anchor in self.anchors for byte in allowed)


KEYS: tuple[Key, ...] = (
    # RuntimeError, CUDA error, NCCL error, ...Error: ("errors" is prose)
    Key(rb"rror(?!s)", (b"rror",), then_not=b"s"),
    # out of memory, Out Of Memory, MemoryError, illegal memory access (and the words a writer
    # tells a GPU's memory running out in Spanish, Portuguese, German and French: "memoria",
    # "memória", "Grafikspeicher", "mémoire", the last by its final "e")
    # (and a cure told, in this pass: "setting NCCL_P2P_DISABLE=1 fixed it", "adding swap solved
    # the issue", "--medvram did the trick", "--lowvram worked"; the "e" of "fixed", "solved",
    # "the", "worked", "made")
    # (and a build told to have dropped the writer's card: "dropped support for my GTX 760")
    # (each added word behind one literal: a pass tries every branch at every "e")
    Key(rb"e(?:mo(?:ry|ria)|m\xc3\xb3ria|icher|(?<=moire)"
        # (and a notebook's kernel told dead: "The kernel appears to have died.")
        rb"|ars to have died\b(?<=appears to have died)"
        rb"|d(?:(?<=ixed|lved) (?:it|this|that|the (?:issue|problem|crash|error|hang))\b"
        rb"|\b(?<=worked)| support(?:(?<=dropped support)|(?<=removed support)))"
        rb"| trick(?<=the trick)| it work(?<=made it work)"
        # (and a kernel's assertion told in lower case: "it was a device-side assert")
        rb"|vice[- ]side assert"
        # (and a machine told rebooting, restarting or powering off under load: "the computer
        # restarts by itself", "the PC reboots", "it powered off")
        rb"|start(?<=[Rr]estart)|boot(?<=[Rr]eboot)|r(?:s off(?<=owers off)|ed off(?<=owered off))"
        # (and a card told falling off the bus: "our 4090 keeps falling off the bus")
        rb"| bus(?:(?<=off the bus)|(?<=off the PCIe bus)|(?<=off the PCI bus))"
        # (and a card told overheating or overclocked, or the board swapped, anywhere in a
        # thread: "it was more than likely due to overheating", "the factory overclock")
        rb"|r(?:heat(?<=verheat)|clock(?<=verclock)|board(?<=otherboard))"
        # (and Horovod's stall inspector by its source file, early on a line a terminal may
        # wrap before its words: "W horovod/common/stall_inspector.cc:105] One or more ...")
        rb"|ctor\.cc(?<=stall_inspector\.cc)"
        # (and a TensorRT engine built on another GPU: "The engine plan file is generated on an
        # incompatible device")
        rb"|ngine plan file is generated(?<=engine plan file is generated)"
        # (and torch's CUDA told unavailable: "torch.cuda.is_available() is false")
        rb"|\(\)(?<=is_available\(\)))",
        (b"emory", b"emoria", "emória".encode(), b"eicher", b"moire", b"appears to have died",
         *CURED_ANCHORS, b"dropped support", b"removed support", b"evice-side assert",
         b"evice side assert", b"estart", b"eboot", b"owers off", b"owered off", b"off the bus",
         b"off the PCIe bus", b"off the PCI bus", b"verheat", b"verclock", b"otherboard",
         b"stall_inspector.cc", b"engine plan file is generated",
         b"is_available()")),
    # a launcher's exit status for a process killed with SIGKILL (137, -9)
    # (also when a terminal or logger wrapped the line before the number)
    # (and Moab's "job 4242 exceeded MEM usage hard limit", in this pass: one pass fewer)
    # (and the status alone after the verb: "Exited (137)", "exiting due to 137")
    # (and Kubernetes' fields for a container's last state: "Exit Code:    137", "exitCode: 137",
    # YARN's "Exit code is 137")
    Key(rb"x(?:it(?:ed|s)?(?: with)?(?: a)?[ _]?(?:status|[Cc]ode\"?(?: is)?)(?: code)?[ :=]*"
        rb"(?:\r?\n[ \t]*)?"
        rb"(?:137|-9)\b|it(?:ed|ing|s)?(?: with| due to)? \(?137\b|ceeded MEM usage)",
        (b"xit", b"xceeded MEM usage"), next_line=True),
    # (and docker build's "returned a non-zero code: 137")
    Key(rb"eturn(?:ed)?(?:[ _]?code| a non-zero code)[ :=]*(?:\r?\n[ \t]*)?(?:137|-9)\b",
        (b"eturn",), next_line=True),
    # (cudaMallocAsync's missing operations, also in a sentence or a title without "Error")
    # (and a kernel's indexing assertion without its quotes: "Assertion srcIndex < ...")
    # (and the async backend named anywhere, "cudaMallocAsync", and its out-of-memory message
    # cut after its head: "Allocation on device ")
    Key(rb"A(?:ssertion (?:`|['\"]?(?:srcIndex|idx_dim|t >= 0|input_val|target_val))|LLOC_CONF"
        rb"|SSERT FAILED|sync does not (?:yet )?support|sync support for [a-z]+[A-Z]"
        rb"|llocation on device|(?<=MallocA)sync"
        # (and a program's own check of a cuBLAS call: "cuBLAS API failed with status 7")
        rb"|(?<=BLAS A)PI failed|(?<=BLASLt A)PI failed"
        # (and TensorFlow's "Attempting to perform BLAS operation using StreamExecutor without
        # BLAS support", in a title or a line without "Error")
        rb"|ttempting to perform BLAS operation"
        # (and ONNX Runtime's arena grown, with its device: "AllocateRawInternal] Extending
        # BFCArena for Cpu")
        rb"|llocateRawInternal\] Extending BFCArena"
        # (and a kernel's assertion after its block and thread, its quotes lost: "thread:
        # [31,0,0] Assertion index >= -sizes[i] && ... failed.")
        rb"|ssertion (?<=\] Assertion )"
        # (and a program's check of a cuBLAS call by name: "cuBLAS call cublasLtMatmul(...)
        # failed at ...", "cuBLASLt call ...")
        rb"|S call (?<=BLAS call )|SLt call (?<=BLASLt call )|SLT call (?<=BLASLT call )"
        # (and the shell's word for Killed in another language right after a progress bar's
        # estimate, the bar having printed no newline: "ETA: 2621s" then the word)
        rb"|(?<=ETA): ?\d{1,7}s[ \t]*(?:" + _OTHER_KILLED_WORDS + rb"))",
        (b"Assertion `", *(b"Assertion " + quote + word for quote in (b"", b"'", b'"')
                           for word in (b"srcIndex", b"idx_dim", b"t >= 0", b"input_val",
                                        b"target_val")),
         b"ALLOC_CONF", b"ASSERT FAILED", b"Async does not ", b"Async support for ",
         b"Allocation on device", b"MallocAsync", b"BLAS API failed", b"BLASLt API failed",
         b"AllocateRawInternal] Extending", b"Attempting to perform BLAS operation",
         b"] Assertion ", b"BLAS call ", b"BLASLt call ", b"BLASLT call ",
         *(word.encode() for word in _OTHER_KILLED))),
    # (and "CUDA" right before a word in Chinese, Japanese or Korean: a translated message,
    # "CUDA内存不足"; their UTF-8 lead bytes)
    Key(rb"C(?:UDA(?:[ _]|CachingAllocator|AllocatorConfig|[\xe3-\xed])"
        rb"|U(?:BLAS|SOLVER|SPARSE)_STATUS|UFFT_"
        rb"|UDNN_(?:STATUS|BACKEND)"
        # (and a cuDNN status as people shorten it, "CUDNN_NOT_SUPPORTED"; DyNet's check of a
        # cuBLAS call, "CUBLAS failure in cublasSgemm(...)")
        rb"|UDNN_(?:NOT_SUPPORTED|NOT_INITIALIZED|BAD_PARAM|EXECUTION_FAILED|INTERNAL_ERROR"
        rb"|ALLOC_FAILED|ARCH_MISMATCH|MAPPING_ERROR)|UBLAS failure in "
        # (ONNX Runtime's checks of a cuDNN call: "CUDNN failure 4", "CUDNN error executing")
        rb"|UDNN failure \d|UDNN2? error executing "
        rb"|uda failure|achingAllocator|aught collective|onnection closed by (?:remote )?peer"
        # (and torch's "Can't find nvml<function>:" of a library that lacks it, where a log
        # cut the line before the library's name)
        rb"|an't (?:initialize NVML|find nvml)|urrently allocated +: "
        # (cudaMallocAsync's "Free (according to CUDA): ", in this pass: one pass fewer)
        rb"|(?<=\(according to C)UDA\): "
        # (cuBLAS's handle, in words: "Create cublas handle failed", "CUBLAS initialization")
        rb"|reate cublas handle|UBLAS initiali[sz]ation"
        # (a program's own check of a cuBLAS call in its short words: "CUBLAS: execution failed")
        rb"|UBLAS: "
        # (ONNX Runtime's CPU provider in a list: which device a session runs on)
        rb"|PUExecutionProvider['\"]"
        # (a glog check of a CUDA call's status, on a line without "error": "Check failed: e ==
        # cudaSuccess (2 vs. 0)", "cudaSuccess == cudaStat (0 vs. 39)")
        rb"|heck failed: [^\n]{0,120}?(?:cudaSuccess|_STATUS_SUCCESS)"
        # (llama.cpp's device buffers, "failed to allocate CUDA0 buffer", and TensorFlow's
        # "Loaded runtime CuDNN library: ...", in this pass: one pass fewer)
        rb"|UDA\d{1,2} buffer|uDNN library"
        # (and "no CUDA-capable device is detected" on a line without "error": llama.cpp's
        # "ggml_cuda_init: failed to initialize CUDA: no CUDA-capable device is detected")
        rb"|UDA-capable device"
        # (and AliceVision's "This program needs a CUDA-Enabled GPU", with no "error" in a title)
        rb"|UDA-Enabled GPU"
        # (the CUDA a log states, where no "CUDA " is: nvcc's "Cuda compilation tools, release
        # 9.0", CMake's "Found CUDA: /usr/local/cuda (found version "9.0")")
        rb"|uda compilation tools|UDA: (?<=Found CUDA: )"
        # (Theano's CNMeM pool out of memory, on a line without "memory" in lower case)
        rb"|NMEM_STATUS_OUT_OF_MEMORY"
        # (and OpenCL's status for a buffer the device could not hold)
        rb"|L_MEM_OBJECT_ALLOCATION_FAILURE"
        # (and OpenCL's status for its runtime's host memory, "CL_OUT_OF_HOST_MEMORY")
        rb"|L_OUT_OF_HOST_MEMORY"
        # (and llama.cpp's "ggml_cuda_init: failed to initialize CUDA: <reason>" whatever the
        # reason: "system has unsupported display driver / cuda driver combination")
        rb"|(?<=initialize C)UDA: "
        # (and a temperature in degrees Celsius: an overheat told, "crashes at 110°C")
        rb"|(?<=\d\xc2\xb0C)"
        # (and an RDMA completion queue's failed entry: "CQE ERROR wr_id=3 status=12(...)")
        rb"|QE (?:ERROR|[Ee]rror)"
        # (and NVIDIA DALI's device allocator: "Can't allocate 129499136 bytes on device 0.")
        rb"|an't allocate \d{1,20} bytes on device"
        # (and NCCL's socket connect named by its function: "socketStartConnect: Connect to")
        rb"|onnect: (?<=StartConnect: )|onnect: (?<=PollConnect: )|onnect: (?<=SocketConnect: )"
        # (and a CUDA library that does not load, on a line without "error": "Could not locate
        # cudnn_ops_infer64_8.dll", ONNX Runtime's "Failed to create CUDAExecutionProvider";
        # and XLA finding no ptxas, "Couldn't get ptxas version string", as a title copies it)
        rb"|ould not locate|UDAExecutionProvider(?!['\"])"
        rb"|ouldn'?t (?:get|invoke) ptxas)",
        (b"Could not locate", b"CUDAExecutionProvider", b"Couldn't get ptxas",
         b"Couldnt get ptxas", b"Couldn't invoke ptxas", b"Couldnt invoke ptxas", b"CUDA ",
         b"CUDA_",
         b"CUDACachingAllocator", b"CUDAAllocatorConfig",
         *(b"CUDA" + bytes([lead]) for lead in range(0xE3, 0xEE)), b"CUBLAS_STATUS",
         b"CUSOLVER_STATUS", b"CUSPARSE_STATUS", b"CUFFT_", b"CUDNN_STATUS", b"CUDNN_BACKEND",
         *(b"CUDNN_" + short for short in (b"NOT_SUPPORTED", b"NOT_INITIALIZED", b"BAD_PARAM",
                                           b"EXECUTION_FAILED", b"INTERNAL_ERROR",
                                           b"ALLOC_FAILED", b"ARCH_MISMATCH", b"MAPPING_ERROR")),
         b"CUBLAS failure in ", b"CUBLAS: ", b"CUDNN failure ", b"CUDNN error executing ",
         b"CUDNN2 error executing ",
         b"Cuda failure", b"CachingAllocator", b"Caught collective", b"Connection closed by ",
         b"Can't initialize NVML", b"Can't find nvml", b"Currently allocated ",
         b"(according to CUDA): ",
         b"Create cublas handle", b"CUBLAS initialization", b"CUBLAS initialisation",
         b"CPUExecutionProvider'", b'CPUExecutionProvider"', b"Check failed: ",
         *(b"CUDA%d" % digit for digit in range(10)), b"CuDNN library",
         b"CUDA-capable device", b"CUDA-Enabled GPU", b"Cuda compilation tools", b"Found CUDA: ",
         b"CNMEM_STATUS_OUT_OF_MEMORY", b"CL_MEM_OBJECT_ALLOCATION_FAILURE",
         b"CL_OUT_OF_HOST_MEMORY",
         b"initialize CUDA: ", "°C".encode(), b"CQE ERROR", b"CQE error", b"CQE Error",
         b"Can't allocate ", b"StartConnect: ", b"PollConnect: ", b"SocketConnect: ")),
    # (and TensorFlow 1's node under its OOM: '[[Node: ... _device=".../device:GPU:0"]')
    # (and a GPU lost, told: "we lost 1 GPU", "one GPU is loss after reboot", "Lost GPU")
    # (and nvidia-smi's "GPU requires reset" for a GPU only a reset brings back)
    # (and PaddlePaddle's "The GPU architecture in your current machine is Ampere, which is
    # not compatible with Paddle installation with arch: ..."; short enough to stay whole on the
    # first line when a terminal wraps it)
    Key(rb"G(?:PU(?: is lost| lost from the bus| has fallen| requires reset| \d+ has a total|"
        rb" architecture in |"
        rb"\d+ [^\n]{0,80}?"
        rb"which is of cuda capability|:\d+\"\]| is loss)|ET was unable"
        rb"|(?<=[Ll]ost G)PU|(?<=[Ll]ost [a\d] G)PU|(?<=[Ll]ost one G)PU|(?<=losing the G)PU"
        # (and a card found at fault, told: "swapped the GPU", "a faulty GPU")
        rb"|(?<=ed the G)PU|(?<=ed my G)PU|(?<=ed our G)PU|(?<=faulty G)PU|(?<=defective G)PU"
        # (and a node told to have a bad card, or to have come up a card short: "machine 47
        # has a bad GPU", "node 3 came up short a GPU")
        rb"|(?<=bad G)PU|(?<=broken G)PU|(?<=failing G)PU|(?<=up short a G)PU"
        rb"|(?<=up short one G)PU|(?<=up missing a G)PU|(?<=up missing one G)PU"
        rb"|(?<=back short a G)PU|(?<=back short one G)PU"
        # (and TensorFlow's "Blas GEMM launch failed", in a title or a line without "Error")
        rb"|EM[MV](?:Batched|StridedBatched)? launch failed"
        # (and a card told dead: "my GPU is toast", "the GPU died", "it burnt my GPU")
        rb"|PUs? (?:(?:is|was|just) )?(?:toast|dead|died|fried|burn)|(?<=rnt my G)PU"
        rb"|(?<=urn my G)PU"
        # (and a program's abort at its temperature limit: hashcat's "Temperature limit on GPU
        # #1 reached, aborting")
        rb"|PU #(?<=emperature limit on GPU #)"
        # (and a build without this GPU's architecture, in the program's words: "ggml-cuda was
        # compiled without support for the current GPU architecture")
        rb"|PU architecture(?<=current GPU architecture)"
        # (and a GPU told disconnected: "the GPU disconnected during training", "GPU
        # disconnection")
        rb"|PUs? (?:(?:was|were|got|has|had|have|just|suddenly|randomly|keeps?|kept) ){0,2}"
        rb"disconnect"
        # (and a GPU told vanishing: "the GPU disappears from nvidia-smi", "GPU 3 vanished")
        rb"|PUs?(?: #?\d{1,2})? (?:\w+ ){0,2}?(?:disappear|vanish))",
        (b"GPU is lost", b"GPU lost from the bus", b"GPU has fallen", b"GPU requires reset",
         b"GPU architecture in ",
         b" has a total",
         b"which is of cuda capability", *(b"GPU:%d" % digit for digit in range(10)),
         b"GET was unable", b"GPU is loss",
         *(first + b"ost " + between + b"GPU" for first in (b"l", b"L")
           for between in (b"", b"a ", b"one ", *(b"%d " % digit for digit in range(10)))),
         b"losing the GPU", b"ed the GPU", b"ed my GPU", b"ed our GPU", b"faulty GPU",
         b"defective GPU", b"bad GPU", b"broken GPU", b"failing GPU",
         *(b"up " + word + b" " + count + b" GPU" for word in (b"short", b"missing")
           for count in (b"a", b"one")), b"back short a GPU", b"back short one GPU",
         b"GEMM launch failed", b"GEMV launch failed",
         b"GEMMBatched launch failed", b"GEMMStridedBatched launch failed",
         b"rnt my GPU", b"urn my GPU", b"emperature limit on GPU #",
         b"current GPU architecture", b"disconnect", b"disappear", b"vanish",
         *(b"GPU" + plural + b" " + link + end for plural in (b"", b"s")
           for link in (b"", b"is ", b"was ", b"just ")
           for end in (b"toast", b"dead", b"died", b"fried", b"burn")))),
    # (and Jupyter's server restarting a kernel that died: "KernelRestarter: restarting kernel";
    # VS Code's "The Kernel crashed while executing code in the current cell")
    Key(rb"K(?:ill|ILL|ernelRestarter: restarting kernel|ernel crashed while executing)",
        (b"Kill", b"KILL", b"KernelRestarter: restarting kernel",
         b"Kernel crashed while executing")),
    # a kill told in the writer's words, wherever it is ("my process gets killed in the pod")
    # (and in Chinese with the English verb: "程序在加载模型中被kill了")
    # (and screens told going black under load: "the monitors go black", "the screen went
    # blank"; a GPU that stopped answering)
    # (and a run told stuck: "the ranks get stuck at step 300"; its hang in the "n" pass)
    Key(rb"k(?:ill(?:ed\b|(?<=\xe8\xa2\xabkill))|(?<=bla[cn]k)(?:(?<=[nst] black)|(?<=go black)"
        rb"|(?<=[nst] blank)|(?<=go blank))|\b(?<=stuck))",
        (b"stuck", b"killed", "被kill".encode(),
         *(end + b" " + word for end in (b"n", b"s", b"t", b"go") for word in (b"black",
                                                                          b"blank")))),
    # ("ProcessGroupNCCL'" at a line's end: a terminal cut "ProcessGroupNCCL's" there)
    # (and lspci's line for a GPU that no longer answers on the bus: "NVIDIA Corporation ...
    # (rev ff)")
    # (and nvJPEG's status for its failed allocator, on a line without "error")
    Key(rb"N(?:V(?:RM|ML|IDIA(?:-SMI| driver| Display Driver\. By default"
        rb"| Corporation [^\n]{0,160}?\(rev ff\))|Link|LINK|JPEG_STATUS_ALLOCATOR_FAILURE)"
        rb"|CCL(?: WARN| error| comm| oper| work|\(|"
        rb"\.cpp|'(?:s|\r?\n)| INFO [\w/.-]+\.(?:cc|h|cu|cpp|hpp):\d+ -> [1-7]\b"
        # (the watchdog's timeout in its stack trace: "WorkNCCL::checkTimeout(")
        rb"|::checkTimeout)"
        # (an InfiniBand completion error without "NCCL WARN": a title, a retold line)
        rb"|ET/\w+ ?:? ?Got completion"
        # (nvtop's words when NVML gave it no GPU, and nvidia-smi's)
        rb"|o GPU to monitor|o devices were found|o NVIDIA GPU device is present"
        # (CUDA's "no kernel image is available" capitalised, as a title or a sentence starts it)
        rb"|o kernel image"
        # (an NGC container's banner: "This container was built for NVIDIA Driver Release ...")
        rb"|VIDIA Driver Release"
        # (a writer's "my Nvidia version is too old")
        rb"|(?:vidia|VIDIA) (?:driver|version) is too old"
        # (the driver and its kernel module named in other cases: "couldn't communicate with the
        # Nvidia driver", "NVIDIA kernel module missing")
        rb"|vidia [Dd]river|VIDIA Driver|(?:vidia|VIDIA) [Kk]ernel [Mm]odule"
        # (and right before a Chinese word, "NCCL超时", "NCCL会报超时错误": UTF-8 lead bytes)
        rb"|CCL ?[\xe3-\xed]"
        # (a writer's "... and reports NCCL timeout")
        rb"|CCL [Tt]ime ?out"
        # (a writer's hang or failure in NCCL: "hangs at NCCL init", "NCCL hangs on two nodes",
        # "stuck in NCCL", "NCCL-Initialisierung", "de NCCL", "do NCCL")
        rb"|CCL[ -](?:[Ii]nit|[Hh]ang|[Dd]eadlock|[Ss]tuck|[Ff]reez|[Cc]rash|[Ff]ail)"
        rb"|CCL\b(?<=in NCCL|at NCCL|on NCCL|de NCCL|do NCCL|\xd1\x81 NCCL)"
        # (and NCCL named as the run's backend after a stall: "... with NCCL", "using NCCL",
        # "the NCCL backend")
        rb"|CCL\b(?<=with NCCL)|CCL\b(?<=using NCCL)"
        rb"|CCL\b(?<=the NCCL|mit NCCL|com NCCL|Com NCCL|vec NCCL)"
        rb"|CCL backend"
        # (and the ranks' NCCL told differing: "the NCCL versions differed between the nodes",
        # "our servers had different NCCL versions")
        rb"|CCL versions? (?:differ|mismatch|(?:are|were|was|is) (?:not the same|different)"
        rb"|(?:did|do)(?: not|n't) match)|CCL(?<=different NCCL)"
        # (a writer's "NCCLAllReduce ... causes a crash", "the NCCL all-reduce fails")
        rb"|(?:CCL|ccl)[ -]?[Aa]ll[ -]?[Rr]educe"
        # (DCGM's "Detected fatal errors on NvSwitch 2 link 17", "Detected fatal NvSwitch SXID
        # 12028", "... nvlink_replay_error_count_total NvLink errors on GPU 3's NVLink")
        rb"|(?<=fatal errors on N)vSwitch|vSwitch SXID(?<=fatal NvSwitch SXID)"
        rb"|vLink errors (?<= NvLink errors ))",
        (b"NVRM", b"NVML", b"NVIDIA-SMI", b"NVIDIA driver", b"NVIDIA Display Driver. By default",
         b"NVJPEG_STATUS_ALLOCATOR_FAILURE",
         b"NVIDIA Corporation ",
         b"NVLink", b"NVLINK", b"NCCL WARN", b"NCCL error", b"NCCL comm", b"NCCL oper",
         b"NCCL work", b"NCCL(", b"NCCL.cpp", b"NCCL'", b"NCCL::checkTimeout", b"NET/",
         b"No GPU to monitor", b"No NVIDIA GPU device is present",
         b"No devices were found", b"No kernel image",
         b"Nvidia driver is too old", b"Nvidia version is too old",
         b"NVIDIA Driver Release",
         b"NVIDIA version is too old", b"Nvidia driver", b"Nvidia Driver", b"NVIDIA Driver",
         *(first + b" " + kernel + b"ernel " + module + b"odule" for first in (b"Nvidia", b"NVIDIA")
           for kernel in (b"k", b"K") for module in (b"m", b"M")),
         *(b"NCCL" + bytes([lead]) for lead in range(0xE3, 0xEE)),
         *(b"NCCL " + bytes([lead]) for lead in range(0xE3, 0xEE)),
         *(b"NCCL" + sep + word for sep in (b" ", b"-")
           for word in (b"Init", b"init", b"Hang", b"hang", b"Deadlock", b"deadlock", b"Stuck",
                        b"stuck", b"Freez", b"freez", b"Crash", b"crash", b"Fail", b"fail")),
         b"in NCCL", b"at NCCL", b"on NCCL", b"de NCCL", b"do NCCL",
         b"with NCCL", b"using NCCL", b"the NCCL", b"mit NCCL", b"com NCCL",
         b"Com NCCL", b"vec NCCL", "с NCCL".encode(), b"NCCL backend", b"NCCL version",
         b"different NCCL",
         b"NCCL timeout", b"NCCL Timeout", b"NCCL time out", b"NCCL Time out",
         *(first + sep + all_ + sep_ + reduce for first in (b"NCCL", b"Nccl")
           for sep in (b"", b" ", b"-") for all_ in (b"All", b"all")
           for sep_ in (b"", b" ", b"-") for reduce in (b"Reduce", b"reduce")),
         *(b" -> %d" % code for code in range(1, 8)), b"fatal errors on NvSwitch",
         b"fatal NvSwitch SXID", b" NvLink errors ")),
    # (an nvidia-smi table's "Processes:" row: who holds the GPU, in the rows below it)
    # (and PBS/Torque's "PBS: job killed: mem ... exceeded limit ...")
    # (and a power supply's protection tripping, told: "latched PSU OCP/UVP protection", "the
    # PSU kept tripping")
    # (and DCGM's "Pending page retirements together with a DBE were detected on GPU 1")
    Key(rb"P(?:yTorch|YTORCH_|rocess(?:(?P<table>es:)| \d+ has)|TX|BS: job killed"
        rb"|SU(?:s|'s?)? (?:OCP|OPP|UVP|OVP|SCP|[Oo]ver|[Uu]nder|(?:keeps |kept |was |is )?trip"
        # (and the supply named with its fault: "a hardware PSU issue", "the PSU was dying")
        rb"|(?:issue|problem|fault|failure|was|is|died|dying|was dying))"
        rb"|ending page retirements together"
        # (and GPU peer-to-peer told unavailable or failing: "P2P access is not supported",
        # "NCCL P2P issue")
        rb"|2P (?:[Aa]ccess |[Cc]ommunication |[Tt]ransport )?(?:is |was )?(?:[Nn]ot [Ss]upported"
        rb"|[Uu]nsupported)|(?<=NCCL P)2P )",
        (b"PyTorch", b"PYTORCH_", b"Processes:", b"PTX", b"PBS: job killed", b"PSU",
         b"Pending page retirements together", b"P2P ",
         *(b"Process %d" % digit for digit in range(10)))),
    # (and XLA's list of the buffers live at an out-of-memory)
    Key(rb"X(?:id|ID|LA Label: )", (b"Xid", b"XID", b"XLA Label: ")),
    # TensorFlow's and XLA's status for an out-of-memory, in a title or a sentence without
    # "Error" or "memory" ("Resource exhausted: OOM when allocating tensor ...")
    Key(rb"R(?:esource ?[Ee]xhausted|ESOURCE_EXHAUSTED"
        rb"|equested +: "  # (and cudaMallocAsync's "Requested : ", one pass fewer)
        # (and the host's RAM named: a notebook's "Your session crashed after using all
        # available RAM", a writer's "the RAM is full and the process is killed"; not VRAM)
        rb"|(?<![A-Za-z]R)AM\b"
        # (and capitalised as a word: "the Ram use grows every epoch")
        rb"|(?<![A-Za-z]R)am\b"
        # (and the GPU's memory as a writer names it: "runs out of VRAM")
        rb"|(?<=VR)AM\b"
        # (and an RDMA library's "MR registration failed: Bad address")
        rb"|(?<=MR) registration"
        # (and nvidia-smi's "ERR!" in a table's field NVML could not read)
        rb"|!(?<=ERR!)"
        # (and RAPIDS' error code for its out-of-memory, "RMM_ERROR_OUT_OF_MEMORY")
        rb"|MM_ERROR_OUT_OF_MEMORY)",
        (b"Resource exhausted", b"Resource Exhausted", b"Resourceexhausted", b"ResourceExhausted",
         b"RESOURCE_EXHAUSTED", b"Requested ", b"RAM", b"Ram", b"MR registration", b"ERR!",
         b"RMM_ERROR_OUT_OF_MEMORY")),
    # the shell's word for Killed in another language, alone at the start of a line (after
    # a job number): the hit is the line after the newline (group "at")
    # (the look-ahead turns most lines away at their first byte: half this pass's cost)
    Key(rb"\n(?=[ \t*_`>\[" + _KILLED_FIRST_BYTES + rb"])"
        rb"(?P<at>[ \t*_`>]*(?:\[\d+\][+-]?[ \t]+(?:\d+[ \t]+)?)?(?:"
        + _OTHER_KILLED_WORDS + rb"))",
        tuple(word.encode() for word in _OTHER_KILLED)),
    # the kernel's OOM killer at work: "invoked oom-killer"; a writer's "oom killer"
    # (and a GPU's out-of-memory told in lower case: "the node3 failed with cuda oom")
    # (and a writer's driver told too old, in this pass: "my driver is too old for CUDA 12.1")
    # (and a model told too big for the card, in this pass: "the model is too big for my GPU")
    Key(rb"oo(?:m(?:[- ]?kill|_reaper|(?<=[Cc]uda oom)\b)|(?: old| low)(?:(?<=driver is too old)"
        rb"|(?<=driver was too old)|(?<=driver version is too old)|(?<=driver is too low)"
        rb"|(?<=driver version is too low)"
        # (... and with its version between: "my driver is 470 which is too old", "the 470
        # driver was too old")
        rb"|(?<=\d is too old)|(?<=\d was too old)|(?<=which is too old)|(?<=which was too old)"
        rb"|(?<=\d is too low)|(?<=which is too low))|(?<=too) (?:big|large) (?:for|to fit)\b)",
        (b"oom-kill", b"oom kill", b"oomkill", b"oom_reaper", b"cuda oom", b"Cuda oom",
         b"driver is too old", b"driver was too old", b"driver version is too old",
         b"driver is too low", b"driver version is too low", b"is too old", b"was too old",
         b"is too low", b"too big ", b"too large ")),
    # ... and in capitals, mid-log or in prose ("killed by the OOM killer", "OOM-killed"), on a
    # line with no other key ("Out of memory: Killed process" has "emory" and "Kill")
    # (and TensorFlow's out-of-memory without its status, "OOM when allocating tensor ...": a
    # title, or the line a person kept of it)
    # (and the kubelet's event for a kill on its node: "System OOM encountered, victim ...")
    # (and the host's memory named before OOM: "a CPU OOM", "the host OOM came back")
    # (and an out-of-memory told in capitals as a word of its own: "getting OOM on an A100",
    # "OOMs at step 500", "it's OOMing on my 4090"; the signatures tell the GPU's from the
    # host's)
    # (and Slurm's job state after an OOM kill: "JobState=OUT_OF_MEMORY", sacct's "OUT_OF_ME+")
    Key(rb"O(?:(?:OM|om)[- _]?(?:kill|Kill|KILL)|OM when allocating|OM encountered"
        rb"|OM(?:s|ing|ed|'d)?\b|UT_OF_ME(?:MORY|\+)"
        # (and in Chinese right after it: "就OOM了", "OOM啦", "OOM掉了")
        + "|OM ?(?:了|啦|掉了)".encode() +
        rb"|(?:(?<=CPU O)|(?<=host O)|(?<=Host O)|(?<=system O)|(?<=System O))OM"
        # (and Horovod's stall inspector: "One or more tensors were submitted to be reduced,
        # gathered or broadcasted by subset of ranks and are waiting ...")
        rb"|ne or more tensors were submitted)",
        (*(first + sep + kill for first in (b"OOM", b"Oom") for sep in (b"", b" ", b"-", b"_")
           for kill in (b"kill", b"Kill", b"KILL")), b"OOM when allocating",
         b"OOM encountered", b"CPU OOM", b"host OOM", b"Host OOM", b"system OOM",
         b"System OOM", b"OOM", b"OUT_OF_ME", b"One or more tensors were submitted")),
    # a GPU's memory told running out in Chinese, the language most such reports not in
    # English are in ("显存不足", "爆显存"): no other pass starts with its first byte
    # (and the card's memory in longer words, "显卡内存一直上涨 ... 最终内存溢出": 显 leads both;
    # and the card told lost, "发现显卡丢失")
    Key("显(?:存|卡的?内存|卡丢失)".encode(),
        ("显存".encode(), "显卡内存".encode(), "显卡的内存".encode(), "显卡丢失".encode())),
    # the numbers of the cudaMallocAsync backend's OOM message, one per line
    # ("Requested" and "(according to CUDA)": in the R and C passes)
    # (and TensorFlow's "kernel version 470.57.2 does not match DSO version 510.47.3", in this
    # pass: one pass fewer)
    # (and a kernel's assertion told with a capital: "Device-side assert in the loss")
    # (and DCGM's health watch: "Detected clocks event due to thermal violation in GPU 2")
    Key(rb"D(?:evice limit +: |SO version \d|evice[- ]side assert"
        rb"|etected clocks? (?:event|throttling) due to thermal)",
        (b"Device limit ", b"DSO version ", b"Device-side assert", b"Device side assert",
         b"Detected clock")),
    # the driver's tools and library named in lower case: "bash: nvidia-smi: command not found",
    # the runtime's `exec: "nvidia-smi": executable file not found`, "libnvidia-ml.so.1 missing"
    # (and "no kernel image is available" where a program, a miner or a server, printed it
    # without "error": one pass fewer)
    # (and the NVIDIA kernel module that would not load, as modprobe, insmod and the driver's
    # installer name it: "could not insert 'nvidia'", "Module nvidia not found", "nvidia.ko: Key
    # was rejected", "Unable to load the kernel module 'nvidia.ko'", "nvidia kernel module
    # missing"; and "the nvidia driver" in lower case)
    # (and a run told hanging, in lower case: "the script hangs during the backward pass on
    # rank 0", "it hung at the barrier", "training is hanging"; "hang" alone where a terminal cut
    # "hangs" at its width)
    Key(rb"n(?:gs\b(?<=hangs)|g\b(?<=hung)|ging\b(?<=hanging)|g\b(?<=hang)"
        rb"|vidia-(?:smi|ml)|o kernel image|vidia\.ko: |vidia [Dd]river"
        rb"|vidia [Kk]ernel [Mm]odule|(?<=insert 'n)vidia|(?<=Module n)vidia"
        rb"|(?<=kernel module 'n)vidia|(?<=the 'n)vidia"
        # (llama.cpp's "  current device: 1, in function ..." under a CUDA error; Docker's
        # "could not select device driver "" with capabilities: [[gpu]]" in a title; the
        # literal before the look-behind turns most "n"s away at their next byte)
        rb"|t device: \d(?<=current device: \d)"
        rb"|ot select device driver(?<=could not select device driver)"
        # (and TensorFlow's "Failed to get convolution algorithm" cut after its first words, as
        # a title quotes it: the "n" that ends "convolution")
        rb"| algorithm(?<=Failed to get convolution algorithm)"
        # (and CUDA's kernel faults in its own words, where a program prints them after the
        # call's name with no "error": hashcat's "cuMemcpyHtoDAsync(): unspecified launch
        # failure", "cuCtxCreate(): misaligned address")
        rb"|specified launch failure(?<=nspecified launch failure)"
        rb"|ed address(?<=misaligned address)"
        # ("cuStreamSynchronize(): the launch timed out and was terminated", "cuLaunchKernel():
        # an illegal instruction was encountered")
        rb"|ch timed out(?<=launch timed out)| illegal instruction(?<=an illegal instruction)"
        # (and CUDA's words for a kernel not built for this GPU, after the kernel's name
        # without "error": "filterH: invalid device function")
        rb"|ction(?<=invalid device function)"
        # (and CUDA's description of status 35, as libraries' hints print it and writers retell
        # it: "the installed NVIDIA CUDA driver is older than the CUDA runtime library", "gpu
        # driver is older than gpu runtime version")
        rb"|(?<=is older tha)n (?:the )?(?:GPU |gpu |CUDA |cuda )?run ?time"
        # (and a GPU's device node missing: "no NVIDIA GPU device is present: /dev/nvidia0 does
        # not exist")
        rb"|o NVIDIA GPU device is present|(?<=/dev/n)vidia\d{1,2} does not exist"
        # (and a thermal shutdown told as a sentence of its own: "thermal shutdown. bringing
        # hosts back up")
        rb"|[.!](?<=hermal shutdown[.!])|[.!](?<=hermal shut down[.!])"
        # (and C++'s allocation failure nothing caught: "terminate called after throwing an
        # instance of 'std::bad_alloc'")
        rb"|stance of 'std::bad_alloc'(?<=instance of 'std::bad_alloc')"
        # (and NCCL's shared-memory helper named by a writer or a backtrace: "ncclShmOpen")
        rb"|cclShmOpen"
        # (and PaddlePaddle Fluid's check of a GPU request against the free memory: "enforce
        # allocating <= available failed, N > M")
        rb"|g <= available(?<=allocating <= available)"
        # (and a writer's driver told short of the CUDA the program needs: "the driver version
        # is insufficient for ...", "the driver only supports CUDA 11.4", "needs a newer driver")
        rb"|sufficient(?:(?<=driver version is insufficient)|(?<=driver is insufficient))"
        rb"|ly supports(?<=driver only supports)|ewer driver(?<=newer driver)"
        # (and a card told needing a newer CUDA: "the 3090 only supports cuda 11.0 or newer")
        rb"|ly supports (?:cuda|CUDA)"
        # (and llama.cpp's loader and NumPy's allocation, on lines without "error" or "memory":
        # "unable to allocate backend buffer", 'it prompts "Unable to allocate 58.0 GiB for an
        # array with shape ..."')
        rb"|able to allocate (?:backend buffer|[^\n]{1,40}? for an array with shape"
        rb"|array with shape)"
        # (and go-nvml's failed start as a Go program prints it: "nvml.Init() failed: ...")
        rb"|vml\.(?:Init|Shutdown)\(\) failed"
        # (and NCCL as a run's backend in lower case, told beside a stall: "the nccl backend",
        # "backend='nccl'")
        rb"|ccl(?: backend|['\"](?<=backend=['\"]nccl['\"]))"
        # (and a build told to no longer support the writer's card: "no longer supports my K80")
        rb"|o longer support"
        # (and Horovod's stalled ops, one per line: "HorovodAllreduce_grads_0 [missing ranks: 7]")
        rb"|ks: (?<=missing ranks: )"
        # (and NVML's mismatch told without its message: "got a driver/library version mismatch")
        rb"| mismatch(?<=ibrary version mismatch)"
        # (and a machine told turning off or shutting down under load: "the whole rig turned
        # off", "the workstation shuts down"; the last behind one check of "own": a branch with
        # no literal after the "n" costs every "n"; not the noun "shutdown", a log's word)
        rb"|(?:s|ed) off(?:(?<=turns off)|(?<=turned off))"
        rb"|(?<=own)(?:(?<=shut down)|(?<=shuts down)))",
        (b"hangs", b"hung", b"hanging", b"hang", b"nvidia-smi", b"nvidia-ml", b"no kernel image",
         b"nvidia.ko: ", b"nvidia driver",
         b"driver version is insufficient", b"driver is insufficient", b"driver only supports",
         b"nly supports cuda", b"nly supports CUDA", b"nable to allocate backend buffer",
         b"for an array with shape", b"nable to allocate array with shape",
         b"newer driver",
         b"nvidia Driver", *(b"nvidia " + kernel + b"ernel " + module + b"odule"
                             for kernel in (b"k", b"K") for module in (b"m", b"M")),
         b"insert 'nvidia", b"Module nvidia", b"kernel module 'nvidia", b"the 'nvidia",
         b"current device: ", b"could not select device driver",
         b"Failed to get convolution algorithm", b"nspecified launch failure",
         b"misaligned address", b"launch timed out", b"an illegal instruction",
         b"invalid device function", b"is older than ", b"no NVIDIA GPU device is present",
         b"/dev/nvidia", b"hermal shutdown.", b"hermal shutdown!", b"hermal shut down.",
         b"hermal shut down!", b"nstance of 'std::bad_alloc'", b"ncclShmOpen",
         b"allocating <= available", b"nvml.Init() failed", b"nvml.Shutdown() failed",
         b"nccl backend", b"backend='nccl'", b'backend="nccl"', b"no longer support",
         b"missing ranks: ",
         b"ibrary version mismatch", b"turns off", b"turned off", b"shut down",
         b"shuts down")),
)
PREFILTER: tuple[re.Pattern[bytes], ...] = tuple(re.compile(key.pattern) for key in KEYS)

# a row of a boxed table, from its line's start (behind a launcher's or logger's prefix too)
_TABLE_ROW = re.compile(rb"[ \t]*" + LOG_PREFIXES.encode() + rb"\|")
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# Typographic quotes and odd spaces (a forum's or a translator's) read as the plain ones;
# one character for one, so positions do not move.
_PLAIN = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'",
                        "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00a0": " ",
                        "\u2009": " ", "\u202f": " ", "\u3000": " "})


def clean_text(raw: bytes) -> str:
    """Text for matching: undecodable bytes replaced, colour codes and control bytes removed;
    white space kept (indentation, and a space where a terminal wrapped, are evidence)."""
    text = raw.decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _CONTROL.sub("", text).translate(_PLAIN)


def clean_line(raw: bytes) -> str:
    """Text for matching: undecodable bytes replaced, colour codes and control bytes removed."""
    return clean_text(raw).strip()


Context = tuple[tuple[int, str], ...]  # (lines away from the candidate's line, text)


@dataclass(frozen=True)
class Candidate:
    """A line (or a window of a very long line) that passed the prefilter."""

    line: int  # 1-based line number in its source
    text: str
    before: Context = ()  # the segments before it, nearest last
    after: Context = ()  # the segments after it, nearest first
    tail: bool = False  # one of the stream's last lines, taken without a prefilter hit
    own: str = ""  # the segment's text as written (unstripped); "" for a window of a long line


# Where the keys hit in ``buf[lo:end]`` and where a table's header line ends, given the
# absolute offset of ``buf[0]`` in its stream: python_prefilter, or an engine that knows where
# the keys' anchors lie (gpu_audit.explain.grepscan) and gives the same positions.
Prefilter = Callable[[bytes, int, int, int], tuple[list[int], list[int]]]


def python_prefilter(buf: bytes, lo: int, end: int, origin: int = 0
                     ) -> tuple[list[int], list[int]]:
    """The keys' hits in ``buf[lo:end]`` (one pass of each key) and the ends of the table
    headers among them."""
    keyed: list[int] = []
    tables: list[int] = []
    for pattern in PREFILTER:
        _run(pattern, buf, lo, end, keyed, tables)
    return keyed, tables


def _run(pattern: re.Pattern[bytes], buf: bytes, lo: int, end: int, keyed: list[int],
         tables: list[int]) -> None:
    """Add ``pattern``'s hits in ``buf[lo:end]`` to ``keyed`` (and table headers' ends)."""
    if "table" in pattern.groupindex:
        for hit in pattern.finditer(buf, lo, end):
            keyed.append(hit.start())
            if hit.start("table") >= 0:
                tables.append(hit.end())
        return
    keyed.extend(map(methodcaller("start", pattern.groupindex.get("at", 0)),
                     pattern.finditer(buf, lo, end)))


def keyed_on_lines(buf: bytes, lo: int, end: int, anchored: Iterable[tuple[int, int]]
                   ) -> tuple[list[int], list[int]]:
    """What :func:`python_prefilter` finds in ``buf[lo:end]`` (whole lines), running each key
    only over the lines where its anchors lie: ``anchored`` is (position, bit mask of the
    :data:`KEYS` that may hit on that position's line), in position order.

    A key's pass over a line finds what its pass over the whole text finds there: no hit of a
    key crosses into the next line but for a wrapped number (which holds no anchor), and the
    shell's Killed word, whose hit starts at the newline before its line.
    """
    keyed: list[int] = []
    tables: list[int] = []
    start = stop = lo  # the line being gathered: buf[start:stop]
    mask = 0
    for pos, keys in anchored:
        if pos >= stop:
            if mask:
                _run_on_line(buf, lo, end, start, stop, mask, keyed, tables)
            start = buf.rfind(b"\n", stop, pos) + 1 or stop
            stop = buf.find(b"\n", pos, end) + 1 or end
            mask = 0
        mask |= keys
    if mask:
        _run_on_line(buf, lo, end, start, stop, mask, keyed, tables)
    return keyed, tables


def _run_on_line(buf: bytes, lo: int, end: int, start: int, stop: int, mask: int,
                 keyed: list[int], tables: list[int]) -> None:
    index = 0
    while mask:
        if mask & 1:
            key = KEYS[index]
            # (a hit at the newline before the line: the shell's Killed word)
            first = max(lo, start - 1) if key.pattern.startswith(rb"\n") else start
            last = (buf.find(b"\n", stop, end) + 1 or end) if key.next_line else stop
            _run(PREFILTER[index], buf, first, last, keyed, tables)
        mask >>= 1
        index += 1


class BlockScanner:
    """Feed bytes in any chunking; get candidates with their line numbers.

    ``before`` is text that precedes the stream (context only: never scanned or counted), for
    a worker that scans one range of a file. ``prefilter`` finds the keys' hits (default:
    :func:`python_prefilter`).
    """

    def __init__(self, before: bytes = b"", prefilter: Prefilter | None = None) -> None:
        self._prefilter = prefilter or python_prefilter
        self.lines = 0  # newlines before the start of the pending bytes
        self.bytes = 0
        self._history = before[-(LOOKBEHIND + 1):]  # already scanned, kept as context
        self._pending = b""  # not scanned yet; starts at a line start (or inside a huge line)
        self._offset = 0  # absolute offset of _pending[0]
        self._covered_to = 0  # absolute offset up to which text was already classified
        self._saw_data = False
        self._ends_with_newline = True
        self._cleaned: list[dict[tuple[int, int], str]] = [{}, {}]  # see _Segments
        # rows a table open at the end of the last block (or of ``before``) may still have
        self._table_left = _open_table(self._history)

    def feed(self, data: bytes) -> Iterator[Candidate]:
        if not data:
            return
        self._saw_data = True
        self.bytes += len(data)
        self._ends_with_newline = data.endswith(b"\n")
        base = len(self._history)
        # one copy of the block: the context kept, the bytes not scanned yet, the new ones
        buf = b"".join((self._history, self._pending, data)) if base or self._pending else data
        # Scan whole lines that have LOOKAHEAD bytes after them; keep the rest for later.
        end = buf.rfind(b"\n", base, max(base, len(buf) - LOOKAHEAD)) + 1
        if end == 0:
            if len(buf) - base < MAX_CARRY:
                self._pending = buf[base:]
                return
            # One enormous line: scan all but a tail, which stays as context for the next piece;
            # the kept tail overlaps the scanned part so that a key across the cut is not lost.
            pending = buf[base:]
            end = len(pending) - WINDOW_AFTER
            yield from self._scan(pending, 0, end, context=False)
            self._history = b""
            self._advance(pending, 0, end - _KEY_OVERLAP)
            return
        yield from self._scan(buf, base, end)
        self._history = buf[max(0, end - LOOKBEHIND - 1):end]
        self._advance(buf, base, end)

    def _advance(self, buf: bytes, base: int, keep_from: int) -> None:
        """Drop ``buf[base:keep_from]`` (scanned) from the pending bytes."""
        self._offset += keep_from - base
        self._pending = buf[keep_from:]

    def finish(self, after: bytes = b"", tail: bool = True,
               at_end: bool | None = None) -> Iterator[Candidate]:
        """The candidates left. ``after`` is text that follows the stream (context only);
        ``at_end``: the stream's text ends with ``after`` (default: when ``after`` is empty);
        ``tail``: take the last lines as candidates too."""
        if self._pending:
            base = len(self._history)
            buf = self._history + self._pending + after
            yield from self._scan(buf, base, base + len(self._pending),
                                  at_end=not after if at_end is None else at_end, tail=tail)
            self._offset += len(self._pending)
            self._pending = b""

    @property
    def line_count(self) -> int:
        """Lines seen so far, counting a last line without a newline."""
        if not self._saw_data:
            return 0
        return self.lines + (0 if self._ends_with_newline else 1)

    def _table_rows(self, buf: bytes, lo: int, end: int, headers: list[int]) -> list[int]:
        """Where the rows under each table header in ``buf[lo:end]`` start (and those of a table
        that an earlier block left open): each line that starts with "|", up to the first that
        does not, within :data:`MAX_TABLE_ROWS` rows per table. An open table stays open into the
        next block, so the rows found do not depend on where the stream was cut."""
        rows: list[int] = []
        starts = [(lo, self._table_left)] if self._table_left else []
        self._table_left = 0
        starts += [(buf.find(b"\n", at, end) + 1, MAX_TABLE_ROWS) for at in headers]
        for pos, left in starts:
            if pos <= 0 or (rows and pos <= rows[-1]):
                continue  # a header on the last line, or one inside a table already read
            while left and pos < end:
                match = _TABLE_ROW.match(buf, pos, end)
                if match is None:
                    left = 0
                    break
                rows.append(match.end() - 1)
                left -= 1
                pos = buf.find(b"\n", pos, end) + 1 or end
            if left and pos >= end:
                self._table_left = left
        return rows

    def _scan(self, buf: bytes, lo: int, end: int, *, context: bool = True,
              at_end: bool = False, tail: bool = False) -> Iterator[Candidate]:
        """Classify-worthy segments among those starting in ``buf[lo:end]``; count newlines.

        ``buf[:lo]`` was scanned before (context only); ``buf[end:]`` is context after.
        Every search here is bounded by a window around its hit, so a block full of matching
        lines costs the same per line as a block with one.
        """
        # where a key hits (many per line in a hostile log), where a table's header line ends
        keyed, tables = self._prefilter(buf, lo, end, self._offset - lo)
        keyed.extend(self._table_rows(buf, lo, end, tables))
        keyed.sort()
        tails = _tail_starts(buf, lo, end)[::-1] if tail else []
        counted_to = lo
        newlines = self.lines
        if keyed or tails:
            base = self._offset - lo  # absolute offset of buf[0]
            covered = self._covered_to - base  # may be before lo: nothing covered in buf yet
            segments = _Segments(self._cleaned, buf, base)
            i = j = 0
            while True:
                # the next hit not covered yet (a keyed one first at the same place): the hits
                # inside a segment already taken are jumped over, not visited one by one
                i = bisect_left(keyed, covered, i)
                while j < len(tails) and tails[j] < covered:
                    j += 1
                if i < len(keyed) and (j == len(tails) or keyed[i] <= tails[j]):
                    hit, is_tail, i = keyed[i], False, i + 1
                elif j < len(tails):
                    hit, is_tail, j = tails[j], True, j + 1
                else:
                    break
                floor = max(0, hit - WINDOW_BEFORE, covered)
                start = max(floor, _last_break(buf, floor, hit) + 1)
                stop = _segment_end(buf, hit, min(len(buf), hit + WINDOW_AFTER))
                newlines += buf.count(b"\n", counted_to, start)
                counted_to = start
                covered = stop
                self._covered_to = base + stop
                if is_tail and bisect_left(keyed, stop) > bisect_left(keyed, start):
                    is_tail = False  # a keyed segment anyway
                own = segments.text(start, stop) if context else clean_text(buf[start:stop])
                text = own.strip()
                if not text:
                    continue
                if context:
                    whole = stop - start < WINDOW_BEFORE + WINDOW_AFTER
                    yield Candidate(newlines + 1, text, _before(segments, start),
                                    _after(segments, stop, at_end), is_tail, own if whole else "")
                else:
                    yield Candidate(newlines + 1, text, tail=is_tail)
        self.lines = newlines + buf.count(b"\n", counted_to, end)


_MEMO_SEGMENTS = 4 * CONTEXT_LINES  # cleaned segments kept per generation (two generations)


class _Segments:
    """The cleaned text of ``buf``'s segments, remembered by absolute offset across blocks.

    In a log full of matching lines every line is the neighbour of the candidates around it;
    it is decoded and cleaned once, not once per neighbour. ``memo`` holds two generations of
    at most :data:`_MEMO_SEGMENTS` entries each: the segments of the last few candidates.
    """

    __slots__ = ("buf", "memo", "origin")

    def __init__(self, memo: list[dict[tuple[int, int], str]], buf: bytes, origin: int) -> None:
        self.memo = memo
        self.buf = buf
        self.origin = origin  # absolute offset of buf[0]

    def text(self, start: int, stop: int) -> str:
        key = (self.origin + start, stop - start)
        now, old = self.memo
        found = now.get(key)
        if found is None:
            found = old.get(key)
            if found is None:
                found = clean_text(self.buf[start:stop])
            now[key] = found
            if len(now) >= _MEMO_SEGMENTS:
                self.memo[:] = [{}, now]
        return found


def _open_table(text: bytes) -> int:
    """The rows left to a table whose header and rows end ``text`` (the bytes before a worker's
    range), so that a worker reads the rows of a table that began in the range before it."""
    header = text.rfind(b"Processes:")
    line_start = text.rfind(b"\n", 0, header) + 1
    if header < 0 or text.find(b"\n", header) < 0 or not _TABLE_ROW.match(text, line_start):
        return 0
    rows = text[text.find(b"\n", header) + 1:].splitlines()
    if not all(_TABLE_ROW.match(row) for row in rows):
        return 0
    return max(0, MAX_TABLE_ROWS - len(rows))


def _last_break(buf: bytes, lo: int, hi: int) -> int:
    """The position of the last ``\\n`` or ``\\r`` in ``buf[lo:hi]``, or -1."""
    return max(buf.rfind(b"\n", lo, hi), buf.rfind(b"\r", lo, hi))


def _segment_end(buf: bytes, pos: int, limit: int) -> int:
    """The first ``\\n`` or ``\\r`` in ``buf[pos:limit]``, or ``limit``."""
    newline, carriage = buf.find(b"\n", pos, limit), buf.find(b"\r", pos, limit)
    ends = [i for i in (newline, carriage) if i != -1]
    return min(ends) if ends else limit


def _before(segments: _Segments, start: int) -> Context:
    """The segments that end right before ``start``, whole ones within LOOKBEHIND bytes.

    Walked back from ``start`` one line break at a time (``\\r\\n`` is one break), so only
    the segments kept are looked at.
    """
    buf = segments.buf
    first = start - LOOKBEHIND
    if first > 0 and buf[first - 1:first] not in (b"\n", b"\r"):
        first = _segment_end(buf, first, start) + 1  # skip a partial segment
    first = max(first, 0)
    out: list[tuple[int, str]] = []
    back = 0
    carriage = buf.rfind(b"\r", first, start)  # the last \r before the break looked for
    at = max(buf.rfind(b"\n", first, start), carriage)  # the text after it is start's own
    while at >= 0 and len(out) < CONTEXT_LINES:
        brk = at  # where the break before the segment starts
        if buf[at] == _NEWLINE:
            back += 1
            if at > first and buf[at - 1] == _CARRIAGE:
                brk = at - 1
        if carriage >= brk:
            carriage = buf.rfind(b"\r", first, brk)
        at = max(buf.rfind(b"\n", first, brk), carriage)
        piece = first if at < 0 else at + 1
        out.append((back, segments.text(piece, min(brk, piece + CONTEXT_CHARS))))
    return tuple(reversed(out))


_NEWLINE, _CARRIAGE = ord("\n"), ord("\r")


def _after(segments: _Segments, stop: int, at_end: bool) -> Context:
    """The segments after the one ending at ``stop``, whole ones within LOOKAHEAD bytes."""
    buf = segments.buf
    limit = min(len(buf), stop + LOOKAHEAD)
    out: list[tuple[int, str]] = []
    ahead = 0
    pos = stop
    carriage = buf.find(b"\r", stop, limit)  # the next \r at or after pos (-1: none)
    while len(out) < CONTEXT_LINES and pos < limit:
        if buf[pos] == _NEWLINE:
            ahead += 1
            pos += 1
        elif buf[pos] == _CARRIAGE:
            if buf[pos + 1:pos + 2] == b"\n":
                ahead += 1
                pos += 1
            pos += 1
        else:
            break  # a long line cut by the window: nothing after it is its neighbour
        if 0 <= carriage < pos:
            carriage = buf.find(b"\r", pos, limit)
        newline = buf.find(b"\n", pos, limit)
        nxt = min(newline, carriage) if newline >= 0 and carriage >= 0 else max(newline, carriage)
        if nxt < 0:
            if not (at_end and limit == len(buf)) or pos >= limit:
                break
            out.append((ahead, segments.text(pos, min(limit, pos + CONTEXT_CHARS))))
            break
        out.append((ahead, segments.text(pos, min(nxt, pos + CONTEXT_CHARS))))
        pos = nxt
    return tuple(out)


def _tail_starts(buf: bytes, lo: int, end: int) -> list[int]:
    """Where the stream's last TAIL_LINES lines (within TAIL_BYTES) start, in ``buf[lo:end]``."""
    starts: list[int] = []
    stop = end
    if stop > lo and buf[stop - 1:stop] == b"\n":
        stop -= 1  # the final newline ends the last line; it does not start another
    floor = max(lo, end - TAIL_BYTES)
    while len(starts) < TAIL_LINES:
        start = buf.rfind(b"\n", max(0, floor - 1), stop) + 1  # none before floor is needed
        if start < floor:
            break
        starts.append(start)
        if start == 0 or start <= lo:
            break
        stop = start - 1
    return starts


def scan_chunks(chunks: Iterable[bytes], scanner: BlockScanner | None = None
                ) -> Iterator[Candidate]:
    """Every candidate line in a stream of byte chunks."""
    scanner = scanner or BlockScanner()
    for chunk in chunks:
        yield from scanner.feed(chunk)
    yield from scanner.finish()
