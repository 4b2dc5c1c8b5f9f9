"""The GPU ran out of memory (PyTorch's caching allocator, or a raw CUDA allocation).

PyTorch's out-of-memory message states how much was requested, how big the GPU is, what was
free, and what PyTorch had allocated and reserved; in every format PyTorch has printed (from
the THC era's ``cuda runtime error (2)`` to the unified allocator's ``Out of memory. Tried to
allocate``), including messages that a logger wrapped over several lines. From those numbers
`gpu-audit explain` tells fragmentation from a job that is too big for the GPU, from memory
held by other processes, and from a per-process memory fraction. Allocations outside
PyTorch's cache (the CUDA context, library workspaces, NCCL buffers) fail with a message
without numbers. TensorFlow's (``ResourceExhaustedError: OOM when allocating tensor ... by
allocator GPU_0_bfc``) and JAX/XLA's (``RESOURCE_EXHAUSTED: Out of memory while trying to
allocate N bytes``) out-of-memory on the same GPUs are read too, with their size and GPU, and
so are MXNet's, PaddlePaddle's, ONNX Runtime's, CuPy's, Theano's and faiss's allocators' own
messages.

Why it matters: the step that failed is lost, and the run stops unless the program catches
it; the same job rerun unchanged fails at the same point.

Example: ``torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has
a total capacity of 79.15 GiB of which 1.02 GiB is free.``

Fix: the remedy follows the case found: expandable segments (or ``max_split_size_mb``) for
fragmentation, `gpu-audit scan` to find and stop other processes holding the GPU, a larger
per-process memory fraction, or a smaller step (batch size, sequence length, activation
checkpointing) for a job too big for the GPU.
"""

from __future__ import annotations

import re
from typing import Any

from gpu_audit.explain.prefixes import LINE_HEAD
from gpu_audit.explain.signatures.guards import (
    CURED_NEEDLES,
    SENTENCE_BREAK,
    SKIP_SENTENCES,
    cure_told,
    unless_words,
)
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
from gpu_audit.explain.signatures.texts import REDUCE_MEMORY, SCAN_OTHERS, size_text
from gpu_audit.knowledge.allocator import alloc_conf_export, fragmentation_remedy
from gpu_audit.knowledge.cuda_errors import status_check
from gpu_audit.knowledge.oom import (
    DEVICE_OOM_PATTERN,
    TORCH_OOM_RETYPED_PATTERN,
    budget_sentences,
    complete_oom_numbers,
    diagnose_oom,
    extract_oom_fields,
    holders_text,
    oom_budget,
)
from gpu_audit.model import Severity
from gpu_audit.units import SIZE, fmt_pct, size_or_none

CLASS = document_class("cuda-oom", __doc__)
# An exception's type printed alone on its line, with no message: the message of its class
# read a few lines below it names the failure instead (an internal number, never shown).
BARE = "_bare"
# An out-of-memory told in the writer's words, with no numbers of its own: a program's message
# of the same failure in the text takes its place as the root cause (classify.py).
TOLD = "_told"


# PyTorch's message translated (a machine translation pasted into a title or a post, in
# Chinese, Japanese or Korean): its head, and its numbers in the translation's words.
_CJK_SIZE = r"\d+(?:\.\d+)?\s?(?:bytes|[KMGTP]iB|[KMGTP]B|kB|B)(?![A-Za-z])"
_TRANSLATED_OOM = (r"CUDA ?(?:的 ?)?(?:内存|显存|記憶體|顯存)(?:不足|溢出|耗尽|用尽)|"
                   r"CUDA ?(?:の ?)?メモリ(?:が|は)?(?: ?不足)|CUDA ?메모리(?:가)? ?부족")
_TRANSLATED_FIELDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern)) for name, pattern in (
        ("requested_bytes", rf"(?:尝试|试图|嘗試|試圖)(?:分配|申请)了?\s*({_CJK_SIZE})|"
                            rf"({_CJK_SIZE})\s*(?:を|の)(?:割り当て|確保)|({_CJK_SIZE})\s*[을를]\s*할당"),
        ("gpu_index", r"GPU\s*(\d+)\s*(?:的|の|의)\s*(?:总|總|合計|총)"),
        ("capacity_bytes", rf"(?:总|總)(?:内存|显存|記憶體)?容量(?:为|是|為)?\s*[:：]?\s*"
                           rf"({_CJK_SIZE})|合計容量は\s*({_CJK_SIZE})|총 용량은\s*({_CJK_SIZE})"),
        ("free_bytes", rf"(?:空闲|可用|剩余|空閒)(?:内存|显存)?(?:为|是|為|只有|仅)?\s*[:：]?\s*"
                       rf"({_CJK_SIZE})|({_CJK_SIZE})\s*(?:が|は)(?:空いて|空き|利用可能)|"
                       rf"({_CJK_SIZE})\s*[이가]?\s*(?:사용 가능|여유)"),
        ("process_bytes", rf"(?:此|该|這個|这个|該)进程(?:正在使用|使用了?|占用了?|有)\s*"
                          rf"({_CJK_SIZE})"),
    ))
_TRANSLATED_PROCESS = re.compile(
    rf"(?:进程|進程|プロセス|프로세스)\s*(\d+)\s*(?:正在使用|使用了?|占用了?|有|が|は|[이가는])?\s*"
    rf"({_CJK_SIZE})")


def _translated_fields(line: str) -> dict[str, Any]:
    """The numbers of a translated out-of-memory message (see :data:`_TRANSLATED_FIELDS`)."""
    return extract_oom_fields(line, _TRANSLATED_FIELDS, _TRANSLATED_PROCESS)


# What a writer calls a GPU's out-of-memory: PyTorch's words, or "CUDA OOM", "GPU
# OutOfMemoryError" with the device named.
# ("... the error that CUDA is out of memory": the device said to be out of it)
_GPU_OOM = (r"(?:(?:CUDA |GPU )?out of memory\b|(?:CUDA|GPU) (?:OOM|OutOfMemoryError)\b|"
            r"(?:CUDA|GPU) (?:is|was|ran|runs|went) out of memory\b)")
# The writer telling a GPU's out-of-memory in their own words, in a line that names the GPU
# ("I am still getting the error Out of memory" on "a single 24G GPU", "I'm running out of
# memory ... on an A6000"), not the host's (RAM, CPU, swap, the OOM killer) and not in a
# condition ("if I get out of memory"); "GPU RAM" is the GPU's.
# (a GPU named: also the whole text's subject, documents.Head.gpu_subject)
GPU_WORD = (r"\b(?:GPU|CUDA|VRAM|RTX|GTX|Tesla|Quadro|A\d{2,4}|H\d{3}|V100|T4|L4|L40S?|"
            r"[1-5]0[5-9]0(?: ?Ti)?)s?\b")
# The CPU named as the host's memory (not a device to run on: "the next module will run on CPU
# instead", "falls back to the CPU")
_CPU_MEMORY = r"(?<!\bon )(?<!\bto )(?<!\bon the )(?<!\bto the )CPU"
_TOLD_OOM = (
    rf"(?i:^(?=[^\n]*?{GPU_WORD})"
    r"(?![^\n]*?\b(?:(?<!GPU )RAM|" + _CPU_MEMORY + r"|host memory|swap|oom[- ]?kill\w*)\b)"
    r"[^\n]*?(?<!\bif )(?<!\bwhether )(?<!\bwhen )\b(?P<told>I|we)(?:(?:'m| am|'ve| have| had|"
    r" was| were| keep| still| always)?(?: (?:still|always|also|again|now|constantly|"
    r"consistently|repeatedly|sometimes|often))? (?:get|"
    r"gets|got|getting|hit|hitting|ran|run|running|encounter(?:ed|ing)?|receiv(?:e|ed|ing)|see|"
    r"saw|seeing|met|fac(?:e|ed|ing)|have|had|having)(?: (?:the|an?|this|that|same))?"
    r"(?: (?:error|issue|problem)(?: (?:that|saying|says))?"
    # ... or what they tried "failed due to an out of memory error"
    r")?:? |\b[^\n.;?]{0,120}?\b(?:fail(?:ed|s)?|crash(?:ed|es)?|died|stopped|aborted) "
    r"(?:due to|because of|with|from) (?:an? |the )?)" + _GPU_OOM + ")")
# ... and the program's or the job's doing, told with the GPU named beside the out-of-memory
# ("at batch 64 it raises a GPU OOM", "the run failed after two hours with a CUDA
# OutOfMemoryError"; not "if it raises ...")
_TOLD_OOM_DONE = (
    # (or of one node, rank or worker of a multi-node job: "the node3 failed with cuda oom")
    r"(?i:(?<!\bif )(?<!\bwhether )(?<!\bwhen )\b(?P<told_>it|training|job(?: \d+)?|run|"
    r"the (?:training|model|job|run|script|program|process)|(?:the )?(?:node|rank|worker)[ -]?"
    r"\d{1,5})(?: (?:always|still|then|just|also|"
    r"now))? (?:(?:throws|threw|gives|gave|raises|raised|hits|runs into|ran into) (?:an? |the )?|"
    # ("it reported an error that the cuda out of memory")
    r"(?:reports|reported|shows|showed|says|said) (?:an? |the )?(?:error|exception)"
    r"(?: (?:that|saying|of|like))?:? (?:the )?|"
    r"(?:fail(?:ed|s)?|crash(?:ed|es)?|died|aborted)(?: after [^\n.;?,]{1,30}?)? (?:due to|"
    r"because of|with|from|on) (?:an? |the )?(?:(?:genuine|real|plain|actual) )?)"
    r"(?:CUDA|GPU) (?:OOM|OutOfMemoryError|out of memory)\b)|"
    # ... or that it filled the GPU's memory ("It's filled the GPU memory", "training used up
    # all the VRAM"; not "if it fills ...")
    r"(?i:(?<!\bif )(?<!\bwhether )(?<!\bwhen )\b(?P<told__>it|training|the (?:training|model|"
    r"job|run|script|program|process))(?:'s| has| had)?(?: (?:always|still|then|just|also|now|"
    r"quickly|completely))? (?:fill(?:s|ed)?|fulled|used up|uses up|eats up|ate up|"
    r"exhaust(?:s|ed)?|max(?:es|ed) out)(?: all)?(?: of)? (?:the |my |our )?(?:(?:GPU(?:'s)?|CUDA|"
    r"video) ?memory|VRAM)\b)|"
    # ... or that it ran out of the GPU's memory or resources, with the GPU named on the line
    # and no host memory ("mine is a 4 GB GPU ... it ran out of resource every time")
    rf"(?i:^(?=[^\n]*?{GPU_WORD})"
    r"(?![^\n]*?\b(?:(?<!GPU )RAM|" + _CPU_MEMORY + r"|host memory|swap|oom[- ]?kill\w*)\b)"
    r"[^\n]*?(?<!\bif )(?<!\bwhether )(?<!\bwhen )\b(?P<told___>it|training|the (?:training|"
    r"model|job|run|script|program|process))(?: (?:always|still|then|just|also|now))? "
    r"(?:ran|runs|run|running) out of (?:GPU |CUDA |video )?(?:memory|resources?|VRAM)\b)|"
    # ... or, in Russian, what the program wrote or gave ("пишет что out of memory в gpu",
    # "выдаёт CUDA out of memory"; also with the common slip "out off memory")
    r"(?i:(?<!\bесли )(?<!\bкогда )\b(?P<told____>пишет|пишут|выда[её]т|выдает|выдаю|"
    r"получаю|получил[аи]?|пада[ею]т с|вылета[ею]т с)(?: что| ошибку)?:? "
    r"(?:(?:CUDA|GPU) out off? memory\b|"
    r"out off? memory (?:в|на) (?:GPU|CUDA|видеокарт\w*)(?![^\W\d_])))|"
    # ... or, in Chinese, that it is still out of memory after what the writer changed
    # ("调整了参数，还是cuda out of memory", "改小了batch仍然报CUDA out of memory"; not in a
    # condition, "如果还是...")
    r"(?<!如果)(?<!假如)(?<!要是)(?<!若)(?P<told_____>还是|仍然|依然|依旧|一直|总是|老是)(?:会|在)?(?:报错?|出现|提示|显示)?[:：]?\s?"
    r"(?i:cuda|gpu) ?out of memory\b|"
    # ... or that it appears, reported ("文件数量过多就会出现cuda out of memory"; not a condition, a
    # guess or advice: "如果出现...", "可能出现...", "避免出现...")
    r"(?<!如果)(?<!假如)(?<!要是)(?<!若)(?<!可能)(?<!避免)(?<!防止)(?<!可能会)(?<!以免)"
    r"(?P<told_______>出现|报错?)了?[:：]?\s?(?i:cuda|gpu) ?out of memory\b|"
    # ... or a reply telling the writer that they ran out of it, the GPU named on the line
    # ("The main problem seems that you are out of memory ... your card has 4Gb of VRAM"; not
    # "if you are out of memory")
    rf"(?i:^(?=[^\n]*?{GPU_WORD})"
    r"(?![^\n]*?\b(?:(?<!GPU )RAM|" + _CPU_MEMORY + r"|host memory|swap|oom[- ]?kill\w*)\b)"
    r"[^\n]*?\b(?:seems?|looks? like|appears?|(?:problem|issue) is|(?:it's|it is|that's|"
    r"this is) because)(?: to be)?(?: that)? "
    r"(?P<told______>you)(?:(?:'re| are)(?: simply| just)? (?:running |run )?out of "
    # ("It's because you have not enough VRAM and it crashes": a reply's reading)
    r"|(?: (?:have|had) not| (?:don't|do not|didn't) have) enough )"
    r"(?:GPU |CUDA |video )?(?:memory|VRAM)\b)")


def _oom(match: re.Match[str], line: str) -> dict[str, Any]:
    if any(match.groupdict().get(key)
           for key in ("told", "told_", "told__", "told___", "told____", "told_____",
                       "told______", "told_______")):
        # prose: its sizes are the card's, not the message's
        return {TOLD: True}
    if match.groupdict().get("translated"):
        return {**_translated_fields(line), "backend": "CUDA"}
    found = extract_oom_fields(line)
    backend = match.groupdict().get("backend") or (
        "CUDA" if any(match.groupdict().get(key)
                     for key in ("retyped", "retyped_", "retyped__", "retyped___"))
        else None)
    if backend:
        found["backend"] = backend
    if match.groupdict().get("over_1eb"):
        found["requested_over_1eb"] = True
    return found


def _oom_detail(_match: re.Match[str], line: str) -> dict[str, Any]:
    if detail := _XGBOOST_DETAIL.search(line):
        return _xgboost_detail(detail)
    return extract_oom_fields(line)


def _size(numbers: dict[str, Any], key: str) -> str:
    return size_text(numbers.get(key))


def _stated(numbers: dict[str, Any], key: str, text: str) -> str:
    """``text`` with ``{}`` replaced by the figure the message stated; empty when it stated none,
    so that a clause about a figure the message left out is left out too."""
    value = numbers.get(key)
    return text.format(size_text(value)) if value is not None else ""


@signature("cuda-oom/message-detail",
           rf"Tried to allocate {SIZE}|has a total capac\w*ty of|total capacity;|is allocated by "
           r"PyTorch|reserved by PyTorch|memory in use|already allocated;|"
           # the cudaMallocAsync backend's lines (knowledge/oom.py)
           rf"{LINE_HEAD}(?:Currently allocated|Requested|Device limit) +: {SIZE}|"
           rf"{LINE_HEAD}Free \(according to CUDA\): {SIZE}|"
           # XGBoost's lines under its allocator's failure (see _XGBOOST_DETAIL)
           rf"{LINE_HEAD}\W{{0,3}}- (?:Free|Requested) memory: \d",
           ("Tried to allocate", "total capac", "by PyTorch", "memory in use",
            "already allocated", "Currently allocated", "Requested", "Device limit",
            "according to CUDA", "Free memory: "),
           "CUDA out of memory (continued)", extract=_oom_detail, attach="only", window=8,
           example="and 301.94 MiB is reserved by PyTorch but unallocated.")
