"""What kind of text a source is, read from its first lines and the lines around its matches.

A log, or a bug report that pastes one, reports failures. Other texts only quote them:

- a *pull request*, patch or diff: diff markers (``diff --git``, a ``@@ -1,2 +1,3 @@`` hunk, a
  fenced ``diff`` block), a commit title (``fix(nvml): ...``), review trailers (``Test Plan:``,
  ``Signed-off-by:``), a title saying what the change does ("Adds a flag that ..."), a pull
  request template's heading ("Test in your PR ..."), a review's words ("LGTM", "Merging
  now"), or, in its first lines, a sentence saying what the change does ("This PR adds ...",
  "This patch handles ...");
- a *request about a message's wording*: its title asks for a better message ("Proper error
  message when ...", "the out-of-memory message is hard to understand"), and nothing in the
  text says the writer met the failure (no first-person report, no pasted block);
- an *explainer* (documentation, a blog post, an answer): phrases that explain an error rather
  than report it (:mod:`.mentions`); one kind of phrase is enough when nothing in the text says
  the writer met the failure themselves ("I get", "my training", a bug template's headings).

A thread whose messages are missing can still name its failure in its *title* (the first line:
"GPU has fallen off the bus", "NCCL allreduce is timing out"); that counts as the failure when
the rest of the text says it happened to the writer (the same first-person words, a bug
template, a pasted block, a message of the run read in the text, even a warning) and nothing
else in the text was found. A title is typed by hand: its few key words are read through one
typing slip ("initalize", "singal"). A thread copied with a line saying where it is from
("owner/repo · issue #123 · closed") and its labels has its title on the line after them; a
pull request's title there names the change, so it names no failure; an issue's source line
says the thread reports a problem: its title's failure counts without more words of the
writer's, and one explaining phrase in a reply ("that error usually means") does not make it an
explainer. Without that line, a thread's own shape says the same: its posts each under a line
naming the writer and date ("alice · description · 2025-01-05") make it an issue, unless its
title says what a change does or a review is posted, which make it a pull request.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpu_audit.explain.signatures.alloc_conf import (
    ASYNC_FAILS_TOLD,
    EXPANDABLE_FAILS_TOLD,
    OPTION_IGNORED_TOLD,
)
from gpu_audit.explain.signatures.cuda_oom import GPU_WORD, HOST_MEMORY_NAMED, MEMORY_TOLD
from gpu_audit.explain.signatures.gpu_hardware import (
    CARD_DEAD_TOLD,
    OVERHEAT_TOLD,
    POWER_LOSS_TOLD,
)
from gpu_audit.explain.signatures.guards import unless_marks
from gpu_audit.explain.signatures.nccl import DISTRIBUTED_WORDS, P2P_UNSUPPORTED_TOLD
from gpu_audit.explain.signatures.nvml_unavailable import DRIVER_NOT_LOADING_TITLE, SMI_FAILS_TITLE

HEAD_BYTES = 4096  # the first bytes of a source kept to read its title and its kind
HEAD_LINES = 30
_SUBJECT_LINES = 3  # the first non-blank lines that say what a text is about

_CHANGE_VERBS = (
    r"adds|fixes|handles|implements|introduces|improves|updates|removes|refactors|makes|moves|"
    r"allows|enables|supports|documents|changes|replaces|bumps|ensures|prevents|avoids|catches|"
    r"skips|extends|reworks|teaches|exposes|cleans|renames|detects|parses|reports|switches|"
    r"deprecates|raises|wraps|splits|reduces|lets|uses")
# Markers of a pull request, a patch or a commit anywhere in its first lines.
_PULL_REQUEST_HEAD = re.compile(
    r"^(?:diff --git |@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@|(?:Test Plan|Differential Revision|"
    r"Pull Request resolved|Reviewed[- ]By|Signed-off-by|Co-authored-by):)|"
    rf"\b[Tt]his (?:PR|pull request|patch|change(?:set)?|commit|MR|merge request|diff) "
    rf"(?:also |now |simply |just |only )?(?:{_CHANGE_VERBS})\b|"
    # GitHub's closing keywords on a line of their own: a pull request's body ("Fixes #1877")
    r"^(?:[Ff]ix(?:es)?|[Cc]loses?|[Rr]esolves?) #\d+\s*$|"
    # a reviewer's or a maintainer's words on a change: "LGTM", "Merging now."
    r"^LGTM\b|(?:^|[.!] )Merging (?:now|this|it)\b",
    re.MULTILINE)
# A pull request template's headings below the title: "#### Test in your PR that fails without
# your code" (not the title itself: "[DO NOT MERGE] this PR is used to debug X" names a thread
# whose replies paste the failing run)
_TEMPLATE_HEADING = re.compile(r"^#{1,6}[^\n]*\b(?:your|this) (?:PR|pull request|patch|change)\b",
                               re.MULTILINE)
# A conventional commit title ("fix(nvidia/xid): ...", "docs: ...") as a source's first line,
# or one that says what the change does, in the third person ("Adds a flag that ...").
_COMMIT_TITLE = re.compile(
    # (after a ticket's keys, "[PROJ-123] [PROJ-124] fix(xid): ...")
    r"^(?:#+\s*)?(?:\[[\w.-]{1,30}\]\s*){0,4}"
    # (not llama.cpp's banner, a log's first line: "build: 4410 (a1b2c3d4) with cc ... for ...")
    r"(?!build: \d+ \([0-9a-f]{4,40}\) with )"
    r"(?:(?:feat|fix|docs?|chore|refactor|perf|test|tests|ci|build|style|revert)"
    r"(?:\([^)\n]{1,60}\))?!?: \S|(?i:(?:adds|implements|introduces|refactors|bumps|renames|"
    r"deprecates|exposes) \S|fixes (?:#\d|an? |the ))|"
    # a bump: "Update the NVIDIA driver to 580.82.07", "Bump torch to 2.4" (a title that
    # ends at the version; "Update to 535 breaks NCCL" is an issue)
    r"(?i:(?:update|upgrade|bump|pin)s? (?!to\b)[^\n]{1,60}?\bto\b[^\n]{0,30}?"
    r"\bv?\d+(?:\.\d+)+\s*$))")
# A title about how a message is worded (a feature request: "Proper error message when ...",
# "the out-of-memory message is hard to understand"): the text quotes the message it discusses.
_ABOUT_A_MESSAGE = re.compile(
    r"\bmessages?\b[^\n]{0,30}?\b(?:hard to (?:understand|read)|confusing|misleading|cryptic|"
    r"unclear|unhelpful|not (?:helpful|clear|informative)|too (?:vague|terse)|could be (?:better|"
    r"clearer|improved)|should (?:say|mention|include|show|name|print))\b|"
    r"^(?:\W*(?:\[?(?:feature(?: request)?|enhancement|RFE)\]?\W+))?(?:an? )?(?:proper|better|"
    r"clearer|improved?|more (?:helpful|informative|useful|specific|descriptive)|friendlier|"
    r"nicer|meaningful|descriptive|(?:improve|clarify|reword|rephrase) the)\b[^\n]{0,40}?"
    r"\b(?:error |warning )?messages?\b|"
    # (a change to a message, titled as a commit is: "Refine err msg of out of gpu memory",
    # "Improve the error message for NCCL timeouts", "Polish OOM error info")
    r"^(?:\W*\[[\w. -]{1,30}\]\s*)?(?:refine|improve|polish|enhance|clarify|reword|rephrase|"
    r"beautify|simplify|unify)[sd]?\b[^\n]{0,30}?\b(?:err(?:or)?|warning|exception)s? ?"
    r"(?:msg|message|info|hint|text|reporting)s?\b",
    re.IGNORECASE)
# Where a diff starts, in the lines above a match: its lines quote code, they did not run.
DIFF_START = re.compile(r"^(?:`{3,}\s*(?:diff|patch)\s*$|diff --git |@@ -\d+(?:,\d+)? \+\d+)")
_DIFF_LINE = re.compile(r"^[+-](?![+-])")

# The writer met the failure: first-person reports, a bug template's headings, a pasted block.
OWN_RUN = re.compile(
    r"\bI(?:'m| am|'ve| have| had| was| keep| always| still| also| just| then)?"
    r"(?: (?:been|now|often|sometimes|randomly|constantly|consistently))? (?:get|gets|got|"
    r"getting|see|saw|seeing|hit|hitting|encounter(?:ed|ing)?|ran|run|running|tried|trying|"
    r"receive[ds]?|receiving|fac(?:e|ed|ing)|train(?:ed|ing)?|launch(?:ed|ing)?|start(?:ed|ing)?|"
    r"install(?:ed|ing)?|use[ds]?|using|noticed?|met|meet)\b|"
    r"\bwe(?:'re| are| have| keep)? (?:got|getting|hit|saw|are seeing|encountered|ran into|"
    r"keep getting|noticed)\b|"
    r"\b(?:my|our) (?:job|run|training|model|code|script|gpus?|container|pod|process|program|"
    r"machine|server|node|cluster|system|setup|dataset|laptop|workstation|card)s?\b|"
    # (numbered or set in bold or italics, as templates write them: "### 2. Steps to reproduce",
    # "**Describe the bug**")
    r"^#*\s*(?:\d{1,2}[.)]\s*)?[*_]{0,2}(?:describe the bug|to reproduce|steps to reproduce|"
    r"expected behaviou?r|environment|system info|bug incidence|reproduction|what happened|"
    r"(?:issue|bug|problem)(?: or feature)? description)\b|"
    r"\bany (?:ideas?|help|suggestions?|hints?)\b|\bplease help\b|\bhelp me\b|"
    r"\bam I doing (?:\w+ )?(?:anything|something) wrong\b|"
    r"\bI (?:have|had|got|get|see|saw|met|hit) the same (?:problem|issue|error)\b|"
    r"\bI(?:'m| am) having (?:the same|a similar) (?:problem|issue|error)\b|"
    # a link to the CI job that failed, given as the case at hand ("... even when the GPU has
    # crashed, for example https://github.com/o/r/actions/runs/123/job/456")
    r"\bhttps?://github\.com/[\w.-]{1,60}/[\w.-]{1,100}/actions/runs/\d+|"
    # a failure that happened, in the past, introducing the paste below it: "... prompt
    # encoding aborted the server with:", "the second epoch crashed with the following error:"
    r"\b(?:crashed|aborted|failed|died|terminated|errored out)(?: (?:the|our|my) (?:server|"
    r"process|job|run|training|program|worker|container|pod))? with(?: the following"
    r"(?: errors?)?| this(?: errors?)?)?:\s*$|"
    r"\bthe (?:training|job|run|script|process|program|server|container|pod) (?:stops|stopped|"
    r"crash(?:es|ed)|fails|failed|dies|died|hangs|hung|was killed|gets killed|got killed)\b|"
    r"^(?:so |but |pls |please )?how (?:to|do i|can i|could i|should i) (?:fix|solve|resolve|"
    r"avoid|handle|debug) (?:this|it|that)\b[^\n]{0,20}$|"
    # a traceback frame in a file at an absolute path: a program that ran on someone's machine
    r"^\s*File \"(?:/|[A-Za-z]:\\)[^\"\n]+\", line \d+|"
    # ... or as IPython prints it: "/home/u/env/.../training.py in _fit_loop(self, ...)", with
    # its arrow at the line that ran ("-> 1235     outs = f(ins_batch)")
    r"^(?:/|[A-Za-z]:\\)[^\s\n]+\.py in [\w<>]+\(|^-{1,3}> ?\d+ {2,}\S|"
    # ... or a glog line, with its process id and source position ("I1019 09:20:42.064462 82681
    # Util.cpp:166] ..."): a program's own log
    r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.-]+\.(?:cc|cpp|cu|h|py):\d+\]|"
    # (a report's "Environment:" label, at its line's start; not a guide's "set this in the
    # environment:")
    r"^\W{0,6}(?:environment|环境)\W{0,4}[:：]|我(?:的|在|用|运行|训练|遇到|跑)|私の|実行すると|"
    # the same in Spanish, Portuguese and French: "me sale este error", "estoy entrenando",
    # "mi modelo", "estou treinando", "meu código", "j'ai cette erreur", "mon modèle"
    r"\bme (?:sale|salen|sali[oó]|aparece|aparecen|apareci[oó]|da|dio) (?:el|este|ese|un|una|"
    r"la|lo|esto)\b|\b(?:tengo|tuve|obtengo|recibo) (?:este|el|ese|un|una|la) (?:error|"
    r"problema|mensaje)\b|\b(?:estoy|estaba) (?:entrenando|ejecutando|corriendo|usando|"
    r"intentando)\b|\bcuando (?:ejecuto|corro|entreno|lanzo|intento)\b|\bmi (?:modelo|"
    r"entrenamiento|gpu|c[oó]digo|script|servidor|m[aá]quina|tarjeta|equipo|pc)\b|"
    r"\b(?:estou|estava) (?:treinando|executando|rodando|usando|tentando)\b|\b(?:tenho|"
    r"recebo|recebi|tive) (?:este|esse|o|um) (?:erro|problema)\b|\bmeu (?:modelo|"
    r"treinamento|treino|c[oó]digo|script|servidor|computador)\b|"
    r"\bj'ai (?:cette|une|l') ?erreur\b|\bquand je (?:lance|ex[ée]cute|entra[iî]ne)\b|"
    r"\bmon (?:mod[eè]le|code|script|entra[iî]nement|serveur)\b|"
    r"제가|저의|"
    # "... keeps triggering this error", "the error shows up" ("뜨는데", "뜹니다"): the present
    # of a problem being reported, not a condition ("如果触发这个错误", "이 오류가 뜨면") nor a
    # post's past anecdote ("에러가 떴습니다", "遇到以下问题")
    r"(?<!如果)(?<!若)(?<!可能)(?<![你您会])(?:触发|报)了?(?:这个|这种|该)(?:错误|报错|问题)|"
    r"(?:뜨는데|뜹니다|떠요|뜨네요|뜨고 있)|"
    # a run that went wrong, or a fix that did not help, told in a clause of its own ("GPU训练
    # 出错", "调小到1后仍然不能解决", "重装驱动还是不行"), not in a condition a guide sets ("如果
    # 还是不行，...", "还是报错的话")
    r"(?:^|[。！？!?；;])(?:(?!如果|假如|若|要是|万一|可能|容易|经常|一旦)[^。！？!?；;\n]){0,30}?"
    r"(?:(?:仍然|依然|还是|仍|一直)(?:不能解决|无法解决|解决不了|不行|没用|没有用|报错|出错|失败)|"
    r"(?:训练|运行|推理|微调|编译|安装|加载|启动|执行)\w{0,4}?(?:时|的时候|过程中)?"
    r"(?:出错了?|失败了?|报错了))"
    r"(?!的话)(?=[\s，,。.！!；;]|$)|"
    # a label over the writer's paste in a report ("报错信息：", "**错误信息：**" as a bug
    # template sets it in bold); a guide's plain "错误信息" heading only introduces its example
    r"^\W{0,4}(?:报错(?:信息|日志|内容|截图)?|\*\*(?:错误|报错)(?:信息|日志|内容)\s*[:：]?\*\*)"
    r"\s*[:：]?\W{0,4}$|"
    # the writer at a loss, or the writer's setup said to be current ("not sure what to do",
    # "I have the latest nvidia driver"), and a reply that met the same ("Getting same error")
    r"(?<!you're )(?<!you are )\bnot sure what (?:to do|else to (?:do|try))\b|"
    r"\bI (?:do not|don'?t) know what (?:else )?to do\b|"
    r"\bI(?:'ve| have) (?:the )?(?:latest|newest) (?:[\w.-]+ ){0,2}(?:drivers?|versions?)\b|"
    r"^(?:also |still )?(?:getting|got|having|seeing|facing) (?:the |a )?same (?:error|issue|"
    r"problem)\b",
    re.IGNORECASE | re.MULTILINE)

# A reply reading the writer's own paste ("The error log you've provided indicates a CUDA out of
# memory error"): the run it then explains, however many explaining phrases it uses, is the
# writer's (Head.reads_paste).
READS_PASTE = re.compile(
    r"\b(?:the |your )?(?:error |crash )?(?:log|logs|traceback|output|error message|error)"
    r" (?:that )?you(?:'ve| have)? (?:provided|posted|shared|attached|pasted|sent)\b",
    re.IGNORECASE)

# Words beside "OOM" in a title that make it the GPU's memory, not the host's.
# (and a model's fine-tuning: "OOM while running LoRA", "OOM for 7B ... 8xA100(40G)")
# (and the caching allocator's own setting, "max_split_size_mb"; Unsloth, a GPU-only fine-tuning
# library; a fine-tuning, a graphics card or its memory in Chinese: "微调", "显卡", "显存")
# (and the device's: "initialization causes out of memory error on device")
_GPU_MEMORY = (r"(?:CUDA|GPU|VRAM|reserved|(?:un)?allocated|on (?:the )?device|device memory|"
               r"RTX|GTX|Tesla|Quadro|A-?\d{2,4}|H\d{3}|"
               r"V100|T4|L4|L40S?|\d{1,2} ?[x*×] ?[AHLV]-?\d{2,4}|Q?LoRA|fine-?tun\w*|"
               r"\d{1,3}(?:\.\d)?B|max_split_size_mb|Unsloth|微调|显卡|显存|顯卡|顯存)")
# A GPU's memory running short, in Chinese: "显存不足", "显存溢出", "爆显存" ("video memory": the
# GPU's own word, never the host's "内存")
_GPU_MEMORY_SHORT_ZH = (r"(?:显存|顯存)(?:不足|不够|不夠|溢出|耗尽|耗盡|用尽|用完|"
                        r"爆(?:了|掉)?|占满|佔滿)|爆(?:了)?(?:显存|顯存)")
# Word edges that hold beside Chinese, Japanese or Korean text ("使用Unsloth反而OOM了"), where
# \b does not: a CJK character is a word character too.
_EDGE_BEFORE, _EDGE_AFTER = r"(?<![A-Za-z0-9_])", r"(?![A-Za-z0-9_])"
# ("OOM-killer" is the host's; "out-of-memory" as a compound in a title)
_OOM_WORDS = r"(?:out[- ]of[- ]memory|OOM(?![- ]?kill))"
_TITLE_XID = r"\bXid\W{0,3}(?P<xid>\d{1,3})\b"
_TITLE_ARCH = (r"\b(?P<capability>sm_\d{2,3}a?)\)? (?:is |are )?(?:not (?:yet )?supported|"
               r"unsupported)\b|\b(?:no|missing|lacks?|without) (?:support|kernels?) for "
               r"(?P<capability_>sm_\d{2,3}a?)\b")
# A distributed run's collectives and frameworks, and its hang, in a title (a typing slip in the
# collective's name is read too: "Allredue").
_DISTRIBUTED = (rf"\b(?:all[-_ ]?red\w*|all[-_ ]?gather|reduce[-_ ]scatter|{DISTRIBUTED_WORDS})\b")
_HANGS = r"\b(?:hang\w*|hung|stuck|freez\w*|froze|deadlock\w*)\b"
# A failure named in a thread's title, by class: the signature whose advice it gets.
_TITLES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (sig_id, re.compile(pattern, re.IGNORECASE)) for sig_id, pattern in (
        # the caching allocator's NVML assert, in the writer's words ("CUDACachingAllocator.cpp:995
        # NVML internal assert fires instead of an OOM")
        ("nvml-assert-oom/caching-allocator", r"\bCUDACachingAllocator\b[^\n]{0,80}?\bNVML\b"
                                              r"[^\n]{0,30}?\bassert|\bNVML\b[^\n]{0,30}?\bassert"
                                              r"[^\n]{0,80}?\bCUDACachingAllocator\b|"
                                              # (the assert's own words, cut before its file:
                                              # "NVML_SUCCESS == r INTERNAL ASSERT FAILED")
                                              r"\bNVML_SUCCESS == \S{1,60} INTERNAL ASSERT "
                                              r"FAILED\b"),
        ("gpu-hardware/fallen-off-bus", r"\b(?:fall(?:s|en|ing)?|fell) off (?:of )?the bus\b|"
                                        r"\bGPU is lost\b|\blost from the bus\b|\bXid\W{0,3}79\b|"
                                        # a node or a server that lost a GPU ("has lost a GPU",
                                        # "Loses GPU"), not its memory or its support
                                        r"\blos(?:e|es|ing|t) (?:a |one |the |\d )?GPU\b"
                                        r"(?!s? (?:memory|support|acceleration|access|util))"),
        # the GPU's firmware (GSP) that crashed or timed out, or a GPU that needed a reset
        # ("NVLink GSP Crash", "GSP heartbeat timeout", "display loss and GSP/full-chip reset")
        ("gpu-hardware/gsp-timeout", r"\bGSP\b[^\n]{0,30}?\b(?:crash\w*|resets?|timeouts?|"
                                     r"timed out|heartbeat|halt\w*|hangs?|hung)\b|"
                                     r"\bfull[- ]chip reset\b|\b(?:GPU|card) (?:needs|needed|"
                                     r"requires|required|requiring) an? (?:full |hard )?"
                                     r"reset\b"),
        # the writer's machine that powers off or restarts under load
        ("gpu-hardware/power-loss-told", POWER_LOSS_TOLD),
        # the writer's card (or its board) dead, or overheating, under load
        ("gpu-hardware/card-dead-told", CARD_DEAD_TOLD),
        ("gpu-hardware/overheat-told", OVERHEAT_TOLD),
        ("gpu-hardware/nvlink-uncorrectable", r"\buncorrectable NVLink\b|\bNVLink\b[^\n]{0,30}?"
                                              r"\buncorrectable\b"),
        # any other Xid the title names by its number: the driver's record of a GPU fault
        ("gpu-hardware/xid", _TITLE_XID),
        ("gpu-hardware/uncorrectable-ecc", r"\buncorrectable ECC\b|\bECC errors?\b[^\n]{0,30}?"
                                           r"\buncorrectable\b|\bdouble[- ]bit ECC\b"),
        # a kernel's assertion, the title cut before its end by the tracker ("IndexKernel.cu:113:
        # operator(): block: [4,0,0], thread: [3,0,0] Assertion `-sizes[i] <= index && ind")
        ("device-assert/kernel-assertion", r"\.cuh?:\d+:[^\n]{0,120}?\bAssertion `"),
        # a kernel's assertion named in words: "device-side assertion error during training",
        # "Indexing Assertion Errors" (PyTorch's indexing kernels check their indices on the GPU)
        ("device-assert/triggered", r"\bdevice[- ]side assert(?:ion)?s?\b|"
                                    r"\bindex(?:ing)? assert(?:ion)?s?\b|"
                                    # (the condition of one of PyTorch's kernel assertions,
                                    # named without "Assertion `": "Assertion error with
                                    # class labels (t >= 0 && t < n_classes)")
                                    r"\bt >= 0 && t < n_classes\b|"
                                    r"\bsrcIndex < srcSelectDimSize\b|"
                                    r"\bidx_dim >= 0 && idx_dim < index_size\b|"
                                    r"\binput_val >= zero && input_val <= one\b|"
                                    # (and a GPU kernel's assertion: "kernel assertion with
                                    # torch 1.10", "CUDA kernel assert in embedding")
                                    r"(?<!linux )(?<!os )\bkernel assert(?:ion)?s?\b|"
                                    # ("CUDA Index error on certain models": the same
                                    # check, named by what it checks)
                                    r"\bCUDA index(?:ing)? errors?\b"),
        ("illegal-memory-access/illegal-address", r"\billegal (?:memory )?(?:access|address)"
                                                  r"(?:es)?\b|"
                                                  r"\billegal memory errors?\b|"
                                                  # ("accessing memory illegally")
                                                  r"\baccess(?:es|ed|ing)? memory illegally\b|"
                                                  # (in Chinese: "kernel 非法内存访问")
                                                  r"非法(?:内存|显存)?访(?:问|存)|(?:内存|显存)"
                                                  r"非法访问"),
        # CUDA's status 716 in a title's words ("... - CUDA Misaligned Address Error")
        ("illegal-memory-access/misaligned-address", r"\bmisaligned (?:memory )?address(?:es)?\b"),
        ("nccl/watchdog-timeout", r"(?:\b|ProcessGroup)NCCL\b[^\n]{0,80}?\b(?:tim(?:ed|es|ing) ?"
                                  r"out|timeouts?|hangs?|hanging|stuck)\b|\bWorkNCCL\([^\n]*\bTimeout\b|"
                                  # (torch's "Watchdog caught collective operation timeout",
                                  # retold: "training fails under collective operation timeout")
                                  r"\bcollective operation tim(?:e|ed) ?out\b|"
                                  # (the hang first: "Hang with nccl all_reduce_perf on 8
                                  # cards", "stuck in NCCL init")
                                  r"\b(?:hangs?|hanging|stuck)\b (?:with|in|on|during|at) "
                                  r"(?:the )?(?:ProcessGroup)?NCCL\b|"
                                  # ("NCCL超时", "nccl 超时时间": a timeout, in Chinese)
                                  r"\bNCCL(?![A-Za-z])[^\n]{0,40}?(?:超时|卡住|卡死)|"
                                  # a distributed run that hangs and then times out: its
                                  # collective's timeout, told without naming NCCL
                                  r"(?:分布式|多机|多卡|\bmulti-?(?:node|GPU)\b|\bdistributed\b|"
                                  r"\bDDP\b)[^\n]{0,40}?(?:卡住|卡死|\bhangs?\b|\bhanging\b|"
                                  r"\bstuck\b)[^\n]{0,40}?(?:超时|\btim(?:es|ed|ing) ?out\b|"
                                  r"\btimeouts?\b)"),
        # Slurm's (or a cgroup's) out-of-memory: the host's, whatever GPU the title names
        ("host-oom/slurm-oom-kill", rf"\b(?:slurm|cgroup)\b[^\n]{{0,20}}?\b{_OOM_WORDS}\b"),
        # (the caching allocator's own words say whose memory: "reserved", "allocated")
        # (right after a Chinese word, with no space: "出现Cuda Error: out of memory")
        ("cuda-oom/caching-allocator", rf"{_EDGE_BEFORE}{_GPU_MEMORY}{_EDGE_AFTER}[^\n]{{0,60}}?"
                                       rf"{_EDGE_BEFORE}{_OOM_WORDS}{_EDGE_AFTER}|"
                                       rf"{_EDGE_BEFORE}{_OOM_WORDS}{_EDGE_AFTER}[^\n]{{0,60}}?"
                                       rf"{_EDGE_BEFORE}{_GPU_MEMORY}{_EDGE_AFTER}|"
                                       r"\bOutOfMemoryError\b|\bCUDA_ERROR_OUT_OF_MEMORY\b|"
                                       # (CUDA.jl's exception: "OutOfGPUMemoryError With
                                       # Available Memory")
                                       r"\bOutOfGPUMemoryError\b|"
                                       # (its memory errors: "CUDA Memory Errors at first
                                       # epoch")
                                       r"\b(?:CUDA|GPU) memory errors?\b|"
                                       + _GPU_MEMORY_SHORT_ZH),
        # (also the kernel's and cgroups' own noun, "oom-kill while using two MPI ranks per node";
        # not docker's --oom-kill-disable or the kernel's oom_score_adj)
        ("host-oom/kernel-oom-killer", r"\boom[- ]?kill(?:er|ed|s)?\b"
                                       r"(?![-_](?:disable|score|adj))"),
        ("host-oom/shell-killed", r"^\W*killed\W*(?:error\W*)?$"),
        # SIGKILL's number in a title, as people write it: "sigkill 9", "segkill 9", "killing
        # process -9 error", "killed with signal 9"
        # (and the shell's status for it: "Error code 137 when loading the model"; not a
        # question of what it means)
        ("host-oom/sigkill", r"\bs[ie]g[- ]?kill[- ]?\(?-?9\b|\bsignal[- ]9\b|"
                             r"\b(?:error|exit|return) ?(?:code|status):? ?137\b"
                             r"(?![^\n?]{0,30}\bmean)|"
                             r"\bkill(?:ed|ing|s)?[- ](?:the[- ])?(?:sub)?process(?:es)?"
                             r"[- ]\(?-?9\b"),
        # (a segmentation fault is the dataset's own crash, not memory)
        ("host-oom/dataloader-killed", r"\bDataLoader (?:worker|process)\b(?![^\n]*\b(?:"
                                       r"segmentation fault|SIGSEGV)\b)[^\n]{0,60}?\b(?:killed|"
                                       r"exited unexpectedly)\b"),
        ("host-oom/shared-memory", r"\bBus error\b[^\n]{0,60}?\b(?:DataLoader|docker|container|"
                                   r"shm|shared memory|workers?)\b|\b(?:DataLoader|docker|"
                                   r"container|workers?)\b[^\n]{0,60}?\bBus error\b|"
                                   r"\b(?:insufficient|out of) shared memory\b"),
        # the job itself killed, with no word of why: SIGKILL, most often for memory
        ("host-oom/shell-killed", r"\b(?:training|job|process|script|run|program|python|"
                                  r"container|pod)s?\b[^\n]{0,20}?\b(?:(?:gets?|got|was|is|were|"
                                  r"being) )?killed\b|\bkilled (?:without|with no) (?:any )?"
                                  r"(?:error|message|reason|traceback)\b|"
                                  # (the kill as the title's last word in brackets: "stereo
                                  # fusion bug (killed)")
                                  r"\((?:(?:gets?|got|was|is|being) )?killed\)\W*$"),
        # a tool's own words: "failed to initialize NVML", "Impossible to initialize nvidia nvml",
        # "unable to initialise NVML", "NVML: Driver/library version mismatch"
        ("nvml-unavailable/init-failed", r"\b(?:fail(?:ed|s|ure)?|unable|impossible|can ?not|"
                                         r"can't|could ?n[o']t|error)\b[^\n]{0,20}?\binitiali[sz]e"
                                         r"\b[^\n]{0,20}?\bNVML\b|\bNVML\b[^\n]{0,40}?"
                                         r"\b(?:not found|LibraryNotFound|driver/library version "
                                         r"mismatch)\b|"
                                         # (NVML's reason, shortened: "GPU access blocked by
                                         # the operating system", as "GPU access blocked in WSL")
                                         r"\bGPU access (?:is |was )?blocked\b"),
        # the driver that does not load ("NVIDIA driver don't load on startup", "Nvidia driver
        # not loading"), and nvidia-smi's words for it without its name
        ("nvml-unavailable/kernel-module", DRIVER_NOT_LOADING_TITLE),
        # nvidia-smi's "No devices were found", retyped ("nvidia-smi No device were found")
        ("nvml-unavailable/no-devices-found", r"\bnvidia-smi\b[^\n]{0,60}?\bno devices? "
                                              r"(?:were|was) found\b"),
        # nvidia-smi told failing: "nvidia-smi error", "Can't get nvidia-smi to work in a pod"
        # (after the titles that name its message)
        ("nvml-unavailable/smi-fails-told", SMI_FAILS_TITLE),
        # the driver told missing: "CUDA driver not found", "NVIDIA driver not found"
        ("driver-mismatch/no-driver", r"\b(?:CUDA|NVIDIA|GPU) driver (?:was |is )?not found\b"),
        ("driver-mismatch/driver-too-old", r"\b(?:NVIDIA|CUDA|GPU) driver(?: version)? (?:is )?"
                                           r"too old\b|"
                                           # (the driver alone opening the title: "Driver too
                                           # old for CUDA 12.1")
                                           r"^\W*(?:my |the )?driver(?: version)? (?:is )?too "
                                           r"old\b|"
                                           # (CUDA's status cut after its first words: "CUDA
                                           # driver version is insufficient after upgrading")
                                           r"\bCUDA driver version is insufficient\b"),
        # a new GPU's architecture the installed build has no kernels for, told ("CUDA error on
        # an RTX 5050 (sm_120 not supported)", "SM_120 is unsupported", "no support for sm_120")
        ("driver-mismatch/arch-not-compiled", _TITLE_ARCH),
        # ... or the card named instead of its architecture ("RTX 5090 not supported by current
        # PyTorch", "GTX 760 is not supported in the latest torch build")
        ("driver-mismatch/arch-not-compiled",
         r"\b(?:RTX|GTX|Quadro|Tesla|[AHLBV]\d{2,3}|\d{4}(?: ?Ti)?)\b[^\n]{0,20}?\b(?:is |are )?"
         r"(?:not (?:yet )?supported|unsupported) (?:by|in|with|on) (?:the )?(?:current |latest "
         r"|new(?:est)? |this )?(?:PyTorch|torch|build|release|version|wheels?|binar(?:y|ies))\b"),
        # PTX newer than the driver, named by CUDA's status in words ("Cant start the cracker
        # because of unsupported PTX version", "PTX compiled with an unsupported toolchain")
        ("driver-mismatch/unsupported-ptx", r"\bunsupported PTX(?: version)?\b|"
                                            r"\bPTX\b[^\n]{0,40}?\bunsupported toolchain\b"),
        # an InfiniBand completion that exhausted its transport retries (verbs' status 12)
        ("nccl/network", r"\b(?:IBV_WC_|TRANSPORT_)?RETRY_EXC_ERR\b|"
                         r"\btransport retry count(?:er)? exceeded\b"),
        # GPU peer-to-peer access told unavailable or failing under NCCL ("NCCL P2P issue
        # using two RTX 5090", "Training Failure due to NCCL P2P Access Not Supported")
        ("nccl/p2p-unsupported", P2P_UNSUPPORTED_TOLD),
        # (after the shapes above: an NCCL error is most often an echo of one of them)
        # (also NCCL's "unhandled cuda error" retold, "Unhandled CUDA error in
        # ProcessGroupNCCL.cpp": the words are NCCL's result, and torch's class names NCCL)
        ("nccl/error", r"(?:\b|ProcessGroup)NCCL\b[^\n]{0,40}?\b(?:error|failure|failed|"
                       r"crash(?:es|ed)?)\b|\bunhandled (?:cuda|system) error\b"),
        # vLLM's check that expandable segments are off before it pools memory (its sleep mode),
        # quoted as its assert statement or its message
        ("alloc-conf/mempool-expandable", r"\bassert\s+[\"'`]?expandable_segments:True[\"'`]?\s+"
                                          r"not in\b|\bExpandable segments are not compatible "
                                          r"with memory pool\b"),
        # a program that fails with expandable segments on, told
        ("alloc-conf/expandable-told", EXPANDABLE_FAILS_TOLD),
        # an allocator option told ignored ("`roundup_power2_divisions` ignores the value of 1")
        ("alloc-conf/option-ignored-told", OPTION_IGNORED_TOLD),
        ("alloc-conf/backend", r"\bcudaMallocAsync\b[^\n]{0,80}?\b(?:bug|error|fail\w*|crash\w*|"
                               r"broken|not work\w*)\b|\b(?:bug|error|fail\w*|crash\w*)\b"
                               r"[^\n]{0,80}?\bcudaMallocAsync\b"),
        # ... or by the option applications turn it on with: "with --cuda-malloc parameter
        # not works reactor" (not their option to turn it off)
        ("alloc-conf/async-fails-told", ASYNC_FAILS_TOLD),
        # cuDNN's failure named in general words ("cuDNN error on RTX 4090 with conv3d")
        ("cudnn-failure/status", r"\bcuDNN (?:status )?(?:error|failure|exception)s?\b"),
        # no cuDNN convolution algorithm could run (PyTorch's words, XLA's autotuner's)
        ("cudnn-failure/no-engine", r"\bUnable to find a valid cuDNN algorithm\b|"
                                    r"\bFailed to determine best cudnn convolution algorithm\b"),
        # TensorFlow's status for its out-of-memory, without its "OOM when allocating"
        # (also its exception's name: "ResourceExhaustedError: OOM")
        ("cuda-oom/tensorflow", r"\bResource ?exhausted(?:Error)?\b"),
        # the job killed, in Chinese ("进程被杀死", "加载时被kill"; not "如果 ...")
        ("host-oom/shell-killed", r"(?<!如果)(?<!若)(?:程序|进程|训练|任务|加载|模型)"
                                  r"[^\n，,。]{0,8}?(?:被\s*)?(?:kill(?:ed)?|杀死|杀掉)|"
                                  # (anything "被killed", got killed: "合并权重自动被killed")
                                  + unless_marks("如果|若|假如|万一") + r"被\s*(?:系统)?\s*"
                                  r"(?:kill(?:ed)?|杀死|杀掉)|"
                                  # (the shell's word first, then when: "Killed when saving")
                                  r"^\W*killed (?:when|while|during|after|before|at|on)\b|"
                                  # (the shell's word in brackets after the run's end: "训练
                                  # 中途总是退出（killed）", "training exits (Killed)")
                                  r"(?:退出|中断|停止|终止|结束|挂掉|挂了|\bexit(?:s|ed)?|"
                                  r"\bstop(?:s|ped)?|\bquits?|\bdie[sd]?)\s*[（(]\s*[\"'`]?"
                                  r"killed[\"'`]?\s*[)）]"),
        # a notebook's runtime out of host RAM, told ("RAM Exhaustion and Session Crash")
        ("host-oom/notebook-session-ram", r"^(?=[^\n]*\b(?:session|notebook|colab|kaggle|"
                                          r"jupyter)\b)[^\n]*?(?<!GPU )(?<!video )\bRAM "
                                          r"(?:exhaustion|exhausted|overflow|crash(?:ed|es)?)\b|"
                                          # ("Colab crashes after using all available RAM",
                                          # retold, the word misspelt)
                                          r"\bcrash(?:ed|es|ing)? after (?:using|filling|eating)"
                                          r" (?:up )?all (?:the )?(?:\w{1,12} )?RAM\b|"
                                          r"\bsession (?:keeps |kept )?crash(?:ed|es|ing)?\b"
                                          r"[^\n]{0,40}?(?<!GPU )"
                                          r"\bRAM\b|(?<!GPU )\bRAM\b[^\n]{0,40}?\bsession crash|"
                                          # (the host's RAM, then the notebook told crashing
                                          # on a title that names the notebook's service: "(Colab)
                                          # High RAM use when converting, notebook crashing")
                                          r"^(?=[^\n]*\b(?:colab|kaggle|jupyter)\b)[^\n]*?"
                                          r"(?<!GPU )(?<!video )\bRAM\b[^\n]{0,60}?\b(?:notebook|"
                                          r"session|runtime|kernel)s? (?:\w+ )?crash(?:es|ed|ing)?"
                                          r"\b"),
        # the host's RAM told run out or full ("phase 2 running out of RAM", "RAM gets full
        # after a few epochs"); not the GPU's ("out of GPU RAM")
        ("host-oom/ram-full-told", r"\b(?:run(?:s|ning)?|ran) out of (?:(?:system|host|CPU|main) "
                                   r")?RAM\b|\bout of (?:system|host|"
                                   r"CPU|main) memory\b|(?<!GPU )(?<!video )\bRAM (?:is |gets |"
                                   r"got |getting )?(?:full|exhausted)\b"),
        # a distributed run told hanging, by its collective or its framework ("Allreduce hang
        # in yolo3 train using multi machine", "deepspeed zero2 training hangon and timeout",
        # "from_pretrained hangs when using zero-3"): a rank that never joined the collective
        # (after the titles that name a failure of their own, such as an out-of-memory)
        ("nccl/hang-told", rf"{_DISTRIBUTED}[^\n]{{0,60}}?{_HANGS}|{_HANGS}[^\n]{{0,40}}?"
                           rf"{_DISTRIBUTED}"),
        # the GPU's memory told run out, in any of the words and languages explain reads in a
        # text (last: a title's other words for an out-of-memory come first)
        ("cuda-oom/memory-told", MEMORY_TOLD),
    ))
# A title that tells when the failure came ("... while training", "... after 3 epochs",
# "训练过程中 ...", "启动训练后 ...", "突然"): an event the writer met, not a topic.
_TOLD_WHEN = re.compile(
    r"\b(?:while|when|during|after) (?:training|fine-?tuning|running|inference|loading|"
    r"evaluat\w+|\d+ (?:epochs?|steps?|iterations?))\b|训练(?:过程)?中|"
    r"(?:训练|推理|加载|运行|启动)[^\n]{0,4}?(?:时|后)|突然", re.IGNORECASE)
# ... unless it names the host's memory beside the GPU's ("out of memory while loading into RAM
# on the GPU node"): whose memory is then left open
_HOST_MEMORY_WORDS = re.compile(r"\b(?:RAM|CPU memory|host memory|swap)\b|内存", re.IGNORECASE)
# An out-of-memory named without saying whose ("OOM after the fifth epoch"): the GPU's
# when the text's own messages are the GPU allocator's (even its notes that it retried).
_BARE_OOM = re.compile(r"\bout[- ]of[- ]memory\b|\bOOM\b(?![- ]?kill)", re.IGNORECASE)
# The shell's word as the title's message, with no word of why ('"Killed" message on the
# example data', "Killed error when running the demo"): a kill for memory only where the text
# below names the host's memory ("only 1gb of RAM in the VM", "a 4G memory limit", exit 137).
_KILLED_MESSAGE_TITLE = re.compile(r"^\W*killed\W*(?:message|error|output)\b", re.IGNORECASE)
_HOST_MEMORY_BELOW = re.compile(
    r"\b(?:RAM|CPU memory|host memory|system memory|swap|memory limit|--memory|mem_limit|"
    r"exit(?:ed)? (?:code )?\(?137)\b", re.IGNORECASE)
# The host's memory named in a title beside the failure it came with ("When CPU Virtual Memory
# Used=137GB, problem occurs", "CPU memory grows until the job crashes"; not the GPU's)
_HOST_MEMORY_FAILURE_TITLE = re.compile(
    r"^(?![^\n]*\b(?:GPU|VRAM|CUDA|video)\b)[^\n]*?\b(?:CPU|host|system)(?: virtual)? "
    r"(?:memory|RAM)\b[^\n]{0,60}?\b(?:problems? (?:occurs?|occurred|happens?|appears?)|"
    r"crash(?:es|ed)?|(?:gets?|got|is|was) killed|dies|died)\b", re.IGNORECASE)
# A title that asks in general what to do about a failure ("显存溢出怎么办？", "What to do when
# CUDA runs out of memory?") over a first post that answers it with advice ("... 可以通过调小
# batch size 降低显存占用", "it can be avoided by ..."): a maintainer's FAQ, not a report.
_WHAT_TO_DO_TITLE = re.compile(r"(?:怎么办|怎么处理|如何处理|咋办|"
                               r"\bwhat (?:to|should (?:I|we|one)) do\b[^\n]{0,60}?)\s*[?？]+\s*$",
                               re.IGNORECASE)
_ANSWERS_IN_GENERAL = re.compile(
    r"可以?通过|可通过|\bcan be (?:reduced|avoided|fixed|solved|lowered|prevented|worked around) "
    r"by\b|\byou can (?:reduce|lower|decrease|try|use|set)\b", re.IGNORECASE)
# "killed ... (not a RAM problem)": the writer rules host memory out.
_NOT_MEMORY = re.compile(r"\bnot (?:an? |the )?(?:RAM|memory|OOM|out of memory)\b", re.IGNORECASE)
# A feature request's or proposal's title ("FR: ...", "[Feature] ...") asks for something; the
# failure it names is the subject, not an event.
_REQUEST_TITLE = re.compile(r"^(?:\[(?:FR|feature(?: request)?|enhancement|RFE|RFC|proposal)\]|"
                            r"(?:FR|feature(?: request)?|enhancement|RFE|RFC|proposal)\s*:)",
                            re.IGNORECASE)
# A source position in a title ("CUDACachingAllocator.cpp:995", "common.cu:874") is copied
# from a message the writer's run printed: the title reports it.
_SOURCE_POSITION = re.compile(
    r"\b(?P<file>[\w.-]+\.(?:cpp|cu|cc|c|h|hpp|py))[\"']?:(?P<line>\d+)\b")
# A title that opens with a message in quotes and says what the writer was doing when it came
# ('"... watchdog got stuck" when training on two nodes'): copied from the writer's own run.
_QUOTED_WHEN = re.compile(r"^(?:\"[^\"\n]{12,200}\"|`[^`\n]{12,200}`)\s+(?:when|while|during|"
                          r"after|at)\s+\w", re.IGNORECASE)
# An issue's title that asks for a change about a failure ("Add support for Xid 154", "Detect
# GPUs that fell off the bus", "Feature: ..."): the failure is its subject, not its report.
_ASKS_FOR_CHANGE = re.compile(
    r"^\W*(?:add|adding|support|handle|detect|parse|ignore|catch|expose|implement|allow|enable|"
    r"improve|document|show|print|report|recogni[sz]e)\b|\b(?:feature|proposal|RFC|support for)\b",
    re.IGNORECASE)
# A title that says the failure is still there after the writer's change ("raised the timeout,
# still errors"): the writer's own run.
_STILL_FAILS = re.compile(r"(?:仍然|还是|依然|一直|总是|老是)报错|"
                          r"\bstill (?:fails|failing|errors? out|crash(?:es|ing)|times? out|"
                          r"timing out|hangs?)\b", re.IGNORECASE)
_QUESTION_TITLE = re.compile(r"^\s*(?:(?:how (?:to|do|can)|what is|why)\b|如何|怎么|怎样|为什么)",
                             re.IGNORECASE)
# A title that asks ahead whether a run would fail ("Does training 13B on one A100 run out of
# memory?", "Can I run the 70B model on 24 GB without OOM?"): with no run of the writer's in the
# text, no failure happened. (Not "Does anyone else get OOM ...?", "Is it normal that ...?":
# reports phrased as questions; nor "Can't ...".)
_AHEAD_TITLE = re.compile(
    r"^\s*(?:does|do|will|would|can|could|should)(?!['’]|n['’]?t\b)\b"
    r"(?![^?\n]*\b(?:anyone|anybody|someone|else|others|everyone|normal|expected|a bug)\b)"
    r"[^?\n]*\?\s*$", re.IGNORECASE)
# A title that sets a condition and gives no run of the writer's ("If training runs out of GPU
# memory, try these steps", "如果训练时显存不足，可以尝试以下方法"): a guide's advice. ("If I use
# batch 64, training OOMs" is the writer's run.)
_CONDITION_TITLE = re.compile(r"^\s*(?:(?:if|wenn|falls|если|si)\b|如果|假如|要是|もし|만약)"
                              r"(?![^\n]*(?:\b(?:I|we|my|our|me)\b|我|私|저는|제가))",
                              re.IGNORECASE)
# A title that asks what a term is, in Korean, Japanese or Chinese, after the term ("OOM-killer
# 란?", "OOM Killerとは", "device-side assert是什么"): an explainer's subject, not a report.
_DEFINITION_TITLE = re.compile(r"[A-Za-z0-9)]\s?(?:이?란\s*[?？]|とは|是什么|是什麼|是啥)")
# A log's own first line (a timestamp, a bracketed prefix, a log level) is no thread's title.
# ("[Bug]: ..." and "[Troubleshoot]: ..." are titles; "[I 12:00:01]" and "[  5.1]" are not.)
_LOG_LINE = re.compile(r"^(?:\[[IWEF]?\s*\d|\d{2,4}[-/:. ]\d|[IWEF]\d{4} )|"
                       r"\b(?:INFO|WARN(?:ING)?|DEBUG|TRACE)\b")


@dataclass
class Head:
    """What a source's first lines say about it."""

    title: str = ""
    title_line: int = 0
    pull_request: bool = False
    about_message: bool = False  # the title discusses how a message is worded
    heading: bool = False  # the first line is a heading (markdown, or set off by a blank line)
    own_run: bool = False
    # the source line calls the thread a pull request: its title names the change, whatever
    # failure it handles (its text may still paste a failing run: CI, a reviewer's test)
    change_thread: bool = False
    issue_thread: bool = False  # ... an issue: a report, where a reply's one phrase explains it
    # its labels call it a request (an enhancement, a feature) and not a bug: its title names
    # what to build ("[core] oom killer: kill task more aggressively"), not a failure met
    requested: bool = False
    # ... a web page (an article, a guide, a post): a log it shows illustrates its words unless
    # the writer says they met the failure
    web_page: bool = False
    fenced: bool = False  # a pasted block (``` or a table) below the title
    virtual_gpu: bool = False  # the first lines put the GPU behind a hypervisor (vGPU, VFIO)
    # the first lines name a GPU (a card, its memory, CUDA) and not the host's memory: an
    # out-of-memory told there without saying whose is the GPU's
    gpu_subject: bool = False
    reads_paste: bool = False  # a reply there reads the writer's paste (READS_PASTE)
    lines: list[str] = field(default_factory=list)

    def subject(self) -> list[str]:
        """The text's first lines (a title, a thread's header, a first heading): what it is
        about."""
        return [line for line in self.lines if line.strip()][:_SUBJECT_LINES]