@signature("cuda-oom/headless",
           rf"Tried to allocate {SIZE} ?(?:\(GPU \d+; {SIZE} total capacity|\. GPU \d+ has a "
           r"total capac)|memory try setting (?:max_split_size_mb|PYTORCH_(?:CUDA_)?ALLOC_CONF="
           r"expandable_segments:True) to avoid fragmentation",
           ("Tried to allocate", "to avoid fragmentation"), "CUDA out of memory",
           extract=_oom_detail, group="cuda-oom", attach="prefer", window=8,
           example="Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB "
           "already allocated; 2.88 MiB free; 1.25 GiB reserved in total by PyTorch)")
@signature("cuda-oom/caching-allocator",
           # (a trailing "_" closes markdown emphasis: "_CUDA out of memory_")
           # (and retyped: "CUDA: out of memory", "CUDA out of the memory")
           r"(?<![A-Z_])(?:(?P<backend>CUDA|HIP|XPU|MUSA|NPU):? out of (?:the )?memory(?![^\W_])|"
           r"Out of memory\. Tried to allocate)"
           r"(?:.*?Tried to allocate (?P<over_1eb>more than 1EB))?|"
           # the cudaMallocAsync backend (knowledge/oom.py), also cut after its head, as error
           # reports print it ("Exception Message: Allocation on device ")
           r"Allocation on device(?: \d+ would exceed allowed memory\. \(out of memory\)|"
           r"(?: \d+)?[ .:]*$)|"
           # PyTorch's exception type alone as a report's field ("Exception Type:
           # torch.OutOfMemoryError"), its message translated or on another line
           r"[:：]\**\s*torch\.(?:cuda\.)?OutOfMemoryError\s*$|"
           # ... or as a notebook's traceback header names it, the message cut below it
           # ("OutOfMemoryError      Traceback (most recent call last)")
           rf"{LINE_HEAD}(?:torch\.(?:cuda\.)?)?OutOfMemoryError"
           r"(?= {2,}Traceback \(most recent call)|"
           # ... or as a program's error report names it after what it was doing, the
           # traceback below ("loading the model: OutOfMemoryError")
           rf"{LINE_HEAD}[A-Za-z][A-Za-z ]{{2,80}}: OutOfMemoryError\s*$|"
           # PyTorch's head retyped in capitals ("the log says CUDA OUT OF MEMORY"), also as a
           # constant's name ("CUDA_OUT_OF_MEMORY"), on a line that does not ask how to fix or
           # avoid it
           r"^(?![^\n]*\b(?i:how|why|fix\w*|solv\w*|avoid\w*|prevent\w*|if|whether|you|your)\b)"
           r"[^\n]*?(?<![A-Za-z_])(?P<retyped___>CUDA)(?: OUT OF |_OUT_OF_)MEMORY\b|"
           rf"(?P<translated>{_TRANSLATED_OOM})|" + _TOLD_OOM + "|" + _TOLD_OOM_DONE + "|"
           # (retyped or lower-cased by a logger: "runtimeerror: cuda out of memory.")
           + TORCH_OOM_RETYPED_PATTERN,
           ("out of memory", "Out of memory", "Out Of Memory", "OUT OF MEMORY", "CUDA",
            "Allocation on device",
            "OutOfMemoryError", "CUDA OOM", "CUDA oom", "Cuda OOM", "Cuda oom", "cuda OOM",
            "cuda oom", "GPU OOM", "GPU oom", "GPU memory", "GPU's memory", "gpu memory",
            "video memory", "VRAM", "out of resource", "out off memory"),
           "CUDA out of memory", extract=_oom, group="cuda-oom",
           example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
           "has a total capacity of 79.15 GiB of which 1.52 GiB is free. Including non-PyTorch "
           "memory, this process has 77.62 GiB memory in use. Of the allocated memory 60.12 GiB "
           "is allocated by PyTorch, and 16.98 GiB is reserved by PyTorch but unallocated.")
def _cuda_oom(sig: Signature, raw: dict[str, Any], ctx: AdviceContext) -> Advice:
    numbers = complete_oom_numbers(raw)
    diagnosis = diagnose_oom(numbers)
    req, gpu = _size(numbers, "requested_bytes"), numbers.get("gpu_index")
    on_gpu = f" on GPU {gpu}" if gpu is not None else ""
    if raw.get("requested_over_1eb"):
        diagnosis = "too-large"
    if ctx.facts.get("gpu_processes") and not numbers.get("other_processes"):
        numbers["gpu_processes"] = _others_listed(ctx.facts["gpu_processes"], numbers)
    arithmetic = " ".join(budget_sentences(numbers, size_text))
    if diagnosis == "fragmentation":
        explanation = (
            f"PyTorch asked the driver for more memory{on_gpu}. {arithmetic} "
            f"The unallocated part is {fmt_pct(numbers['fragmentation_pct'])} of the "
            f"{_size(numbers, 'reserved_bytes')} the cache had reserved, in pieces too small "
            "to use: this is fragmentation, not a model that is too big for the GPU.")
        remedy = (fragmentation_remedy(ctx.torch_version) + "\n"
                  "Set it in the job's environment before Python starts. If the job still runs "
                  "out of memory, it is near the limit: " + REDUCE_MEMORY[0].lower()
                  + REDUCE_MEMORY[1:])
        title = "CUDA out of memory: fragmentation"
    elif diagnosis == "other-processes":
        explanation, remedy = _elsewhere(numbers, req, on_gpu, arithmetic, ctx)
        title = "CUDA out of memory: other processes hold the GPU"
    elif diagnosis == "memory-fraction":
        explanation = (
            f"A per-process memory fraction caps this process at {_size(numbers, 'allowed_bytes')}"
            f"; with {_size(numbers, 'reserved_bytes')} already reserved, the request of {req} "
            "would exceed it, so PyTorch refused it before asking the driver.")
        remedy = ("Raise or remove torch.cuda.set_per_process_memory_fraction(...) (or "
                  "per_process_memory_fraction in the allocator configuration); otherwise:\n"
                  + REDUCE_MEMORY)
        title = "CUDA out of memory: per-process memory fraction reached"
    elif diagnosis == "too-large":
        return _too_large(sig, raw, numbers, req)
    else:
        explanation = (
            f"PyTorch's caching allocator could not find {req}{on_gpu}; the message does not "
            "state how much memory was free or what PyTorch held, so gpu-audit cannot tell "
            "fragmentation, other processes and a job too big for the GPU apart."
            if numbers.get("requested_bytes") is not None else
            "PyTorch's caching allocator ran out of GPU memory; the message in this log carries "
            "no numbers, so gpu-audit cannot tell fragmentation from a job that is too big.")
        remedy = (f"{SCAN_OTHERS}\nIf the memory is this job's own: "
                  f"{fragmentation_remedy(ctx.torch_version)}\n"
                  f"and if it still fails:\n{REDUCE_MEMORY}")
        title = "CUDA out of memory"
    return advice(sig, numbers, explanation, remedy, title=title, diagnosis=diagnosis)


def _elsewhere(numbers: dict[str, Any], req: str, on_gpu: str, arithmetic: str,
              ctx: AdviceContext) -> tuple[str, str]:
    """Memory held outside this process made the difference: the arithmetic, who holds it
    (named when PyTorch, or an nvidia-smi table in the log, lists them), and the remedies."""
    if arithmetic:
        explanation = f"PyTorch ran out of memory{on_gpu}. {arithmetic}"
    elif numbers.get("other_processes_bytes") is not None:
        explanation = (
            f"Other processes held {_size(numbers, 'other_processes_bytes')} of the GPU's "
            f"{_size(numbers, 'capacity_bytes')}{holders_text(_holders(numbers), size_text)}"
            f"{_stated(numbers, 'reserved_bytes', ', while this job had {} reserved')}. Its "
            f"request of {req}{on_gpu} failed: without that memory it would have fitted.")
    else:
        explanation = (
            f"{_size(numbers, 'non_pytorch_bytes')} of the GPU's "
            f"{_size(numbers, 'capacity_bytes')} was held outside this process's PyTorch cache "
            f"(other processes, or this process's own non-PyTorch allocations)"
            f"{holders_text(_holders(numbers), size_text)}"
            f"{_stated(numbers, 'reserved_bytes', ', while this job had {} reserved')}. Its "
            f"request of {req}{on_gpu} failed: without that memory it would have fitted.")
    remedy = SCAN_OTHERS
    if oom_budget(numbers).fragmented():
        remedy += ("\nIf the GPU must stay shared, the free memory and the cache's unallocated "
                   "bytes together would also have fitted the request:\n"
                   + fragmentation_remedy(ctx.torch_version))
    return explanation, remedy


def _others_listed(processes: list[dict[str, Any]], numbers: dict[str, Any]
                   ) -> list[dict[str, Any]]:
    """The processes an nvidia-smi table in the log lists on the failing GPU, less the job
    itself (the entry closest to what this process had in use, within 10%)."""
    gpu = numbers.get("gpu_index")
    listed = [p for p in processes if gpu is None or p["gpu_index"] == gpu]
    mine = numbers.get("process_bytes") or numbers.get("reserved_bytes")
    if mine:
        closest = min(listed, key=lambda p: abs(p["used_bytes"] - mine), default=None)
        if closest is not None and abs(closest["used_bytes"] - mine) <= 0.1 * mine:
            listed = [p for p in listed if p is not closest]
    return listed


def _holders(numbers: dict[str, Any]) -> list[dict[str, Any]]:
    return numbers.get("other_processes") or numbers.get("gpu_processes") or []


def _too_large(sig: Signature, raw: dict[str, Any], numbers: dict[str, Any], req: str) -> Advice:
    capacity = numbers.get("capacity_bytes")
    requested = numbers.get("requested_bytes")
    if raw.get("requested_over_1eb") or (capacity and requested and requested > capacity):
        what = "more than 1 EB" if raw.get("requested_over_1eb") else req
        explanation = (
            f"A single request of {what} is larger than the whole GPU"
            f"{_stated(numbers, 'capacity_bytes', ' ({})')}. That is rarely a model that is "
            "slightly too big: usually a tensor with a wrong shape (an unbounded sequence "
            "length, a dimension multiplied by mistake) or a model that has to be sharded.")
        remedy = ("Check the shapes of the tensors created just before the failure (the "
                  "Python frames above the error).\n" + REDUCE_MEMORY)
        title = "CUDA out of memory: one allocation larger than the GPU"
    else:
        unalloc = numbers.get("reserved_unallocated_bytes")
        slack = (f" and only {size_text(unalloc)} of its cache was unused, so there was "
                 "nothing to defragment" if unalloc is not None else "")
        gpu = _stated(numbers, "capacity_bytes", " on a {} GPU")
        missed = f"{_stated(numbers, 'free_bytes', ' ({} free)')}{slack}"
        held = " and ".join(part for part in (
            _stated(numbers, "allocated_bytes", "{} allocated to live tensors"),
            _stated(numbers, "reserved_bytes", "{} reserved")) if part)
        explanation = (
            f"PyTorch had {held}{gpu}; the next request of {req} did not fit{missed}." if held
            else f"The request of {req}{gpu} did not fit{missed}; the message does not state how "
                 "much memory PyTorch held.") + " The job's working set does not fit this GPU."
        remedy = REDUCE_MEMORY
        title = "CUDA out of memory: the job needs more memory than the GPU has"
    return advice(sig, numbers, explanation, remedy, title=title, diagnosis="too-large")


def _raw_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    """The request's size where the allocator states it (TensorFlow: "failed to allocate 17.79G
    (19104890880 bytes) from device", NCCL: "Failed to CUDA calloc 6291456 bytes"), and
    XGBoost's allocator named where its words are (its sizes follow on the next lines:
    :data:`_XGBOOST_DETAIL`)."""
    found = named(match, line)
    size = (re.search(r"failed to allocate [^(\n]{0,20}\((\d+) bytes\)", line)
            or _NCCL_CALLOC.search(line))
    if size:
        found["requested_bytes"] = int(next(group for group in size.groups() if group))
    if _XGBOOST_HEAD.search(line):
        found["library"] = "xgboost"
    return found


# NCCL's buffers: "Failed to CUDA calloc 6291456 bytes" (after its "Cuda failure 'out of memory'"),
# and a program's own line after its check: "failed to allocate 9453759777 bytes for centroids"
_NCCL_CALLOC = re.compile(r"\bFailed to CUDA calloc(?: async)? (\d{1,20}) bytes|"
                          r"\bfailed to allocate (\d{1,20}) bytes\b")

# XGBoost's device allocator: "Memory allocation error on worker 0: std::bad_alloc:
# cudaErrorMemoryAllocation: out of memory", then "- Free memory: N" and "- Requested memory: N"
# on lines of their own (bytes; since 2.0 in binary units written "GB", "MB", "KB", "B").
_XGBOOST_HEAD = re.compile(r"\bMemory allocation error on worker \d+:")
_XGBOOST_DETAIL = re.compile(
    LINE_HEAD + r"\W{0,3}- (?P<what>Free|Requested) memory: (?P<size>\d{1,20}(?:\.\d{1,12})?)"
    r"(?P<unit>[KMGT]?B)?\s*$")
_BINARY_POWERS = {"": 0, "B": 0, "KB": 1, "MB": 2, "GB": 3, "TB": 4}


def _xgboost_detail(match: re.Match[str]) -> dict[str, Any]:
    size = float(match["size"]) * 1024 ** _BINARY_POWERS[match["unit"] or ""]
    key = "free_bytes" if match["what"] == "Free" else "requested_bytes"
    return {key: int(size)}


# Julia's CUDA.jl when its memory pool cannot get a buffer (OutOfGPUMemoryError): "Out of GPU
# memory trying to allocate 1.863 GiB", then "Effective GPU memory usage: 99.80% (7.785 GiB/7.800
# GiB)" and "Memory pool usage: 5.590 GiB (5.625 GiB reserved)" on lines of their own.
def _julia_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if match.groupdict().get("requested"):
        found["requested_bytes"] = size_or_none(match["requested"])
    if match.groupdict().get("used"):
        found["capacity_bytes"] = size_or_none(match["total"])
        used = size_or_none(match["used"])
        if used is not None and found["capacity_bytes"] is not None:
            found["free_bytes"] = max(found["capacity_bytes"] - used, 0)
    if match.groupdict().get("pool"):
        found["allocated_bytes"] = size_or_none(match["pool"])
        found["reserved_bytes"] = size_or_none(match["reserved"])
    return found


# (the usage lines alone are CUDA.memory_status()'s report of a healthy run: they only add their
# numbers to the out-of-memory above them)
@signature("cuda-oom/julia-memory-usage",
           rf"{LINE_HEAD}\W{{0,4}}Effective GPU memory usage: [\d.]+% \((?P<used>{SIZE}) ?/ ?"
           rf"(?P<total>{SIZE})\)|"
           rf"{LINE_HEAD}\W{{0,4}}Memory pool usage: (?P<pool>{SIZE}) "
           rf"\((?P<reserved>{SIZE}) reserved\)",
           ("Effective GPU memory usage: ", "Memory pool usage: "),
           "GPU out of memory (Julia's CUDA.jl)", extract=_julia_oom, group="julia-oom",
           attach="only", window=4,
           example="Effective GPU memory usage: 99.80% (7.785 GiB/7.800 GiB)")
@signature("cuda-oom/julia-out-of-gpu-memory",
           rf"\bOut of GPU memory trying to allocate (?P<requested>{SIZE})",
           ("Out of GPU memory trying to allocate",),
           "GPU out of memory (Julia's CUDA.jl)", extract=_julia_oom, group="julia-oom",
           example="ERROR: Out of GPU memory trying to allocate 1.863 GiB")
def _julia_out_of_gpu_memory(sig: Signature, numbers: dict[str, Any],
                             ctx: AdviceContext) -> Advice:
    req = _stated(numbers, "requested_bytes", " {}")
    free = _stated(numbers, "free_bytes", "; {} of the GPU was free")
    pool = _stated(numbers, "reserved_bytes", ", and CUDA.jl's pool held {}")
    explanation = (
        f"CUDA.jl could not get{req or ' the memory it asked for'} on the GPU{free}{pool}. "
        "Its pool frees arrays only when Julia's garbage collector finalises them, so arrays "
        "the program no longer uses can still hold the GPU's memory; otherwise the work is "
        "too big for the card, or another process holds part of it.")
    remedy = (f"{SCAN_OTHERS}\nFree what the program no longer needs before the big step "
              "(`CUDA.unsafe_free!(x)`, or `GC.gc(); CUDA.reclaim()` every few iterations), "
              "then make the work smaller (a smaller batch, Float32 instead of Float64, fewer "
              "arrays alive at once).")
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")


@signature("cuda-oom/cuda-error",
           # (MXNet's check, "e == cudaSuccess (2 vs. 0)", is its pooled storage's: below)
           DEVICE_OOM_PATTERN + "|(?<!\\be == )(?:" + status_check("cudaErrorMemoryAllocation")
           # (XGBoost's device allocator's own head, whatever error text it carries)
           + ")|" + _XGBOOST_HEAD.pattern
           # (PyTorch's THC status 2 with its words cut off, as a title copies it: "RuntimeError:
           # cuda runtime error (2)"; 2 is cudaErrorMemoryAllocation in every CUDA release)
           + r"|\b(?:CUDA|Cuda|cuda) runtime error \(2\)(?!\.\d)",
           ("out of memory", "OUT_OF_MEMORY", "MemoryAllocation", "cudaSuccess", "OutOfMemory",
            "CUDA calloc", "Memory allocation error on worker", "runtime error (2)"),
           "CUDA out of memory (outside PyTorch's allocator)", group="cuda-oom-raw",
           extract=_raw_oom,
           example="RuntimeError: CUDA error: out of memory")