def read_head(data: bytes, whole: bool) -> Head:
    """The title, kind and evidence of a source from its first :data:`HEAD_BYTES` bytes
    (``whole``: the source ends there)."""
    text = data[:HEAD_BYTES].decode("utf-8", errors="replace")
    lines = text.splitlines()[:HEAD_LINES]
    if not whole and lines:
        lines = lines[:-1]  # the last one may be cut
    head = Head(lines=lines)
    head.virtual_gpu = any(VIRTUAL_GPU.search(line) for line in lines)
    head.reads_paste = any(READS_PASTE.search(line) for line in lines)
    head.gpu_subject = (any(_NAMES_GPU.search(line) for line in lines)
                        and not any(_NAMES_HOST_MEMORY.search(line) for line in lines))
    numbered = [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
    head.change_thread = bool(numbered and _PULL_SOURCE.match(numbered[0][1]))
    head.issue_thread = bool(numbered and _ISSUE_SOURCE.match(numbered[0][1]))
    head.web_page = bool(numbered and _WEB_PAGE_SOURCE.match(numbered[0][1]))
    # (a thread whose labels line comes first, its source line left off, may be an issue or a
    # pull request: its title shaped like a commit does not say which)
    labelled = bool(numbered and _LABELS_LINE.match(numbered[0][1]))
    labels = next((line for _, line in numbered[:3] if _LABELS_LINE.match(line)), "")
    head.requested = bool(_REQUEST_LABEL.search(labels) and not _BUG_LABEL.search(labels))
    numbered = _after_source_line(numbered)
    if not numbered:
        return head
    head.title_line, head.title = numbered[0]
    body = "\n".join(line for _, line in numbered[1:])
    unfenced = _unfenced(lines)
    below_title = _unfenced([*lines[:head.title_line - 1], "", *lines[head.title_line:]])
    # (an issue titled like a commit, "docs: Failed to initialize NVML: ...", tags its report:
    # the thread says it is an issue, and the writer met the message following the docs)
    head.pull_request = bool((_COMMIT_TITLE.match(head.title)
                              and not (head.issue_thread or labelled))
                             or _PULL_REQUEST_HEAD.search("\n".join(unfenced))
                             or _TEMPLATE_HEADING.search("\n".join(below_title)))
    head.heading = head.title.startswith("#") or (
        len(lines) > 1 and not lines[1].strip() and not _LOG_LINE.search(head.title))
    head.about_message = bool(_ABOUT_A_MESSAGE.search(head.title.lstrip("#").strip()))
    head.own_run = bool(OWN_RUN.search(body))
    head.fenced = "```" in body or bool(re.search(r"^\s*[|+][-=+|]{8,}", body, re.MULTILINE))
    if not (head.issue_thread or head.change_thread or head.web_page):
        _thread_by_shape(head, numbered)
    return head


def _thread_by_shape(head: Head, numbered: list[tuple[int, str]]) -> None:
    """Read a text without its source line as a thread by its own shape: a title, then its
    posts, each under a line naming its writer and date ("alice · description · 2024-05-01").
    It is a change where its title says what a change does ("Dump the batch on OOM",
    "Fix(loader): ...") or a review is posted; else an issue, a report, unless its first post
    reads as a pull request's."""
    if not any(_POST_LINE.match(line) for _, line in numbered[1:_THREAD_LINES]):
        return
    if (_CHANGE_TITLE.match(head.title.lstrip("#").strip())
            or any(_REVIEW_POST.match(line) for _, line in numbered)):
        head.change_thread = True
    elif not (head.pull_request or _COMMIT_TITLE.match(head.title)):
        head.issue_thread = True


# A GPU behind a hypervisor: a virtual GPU's driver (vGPU, GRID, a mediated device), or a GPU
# passed through to a virtual machine (VFIO, a hypervisor named).
# A GPU named in a text's first lines, and the host's memory named there (Head.gpu_subject):
# the words a line's telling is read with, and the GPU's and the host's memory in Chinese and
# Japanese (the CPU alone there is no memory: a report lists its machine's CPU).
_NAMES_GPU = re.compile(rf"{GPU_WORD}|显存|顯存|显卡|顯卡|ビデオメモリ", re.IGNORECASE)
_NAMES_HOST_MEMORY = re.compile(rf"\b(?:{HOST_MEMORY_NAMED}|CPU memory|MemoryError|exit code "
                                r"137)\b|(?<![显卡U])内存", re.IGNORECASE)
VIRTUAL_GPU = re.compile(r"\bv-?GPUs?\b|\bGRID (?:vGPU|drivers?|K\d)|\bvfio(?:-pci)?\b|\bmdev\b|"
                         r"\bhypervisors?\b|\bGPU pass-?through\b|\bProxmox\b|\bESXi\b|"
                         r"\bKubeVirt\b", re.IGNORECASE)


# A thread copied with the line that says where it is from ("owner/repo · issue #123 · closed ·
# Python") and its labels ("labels: bug") above its title: the title is the line after them.
_SOURCE_LINE = re.compile(r"^[\w.-]+/[\w.-]+ · (?:issue|pull request|discussion) #\d+\b")
_LABELS_LINE = re.compile(r"^labels: ")
# (and documentation: a thread asking for a guide, "Tutorial on how to reduce memory for GPU
# training", quotes the errors the guide should cover)
_REQUEST_LABEL = re.compile(r"\b(?:enhancement|feature(?:[ -]request)?|type: ?feature|proposal|"
                            r"RFC|RFE|improvement|documentation|docs)\b", re.IGNORECASE)
_BUG_LABEL = re.compile(r"\b(?:bug|crash|regression|error)\b", re.IGNORECASE)
# A thread's post under the line naming its writer, what the post is and its date: "alice ·
# description · 2024-05-01" opens the first post, "bob · comment · 2024-05-02" a reply.
# (or a numbered turn with its writer: "[turn 0 by alice, continued]")
_POST_LINE = re.compile(r"^(?:[\w.-]{1,60} · (?:description|comment) · \d{4}-\d\d-\d\d\b|"
                        r"\[turn \d{1,4} by [\w.-]{1,60}(?:, continued)?\])")
_REVIEW_POST = re.compile(r"^[\w.-]{1,60} · review(?: thread)? · \d{4}-\d\d-\d\d\b")
_THREAD_LINES = 4  # a thread's first post starts within the lines after its title
# A title in the imperative that names a change ("Dump the batch on OOM", "Find OOM batches
# before training", "Fix CUDNN_STATUS_NOT_SUPPORTED for bn"): a pull request's.
_CHANGE_TITLE = re.compile(
    r"^(?:\[[\w. -]{1,30}\]\s*)?(?:add|fix|dump|find|remove|support|use|make|allow|enable|"
    r"disable|handle|avoid|catch|skip|update|move|refactor|improve|implement|introduce|expose|"
    r"rename|separate|detect|report|log|raise|retry|reduce|decrease|increase|set|bump|revert|"
    r"auto[- ]?detect|document|clarify|replace|ignore|guard|check|free|release|limit|refine|"
    r"polish|enhance|simplify|unify|beautify|tweak)"
    # (a scope as a commit writes it, "Fix(loader): ..."; not the noun or a failure told:
    # "Check failed: ...", "Log shows ...", "Use of ...")
    r"(?:\([^)\n]{1,60}\)!?: | (?!(?:error|errors|failed|fails|of|is|was|shows|says|file|"
    r"output|from)\b))", re.IGNORECASE)
_PULL_SOURCE = re.compile(r"^[\w.-]+/[\w.-]+ · pull request #\d+\b")
_ISSUE_SOURCE = re.compile(r"^[\w.-]+/[\w.-]+ · issue #\d+\b")
# A web page copied with the line that says where it is from ("example.com · web page", or the
# site and the page's address: "docs.example.org · https://docs.example.org/faq/oom").
_WEB_PAGE_SOURCE = re.compile(r"^[\w-]+(?:\.[\w-]+)+ · (?:web page\b|https?://[\w.-]+\.\w)")


def _after_source_line(numbered: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """``numbered`` from the title on: without a thread's source line and labels above it."""
    # (the labels line names no failure even where the source line above it was left off;
    # a source line said twice, once with the repository's language after it, is one)
    rest = numbered
    while rest and len(numbered) - len(rest) < 2 and _SOURCE_LINE.match(rest[0][1]):
        rest = rest[1:]
    return rest[1:] if rest and _LABELS_LINE.match(rest[0][1]) else rest


# "I tried running `x.py` after applying these changes": a diff the writer ran, not a change
_TRIED_WITH = re.compile(r"\bI (?:tried|ran|run|am running|have run)\b[^\n]{0,80}?\b(?:after|with|"
                         r"using) (?:applying|these|this|the following)\b", re.IGNORECASE)


def _unfenced(lines: list[str]) -> list[str]:
    """``lines`` without those in fenced blocks not marked as a diff: a patch a reply pastes by
    hand ("```" then "diff --git ...") is a suggestion in a thread, not the change a pull
    request is (a change's own diff is shown in a "```diff" block), and so is a diff after the
    writer says they ran it ("I tried running ... after applying these changes")."""
    out, fence, said = [], "", ""
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = "" if fence else (stripped[3:].strip() or "text")
            if fence in ("diff", "patch") and _TRIED_WITH.search(said):
                fence = "text"  # "I tried running it after applying these changes": a try
        elif fence not in ("text", "txt", "shell", "bash", "console", "python", "py"):
            out.append(line)
        if stripped and not fence:
            said = stripped
    return out


# The few words a title's failure turns on, read through one typing slip ("initalize",
# "singal"): a title is typed by hand, a message is not.
_KEY_WORDS = ("initialize", "initialise", "signal", "memory", "cuda")
_WORD = re.compile(r"[A-Za-z]{4,11}")


def _slip(word: str, key: str) -> bool:
    """Is ``word`` ``key`` with one letter left out, added, changed, or two swapped?"""
    if abs(len(word) - len(key)) > 1 or word == key:
        return False
    if len(word) == len(key):
        diff = [i for i, (a, b) in enumerate(zip(word, key, strict=True)) if a != b]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and word[diff[0]] == key[diff[1]]
                                  and word[diff[1]] == key[diff[0]])
    short, long_ = sorted((word, key), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _spelled(title: str) -> str:
    """``title`` with a key word's typing slip corrected (same length or one letter off)."""
    def fix(match: re.Match[str]) -> str:
        word = match[0].lower()
        return next((key for key in _KEY_WORDS if _slip(word, key)), match[0])
    return _WORD.sub(fix, title)


# Where a Chinese, Japanese or Korean title runs into an English term without a space ("请问
# device-side assert triggered怎么解决"): no word boundary there, as a CJK character is a word
# character; a space put in lets the title's patterns read the term.
_CJK = r"\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af"
_CJK_LATIN = re.compile(rf"(?<=[{_CJK}])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[{_CJK}])")


def title_failure(head: Head, logged: bool = False, gpu_oom: str | None = None) -> str | None:
    """The signature id of the failure a thread's title names, if its text says it happened
    (``logged``: a message of the run, even a warning, was read in the text; ``gpu_oom``: the
    signature of a GPU out-of-memory the text's messages show, for a title that does not say
    whose memory ran out)."""
    title = _spelled(_CJK_LATIN.sub(" ", head.title.lstrip("#").strip()))
    if (not title or head.pull_request or head.change_thread or head.about_message
            or head.requested
            or _QUESTION_TITLE.match(title) or _DEFINITION_TITLE.search(title)
            or _CONDITION_TITLE.match(title)
            or _REQUEST_TITLE.match(title)
            or _LOG_LINE.search(title) or _faq_answered(head, title, logged)
            or (_AHEAD_TITLE.match(title) and not (logged or head.own_run or head.fenced))):
        return None
    if not (head.own_run or head.fenced or logged or _SOURCE_POSITION.search(title)
            or _QUOTED_WHEN.match(title) or _STILL_FAILS.search(title)
            or (_TOLD_WHEN.search(title) and not _HOST_MEMORY_WORDS.search(title))
            or (head.issue_thread and not _ASKS_FOR_CHANGE.search(title))):
        return None
    named = next((sig_id for sig_id, pattern in _TITLES if pattern.search(title)
                  and not (sig_id.startswith("host-oom/") and _NOT_MEMORY.search(title))), None)
    if named is None and gpu_oom and _BARE_OOM.search(title):
        return gpu_oom
    # (an out-of-memory the title leaves unnamed, in a text about a GPU that names no host
    # memory: "Out of memory when running run.sh" over "I use one V100 with 32G memory")
    if (named is None and head.gpu_subject and _BARE_OOM.search(title)
            and not _HOST_MEMORY_WORDS.search(title)):
        return "cuda-oom/caching-allocator"
    if named is None and not _NOT_MEMORY.search(title):
        if _HOST_MEMORY_FAILURE_TITLE.search(title):
            return "host-oom/ram-full-told"
        below = "\n".join(head.lines[head.title_line:])
        if _KILLED_MESSAGE_TITLE.search(title) and _HOST_MEMORY_BELOW.search(below):
            return "host-oom/shell-killed"
    return named


def _faq_answered(head: Head, title: str, logged: bool) -> bool:
    """Does the title ask what to do about a failure and the thread's first post answer it in
    general, with no run of its own (no message, no pasted block, no first-person report)?"""
    if logged or head.own_run or head.fenced or not _WHAT_TO_DO_TITLE.search(title):
        return False
    first: list[str] = []
    posts = 0
    for line in head.lines[head.title_line:]:
        posts += bool(_POST_LINE.match(line.strip()))
        if posts > 1:
            break  # the first reply: the answer is the first post's
        first.append(line)
    return bool(_ANSWERS_IN_GENERAL.search("\n".join(first)))


def title_numbers(head: Head, sig_id: str) -> dict[str, Any]:
    """The numbers a title states for the failure it names: the source position of an assert."""
    if sig_id == "gpu-hardware/xid":
        xid = re.search(_TITLE_XID, head.title, re.IGNORECASE)
        return {"xid": int(xid["xid"])} if xid else {}
    if sig_id == "driver-mismatch/arch-not-compiled":
        arch = re.search(_TITLE_ARCH, head.title, re.IGNORECASE)
        return {"capability": (arch["capability"] or arch["capability_"]).lower()} if arch else {}
    position = _SOURCE_POSITION.search(head.title)
    if position is None or not sig_id.startswith("nvml-assert-oom/"):
        return {}
    return {"source_file": position["file"], "source_line": int(position["line"])}


def in_diff(before: list[str], text: str) -> bool:
    """Is a line that starts with ``+`` or ``-`` part of a diff that starts above it?"""
    return bool(_DIFF_LINE.match(text)) and any(DIFF_START.match(line.strip())
                                                 for line in before)