def _cuda_oom_raw(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("library") == "xgboost":
        return _xgboost_oom(sig, numbers)
    explanation = (
        "A CUDA allocation outside PyTorch's caching allocator failed: creating the CUDA "
        "context, a cuBLAS/cuDNN/NCCL workspace, or a library's own cudaMalloc. "
        f"{_request_said(numbers)}At start-up it usually means the GPU was already full (another "
        "process, or several jobs sharing one GPU); later in a run it is an ordinary "
        "out-of-memory.")
    remedy = (f"{SCAN_OTHERS}\nIf the memory is this job's own:\n{REDUCE_MEMORY}\n"
              "If NCCL's buffers are the last straw, NCCL_BUFFSIZE (e.g. 2097152) shrinks them.")
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")


def _request_said(numbers: dict[str, Any]) -> str:
    size = numbers.get("requested_bytes")
    if isinstance(size, int):
        return f"It asked for {size_text(size)}. "
    return "The message has no numbers. "


def _xgboost_oom(sig: Signature, numbers: dict[str, Any]) -> Advice:
    size = _stated(numbers, "requested_bytes", " {}")
    free = _stated(numbers, "free_bytes", "; {} was free on the GPU")
    explanation = (
        f"XGBoost's GPU allocator could not get{size or ' memory'}{free}. The GPU tree method "
        "keeps the quantised training matrix, its gradients and a histogram per node of the "
        "current depth on the GPU, so many rows or features, a high max_bin or a deep tree "
        "outgrow the GPU (or another process holds part of it).")
    remedy = (f"{SCAN_OTHERS}\nThen make the data on the GPU smaller: build the training data as "
              "a QuantileDMatrix (xgboost.QuantileDMatrix, or DataIter batches with "
              "ExtMemQuantileDMatrix for external memory), lower max_bin and max_depth, or train "
              "on a sample of the rows.")
    return advice(sig, numbers, explanation, remedy, title="GPU out of memory (XGBoost)",
                  diagnosis="unknown")


def _gib(text: str | None) -> int | None:
    return size_or_none(f"{text} GiB") if text else None


# llama.cpp's CUDA backend (ggml), also inside Ollama, LM Studio and llama-cpp-python: the
# backend's cudaMalloc of a model, KV-cache or compute buffer ("ggml_backend_cuda_buffer_type_
# alloc_buffer: allocating 9216.00 MiB on device 0: cudaMalloc failed: out of memory"), the
# allocator and the loader naming the device buffer they could not get ("failed to allocate
# CUDA0 buffer of size 9663676416", "unable to allocate CUDA0 buffer"; not "CUDA_Host", pinned
# host memory), and Ollama's runner passing the backend's words on.
_GGML_OOM = (
    rf"\bggml_backend_cuda_buffer_type_alloc_buffer: allocating (?P<size>{SIZE}) on device "
    r"(?P<gpu>\d+): cudaMalloc failed(?:: out of memory)?"
    r"|\b(?:failed|unable) to allocate CUDA(?P<gpu_>\d+) buffer(?: of size (?P<bytes>\d+))?"
    # (the loader before it named the buffer's device: "llama_model_load: error loading model:
    # unable to allocate backend buffer", a device buffer in every report read: a host buffer's
    # malloc does not fail under Linux's overcommit)
    r"|\bunable to allocate backend buffer(?P<backend>)"
    # (Ollama before 0.1.33: "llama runner process no longer running: -1 cudaMalloc failed")
    r"|\bllama runner process (?:has terminated|no longer running):(?: -?\d{1,4})? cudaMalloc "
    r"failed: out of memory")


def _ggml_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    if "gpu" in found:
        found["gpu_index"] = found.pop("gpu")
    if found.pop("backend", None) is not None:
        found["_device_unnamed"] = True
    size = found.pop("size", None)
    raw = found.pop("bytes", None)
    requested = raw if isinstance(raw, int) else size_or_none(size)
    if requested is not None:
        found["requested_bytes"] = requested
    return found


@signature("cuda-oom/ggml", _GGML_OOM, ("cudaMalloc failed", "to allocate CUDA",
                                        "to allocate backend buffer"),
           "GPU out of memory (llama.cpp)", extract=_ggml_oom, group="cuda-oom-ggml",
           example="ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9216.00 MiB on "
           "device 0: cudaMalloc failed: out of memory")
def _ggml(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    size = (f" {size_text(numbers['requested_bytes'])}" if numbers.get("requested_bytes")
            else " a buffer")
    gpu = numbers.get("gpu_index")
    explanation = (
        f"llama.cpp's CUDA backend (also inside Ollama, LM Studio and llama-cpp-python) could "
        f"not allocate{size}{f' on GPU {gpu}' if gpu is not None else ''}: the layers offloaded "
        "to the GPU, the KV cache (which grows with the context length) and the compute buffer "
        "together need more than the GPU had free.")
    if numbers.get("_device_unnamed"):
        explanation += (" (This loader's message does not name the buffer's device: where no "
                        "layer is offloaded, it is the host's memory.)")
    remedy = (f"{SCAN_OTHERS}\nThen offload fewer layers (llama.cpp: --n-gpu-layers; Ollama: the "
              "num_gpu option), shorten the context (--ctx-size; Ollama: num_ctx or "
              "OLLAMA_CONTEXT_LENGTH), quantise the KV cache (--cache-type-k q8_0 --cache-type-v "
              "q8_0 with --flash-attn; Ollama: OLLAMA_FLASH_ATTENTION=1 "
              "OLLAMA_KV_CACHE_TYPE=q8_0), or use a smaller quantisation of the model.")
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")


# LLM serving engines refusing to start when the GPU memory they were told to take is not
# there: vLLM's startup check ("Free memory on device cuda:0 (12.18/23.56 GiB) on startup is
# less than desired GPU memory utilization (0.92, 21.67 GiB)"), vLLM with nothing left for
# the KV cache after the weights ("No available memory for the cache blocks") and SGLang's
# ("Not enough memory. Please try to increase --mem-fraction-static"). (vLLM's "max seq len
# ... larger than the maximum number of tokens that can be stored in KV cache" is a setting
# to lower, not memory that ran out: it is not read.)
_GIB = r"\d+(?:\.\d+)?"
_SERVING_OOM = (
    rf"\bFree memory on device(?: [\w:]{{1,16}})? \((?P<free>{_GIB})/(?P<total>{_GIB}) GiB\) "
    r"on startup is less than desired GPU memory utilization(?P<startup>)"
    rf"(?: \((?P<util>[01](?:\.\d+)?), (?P<want>{_GIB}) GiB\))?"
    r"|\bNo available memory for the cache blocks(?P<vllm>)"
    r"|\bNot enough memory\. Please try to increase --mem-fraction-static(?P<sglang>)")


def _serving_oom(match: re.Match[str], _line: str) -> dict[str, Any]:
    groups = match.groupdict()
    found: dict[str, Any] = {"engine": "sglang" if groups["sglang"] is not None else "vllm"}
    for key, group in (("free_bytes", "free"), ("capacity_bytes", "total"),
                       ("requested_bytes", "want")):
        if (value := _gib(groups[group])) is not None:
            found[key] = value
    if groups["util"]:
        found["memory_utilization"] = float(groups["util"])
    if groups["startup"] is not None:
        found["check"] = "startup"
    return found


@signature("cuda-oom/serving-engine", _SERVING_OOM,
           ("Free memory on device", "No available memory for the cache blocks",
            "--mem-fraction-static"),
           "GPU memory short for an LLM serving engine", extract=_serving_oom,
           group="cuda-oom-serving",
           example="ValueError: No available memory for the cache blocks. Try increasing "
           "`gpu_memory_utilization` when initializing the engine.")
def _serving(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("check") == "startup":
        free, total = _size(numbers, "free_bytes"), _size(numbers, "capacity_bytes")
        want = _stated(numbers, "requested_bytes", " ({})")
        explanation = (
            f"vLLM takes a fixed share of the GPU (gpu_memory_utilization{want}) and checks at "
            f"start that it is free: only {free} of {total} was. Other processes (often an "
            "earlier vLLM engine that did not exit) hold the rest.")
        remedy = (f"{SCAN_OTHERS}\nOr ask for less: --gpu-memory-utilization below the free "
                  "share of the GPU.")
        return advice(sig, numbers, explanation, remedy, diagnosis="other-processes",
                      title="GPU out of memory (vLLM): the GPU was not free at start")
    if numbers.get("engine") == "sglang":
        name, share, knobs = ("SGLang", "--mem-fraction-static",
                              "--max-running-requests, --chunked-prefill-size")
    else:
        name, share, knobs = ("vLLM", "--gpu-memory-utilization",
                              "--max-num-seqs, --max-num-batched-tokens")
    explanation = (
        f"{name} loaded the model and measured a step, and nothing was left of its share of "
        f"the GPU ({share}) for the KV cache: the weights and activations fill it.")
    remedy = (f"{SCAN_OTHERS}\nThen raise {share} (e.g. 0.95) if nothing else uses the GPU, "
              f"lower {knobs}, shard the model over more GPUs (--tensor-parallel-size), or use "
              "a quantised model.")
    return advice(sig, numbers, explanation, remedy, diagnosis="too-large",
                  title=f"GPU out of memory ({name}): no memory left for the KV cache")


# transformers loading a bitsandbytes-quantised model with device_map="auto": accelerate found no
# room on the GPUs for every module and placed some on the CPU or the disk, which a quantised
# model cannot run from ("Some modules are dispatched on the CPU or the disk. Make sure you have
# enough GPU RAM to fit the quantized model.").
@signature("cuda-oom/quantized-model-offloaded",
           r"\bSome modules are dispatched on the CPU or the disk\.",
           ("dispatched on the CPU or the disk",),
           "The quantised model does not fit in GPU memory",
           example="ValueError: Some modules are dispatched on the CPU or the disk. Make sure you "
           "have enough GPU RAM to fit the quantized model.")
def _quantized_offloaded(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "Loading a bitsandbytes-quantised model with device_map=\"auto\", accelerate found too "
        "little free memory on the GPUs for every module and placed some on the CPU or the "
        "disk, where quantised modules cannot run. (With no GPU visible at all, everything "
        "goes to the CPU and the same error follows.)")
    remedy = (f"Check that the GPU is visible (python -c 'import torch; print(torch.cuda."
              f"is_available())').\n{SCAN_OTHERS}\nThen load a smaller model or a 4-bit "
              "quantisation, or keep the offloaded modules unquantised: "
              "BitsAndBytesConfig(llm_int8_enable_fp32_cpu_offload=True) with a device_map "
              "that names them.")
    return advice(sig, numbers, explanation, remedy, diagnosis="too-large")


# GPU array libraries' own pools: CuPy's ("cupy.cuda.memory.OutOfMemoryError: Out of memory
# allocating 1,073,741,824 bytes (allocated so far: 8,589,934,592 bytes)."; not XLA's
# "RESOURCE_EXHAUSTED: Out of memory allocating N bytes.") and RAPIDS RMM's (cuDF, cuML,
# dask-cuda: "std::bad_alloc: out_of_memory: RMM failure at:...pool_memory_resource.hpp:193:
# Maximum pool size exceeded", "out_of_memory: CUDA error at: ...: cudaErrorMemoryAllocation").
_COUNT = r"\d{1,3}(?:,\d{3}){1,6}|\d{1,20}"
_ARRAY_OOM = (
    rf"\bOutOfMemoryError: Out of memory allocating (?P<req>{_COUNT}) bytes(?P<cupy>)"
    rf"|\bOut of memory allocating (?P<req_>{_COUNT}) bytes \(allocated so far(?P<cupy_>)"
    # (CuPy before 6 and Chainer on it: "out of memory to allocate 205520896 bytes (total
    # 16068929536 bytes)", the total being what its pool held)
    rf"|\bout of memory to allocate (?P<req__>{_COUNT}) bytes(?P<cupy__>)"
    rf"(?: \(total (?P<total>{_COUNT}) bytes\))?"
    # (RMM's pool at its maximum, a limiting adaptor's limit, older RMM's cudaMalloc; not its
    # other failures, "Initial pool size required to be a multiple of 256 bytes")
    r"|\bRMM failure at: ?[^\n]{0,300}?: (?:Maximum pool size exceeded|Exceeded memory limit|"
    r"cudaErrorMemoryAllocation out of memory)(?P<rmm>)"
    r"|\b(?:out_of_memory|std::bad_alloc): CUDA error at: [^\n]{0,300}?"
    r"cudaErrorMemoryAllocation(?P<rmm_>)"
    # (RMM's allocation check throws its bad_alloc on whatever CUDA error the allocation
    # returned, and its out_of_memory on cudaErrorMemoryAllocation; since 24.x it states the
    # request's size: "CUDA error (failed to allocate 1024 bytes) at: ..."; and a bad_alloc cut
    # inside RMM's headers, before the error's name, as cuDF's MemoryError is often pasted)
    r"|\bout_of_memory: CUDA error \(failed to allocate (?P<req___>\d{1,20}) bytes\) at: "
    r"(?P<rmm__>)"
    r"|\bstd::bad_alloc: CUDA error \(failed to allocate (?P<req____>\d{1,20}) bytes\) at: "
    r"[^\n]{0,300}?cudaErrorMemoryAllocation(?P<rmm___>)"
    r"|\bstd::bad_alloc: CUDA error at: [^\s:]{0,300}?/rmm/[^\s:]{0,200}/\s*$(?P<rmm____>)"
    # (RMM's own out_of_memory, its type naming the status, cut before it: "MemoryError:
    # std::bad_alloc: out_of_memory: CUDA error at: .../rmm/mr/device/cuda_memory_resource.hpp")
    r"|\bout_of_memory: CUDA error at: [^\s:]{0,300}?/rmm/(?P<rmm_____>)"
    # (and RMM's error code for it, older RMM and its C API: "RMM_ERROR_OUT_OF_MEMORY")
    r"|\bRMM_ERROR_OUT_OF_MEMORY\b(?P<rmm______>)"
    # thrust's CUDA back end (in XGBoost, cuDF, cuML and CUDA C++ programs): an algorithm's
    # temporary storage or launch failed with the CUDA status's text ("parallel_for failed: out
    # of memory", "radix_sort: failed on 1st step: out of memory")
    r"|\b(?:parallel_for|for_each|transform|reduce|reduce_by_key|scan|scan_by_key|radix_sort|"
    r"merge_sort|copy_if|unique|unique_by_key|get_temporary_buffer)(?: failed|: failed "
    r"(?:on|to) [a-z0-9 ]{1,30}): (?:cudaErrorMemoryAllocation: )?out of memory\b(?P<thrust>)")
_CUPY_ALLOCATED = re.compile(rf"allocated so far: ({_COUNT}) bytes")


def _array_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    groups = {key.rstrip("_"): value for key, value in match.groupdict().items()
              if value is not None}
    library = next((name for name in ("cupy", "thrust") if name in groups), "rmm")
    found: dict[str, Any] = {"library": library}
    if "req" in groups:
        found["requested_bytes"] = int(groups["req"].replace(",", ""))
    if held := _CUPY_ALLOCATED.search(line):
        found["allocated_bytes"] = int(held[1].replace(",", ""))
    elif "total" in groups:
        found["allocated_bytes"] = int(groups["total"].replace(",", ""))
    return found


@signature("cuda-oom/array-library", _ARRAY_OOM,
           ("Out of memory allocating", "RMM failure at", "out_of_memory: CUDA error",
            "RMM_ERROR_OUT_OF_MEMORY",
            "bad_alloc: CUDA error", "out of memory to allocate", "out of memory"),
           "GPU out of memory (CuPy, RAPIDS or thrust)", extract=_array_oom, group="cuda-oom-array",
           example="cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824 "
           "bytes (allocated so far: 8,589,934,592 bytes).")
def _array_library(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    size = _stated(numbers, "requested_bytes", " {}")
    held = _stated(numbers, "allocated_bytes", ", with {} already allocated")
    if numbers.get("library") == "cupy":
        explanation = (
            f"CuPy's memory pool could not get{size or ' memory'} from the GPU{held}. CuPy keeps "
            "freed blocks in its pool for reuse, so a GPU shared with another framework (or "
            "with arrays kept alive) runs out early.")
        remedy = (f"{SCAN_OTHERS}\nThen free the pool between stages "
                  "(cupy.get_default_memory_pool().free_all_blocks()), cap it when the GPU is "
                  "shared (export CUPY_GPU_MEMORY_LIMIT=50%), or process the data in smaller "
                  "chunks.")
        name = "CuPy"
    elif numbers.get("library") == "thrust":
        explanation = (
            "A thrust algorithm (the CUDA C++ template library under XGBoost, cuDF, cuML and "
            "many CUDA programs) could not get device memory for its temporary storage: the "
            "GPU was full, held by this job's own data or by another process.")
        remedy = (f"{SCAN_OTHERS}\nThen give the step less data at once: smaller batches or "
                  "partitions, fewer rows or features on the GPU (XGBoost: a QuantileDMatrix, "
                  "lower max_bin), and leave room outside a memory pool set to take the whole "
                  "GPU (RAPIDS: a smaller initial_pool_size in rmm.reinitialize(...)).")
        name = "thrust"
    else:
        explanation = (
            "RAPIDS' memory manager (RMM, under cuDF, cuML and dask-cuda) could not allocate "
            "device memory: its pool reached its maximum size, or the GPU itself was full.")
        remedy = (f"{SCAN_OTHERS}\nThen let cuDF spill to host memory (export CUDF_SPILL=on; "
                  "with Dask, dask-cuda's device_memory_limit), raise the pool's maximum_pool_size "
                  "in rmm.reinitialize(...), use managed memory (rmm.reinitialize("
                  "managed_memory=True)), or process the data in smaller partitions.")
        name = "RAPIDS RMM"
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown",
                  title=f"GPU out of memory ({name})")


@signature("cuda-oom/library-allocation",
           # PhysX (Isaac Gym) states the size; spconv prints the CUDA status's number, and 2 is
           # cudaErrorMemoryAllocation
           r"PxgCudaDeviceMemoryAllocator fail(?:ed)? to allocate memory (?P<requested_bytes>\d+) "
           r"bytes|cuda execution failed with error (?P<cuda_status>2)\b",
           ("to allocate memory", "failed with error 2"),
           "CUDA out of memory in a library's own allocation", group="cuda-oom-raw",
           example="PxgCudaDeviceMemoryAllocator fail to allocate memory 268435456 bytes!! "
           "Result = 2")
def _library_allocation(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    size = (f" of {size_text(numbers['requested_bytes'])}" if numbers.get("requested_bytes")
            else "")
    explanation = (
        f"A library that allocates GPU memory itself (PhysX's GPU simulation, spconv's "
        f"kernels) could not get an allocation{size}: CUDA status 2, cudaErrorMemoryAllocation, "
        "is out of memory. The library's later errors (failed copies, failed kernels) follow "
        "from it.")
    remedy = (f"{SCAN_OTHERS}\nThen shrink what the library holds: fewer simulated "
              "environments or a smaller GPU buffer budget (Isaac Gym: num_envs, "
              "sim_params.physx.max_gpu_contact_pairs), fewer points or voxels per batch, or a "
              f"smaller batch:\n{REDUCE_MEMORY}")
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")


# Kaldi's CUDA allocator (cu-allocator.cc) failing to grow its pool: "ERROR (nnet3-train[5.5]:
# AllocateNewRegion():cu-allocator.cc:519) Failed to allocate a memory region of 8088715264
# bytes. Possibly this is due to sharing the GPU."
@signature("cuda-oom/kaldi-region",
           r"\bFailed to allocate a memory region(?: of (?P<requested_bytes>\d{1,20}) bytes)?",
           ("Failed to allocate a memory region",), "GPU out of memory (Kaldi's CUDA allocator)",
           group="cuda-oom-raw",
           example="ERROR (nnet3-train[5.5]:AllocateNewRegion():cu-allocator.cc:519) Failed to "
           "allocate a memory region of 8088715264 bytes.  Possibly this is due to sharing the "
           "GPU.")
def _kaldi_region(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    size = _stated(numbers, "requested_bytes", " of {}")
    explanation = (
        f"Kaldi's CUDA allocator could not get a new memory region{size} for its pool: the GPU "
        "was full, with this job's own matrices or another process's (Kaldi's message names "
        "sharing the GPU first).")
    remedy = (f"{SCAN_OTHERS}\nThen run one Kaldi job per GPU (put the GPUs in exclusive mode, "
              "`sudo nvidia-smi -c 3`, so a second job cannot start on a busy one), lower the "
              "minibatch size or the number of parallel jobs (--num-jobs-initial, "
              "--num-jobs-final), or give the allocator less up front "
              "(--cuda-memory-proportion).")
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")


# Applications' own words for the GPU's memory running out, with no size: LAMMPS' GPU package
# ("ERROR: Insufficient memory on accelerator (src/GPU/gpu_extra.h:38)") and faceswap's trainer
# ("You do not have enough GPU memory available to train the selected model at the selected
# settings.").
fixed("cuda-oom/application-message",
      r"\bInsufficient memory on accelerator\b|"
      # (Blender Cycles' "System is out of GPU and shared host memory", "System is out of GPU
      # memory")
      r"\bSystem is out of GPU(?: and shared host)? memory\b|"
      r"\bYou do not have enough GPU memory available to (?:train|run|convert|extract)\b",
      ("Insufficient memory on accelerator", "enough GPU memory available to",
       "out of GPU memory", "out of GPU and shared host memory"),
      "CUDA out of memory (the application's own message)", group="cuda-oom-raw",
      example="ERROR: Insufficient memory on accelerator (src/GPU/gpu_extra.h:38)",
      explanation="The application could not get the GPU memory it needed for its data (LAMMPS's "
      "GPU package for its atoms and neighbour lists, faceswap for its model at the chosen "
      "settings): the GPU was full, with this job's own data or another process's.",
      remedy=f"{SCAN_OTHERS}\nThen give the GPU less at once: fewer atoms or particles per GPU "
      "(more GPUs or MPI ranks, LAMMPS' `-sf gpu -pk gpu N neigh no` to keep neighbour lists on "
      f"the host), a lighter model or its low-memory option, or a smaller batch:\n{REDUCE_MEMORY}")


@signature("cuda-oom/tensorrt-request",
           # TensorRT's warning beside its out-of-memory error: the size it could not get
           r"\bRequested amount of GPU memory \((?P<requested_bytes>\d{1,20}) bytes\) could not "
           r"be allocated",
           ("Requested amount of GPU memory",), "CUDA out of memory in TensorRT (its size)",
           group="cuda-oom-raw", attach="only", window=6,
           example="[W] [TRT] Requested amount of GPU memory (8589934592 bytes) could not be "
           "allocated. There may not be enough free memory for allocation to succeed.")
@signature("cuda-oom/tensorrt",
           # TensorRT's logger: its builder or runtime could not get GPU memory ("Error Code 2:
           # OutOfMemory (no further information)", "Error Code 1: Cuda Runtime (out of memory)")
           r"Error Code \d{1,2}: (?:OutOfMemory|Cuda Runtime \(out of memory\))(?: \((?:"
           r"Requested size was (?P<requested_bytes>\d+) bytes|[^)\n]{0,80})\))?"
           # (TensorRT 7 and before: "Cuda Error in nvinfer1::internal::DefaultAllocator::
           # allocate: 2 (out of memory)", "OutOfMemory Error in nvinfer1::builder::...")
           r"|\bCuda Error in [\w:`'<>~-]{1,200}: 2 \(out of memory\)"
           r"|\bOutOfMemory Error in [\w:`'<>~-]{1,200}: \d",
           ("OutOfMemory", "(out of memory)"), "CUDA out of memory in TensorRT",
           group="cuda-oom-raw",
           example="[TRT] [E] 2: [globWriter.cpp::HybridGlobWriter::193] Error Code 2: "
           "OutOfMemory (no further information)")
@signature("cuda-oom/driver-api",
           # the driver API's own "out of memory": in PyTorch, expandable segments mapping
           # memory on a GPU that is full (or on a platform whose driver refuses the mapping)
           # (not XLA's page-locked host memory, "N bytes on host: CUDA_ERROR_OUT_OF_MEMORY")
           r"CUDA driver error: out of memory|"
           r"(?<!bytes on host: )CUDA_ERROR_OUT_OF_MEMORY: out of memory",
           ("driver error: out of memory", "CUDA_ERROR_OUT_OF_MEMORY: "),
           "CUDA out of memory in a driver call", group="cuda-oom-raw",
           example="torch.AcceleratorError: CUDA driver error: out of memory")
def _outside_allocator(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    size = (f" of {size_text(numbers['requested_bytes'])}" if numbers.get("requested_bytes")
            else "")
    if "tensorrt" in sig.id:
        explanation = (
            f"TensorRT could not allocate GPU memory{size}: its builder needs room for the "
            "engine, its tactics' workspaces and the weights at once, outside the framework's "
            "cache, so a GPU the framework already holds runs out first.")
        remedy = (f"{SCAN_OTHERS}\nThen give TensorRT less to hold: build with a smaller "
                  "workspace limit (max_workspace_size or the memory pool limit), a smaller "
                  "maximum batch or shape profile, or fp16; free the framework's cache before "
                  "building (torch.cuda.empty_cache()).")
        return advice(sig, numbers, explanation, remedy, diagnosis="unknown")
    explanation = (
        "A CUDA driver call could not get GPU memory. In PyTorch these calls come from "
        "expandable segments, which map memory with the driver's virtual-memory functions: "
        "on a GPU that is nearly full the mapping itself fails. On Jetson, WSL2 or vGPU the "
        "driver can refuse the mapping with memory free; switch expandable segments off there.")
    remedy = (f"{SCAN_OTHERS}\nIf the memory is this job's own:\n{REDUCE_MEMORY}\nOn "
              "Jetson, WSL2 or vGPU:\n"
              + alloc_conf_export("expandable_segments:False", ctx.torch_version))
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")


# Other frameworks' GPU allocators, in their own words: MXNet's pooled storage ("cudaMalloc
# failed: out of memory", "cudaMalloc retry failed: ..."; its checks "Check failed: e ==
# cudaSuccess ... out of memory"), PaddlePaddle's ("Out of memory error on GPU 0. Cannot allocate
# 6.933594GB memory on GPU 0, ... available memory is only 726.750000MB."; its sizes are binary
# units written "GB", "MB") and ONNX Runtime's arena ("BFCArena::AllocateRawInternal Failed to
# allocate memory for requested buffer of size N", also cut after the function's name).
_PADDLE_SIZE = r"\d+(?:\.\d+)?\s?[KMGT]?B\b"


def _paddle_gpu_place(group: str) -> str:
    """A GPU place as PaddlePaddle prints it (``Place(gpu:0)``, ``CUDAPlace(0)``), its index in
    ``group`` and ``group``_."""
    return rf"\b(?:Place\((?:gpu|cuda):(?P<{group}>\d+)\)|CUDAPlace\((?P<{group}_>\d+)\))"


_FRAMEWORK_OOM = (
    # (a paste wrapped inside the word and joined again with a space: "cudaMalloc fail ed: ...")
    r"\bcudaMalloc(?P<mxnet>)(?: retry)? fail ?ed: out of memory"
    r"|\bCheck failed: e == cudaSuccess\b(?P<mxnet_>)[^\n]{0,80}?\bout of memory"
    r"|\bCheck failed: e == cudaSuccess \(2 vs\. 0\)(?P<mxnet__>)"  # (the message cut)
    rf"|\bOut of memory error on GPU ?(?P<gpu>\d+)(?P<paddle>)(?:\. Cannot allocate "
    rf"(?P<size>{_PADDLE_SIZE}) memory on GPU \d+)?"
    # (PaddlePaddle 1.x's check of a CUDA call, the runtime's words after its exception type:
    # "PaddleCheckError: out of memory at [.../device_context.cc:219]")
    r"|\bPaddleCheckError: out of memory at \[(?P<paddle___>)"
    # (PaddlePaddle Fluid's check of a request against the GPU's free memory, bytes against
    # bytes: "enforce allocating <= available failed, 10737418240 > 2147483648"; since 1.5
    # "Expected allocating <= available, but received allocating:N > available:M.")
    r"|\benforce allocating <= available failed, (?P<bytes_________>\d{1,20}) > "
    r"(?P<avail>\d{1,20})(?P<paddle____>)"
    r"|\bExpected allocating <= available, but received allocating:(?P<bytes__________>\d{1,20})"
    r" > available:(?P<avail_>\d{1,20})(?P<paddle_____>)"
    # (not the source of its info lines as the arena grows: "[I:onnxruntime:, bfc_arena.cc:317
    # onnxruntime::BFCArena::AllocateRawInternal] Extending BFCArena for Cuda. ...")
    r"|\bBFCArena::AllocateRawInternal\b(?!\] Extend)(?P<onnxruntime>)"
    r"(?:[^\n]{0,200}?requested buffer of size (?P<bytes>\d+))?"
    r"|\bFailed to allocate memory for requested buffer of size (?P<bytes_>\d+)(?P<onnxruntime_>)"
    # CatBoost's GPU memory pool ("Error: Out of memory. Requested 8880 MB; Free 5902.06 MB",
    # before 1.0 without the unit; its exception type, NCudaLib::TOutOfMemoryError, on its own)
    # (also retyped in lower case: "out of memory. requested 1795MB; free 595 MB")
    r"|\b(?i:Out of memory\. Requested) \d{1,12}(?:\.\d{1,12})?(?: ?MB)?; (?i:Free) \d"
    r"(?P<catboost>)"
    # (the type's name cut where a paste or a terminal cut it: "NCudaLib::TOutOfMemoryE")
    r"|\bNCudaLib::TOutOfMemory(?:Error|Erro|Err|Er|E)?(?![A-Za-z])(?P<catboost_>)"
    # hashcat's check of its buffers against what the device lets one allocation take ("Not
    # enough allocatable device memory for this attack."; not "... or free host memory for
    # mapping", which may be the host's), and OpenCL's status for a buffer the device could not
    # hold (CL_MEM_OBJECT_ALLOCATION_FAILURE)
    r"|\bNot enough allocatable device memory\b(?! or free host)(?P<hashcat>)"
    # (hashcat 3's words for it: "Device #1: Device does not provide enough allocatable
    # device-memory to handle this attack")
    r"|\bdoes not provide enough allocatable device-memory\b(?P<hashcat_>)"
    # RELION's own GPU allocator ("ERROR: CudaCustomAllocator out of memory", the size it was
    # asked for on the next line, "[requestedSpace: 44135424 B]", read joined; a title's
    # "CudaCustomAlloc out of memory")
    r"|\b(?i:cuda ?custom ?alloc(?:ator)?) out of memory\b(?P<relion>)"
    r"(?:\s{0,8}\[requestedSpace: {0,40}(?P<bytes_____>\d{1,20}) ?B\])?"
    r"|\bCL_MEM_OBJECT_ALLOCATION_FAILURE\b(?P<opencl>)"
    # a miner's DAG (the data set an Ethash-family coin grows every epoch) that does not fit
    # the card: "GPU 0: insufficient memory for DAG epoch 387.", "Allocation of DAG failed with
    # error: ...", "Error when allocating memory for the DAG", "not enough memory to allocate
    # DAG", "DAG doesn't fit in GPU memory"
    r"|(?i:\b(?:insufficient|not enough) (?:GPU |device |video )?memory (?:for|to (?:allocate|"
    r"place|store|fit|create|generate)) (?:the )?DAG\b|\b(?:Allocation of|allocating) (?:memory "
    r"for )?(?:the )?DAG(?: buffer)? failed\b|\berror when allocating (?:memory for )?(?:the )?"
    r"DAG\b|\bDAG (?:does ?n[o']t|doesn't|won't|cannot|can't) fit\b)(?P<dag>)"
    # cuFFT's sentence for its status 2, CUFFT_ALLOC_FAILED, as wrappers print it (CUDA.jl's
    # "CUFFTError(code 2, cuFFT failed to allocate GPU or CPU memory)"): a plan's work area
    r"|\bcuFFT failed to allocate GPU or CPU memory\b(?P<cufft>)"
    # NVIDIA DALI's device allocator ("Can't allocate 129499136 bytes on device 0."; not its
    # pinned host buffers', "... on host") and its exception's words alone on the line under
    # an operator's failure ("Error when executing Mixed operator ImageDecoder encountered:" then
    # "CUDA allocation failed"), and nvJPEG's status for an allocator that failed under its
    # decoders (NVJPEG_STATUS_ALLOCATOR_FAILURE, status 5)
    r"|\bCan't allocate (?P<bytes______>\d{1,20}) bytes on device (?P<gpu_>\d{1,3})\b(?P<dali>)"
    rf"|(?:{LINE_HEAD}|\bencountered: ?|\bwhat\(\): +|Error: )CUDA allocation failed\.?\s*$"
    r"(?P<dali_>)"
    r"|\bNVJPEG_STATUS_ALLOCATOR_FAILURE\b(?P<nvjpeg>)"
    # Jittor's memory check, fatal, with its advice and the sizes on the next line ("GPU memory
    # is overflow, please reduce your batch_size or data size!" then "Total: 23.65GB Used:
    # 47.36GB"); the CUDA errors its other threads print after it are the fallout
    r"|\bGPU memory is overflow\b(?P<jittor>)"
    # PyTorch's MPS backend on an Apple GPU, its sizes in units of 1024 written MB and GB ("MPS
    # backend out of memory (MPS allocated: 17.02 GB, other allocations: 1.35 GB, max allowed:
    # 18.13 GB). Tried to allocate 256.00 MB on private pool.")
    r"|\bMPS backend out of memory\b(?P<mps>)(?:[^\n]{0,300}?\bTried to allocate "
    r"(?P<size___>\d{1,9}(?:\.\d{1,4})? ?[KMGT]i?B)\b)?"
    # MindSpore's device memory pool: "Device(id:0) memory isn't enough and alloc failed, kernel
    # name: ..., alloc size: 1073741824B.", and its kernel launch's "Malloc for kernel output
    # failed, Memory isn't enough, node:..."
    r"|\bmemory isn't enough and alloc failed\b[^\n]{0,400}?\balloc size: ?"
    r"(?P<bytes___________>\d{1,20}) ?B\b(?P<mindspore>)"
    r"|\bMalloc for kernel (?:output|input|workspace) failed, Memory isn't enough\b"
    r"(?P<mindspore_>)|\bmemory isn't enough and alloc failed\b(?P<mindspore__>)"
    # faiss's GPU resources, with the size in bytes, in each version's words: "failed to
    # cudaMalloc N bytes (error 2 out of memory)", "Failed to cudaMalloc N bytes on device 1
    # (error 2 out of memory" (its outstanding allocations listed below), the oldest "details:
    # Failed to cudaMalloc N bytes" without a status (not another status: "(error 700 ...)"),
    # and its allocator's request: "StandardGpuResources: alloc fail type TemporaryMemoryBuffer
    # dev 0 space Device stream 0x1f00 size N bytes (cudaMalloc error out of memory [2])"
    r"|\b[Ff]ailed to cudaMalloc(?:Managed)? (?P<bytes_______>\d{1,20}) bytes"
    r"(?: on device (?P<gpu______>\d{1,3}))?(?! ?\(error (?!2\b)\d)(?P<faiss>)"
    r"|(?:\bsize (?P<bytes________>\d{1,20}) bytes )?\(cudaMalloc(?:Managed)? error out of "
    r"memory \[2\]\)(?P<faiss_>)"
    # Theano's CNMeM pool, at start ("cnmemInit call failed! Reason=CNMEM_STATUS_OUT_OF_MEMORY")
    # or on an allocation ("Error allocating 25165824 bytes of device memory
    # (CNMEM_STATUS_OUT_OF_MEMORY)"), and Theano's own allocator's words ("... of device memory
    # (out of memory)")
    r"|\bError allocating (?P<bytes____>\d+) bytes of device memory \((?:out of memory|"
    r"CNMEM_STATUS_OUT_OF_MEMORY)\)(?P<theano>)|\bCNMEM_STATUS_OUT_OF_MEMORY\b(?P<theano_>)"
    # PaddlePaddle's "Fail to alloc memory of N size" is its CPU allocator's (host-oom), unless
    # the line names a GPU place
    r"|\bFail to alloc memory of (?P<bytes__>\d+) size\b(?P<paddle_>)[^\n]{0,200}?"
    + _paddle_gpu_place("gpu__") + "|" + _paddle_gpu_place("gpu____")
    + r"[^\n]{0,200}?\bFail to alloc memory of (?P<bytes___>\d+) size\b(?P<paddle__>)")
_FRAMEWORK_NAMES = {"mxnet": "MXNet", "paddle": "PaddlePaddle", "onnxruntime": "ONNX Runtime",
                    "catboost": "CatBoost", "theano": "Theano", "hashcat": "hashcat",
                    "opencl": "OpenCL", "cufft": "cuFFT", "dali": "DALI", "nvjpeg": "nvJPEG",
                    "relion": "RELION", "dag": "the miner", "faiss": "faiss",
                    "jittor": "Jittor", "mindspore": "MindSpore", "mps": "PyTorch on MPS"}
_PADDLE_FIELDS = (("free_bytes", re.compile(rf"available memory is only ({_PADDLE_SIZE})")),
                  ("allocated_bytes", re.compile(rf"({_PADDLE_SIZE}) memory has been allocated")))


def _binary_size(text: str) -> int | None:
    """PaddlePaddle's "6.933594GB": its units are powers of 1024."""
    return size_or_none(re.sub(r"([KMGT])B$", r"\1iB", text.replace(" ", "")))


# (its exception type comes first on the line when the message follows it)
_CATBOOST_SIZES = re.compile(r"\b(?i:Out of memory\. Requested) (\d{1,12}(?:\.\d{1,12})?)"
                             r"(?: ?MB)?; (?i:Free) (\d{1,12}(?:\.\d{1,12})?)")


def _catboost_sizes(line: str) -> dict[str, Any]:
    """CatBoost's request and what its pool had free: MiB (bytes / 2^20), with or without the
    unit."""
    sizes = _CATBOOST_SIZES.search(line)
    if sizes is None:
        return {}
    return {"requested_bytes": int(float(sizes[1]) * 2**20),
            "free_bytes": int(float(sizes[2]) * 2**20)}


def _framework_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    groups = {key.rstrip("_"): value for key, value in match.groupdict().items()
              if value is not None}
    found["framework"] = next(name for name in _FRAMEWORK_NAMES if name in groups)
    if found["framework"] == "catboost":
        found.update(_catboost_sizes(line))
    if "gpu" in groups:
        found["gpu_index"] = int(groups["gpu"])
    if "bytes" in groups:
        found["requested_bytes"] = int(groups["bytes"])
        if "avail" in groups:
            found["free_bytes"] = int(groups["avail"])
    elif "size" in groups:
        found["requested_bytes"] = _binary_size(groups["size"])
    if found["framework"] == "paddle":
        for key, pattern in _PADDLE_FIELDS:
            if size := pattern.search(line):
                found[key] = _binary_size(size[1])
    elif found["framework"] == "onnxruntime" and _CPU_NODE.search(line):
        found["arena"] = "Cpu"
    return {key: value for key, value in found.items() if value is not None}


# ONNX Runtime's arena fails in the same words on the CPU as on the GPU; which one it was, the
# log says elsewhere. A node its NCHWc layout pass rewrote runs on the CPU ("Name:'347_nchwc'").
_CPU_NODE = re.compile(r"\bName: ?'[^'\n]{0,200}_nchwc'")
# A list of execution providers that holds a GPU's.
_GPU_PROVIDER = re.compile(r"\b(?:CUDA|Tensorrt|NvTensorRTRTX|ROCM|MIGraphX|Dml|OpenVINO)"
                           r"ExecutionProvider\b")


def _onnxruntime_facts(match: re.Match[str], line: str) -> dict[str, Any]:
    """What a line says about ONNX Runtime's arenas and execution providers: an arena grown
    (its device, and the size it rounded the request to, which its failure repeats); a session
    left with the CPU's provider alone (a fall-back from a GPU's, or a list without a GPU's)."""
    if match["arena"]:
        found: dict[str, Any] = {"ort_arenas": [match["arena"]]}
        if match["rounded"]:
            found["ort_arena_extends"] = [{"arena": match["arena"], "bytes": int(match["rounded"])}]
        return found
    if match["fallback"]:
        return {"ort_cpu_fallback": True}
    return {"ort_gpu_provider": True} if _GPU_PROVIDER.search(line) else {"ort_cpu_only": True}


@signature("cuda-oom/onnxruntime-arena",
           r"\bExtending BFCArena for (?P<arena>[A-Za-z]\w{0,40})(?:[^\n]{0,120}?rounded_bytes: ?"
           r"(?P<rounded>\d+))?|(?P<fallback>\bFalling back to \[['\"]CPUExecutionProvider['\"]\])"
           r"|\bCPUExecutionProvider['\"]",
           ("Extending BFCArena for", "CPUExecutionProvider"),
           "ONNX Runtime's arenas and execution providers", severity=Severity.INFO, tier=5.0,
           fact=True, extract=_onnxruntime_facts,
           example="[I:onnxruntime:, bfc_arena.cc:306 AllocateRawInternal] Extending BFCArena for "
           "Cpu. bin_num:20 (requested) num_bytes: 402653184 (actual) rounded_bytes:402653184")
def _onnxruntime_fact(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    return advice(sig, numbers, "What the log says about ONNX Runtime's arenas and execution "
                  "providers; an arena's failure says which device it was on.", "Nothing.")


def onnxruntime_arena(numbers: dict[str, Any], facts: dict[str, Any]) -> str | None:
    """The device of the ONNX Runtime arena that failed (``Cpu``, ``Cuda``), where the log says:
    the failing line's node, the arena the log grew by the same size, a session on the CPU's
    provider alone, or arenas that are all the CPU's."""
    if numbers.get("arena"):
        return str(numbers["arena"])
    size = numbers.get("requested_bytes")
    grown = [item["arena"] for item in facts.get("ort_arena_extends", ())
             if isinstance(item, dict) and item.get("bytes") == size]
    if grown:
        return str(grown[-1])
    if facts.get("ort_cpu_fallback") or (facts.get("ort_cpu_only")
                                         and not facts.get("ort_gpu_provider")):
        return "Cpu"
    arenas = {str(arena) for arena in facts.get("ort_arenas", ())}
    return "Cpu" if arenas == {"Cpu"} else None


_FRAMEWORK_REMEDIES = {
    "mxnet": "MXNet keeps freed memory in its pool: export MXNET_GPU_MEM_POOL_TYPE=Round (fewer "
             "sizes kept apart), and MXNET_CUDNN_AUTOTUNE_DEFAULT=0 (the autotuner's trial "
             "workspaces fill a small GPU at start).",
    "paddle": "PaddlePaddle takes a fixed share of the GPU at start: export "
              "FLAGS_allocator_strategy=auto_growth to allocate as it goes (or raise "
              "FLAGS_fraction_of_gpu_memory_to_use).",
    "catboost": "CatBoost takes most of the GPU for its memory pool when it starts "
                "(gpu_ram_part, 0.95 by default) and the request must fit what the pool has "
                "left: lower depth (the memory a tree needs doubles with each level), "
                "border_count and max_ctr_complexity, or train on fewer rows or features.",
    "theano": "Theano's CNMeM pool takes the share of the GPU set by lib.cnmem when it starts "
              "(a fraction, or MB above 1): lower it (THEANO_FLAGS=lib.cnmem=0.5, or 0 to turn "
              "the pool off), and stop other processes on the GPU first.",
    "hashcat": "hashcat sizes its buffers from the attack and the device's largest single "
               "allocation (the \"MB allocatable\" on its device line): lower the workload "
               "(-w 1), use the optimised kernels (-O), split the hash list or the rule file, or "
               "run the attack on a device with more memory.",
    "relion": "RELION's allocator takes a share of the GPU for every MPI rank on it and needs "
              "more for more classes and larger boxes: run fewer MPI ranks per GPU (or spread "
              "them over more GPUs), bin the particles to a smaller box, classify into fewer "
              "classes, or leave more of the GPU free for what RELION allocates outside its "
              "allocator (--free_gpu_memory, in MB).",
    "cufft": "cuFFT allocates each plan's work area on the GPU when the plan is made: free "
             "plans and arrays no longer used (and the framework's cache) before making new "
             "ones, or transform smaller or fewer arrays at once.",
    "dali": "DALI's GPU decoders and operators allocate per sample and per thread, and the "
            "largest image sets the size: lower the pipeline's batch_size and num_threads, "
            "reserve room for large images up front (the decoder's device_memory_padding and "
            "host_memory_padding), or downscale the few oversized images in the data set.",
    "nvjpeg": "nvJPEG's decoder grows its buffers with the largest image it decodes: lower the "
              "batch size and the number of decoding threads, reserve room up front (DALI's "
              "device_memory_padding), or downscale the oversized images in the data set.",
    "faiss": "faiss's GPU resources keep a temporary buffer beside the index (up to 1.5 GiB "
             "by default): shrink it (res.setTempMemory(256 * 1024 * 1024)), add and search in "
             "smaller batches, store the index in float16 (useFloat16 in its config), shard it "
             "over several GPUs (index_cpu_to_all_gpus(..., co) with co.shard = True), and free "
             "PyTorch's cache first (torch.cuda.empty_cache()) when both share the GPU.",
    "opencl": "The OpenCL device could not hold a buffer the program created: lower the "
              "program's batch, work size or intensity, and close other programs using the GPU.",
    "jittor": "Jittor counts what its variables hold against the GPU's memory: lower the "
              "batch size, or set jt.flags.use_cuda_managed_allocator=1 so that it may spill "
              "to host memory, and call jt.sync_all(); jt.gc() between steps.",
    "mps": "An Apple GPU shares the machine's memory, and PyTorch's MPS backend stops at its "
           "high watermark (PYTORCH_MPS_HIGH_WATERMARK_RATIO, a share of the recommended "
           "maximum): close other programs, and call torch.mps.empty_cache() between stages; "
           "raising the ratio lets the system swap.",
    "mindspore": "MindSpore takes a share of the device's memory for its pool when it starts: "
                 "lower the batch size, or give the pool more of the device "
                 "(context.set_context(max_device_memory=\"30GB\")) when other programs do "
                 "not need it.",
    "onnxruntime": "Cap ONNX Runtime's arena on the CUDA execution provider (gpu_mem_limit) and "
                   "let it grow only by what is requested "
                   "(arena_extend_strategy=kSameAsRequested), or run fewer sessions per GPU.",
}


@signature("cuda-oom/framework-allocator", _FRAMEWORK_OOM,
           ("out of memory", "Out of memory error on GPU", "BFCArena::AllocateRawInternal",
            "requested buffer of size", "Fail to alloc memory of", "cudaSuccess (2 vs. 0)",
            "Out of memory. Requested", "TOutOfMemory", "of device memory",
            "failed to allocate GPU or CPU memory",
            "CNMEM_STATUS_OUT_OF_MEMORY", "allocatable device memory",
            "allocatable device-memory",
            "CL_MEM_OBJECT_ALLOCATION_FAILURE", "Can't allocate", "CUDA allocation failed",
            "NVJPEG_STATUS_ALLOCATOR_FAILURE", "DAG", "dag", "to cudaMalloc",
            "cudaMalloc error out of memory", "cudaMallocManaged error out of memory",
            "allocating <= available", "GPU memory is overflow", "Memory isn't enough",
            "memory isn't enough", "MPS backend out of memory"),
           "GPU out of memory (MXNet, PaddlePaddle, ONNX Runtime, CatBoost, Theano, hashcat, "
           "OpenCL, cuFFT, DALI, nvJPEG, RELION, faiss, Jittor, MindSpore, MPS or a miner's DAG)",
           extract=_framework_oom,
           group="cuda-oom-framework",
           example="Out of memory error on GPU 0. Cannot allocate 1.500000GB memory on GPU 0, "
           "available memory is only 512.000000MB.")
def _framework_allocator(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    framework = str(numbers.get("framework"))
    if framework == "dag":
        return _miner_dag(sig, numbers)
    name = _FRAMEWORK_NAMES.get(framework, framework)
    gpu = numbers.get("gpu_index")
    size = (f" {size_text(numbers['requested_bytes'])}" if numbers.get("requested_bytes")
            else " memory")
    # (CatBoost's figure is what its own pool, taken at start, had left)
    free = _stated(numbers, "free_bytes", "; {} was free in its memory pool"
                   if framework == "catboost" else "; {} was free")
    explanation = (
        f"{name}'s GPU allocator could not get{size}"
        f"{f' on GPU {gpu}' if gpu is not None else ''}{free}. Either the job's step is too "
        "big for the GPU or another process holds part of it.")
    # (an Apple GPU: no NVIDIA driver for gpu-audit scan to ask which processes hold it)
    others = "" if framework == "mps" else f"{SCAN_OTHERS}\nThen l"
    remedy = (f"{others or 'L'}ower the batch size (or the input size).\n"
              f"{_FRAMEWORK_REMEDIES.get(framework, '')}").rstrip()
    return advice(sig, numbers, explanation, remedy,
                  title=f"GPU out of memory ({name})", diagnosis="unknown")


def _miner_dag(sig: Signature, numbers: dict[str, Any]) -> Advice:
    explanation = (
        "The miner could not place the coin's DAG in the GPU's memory. An Ethash-family coin's "
        "DAG grows with every epoch, so a card that mined it before runs out once the DAG "
        "outgrows what the card has free (its memory less the display's and other programs').")
    remedy = ("Mine a coin or algorithm whose DAG fits this card (the miner's documentation "
              "lists each one's size), or move the work to a card with more memory; close "
              "other programs using the GPU, and update the miner (newer releases fit the DAG "
              "into less memory).")
    return advice(sig, numbers, explanation, remedy,
                  title="GPU out of memory: the miner's DAG does not fit the card",
                  diagnosis="too-large")


# A process row of an nvidia-smi table: GPU, GI and CI (since driver 450), PID, type, name,
# memory. The scanner hands over each row under the table's "Processes:" header.
_SMI_ROW = (LINE_HEAD + r"\|\s+(?P<gpu>\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(?P<pid>\d+)\s+"
            r"[CGM+]{1,3}\s+(?P<name>\S.{0,120}?)\s+(?P<mib>\d+)\s?MiB\s*\|\s*$")


def _smi_processes(match: re.Match[str], _text: str) -> dict[str, Any]:
    """One row of an nvidia-smi table's process list."""
    return {"gpu_processes": [{"pid": int(match["pid"]), "gpu_index": int(match["gpu"]),
                               "name": match["name"].strip(),
                               "used_bytes": int(match["mib"]) * 2**20}]}


@signature("cuda-oom/smi-processes", _SMI_ROW, ("MiB",),
           "Processes on the GPUs (nvidia-smi)", severity=Severity.INFO, tier=5.0, fact=True,
           extract=_smi_processes,
           example="|    0   N/A  N/A      2211      C   python serve.py                  206MiB |")
def _smi_fact(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    # a fact: its numbers name the holders in an out-of-memory's explanation, it opens nothing
    return advice(sig, numbers, "The processes nvidia-smi listed on the GPUs.", "Nothing.")


# Bytes per element of the dtypes TensorFlow names in "OOM when allocating tensor ... and type T".
_TF_DTYPE_BYTES = {
    "float": 4, "float32": 4, "half": 2, "float16": 2, "bfloat16": 2, "double": 8, "float64": 8,
    "int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "complex64": 8, "complex128": 16,
}
_MAX_TF_DIMS = 16


def _tensorflow_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    """The GPU and the tensor's size: shape times the dtype's width, or the bytes the BFC
    allocator states ("rounded to N")."""
    found = named(match, line)
    found.pop("shape", None), found.pop("dtype", None)
    if found.pop("bare", None) is not None:
        found[BARE] = True
    # (XLA keeps its own copy of the allocator: JAX's log names its source under xla/)
    found["framework"] = "jax" if "xla/" in line else "tensorflow"
    if "gpu" in found:
        found["gpu_index"] = found.pop("gpu")
    shape, dtype = match["shape"], (match["dtype"] or "").lower()
    if shape is not None and dtype in _TF_DTYPE_BYTES:
        dims = [int(d) for d in re.findall(r"\d+", shape)[:_MAX_TF_DIMS + 1]]
        if 0 < len(dims) <= _MAX_TF_DIMS and all(len(str(d)) < 12 for d in dims):
            total = _TF_DTYPE_BYTES[dtype]
            for d in dims:
                total *= d
            found["requested_bytes"] = total
    if rounded := re.search(r"\(rounded to (\d{1,20})\)", line):
        found["requested_bytes"] = int(rounded[1])
    elif size := match["size"] or match.groupdict().get("size_") or match["size__"]:
        found["requested_bytes"] = size_or_none(size)
    found.pop("size", None)
    return found


# ("with shape[...]"; TensorFlow 1 wrote "of shape [...]")
_TF_SHAPE = (r"(?: (?:with|of) shape ?\[(?P<shape>[\d, ]{0,200})\])?"
             r"(?: and type (?P<dtype>\w+))?")


@signature("cuda-oom/tensorflow",
           rf"(?i:\bOOM when allocating tensor){_TF_SHAPE}"
           r"(?!.{0,300}?(?i:device:CPU|by allocator cpu))"
           r"(?:.{0,200}?(?i:device:GPU:|/gpu:|by allocator GPU_)(?P<gpu>\d+))?"
           r"|Allocator \(GPU_(?P<gpu_>\d+)_bfc\) ran out of memory trying to allocate "
           rf"(?P<size>{SIZE}|[\d.]+[KMGT]iB)(?!.{{0,200}}?caller indicates that this is not a "
           r"failure)|"
           # the same words without the allocator's name, as a writer keeps them ("I always get
           # the same issue (ran out of memory trying to allocate 5.96GiB)"): the BFC
           # allocator's own way of writing a size, without a space (not "Allocator (cpu) ran")
           r"(?<!\) )\bran out of memory trying to allocate (?P<size__>\d+(?:\.\d+)?[KMGT]iB)\b"
           r"(?!.{0,200}?caller indicates that this is not a failure)|"
           # ... and the allocator's line cut right after its head (JAX and TensorFlow print it
           # before their error; its retry, "not a failure", says so further on)
           r"Allocator \(GPU_(?P<gpu__>\d+)_bfc\) ran out of memory(?: [a-z]{1,12}){0,3}[`'\"]?"
           r"\s*$|"
           # (TensorFlow 1.0's allocator named no device, and pointed at its dump when it failed;
           # its retry with less memory says "The caller indicates ..." instead)
           rf"\bRan out of memory trying to allocate (?P<size_>{SIZE}|[\d.]+[KMGT]iB)\.? +"
           r"See logs for memory state|ResourceExhaustedError: failed to allocate memory|"
           # a notebook's traceback header, or a heading: only the exception's class is left
           # (the type alone on its line is also PaddlePaddle's head over its own message:
           # BARE marks it, see classify.py)
           r"\bResourceExhaustedError(?= *Traceback)|" + LINE_HEAD + r"[#>*\s]*(?:[\w.]+\.)?"
           r"ResourceExhaustedError(?P<bare>)"
           r"[:\s]*$|"
           # (a copy to the GPU whose destination the allocator could not create)
           r"\bDst tensor is not initialized|"
           # (the status as a writer keeps it, cut after its code: "get tensorflow error:
           # Resource exhausted: OOM." - not the host's, which names the CPU)
           r"\bResource ?[Ee]xhausted: OOM\b(?! when)(?!.{0,300}?(?i:device:CPU|\bCPU\b))",
           ("OOM when allocating", "oom when allocating", "_bfc) ran out of memory",
            "See logs for memory state", "failed to allocate memory", "ResourceExhaustedError",
            "ran out of memory trying to allocate", "Dst tensor is not initialized",
            "exhausted: OOM", "Exhausted: OOM"),
           "GPU out of memory (TensorFlow)", extract=_tensorflow_oom, group="tensorflow",
           example="tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
           "allocating tensor with shape[256,64,224,224] and type float on "
           "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc")
def _tf_oom(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("framework") == "jax":
        return _xla_oom(sig, numbers, ctx)
    gpu = numbers.get("gpu_index")
    on_gpu = f" on GPU {gpu}" if gpu is not None else ""
    size = (f" a tensor of {size_text(numbers['requested_bytes'])}"
            if numbers.get("requested_bytes") else " a tensor")
    explanation = (
        f"TensorFlow's GPU allocator (BFC) could not find{size}{on_gpu}. TensorFlow reserves "
        "most of the GPU's memory for itself when it starts, so this is either a step too big "
        "for the GPU or another process (a second TensorFlow or a PyTorch job) that took the "
        "memory first.")
    remedy = (f"{SCAN_OTHERS}\nThen lower the batch size (or the input size); mixed precision "
              "(tf.keras.mixed_precision.set_global_policy('mixed_float16')) halves activations. "
              "To let several jobs share a GPU, make TensorFlow allocate as it goes: "
              "export TF_FORCE_GPU_ALLOW_GROWTH=true")
    return advice(sig, numbers, explanation, remedy, diagnosis="unknown")


@signature("cuda-oom/tensorflow-node",
           LINE_HEAD + r"\[\[(?:Node: |\{\{node )[^\n]*?device:GPU:(?P<gpu_index>\d+)\"\]",
           ("device:GPU:",), "GPU out of memory (TensorFlow, continued)", group="tensorflow",
           attach="only", window=3,
           example='\t [[Node: gradients/mul = Const[dtype=DT_FLOAT, _device="/job:localhost/'
           'replica:0/task:0/device:GPU:0"]()]]')
def _tf_node(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    # a continuation: the GPU of the TensorFlow out-of-memory above it (TensorFlow 1 names the
    # device on the node line under its message), never an incident of its own
    return advice(sig, numbers, "The node whose tensor could not be allocated.", "Nothing.")


fixed("cuda-oom/tensorflow-not-a-failure",
      r"Allocator \(GPU_\d+_bfc\) ran out of memory trying to allocate .{0,200}?caller "
      r"indicates that this is not a failure",
      ("_bfc) ran out of memory",), "TensorFlow's allocator retried with less memory",
      severity=Severity.INFO, tier=5.0,
      example="W tensorflow/core/common_runtime/bfc_allocator.cc:243] Allocator (GPU_0_bfc) ran "
      "out of memory trying to allocate 2.18GiB with freed_by_count=0. The caller indicates "
      "that this is not a failure, but may mean that there could be performance gains if more "
      "memory were available.",
      explanation="TensorFlow's allocator could not get the memory it first asked for and fell "
      "back to an algorithm that needs less; the step went on. It is a performance note, not "
      "an error.",
      remedy="Nothing, unless the run is slower than expected: then a smaller batch may be "
      "faster.")


def _jax_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    found["framework"] = "jax"
    raw = found.pop("bytes", None) or found.pop("size", None)
    if raw is not None:
        found["requested_bytes"] = raw if isinstance(raw, int) else size_or_none(str(raw))
    if "gpu" in found:
        found["gpu_index"] = found.pop("gpu")
    return found


@signature("cuda-oom/xla-peak-buffers",
           # the peak buffers XLA lists under its out-of-memory message ("BufferAssignment OOM
           # Debugging"), each with its "XLA Label:" line: printed for that failure only, and
           # the evidence left when a post keeps the list but not the message above it
           # (also behind a glog prefix or two, as a launcher that relays its child's log
           # prints them: "I1102 08:14:02.101 139912 run_container.py:212] XLA Label: fusion")
           LINE_HEAD + r"XLA Label: \S", ("XLA Label: ",),
           "GPU out of memory (JAX/XLA): the buffers live at the peak",
           extract=_jax_oom, group="xla", attach="prefer", window=240,
           example="        XLA Label: fusion")
@signature("cuda-oom/xla",
           # (also cut after "Out of memory", as a title or a writer keeps the status)
           r"(?i:RESOURCE[_ ]EXHAUSTED): (?:Out of memory(?: (?:while trying to allocate|"
           rf"allocating) (?:(?P<bytes>\d+) bytes|(?P<size>{SIZE}|[\d.]+[KMGT]iB)))?(?![A-Za-z])"
           r"|Failed to allocate request for [^(\n]{0,20}\((?P<bytes_>\d+)B\) on device "
           r"ordinal (?P<gpu>\d+))|"
           # (XLA's own words, quoted without the status before them, as in a title)
           r"\bOut of memory while trying to allocate (?P<bytes__>\d+) bytes",
           ("ESOURCE_EXHAUSTED", "esource exhausted", "ESOURCE EXHAUSTED",
            "Out of memory while trying to allocate"),
           "GPU out of memory (JAX/XLA)", extract=_jax_oom, group="xla",
           example="jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
           "trying to allocate 17179869184 bytes.")
def _xla_oom(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    size = (f" {size_text(numbers['requested_bytes'])}" if numbers.get("requested_bytes")
            else " a buffer")
    gpu = numbers.get("gpu_index")
    explanation = (
        f"XLA (JAX) could not allocate{size}"
        f"{f' on GPU {gpu}' if gpu is not None else ''}. JAX preallocates 75% of the GPU when "
        "it starts, so a second process on the same GPU (another JAX, or a PyTorch job) or a "
        "program too big for what is left fails this way.")
    remedy = (f"{SCAN_OTHERS}\nThen make the program smaller (batch size, model size, "
              "jax.checkpoint on the largest blocks). To share a GPU, let JAX allocate as it "
              "goes: export XLA_PYTHON_CLIENT_PREALLOCATE=false (or set "
              "XLA_PYTHON_CLIENT_MEM_FRACTION=.5 per process).")
    return advice(sig, numbers, explanation, remedy, title="GPU out of memory (JAX/XLA)",
                  diagnosis="unknown")


fixed("cuda-oom/caught",
      r"(?i:skipping (?:this |the )?batch)", ("kipping batch", "kipping this batch",
                                             "kipping the batch"),
      "The program caught an out-of-memory and skipped the batch", severity=Severity.INFO,
      tier=5.0, handles="cuda-oom", window=4,
      example="| WARNING: ran out of memory on GPU #2, skipping batch",
      explanation="The training loop caught the out-of-memory, dropped that batch and went on "
      "(fairseq and others do this): the run did not die of it.",
      remedy="Nothing, unless it happens often: then lower the batch size (or max tokens) so "
      "fewer batches are dropped.")

# A batch-size finder (Lightning's tuner, a program's own search) runs steps of growing size
# until one runs out of memory, then tries a smaller one: its next line names the next size.
# (Only a program's words: a writer's "I tried batch size 8" is no search.)
fixed("cuda-oom/batch-size-search",
      r"(?i:" + LINE_HEAD
      + r"\W{0,4}(?:re)?try(?:ing)? (?:with )?(?:a )?batch[ _]size(?: of)?[ =:]*\d+|"
      r"\bbatch[ _]size \d+ failed\W{1,4}trying batch[ _]size \d+|"
      + LINE_HEAD + r"\W{0,4}chosen batch[ _]size\b|\bfinished batch[ _]size finder\b)",
      ("batch size", "batch_size", "Batch size", "Batch_size", "BATCH_SIZE"),
      "A batch-size search caught an out-of-memory and tried another size",
      severity=Severity.INFO, tier=5.0, handles="cuda-oom", window=4,
      example="Batch size 256 failed, trying batch size 128",
      explanation="The program searches for the largest batch size that fits in GPU memory: it "
      "ran a step too big for the GPU, caught the out-of-memory and went on with a smaller "
      "batch. That out-of-memory is the search at work, not the end of the run.",
      remedy="Nothing: the search picks the size that fits. Pin the chosen batch size in the "
      "configuration to skip the search next time.")


# The text saying, after the fact, that a failure was the GPU running out of memory ("that was
# just OOM", "it turned out to be an out-of-memory", "the status masks the real OOM"; not "if it
# is ...", not the OOM killer).
_OOM_WORDS = r"(?:(?:GPU|CUDA) )?(?:out[- ]of[- ]memory|OOM)\b(?![- ]?kill)"
# A cuDNN status that names no cause, on the same line as the telling.
_CAUSELESS_CUDNN = re.compile(
    r"\bCUDNN_STATUS_(?:NOT_INITIALIZED|INTERNAL_ERROR|EXECUTION_FAILED)\b")


def _told_cause(_match: re.Match[str], line: str) -> dict[str, Any]:
    status = _CAUSELESS_CUDNN.search(line)
    return {"status": status[0]} if status else {}


@signature("cuda-oom/told-cause",
           r"(?i:(?<!\bif )(?<!\bwhether )\b(?:it|this|that)(?:'s| was| is| turned out to be| "
           r"turns out to be)(?: (?:just|merely|simply|actually|really|only|all|typically|"
           r"typical|usually|basically|essentially|clearly|definitely|likely|probably))?"
           r"(?: (?:running|"
           rf"ran))? (?:an? )?(?:{_OOM_WORDS}|(?:GPU )?memory (?:issue|problem)\b)|"
           r"\bmask(?:s|ed|ing)? (?:the |an? )?(?:real |actual |"
           rf"underlying )?{_OOM_WORDS}|"
           # ... or names what set the out-of-memory off ("the action that triggers the OOM is a
           # call to cublasCreate"; not "does not trigger an OOM")
           r"(?<!\bnot )(?<!n't )(?<!\bnever )\b(?:trigger(?:s|ed)?|caus(?:es|ed)) (?:the |an? )?"
           rf"{_OOM_WORDS}|"
           # ... or found the GPU's memory full ("it turns out my GPU memory was getting full")
           r"\bturn(?:s|ed) out (?:that )?(?:my |the |our )?(?:GPU|CUDA|video) ?memory "
           r"(?:was|is|had been|got)(?: getting| almost| nearly| completely| already)? full\b|"
           # ... or says the writer was out of the GPU's memory ("Actually, I was out of GPU
           # memory"), or that the failure comes when it runs out ("this may occur when running
           # out of VRAM")
           r"(?<!\bif )(?<!\bwhen )\b(?:I|we) (?:was|were) (?:(?:just|simply|actually|really) )?"
           r"(?:running )?out of (?:GPU |CUDA |video )?(?:memory|VRAM)\b|"
           r"\b(?:occurs?|happens?|appears?) when (?:you(?:'re| are) |the GPU is |it is )?"
           r"(?:running|run|runs) out of (?:GPU |CUDA |video )?(?:memory|VRAM)\b|"
           # ... or gives the GPU's running out of memory as the failures' cause ("I am hitting
           # errors due to the GPU running out of memory"; not "can fail due to ...", "if ...")
           + unless_words(r"if|can|may|might|could|would|often|usually|"
                          r"typically|common\w*|you|your", start=r"(?:^|(?<=[.!?] ))",
                          stop=r"\n.?!") +
           r"\b(?:errors?|failures?|crash(?:es)?|exceptions?) (?:due to|because of|caused by) "
           r"(?:the |my |our )?(?:GPU|CUDA device|graphics card|card) (?:running|ran|having run) "
           r"out of (?:its )?(?:GPU |video )?(?:memory|VRAM)\b|"
           # ... or says that giving the framework's memory back fixed it ("the solution is to
           # turn on memory growth", "setting allow_growth=True allows the program to run"):
           # TensorFlow had taken the GPU's memory, and the library found none left
           r"\b(?:solution is|solved|fixed|fixes|resolved|worked|helped)\b[^\n]{0,40}?"
           r"(?P<growth>\bmemory growth\b|\ballow_growth\b)|"
           r"(?P<growth_>\ballow_growth\s*=\s*True\b|\bset_memory_growth\b)[^\n]{0,40}?"
           r"\b(?:fixe[sd]|solve[sd]|resolve[sd]|works|worked|helped|allows)\b)",
           ("out of memory", "Out of memory", "Out of Memory", "out-of-memory", "OOM",
            "memory issue", "memory problem", "memory was", "memory is", "memory had",
            "memory got", "MEMORY was", "Memory was", "memory Was", "out of GPU", "out of VRAM",
            "out of CUDA", "out of video", "memory growth", "allow_growth", "set_memory_growth"),
           "The text says the failure was the GPU running out of memory",
           severity=Severity.INFO, tier=5.0, extract=_told_cause,
           example="Solved: it turned out to be an out-of-memory, the batch was too large.")
def _told_oom_cause(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    # context alone; beside a cuDNN status that names no cause it is that status's cause (the
    # status on this same line here; classify pairs it with one on another line)
    status = numbers.get("status")
    if not status:
        return advice(sig, numbers, "The text says a failure was an out-of-memory; no "
                      "message of it was found.", "Nothing on its own.")
    return advice(sig, numbers, masked_oom_explanation(str(status)), MASKED_OOM_REMEDY,
                  title="CUDA out of memory, reported as a cuDNN failure",
                  severity=Severity.ERROR, tier=0.9, diagnosis="unknown")


def _cudnn_status_name(text: str) -> str:
    """The status's full name, also where it was printed without its ``STATUS_``."""
    return text if text.startswith("CUDNN_STATUS_") else "CUDNN_STATUS_" + text[len("CUDNN_"):]


# cuDNN's own out-of-memory status: it allocates its workspace and handle outside the
# framework's cache, so a full GPU reaches the program as CUDNN_STATUS_ALLOC_FAILED (or, from
# cuDNN 9, the device allocation's sub-status) instead of the framework's out-of-memory message;
# the threads that report it end on a smaller batch. (A check that printed the status's number,
# "(0 vs. 2)", is read by cuDNN's signature and classify gives it this one's class.)
@signature("cuda-oom/cudnn-alloc-failed",
           r"(?<![A-Za-z0-9_])CUDNN_(?:STATUS_)?(?:ALLOC_FAILED|INTERNAL_ERROR_DEVICE_ALLOCATION_"
           r"FAILED)(?![A-Za-z0-9_])(?!\s+warnings?\b)",
           ("CUDNN_STATUS_ALLOC_FAILED", "CUDNN_ALLOC_FAILED", "DEVICE_ALLOCATION_FAILED"),
           "CUDA out of memory, reported by cuDNN as an allocation failure",
           extract=lambda match, _line: {"status": _cudnn_status_name(match.group(0))},
           example="cuDNN failure 2: CUDNN_STATUS_ALLOC_FAILED ; GPU=0 ; expr=finder(algo, perf)")
def _cudnn_alloc_failed(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    status = numbers.get("status") or "CUDNN_STATUS_ALLOC_FAILED"
    explanation = (
        f"cuDNN could not allocate GPU memory ({status}): it allocates its workspace and handle "
        "outside the framework's cache, so a GPU already full reaches the program as a cuDNN "
        "status instead of an out-of-memory message.")
    return advice(sig, numbers, explanation, MASKED_OOM_REMEDY, diagnosis="unknown")


MASKED_OOM_REMEDY = f"{SCAN_OTHERS}\nThen reduce memory use:\n{REDUCE_MEMORY}"


def masked_oom_explanation(status: str, library: str = "cuDNN") -> str:
    """Why a cuDNN (or cuBLAS) status the text says was an out-of-memory is read as one."""
    said = (f"{library} reported {status}, a status that names no cause," if status else
            f"{library} failed without naming a cause,")
    return (f"{said} and the text says the "
            f"failure was the GPU running out of memory: {library} allocates its handle and "
            f"workspace outside the framework's cache, so a full GPU surfaces as a {library} "
            "failure instead of the framework's out-of-memory message.")




# A GPU's memory told running out in the writer's own words, in the languages people report in,
# where no message of the program's was kept: "my 3060 runs out of VRAM at 1024x1024", "the GPU
# memory fills up after a few epochs", "getting OOM on an A100 with batch 1", "训练一半就爆显存了",
# "не хватает видеопамяти", "la mémoire GPU est saturée". Told as a fact only: not in a condition,
# a question, advice to the reader or a guide's sentence ("if the GPU runs out of memory",
# "when your VRAM is full", "to avoid OOM", "当显存不足时"), which the words before it say; "when
# I ..." is the writer's own run. Not the host's memory (RAM, swap, the OOM killer).
# (the reader's words: in a reply's reading of the writer's run, "you ran out of VRAM", they
# are the writer's; elsewhere advice)
_TOLD_GUARD_READER = r"you|your|you're"
_TOLD_GUARD_WORDS = (
    r"if|whether|unless|whenever|in case|avoid\w*|prevent\w*|how|why|might|may|could|"
    rf"would|will|can|should|does|without|{_TOLD_GUARD_READER}|tips?|guide|FAQ|reduc\w*|"
    r"wenn|falls|vermeiden|wie|si|quand|éviter|comment|cuando|quando|evitar|cómo|como|para|"
    r"если|чтобы|как|fix(?:ed|es)|bug where|before|possible|such as|e\.g|errors? like")
_TOLD_GUARD_ALSO = (
    r"\bwhen(?! (?:I|we|i)\b)|"
    # (a negation just before it: "we did not get OOM", "never runs out of VRAM")
    r"\b(?:not|never|didn't|don't|doesn't|wasn't|isn't|won't|no)\b"
    r"(?=[^\n.,;]{0,30}?(?:OOM|out of|memory|VRAM))|"
    # (a code's gloss in parentheses: "`DCGM_FR_MEMORY_ALLOC` (insufficient GPU memory could be
    # allocated ...)" says what the code means)
    r"(?-i:\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+`? ?\()|"
    r"如果|假如|要是|若|当|避免|防止|怎么|如何|为什么|可以|推测|猜测|可能|是不是|是否|估计|怀疑|你|您|场景|"
    r"場合|なら|ように|경우|려면")
# ... a telling that says the memory is the GPU's ...
_GPU_MEMORY_GONE = (
    # (also of all of it or of its size: "ran out of all 8GB of VRAM")
    r"\bout of (?:all (?:of )?)?(?:(?:the|its|my) )?(?:\d{1,3}(?:\.\d)? ?[GM]i?B (?:of )?)?"
    r"(?:(?:GPU|CUDA|video|graphics) memory|VRAM)\b|"
    r"\b(?:GPU|CUDA|video|graphics|VRAM)(?:'s)?(?: card)?(?: memory| RAM)?(?: usage)? "
    r"(?:(?:fill|fills|filled) up|(?:gets|got|becomes|became|is|was|runs|ran)"
    r"(?: completely| totally)? (?:full|exhausted|maxed out|out)\b|overflow(?:s|ed)?\b|"
    r"max(?:es|ed) out|(?:is|was|isn't|wasn't|is not|was not) (?:enough|sufficient)\b|"
    r"(?:is|was) insufficient\b)|"
    r"\b(?:not enough|insufficient) (?:GPU|video|graphics) memory\b|"
    r"\b(?:not enough|insufficient) VRAM\b|"
    # (its use told growing until the run ends: "GPU memory keeps increasing until crash")
    r"\b(?:GPU|CUDA|video|VRAM)(?: memory)?(?: usage| use)? (?:keeps |kept )?(?:increas|grow|ris|"
    r"climb)\w* (?:\w+ ){0,3}?until (?:it |the (?:\w+ )?)?(?:crash\w*|OOMs?\b|runs? out|"
    r"dies|fails|is full)|"
    # (a program told asking for more than the card has: "ollama tried to alloca more memory
    # than the GPU has"; the card's space: "Running out of GPU space when inferencing")
    r"\b(?:tried|tries|trying|attempt(?:s|ed|ing)?) to alloc\w* more (?:memory|VRAM) than (?:the |"
    r"my |its |this |our )?(?:GPU|card|graphics card) has\b|"
    r"\bout of (?:GPU|VRAM|video memory) space\b|"
    # (a reply's reading: "6GB isn't enough VRAM for the full-size decode")
    r"\b(?:isn't|wasn't|is not|was not) enough (?:VRAM|GPU memory|video memory)\b|"
    # (a model that does not fit the card's memory: "the 13B model doesn't fit in 12GB of
    # VRAM", "needs more VRAM than my 8GB card has")
    r"\b(?:doesn't|does not|didn't|did not|won't|will not|can't|cannot) fit (?:in|into|on) "
    r"(?:the |my |our |your |a |an )?(?:\d{1,3}(?:\.\d)? ?[GM]i?B (?:of )?)?(?:VRAM|GPU memory|"
    r"video memory)\b|"
    r"\bneeds? (?:more|much more) (?:VRAM|GPU memory|video memory) than (?:my|our|your|the|this)\b|"
    r"\b(?:memory|OOM) errors? on (?:the |my |a |an |our )?(?:GPU|CUDA|VRAM)\b|"
    # (a GPU framework told out of memory: "I always get an error saying tensorflow ran out of
    # memory")
    r"\b(?:TensorFlow|tensorflow|Tensorflow|TF|PyTorch|pytorch|Pytorch|torch|CUDA|cuda) "
    r"(?:ran|runs|is running|was running|keeps running|kept running) out of memory\b|"
    # (its memory told taken by someone else's work: "another user's training is taking all
    # the GPU memory", "the GPU memory is occupied by another process")
    r"(?<!\bno )(?<!\bany )\b(?:another|other|someone else's|a different) (?:users?'?s? )?"
    r"(?:\w+ )?(?:training|process|job|program|model|run|application|container|user)s? "
    r"(?:\w+ )?(?:is |was |are |"
    r"were )?(?:taking|took|takes|occupying|occupies|occupied|holding|holds|held|hogging|hogs|"
    r"hogged|eating|eats|ate) (?:up )?(?:all|most|nearly all|almost all|the whole|the entire)"
    r"(?: of)? (?:the |my |our )?(?:GPU|VRAM|video|CUDA)(?:'s)?(?: memory)?\b|"
    r"\b(?:GPU|VRAM|video|CUDA)(?:'s)? memory (?:is|was|gets|got|are|were) (?:already |all |"
    r"fully |completely )?(?:taken|occupied|held|hogged|eaten|used) (?:up )?by (?:another|other|"
    r"someone else's|a different) (?:users?'?s? )?(?:\w+ )?(?:training|process|job|program|"
    r"model|run|application|container|user)s?\b|"
    # German, French, Spanish, Portuguese
    r"\b(?:Grafikspeicher|Videospeicher|GPU-Speicher|VRAM)\w* (?:läuft|lief|ist|war) "
    r"(?:voll|über)|\b(?:nicht genug|zu wenig|nicht genügend) (?:Grafikspeicher|Videospeicher|"
    r"GPU-Speicher|VRAM)|\b(?:läuft|lief) (?:der |mein |dann )?(?:Grafikspeicher|Videospeicher|"
    r"GPU-Speicher|VRAM) (?:voll|über)|"
    r"\b(?:Grafikspeicher|Videospeicher|GPU-Speicher|VRAM) reichte? nicht|"
    r"\bmémoire (?:GPU|vidéo|graphique|de (?:la |ma |notre )?(?:carte (?:graphique|vidéo)|GPU))"
    r"(?: est| était| a été)? (?:saturée|pleine|insuffisante|épuisée)|"
    r"\bmémoire insuffisante (?:sur|dans|de) (?:le |la |ma )?(?:GPU|carte graphique)\b|"
    r"\b(?:manque|plus) de (?:mémoire (?:GPU|vidéo|graphique)|VRAM)\b|"
    r"\bsin (?:memoria (?:en|de) (?:la )?(?:GPU|gráfica|tarjeta gráfica)|VRAM)\b|"
    r"\bfalta de (?:memoria (?:en|de) (?:la )?(?:GPU|gráfica)|memória (?:na|da) (?:GPU|placa)|"
    r"VRAM)\b|\bsem memória (?:na|da) (?:GPU|placa)|"
    r"\bmemoria (?:de (?:la )?)?(?:GPU|gráfica|VRAM) (?:insuficiente|llena|agotada)|"
    r"\bmemória (?:da )?(?:GPU|placa de vídeo|VRAM) (?:insuficiente|cheia|esgotada)|"
    # Russian, Chinese, Japanese, Korean
    r"(?:не хватает|не хватило|нехватка|недостаточно|закончилась|кончилась|кончается) "
    r"(?:видеопамяти|памяти (?:на |в |у )?(?:GPU|видеокарт\w*|гпу))|"
    r"видеопамять (?:кончилась|закончилась|кончается|заканчивается|переполн\w*|забивается)|"
    # (the verb first, as a sentence often runs: "на второй эпохе заканчивается видеопамять")
    r"(?:кончилась|закончилась|кончается|заканчивается|переполняется|забивается) "
    r"(?:вся )?видеопамять|"
    r"(?:显存(?:不足|不够|溢出|爆了?|炸了?|占满|满了|耗尽|用完|用尽|爆满)|爆显存|"
    # (with a word between: "显存直接被占满", "显存很快就爆了")
    r"显存(?:直接|都|全|已经|很快|一下子?|马上)?就?(?:被)?(?:占满|用完|耗尽|吃满|撑爆|爆了|爆掉|满了)|"
    # (its use too large for the run to go on: "显存占用过大无法训练")
    r"显存(?:占用|使用|消耗)(?:过大|过高|太大|太高)[，,]?(?:导致|以致)?(?:无法|不能|没法)|"
    r"(?:GPU|gpu) ?(?:的)?内存(?:不足|不够|溢出|爆了?)|"
    # (the card's memory, then its overflow later in the sentence: "显卡内存一直上涨，大概训练
    # 几十轮后，最终内存溢出")
    r"显卡(?:的)?内存[^\n。？?]{0,40}?(?:溢出|爆了?|不足|不够|耗尽|占满))"
    r"(?![^\n，。,]{0,4}?(?:时|的时候|的话|会|吗|怎么办|呢|可以|可通过|需要))|"
    # (a space may stand between the Latin and the Japanese word: a title's reading puts one
    # there, "GPU メモリ不足")
    r"(?:(?:GPU|VRAM|ビデオ|グラフィック) ?(?:の)?メモリー?(?:が|は)?"
    r"(?:不足|足りな|足らな|溢れ|あふれ)|VRAM ?(?:が|は)?(?:不足|足りな))"
    # (not a condition, nor a guide's topic: "足りなくなると、", "GPUメモリ不足について",
    # "... の対処法")
    r"(?![^\n]{0,6}?(?:場合|なら|時|とき|について|とは|対処|対策|解決|の原因|を防|と[、，,]))|"
    r"(?:GPU|그래픽|그래픽 ?카드|VRAM) ?(?:의 ?)?메모리(?:가|는)? ?(?:부족|모자라|초과)"
    r"(?![^\n]{0,3}?(?:경우|면|때))")
# ... and one that leaves the memory unnamed, on a line that names the GPU: run out of it, not
# enough of it, an OOM met ("OOM at step 500 on 4x V100").
_MEMORY_GONE_GPU_NAMED = (
    # (also of all of it or of its size: "ran out of all 4GB memory", "runs out of the 11 GB of
    # memory")
    r"\b(?:runs?|running|ran|gone|going|went|goes) out of (?:all (?:of )?)?(?:(?:the|its|my) )?"
    r"(?:\d{1,3}(?:\.\d)? ?[GM]i?B (?:of )?)?memory\b|"
    r"\b(?:not enough|insufficient) memory\b|"
    # (the card told short of it: "my GPU doesn't have enough memory for the 70B model"; the
    # model too big for it: "the model is too big for my GPU")
    r"\b(?:doesn't|does not|didn't|did not|don't|do not) have enough (?:\w+ )?(?:memory|VRAM)\b|"
    r"\b(?:is|was|are|were) (?:just |simply |way )?too (?:big|large) (?:for|to fit (?:in|on|into)) "
    r"(?:(?:my|our|your|the|this) (?:\d{1,3} ?GB )?|(?:a|an|one) \d{1,3} ?GB )"
    r"(?:GPU|card|graphics card|VRAM)s?\b|"
    # (an out-of-memory as a verb: "it's OOMing on my 4090", "it OOMed at step 40"; in
    # Chinese, "就OOM了")
    r"\bOOM(?:ing|ed|'d|'ing)\b|(?<![A-Za-z])OOM ?(?:了|啦|掉了)|"
    r"\b(?:get|gets|got|getting|hit|hits|hitting|see|seeing|saw|having|had|cause[sd]?|"
    r"trigger(?:s|ed)?|throws?|threw|raise[sd]?)(?: an?| the| this| that| same| constant)?"
    r" (?:CUDA |GPU )?OOMs?\b|"
    rf"{LINE_HEAD}[\W_]{{0,4}}(?:CUDA |GPU )?OOMs?(?: errors?)? (?:on|at|with|after|during|in)\b")
# The words that say the host's memory: a line naming them is not read as the GPU's (and a
# text whose first lines name them, with its memory's words, documents.Head.gpu_subject).
HOST_MEMORY_NAMED = r"(?<!GPU )(?<!V)RAM|host memory|system memory|swap|oom[- ]?kill\w*"
_HOST_MEMORY_WORDS = rf"\b(?:{HOST_MEMORY_NAMED}|CPU)\b"
# The GPU named in the writer's words, not a folder of a path ("c10/cuda/CUDACachingAllocator.cpp").
_GPU_NAMED = rf"(?<![/\\.]){GPU_WORD}(?![/\\])"
# A line that says the failure is over ("it works fine now") tells of an earlier one.
# (Not "small sizes work fine": the run told of is another one.)
_OVER_NOW = (r"\b(?:(?:works?|working|runs?|running)(?: fine| well| again)? now\b|no longer\b|"
             # (or that the run goes on, or that a full memory is the program's way: "training
             # continues fine", "JAX preallocates ... this is expected")
             r"continu\w* (?:fine|normally|to train|training)|keeps? (?:running|training)\b|"
             r"still (?:runs|trains|works)\b|expected\b|preallocat\w*|"
             r"(?:not|n't)\b[^\n]{0,30}?\bany ?more\b|(?:now )?(?:fixed|solved|resolved)"
             r"(?: now)?[.!]?$)")
# The guard runs over the words before the telling in its sentence only (a tempered token:
# linear time), so "runs out of VRAM when I generate" is read and "if it runs out of VRAM" is
# not, whatever an earlier sentence of the line asked.
_BEFORE_TELLING = unless_words(_TOLD_GUARD_WORDS, f"{_TOLD_GUARD_ALSO}|{SENTENCE_BREAK}", start="")
# ... nor one its sentence asks ("Is it because of insufficient GPU memory?", "是我的显存不够吗？");
# a plea for help after the telling asks nothing of it ("OOM at step 500, any suggestions?",
# "是显存溢出了，有什么解决办法么？")
_NOT_ASKED = (r"(?:(?![^\n.!。！]{0,60}?[?？])|(?=[^\n.!。！?？]{0,60}?(?:\b(?:any|what|how)\b|"
              r"解决办法|解决方法|怎么解决|如何解决|怎么办|有什么办法)[^\n.!。！?？]{0,30}[?？]))")
# A reply's reading of the writer's run, to them: "Looks like you ran out of GPU memory",
# "you're running out of VRAM", "your GPU is out of memory" (not "you will", "if you").
_BEFORE_READING = unless_words(_TOLD_GUARD_WORDS.replace(f"|{_TOLD_GUARD_READER}|", "|"),
                               f"{_TOLD_GUARD_ALSO}|{SENTENCE_BREAK}", start="")
_READER_RAN_OUT = (
    r"\b(?:you(?:'re| are)(?: just| simply)? (?:running|run) out of|you(?: just| simply)? ran "
    r"out of|you(?:'re| are) out of|your (?:GPU|card|graphics card)(?:'s memory)? (?:is|was) "
    r"(?:running )?out of) (?:all (?:of )?)?(?:(?:the|your) )?"
    r"(?:\d{1,3}(?:\.\d)? ?[GM]i?B (?:of )?)?(?:(?:GPU|CUDA|video|graphics) memory|VRAM|"
    r"memory(?=[^\n]*?" + GPU_WORD + r"))")
# (whether the line names the GPU is looked up once, at its start, and remembered in an empty
# group: looked up again from each sentence a telling may start in, a long line of sentences
# with no GPU named would cost its length once per sentence)
MEMORY_TOLD = (rf"(?i:^(?![^\n]*?{_HOST_MEMORY_WORDS})(?![^\n]*?{_OVER_NOW})"
               rf"(?:(?=[^\n]*?{_GPU_NAMED})(?P<gpu_on_line>)|){SKIP_SENTENCES}"
               rf"(?:{_BEFORE_TELLING}(?:{_GPU_MEMORY_GONE})|{_BEFORE_READING}{_READER_RAN_OUT}|"
               rf"(?(gpu_on_line){_BEFORE_TELLING}(?:{_MEMORY_GONE_GPU_NAMED})|(?!))){_NOT_ASKED})")

fixed("cuda-oom/memory-told", MEMORY_TOLD,
      ("memory", "Memory", "MEMORY", "VRAM", "vram", "OOM", "显存", "内存", "メモリ", "메모리",
       "памяти", "видеопамять", "speicher", "Speicher", "mémoire", "memoria", "memória",
       "too big for", "too large for", "too big to fit", "too large to fit"),
      # (below any other failure the text shows or tells: a telling of a GPU's memory running
      # out is the weakest evidence, often a remark on another run or another card)
      "The GPU ran out of memory (told in the writer's words)", tier=3.5, reads_titles=False,
      yields_to_titles=True,
      # (a telling has no numbers: its group that remembers the GPU named is none)
      extract=lambda _match, _line: {},
      example="My RTX 3060 runs out of VRAM at 1024x1024 and the program crashes.",
      explanation="The writer says the GPU's memory ran out; no message of the program's was "
      "kept, so its sizes are unknown. The job (and what else holds the GPU) needed more memory "
      "than the card has free.",
      remedy=f"{SCAN_OTHERS}\nThen reduce memory use:\n{REDUCE_MEMORY}")


# An out-of-memory the writer met, told without saying whose memory ("I always encounter an
# out-of-memory issue", "so i have the OutOfMemory problem", "OOM happened when I trained a
# bigger model", "I keep running out of memory"): the GPU's where the text is about a GPU (its
# first lines name one, and not the host's memory: Head.gpu_subject), on a line that does not
# name the host's memory either. Told as a fact in its own sentence only, as memory-told is.
_BARE_OOM_WORDS = r"(?:out[- ]of[- ]memory|OutOfMemory(?:Error)?|OOM)"
_OOM_MET = (
    r"\b(?:[Ii]|[Ww]e)(?:'ve|'m| have| had| am| was| were| keep| always| still| also| now| "
    r"constantly| sometimes| often| just){0,2} (?:get|got|getting|gets|hit|hitting|"
    r"encounter(?:ed|ing)?|fac(?:e|ed|ing)|ran into|run into|running into|have|had|having|see|"
    r"saw|seeing|receiv(?:e|ed|ing)|met|meet)(?: (?:an?|the|this|that|same|constant|frequent|"
    rf"an? constant))? (?:CUDA |GPU )?{_BARE_OOM_WORDS}(?:[- ](?:errors?|issues?|problems?|"
    r"exceptions?|crash(?:es)?))?\b(?![- ]?kill)|"
    rf"\b{_BARE_OOM_WORDS}(?: (?:errors?|issues?|problems?))? (?:happened|happens|occurred|occurs|"
    r"appeared|appears|came|comes)\b|"
    r"\b(?:[Ii]|[Ww]e)(?:'m| am| was| were| keep| kept| always| still){0,2} "
    r"(?:ran|run|running|runs) out of memory\b")
fixed("cuda-oom/oom-told-unnamed",
      # (nor "the host OOM came back": the host named without its memory's words)
      rf"(?i:^(?![^\n]*?{_HOST_MEMORY_WORDS})(?![^\n]*?\bhost\b)(?![^\n]*?{_OVER_NOW})"
      rf"{SKIP_SENTENCES}{_BEFORE_TELLING}(?-i:{_OOM_MET}){_NOT_ASKED})",
      ("OOM", "ut of memory", "ut-of-memory", "ut of Memory", "utOfMemory", "ut Of Memory"),
      "The GPU ran out of memory (told in the writer's words, on a GPU the text names)",
      tier=3.5, reads_titles=False, yields_to_titles=True, needs_gpu_subject=True,
      example="I followed the inference instructions, but I always encounter an out-of-memory "
      "issue.",
      explanation="The writer says the run ran out of memory without saying whose; the text is "
      "about a GPU and names no host memory, so it was the GPU's. No message of the program's "
      "was kept, so its sizes are unknown.",
      remedy=f"{SCAN_OTHERS}\nThen reduce memory use:\n{REDUCE_MEMORY}")


# A run told fixed by using less of the GPU's memory: a smaller batch, an application's low-VRAM
# mode, a tiled VAE decode, gradient checkpointing ("--medvram did the trick", "lowering the
# batch size to 4 fixed it"): it had run out of the GPU's memory.
GPU_MEMORY_CURES = (r"--(?:low|med)vram\b|"
                    r"(?i:\b(?:lower\w*|reduc\w*|decreas\w*|smaller|halv\w*)\b[^\n]{0,15}?"
                    r"\bbatch[ _-]?sizes?\b|\btiled (?:VAE|decod\w*)\b|"
                    r"\bgradient[ _]checkpointing\b)")
fixed("cuda-oom/cure-told", cure_told(GPU_MEMORY_CURES), CURED_NEEDLES,
      "A run was fixed by using less GPU memory (told in the writer's words)", tier=3.5,
      reads_titles=False, yields_to_titles=True,
      example="It crashed at the VAE decode on the 6 GB card; --medvram did the trick.",
      explanation="The writer says the run went through once it used less of the GPU's memory "
      "(a smaller batch, a low-VRAM mode, a tiled decode, gradient checkpointing): it had run "
      "out of the GPU's memory, and no message of it was kept, so its sizes are unknown.",
      remedy=f"{SCAN_OTHERS}\nThen keep the memory down:\n{REDUCE_MEMORY}")

