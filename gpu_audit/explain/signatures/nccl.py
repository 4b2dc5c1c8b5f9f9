"""NCCL and the other collective backends failed or timed out between ranks.

A collective completes only when every rank joins it, so most collective errors are echoes: a
watchdog timeout, an aborted communicator or a peer that closed its connection usually means
another rank crashed or hung first, and its own log holds the root cause. `gpu-audit explain`
ranks these after the failures they follow, reads the collective's sequence number, operation
and timeout from the watchdog's message, and merges the same timeout seen on many ranks into
one incident. Some are causes of their own: two ranks on one GPU, NCCL without a GPU, a
shared-memory segment that does not fit in /dev/shm, a network or InfiniBand failure, or a
rendezvous that not every rank reached.

Why it matters: one failed or slow rank stops the whole distributed job, often only after the
collective's timeout has wasted its GPUs' time.

Example: ``[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7,
OpType=ALLGATHER, ..., Timeout(ms)=600000) ran for 600100 milliseconds before timing out.``

Fix: find the first error on any rank before the timeout (`gpu-audit explain` on all ranks'
logs together); otherwise rerun with ``TORCH_NCCL_DESYNC_DEBUG=1``. For the causes of their
own: one GPU per rank (``torch.cuda.set_device(LOCAL_RANK)``), a larger /dev/shm, or the
network links.
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
    unless_marks,
    unless_words,
)
from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Signature,
    advice,
    document_class,
    fixed,
    signature,
)
from gpu_audit.explain.signatures.texts import size_text
from gpu_audit.knowledge.nccl import nccl_error_text
from gpu_audit.model import Severity

CLASS = document_class("nccl", __doc__)

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
_BIGGER_SHM = ("Give the container a larger /dev/shm (`docker run --ipc=host` or "
               "`--shm-size=16g`")
_SHM_DISABLE = "NCCL_SHM_DISABLE=1 avoids shared memory at some speed cost."

_WORK_FIELDS = {
    "seq_num": re.compile(r"SeqNum=(\d+)"),
    "op_type": re.compile(r"OpType=(\w+)"),
    "numel_in": re.compile(r"NumelIn=(\d+)"),
    "numel_out": re.compile(r"NumelOut=(\d+)"),
    "timeout_ms": re.compile(r"Timeout\(ms\)=(\d+)"),
    "ran_for_ms": re.compile(r"ran for (\d+) milliseconds"),
    "tensor_shape": re.compile(r"TensorShape=\[([^\]]*)\]"),
    "rank": re.compile(r"\bRank (\d+)\]"),
    "process_group": re.compile(r"\[PG (?:ID )?(\d+)\b"),
}


def _nccl_work(_match: re.Match[str], line: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, pattern in _WORK_FIELDS.items():
        match = pattern.search(line)
        if match:
            found[key] = int(match[1]) if match[1].isdigit() else match[1]
    return found


_PROGRESS = re.compile(r"\bLast enqueued NCCL work: (\d{1,12}), last completed NCCL work: "
                       r"(\d{1,12})", re.IGNORECASE)


def _progress(line: str) -> dict[str, Any]:
    """How far a rank got: its last enqueued and last completed NCCL work, where the line
    says."""
    match = _PROGRESS.search(line)
    if match is None:
        return {}
    return {"last_enqueued_seq": int(match[1]), "last_completed_seq": int(match[2])}


@signature("nccl/timeout-progress",
           r"Timeout at NCCL work: (?P<timed_out_seq>\d+), last enqueued NCCL work: "
           r"(?P<last_enqueued_seq>\d+), last completed NCCL work: (?P<last_completed_seq>\d+)",
           ("Timeout at NCCL work",), "NCCL work progress", attach="only", window=20,
           example="[rank0]:[E1122 03:12:40.133001 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID "
           "0(default_pg) Rank 0] Timeout at NCCL work: 48213, last enqueued NCCL work: 48213, "
           "last completed NCCL work: 48212.")
@signature("nccl/watchdog-timeout", r"(?:Watchdog caught|Caught) collective operation timeout",
           ("collective operation timeout",), "NCCL collective timed out", extract=_nccl_work,
           tier=3.0, group="nccl-timeout",
           example="[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
           "OpType=ALLGATHER, NumelIn=1, NumelOut=8, Timeout(ms)=600000) ran for 600100 "
           "milliseconds before timing out.")
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
    return advice(sig, numbers, explanation, _COLLECTIVE_REMEDY, title=title)


# A collective's timeout told in Chinese, the message itself not pasted: "10分钟后报NCCL超时错误"
# (ten minutes later it reported an NCCL timeout error), "NCCL会报超时错误" (NCCL reports a
# timeout error); the words "reported"/"appeared" make it an event, not a topic. (The match
# starts at the line's start: its excerpt is the writer's sentence.)
fixed("nccl/timeout-told",
      # (not after a question or a condition: "如何解决出现NCCL超时", "如果NCCL报超时")
      unless_marks("如何|怎么|怎样|如果|若是|是否|为什么") +
      # (and met, "我也遇到了NCCL Timeout问题": I ran into the NCCL timeout problem too)
      r"(?:(?:报|出现|提示|遇到|碰到)了?\s?NCCL\s?(?:的)?(?:通信|通讯)?(?:超时|[Tt]ime ?out)|"
      r"NCCL\s?(?:会|就|又|也|一直)?(?:报|出现)了?\s?(?:通信|通讯)?(?:超时|[Tt]ime ?out))|"
      # ... and in English, "it is stuck for 30 minutes and reports NCCL timeout" (not a
      # condition, a question of how or when, nor the reader's: "When do you hit NCCL timeouts?")
      + unless_words("if|whether|when|how|you|can|could|may|might|would")
      + r"(?i:\b(?:reports?|reported|reporting|throws?|threw|gets?|got|getting|hits?|hitting|"
      r"raised?|raises) (?:an? |the )?)NCCL [Tt]ime ?outs?\b",
      ("NCCL",), "NCCL collective timed out (told in the writer's words)", tier=3.0,
      group="nccl-timeout",
      example="训练到第12个epoch卡住，30分钟后报NCCL超时错误",
      explanation="The writer says NCCL reported a timeout, without pasting the watchdog's "
      "message. " + _COLLECTIVE_ECHO,
      remedy=_COLLECTIVE_REMEDY)


# A hang, a timeout or a failure inside NCCL told in the writer's words, the message not pasted:
# the run stuck at, in or during NCCL ("Multi-node training hangs at NCCL init", "all ranks
# deadlock in NCCL"), NCCL as the subject ("NCCL hangs on two nodes"), a run that fails with an
# NCCL error, and the same in Chinese, Japanese, Korean, Russian, German, Spanish, French and
# Portuguese ("卡在NCCL初始化", "NCCLの初期化で止まる", "зависает на инициализации NCCL"). Not a
# condition, a question, advice or the reader's ("if NCCL hangs, ...", "how to avoid NCCL
# hangs", "to avoid NCCL timeouts set ...", "如果卡在NCCL").
_STALLS = (r"(?:hangs|hung|is hanging|(?:gets?|got|is|was|are|were|remains?|stays?) stuck|stuck|"
           r"freez(?:es|ing)|froze|deadlock(?:s|ed)?|stall(?:s|ed)|times? out|timed out|"
           r"timing out|crash(?:es|ed)|fails|failed|dies|died|aborts|aborted)")
_NCCL_PHASE = (r"(?:init\w*|communicat\w*|comm\b|all[-_ ]?reduce|all[-_ ]?gather|broadcast|"
               r"barrier|setup|bootstrap|collectives?|operations?|calls?)")
# (torch.distributed's collectives and its start, where a run on NCCL stalls)
_TORCH_PHASE = (r"(?:all[-_ ]?reduce|all[-_ ]?gather|reduce[-_ ]scatter|broadcast|barrier|"
                r"init_process_group|(?:process group )?init\w*|rendezvous|collectives?|"
                r"(?:the )?(?:first |backward )?(?:sync|synchroni[sz]ation|gradient sync))")
# (NCCL as the run's backend: "with NCCL", "using the nccl backend", "backend='nccl'")
_NCCL_NAMED = r"(?:(?-i:NCCL)\b(?![=/])|nccl backend\b)"
_RUN_ON_NCCL = (r"\b(?:(?:with|using|over|under|on) (?:the )?" + _NCCL_NAMED + r"|"
                r"backend ?= ?['\"]nccl['\"]|(?:the )?nccl backend\b)")
_NCCL_TOLD_EN = (
    unless_words(r"if|whether|when|how|why|you|your|can|could|may|might|would|should|will|"
                 r"avoid\w*|prevent\w*|to fix|unless|usually|often|typically|common\w*",
                 SENTENCE_BREAK, start="^" + SKIP_SENTENCES)
    + r"(?i:\b" + _STALLS + r"\b(?: \S+){0,3}? (?:at|in|on|during|inside|within|while) (?:the )?"
    r"(?-i:NCCL)\b(?:[ -]" + _NCCL_PHASE + r")?|"
    r"(?<![\w-])(?-i:NCCL)(?: " + _NCCL_PHASE + r"){0,2} (?:always |then |just |sometimes |"
    r"randomly |still |also )?(?:hangs|hung|is hanging|deadlocks|deadlocked|freezes|froze|"
    r"(?:gets|got) stuck|times out|timed out|crashes|crashed|fails|failed)\b"
    r"(?! (?:are|were|can|may|might|usually|often|typically|happen|occur))|"
    # (also the hang it ends in: "caused the training script to hang with NCCL timeout")
    r"\b(?:fails|failed|crash(?:es|ed)|dies|died|aborts|aborted|exits|exited|errors out|"
    r"hang|hangs|hung|(?:gets |got )?stuck|freez(?:e|es)|froze) with "
    r"(?:an? |the )?(?-i:NCCL) (?:errors?|failures?|timeouts?|exceptions?)\b|"
    # (the stall at a collective or the process group's start, the run's NCCL named later in
    # the sentence: "hangs forever at the first all_reduce when I use 2 nodes with NCCL",
    # "freezes at init_process_group with the nccl backend")
    r"(?<!never )(?<!not )(?<!no longer )\b" + _STALLS + r"\b(?: \S+){0,2}? (?:at|in|on|"
    r"during|inside|within|while) (?:the )?(?:(?:first|very first|second|initial|last) )?"
    r"(?:dist\.|torch\.distributed\.)?"
    + _TORCH_PHASE + r"\b[^\n.;!?]{0,60}?" + _RUN_ON_NCCL + r"|"
    # (... and NCCL named first: "with NCCL on two nodes, training hangs at the first barrier",
    # "using the nccl backend, init_process_group freezes forever")
    r"\b(?:with|using) (?:the )?" + _NCCL_NAMED + r"[^\n.;!?]{0,60}?"
    r"(?<!never )(?<!not )(?<!no longer )\b" + _STALLS + r"\b)")
_NCCL_TOLD_ZH = (
    unless_marks("如何|怎么|怎样|如果|若是|是否|为什么|避免|防止|可能")
    # (a verb of stalling after NCCL; a timeout or an error only as an event, "NCCL又超时了",
    # not the noun of a title or a topic, "NCCL超时问题")
    + r"(?:(?:卡在|卡住在|停在|挂在|hang在|卡死在)\s?NCCL|NCCL\s?(?:的)?(?:初始化|通信|通讯|"
    r"allreduce|all_reduce)?\s?(?:时|的时候|阶段)?(?:就|一直|总是|又)?(?:卡住|卡死|hang住|挂住|"
    r"(?:超时|报错|出错|失败)了)|报\s?NCCL\s?(?:的)?(?:错误|错)|"
    # (NCCL as what the run uses, then its stall: "用NCCL训练，一直卡在第一次all_reduce")
    r"(?:用|使用|采用)\s?NCCL[^\n。]{0,30}?(?:卡在|卡住|卡死|hang住|挂住))")
_NCCL_TOLD_OTHER = (
    # (Japanese and Korean: NCCL, its phase, then where, then stopping or timing out)
    r"^(?![^\n]*(?:もし|場合|方法|避け|ですか|만약|경우|방법|나요|까요))[^\n]*?"
    # (or NCCL as the backend, the stall later: "NCCLバックエンドで...最初のall_reduceで止まる")
    r"(?:NCCL\s?(?:バックエンド|백엔드)[^\n。.]{0,40}?|"
    r"NCCL\s?(?:の)?\s?(?:初期化|通信|초기화|통신)?\s?(?:단계)?(?:で|中に|時に|에서|중에|중)?\s?)"
    r"(?:止ま|固ま|フリーズ|ハング|タイムアウト|멈추|멈춥|멈췄|멈춰|타임아웃|행이 걸)|"
    # (Russian, German, Spanish, French, Portuguese: the run's stalling verb, then NCCL)
    r"^(?!(?i:[^\n]*\b(?:если|как|чтобы|почему|wenn|falls|wie|sollten?|si|cómo|para evitar|"
    r"comment|pour éviter|vous|se (?:o|a|os|as|você|eu)|caso|como|você)\b))"
    r"(?i:[^\n]*?\b(?:завис\w*|висн\w*|hängt|"
    r"hing|bleibt hängen|blieb hängen|se cuelga|se colgó|se queda (?:colgado|bloqueado|trabado)|"
    r"se bloquea|reste bloquée?|se bloque|bloque|trava|travou|fica travado|congela)\b)"
    r"[^\n.]{0,40}?\bNCCL\b|"
    # (... or NCCL as what the run uses, then the stall: "con NCCL en dos nodos ... se queda
    # colgado", "avec NCCL ... reste bloqué", "с NCCL всё зависает")
    r"^(?!(?i:[^\n]*\b(?:если|как|чтобы|почему|wenn|falls|wie|sollten?|si|cómo|para evitar|"
    r"comment|pour éviter|vous|se (?:o|a|os|as|você|eu)|caso|como|você)\b))"
    r"(?i:[^\n]*?\b(?:с|со|mit|con|avec|com) (?-i:NCCL)\b[^\n.]{0,60}?\b(?:завис\w*|висн\w*|"
    r"hängt|se cuelga|se colgó|se queda (?:colgado|bloqueado|trabado)|se bloquea|"
    r"reste bloquée?|se bloque|trava|travou|fica travado|congela)\b)|"
    # (German's verb split around NCCL: "das Training bleibt in NCCL hängen")
    r"^(?!(?i:[^\n]*\b(?:wenn|falls|wie|sollten?)\b))[^\n]*?\b(?:bleibt|blieb)\b[^\n.]{0,40}?"
    r"\bNCCL\b[^\n.]{0,20}?\bhängen\b")
# ... and a distributed run told hanging without naming NCCL, on a line that says it is
# distributed ("the script hangs during the backward pass on rank 0", "with DeepSpeed ZeRO-3 the
# training hangs after a few steps", "多卡训练时卡住不动"): its ranks wait in a collective for one
# that never joins. (Not a condition, a question or advice, as above.)
# (the frameworks and words that make a run distributed: also a title's, documents.py)
DISTRIBUTED_WORDS = (r"DDP|DeepSpeed|ZeRO[- ]?[123]|FSDP|Horovod|Megatron|torchrun|"
                     r"multi[- ]?(?:node|machine)s?|distributed")
_DISTRIBUTED_RUN = (rf"(?i:\b(?:{DISTRIBUTED_WORDS}|multi[- ]?GPUs?|rank ?\d{{1,5}}|all (?:the )?"
                    r"ranks|(?:\d{1,3}|two|four|eight) (?:GPUs|nodes))\b)")
_DISTRIBUTED_HANG = (
    rf"^(?=[^\n]*{_DISTRIBUTED_RUN})"
    + unless_words(r"if|whether|when|how|why|you|your|can|could|may|might|would|should|will|"
                   r"avoid\w*|prevent\w*|to fix|unless|usually|often|typically|common\w*|"
                   r"never|not|no longer", SENTENCE_BREAK, start=SKIP_SENTENCES)
    + r"(?i:\b(?:training|the (?:training|script|job|run|process|program|model)|it|rank ?\d{1,5}|"
    r"all (?:the )?ranks|the ranks|every rank) (?:always |then |just |sometimes |randomly |still |"
    r"also |consistently |simply )?(?:hangs|hung|is hanging|(?:gets|got) stuck|is stuck|"
    r"freezes|froze|deadlocks|deadlocked)\b)|"
    + unless_marks("如何|怎么|怎样|如果|若是|是否|为什么|避免|防止|可能|吗")
    + r"(?:多卡|多机|分布式|DDP|deepspeed|DeepSpeed)[^\n，,。]{0,12}?(?:训练|推理|运行)?"
    r"[^\n，,。]{0,6}?(?:卡住|卡死|hang住|挂住)")
fixed("nccl/hang-told",
      f"{_NCCL_TOLD_EN}|{_NCCL_TOLD_ZH}|{_NCCL_TOLD_OTHER}|{_DISTRIBUTED_HANG}",
      ("NCCL", "nccl backend", "nccl'", 'nccl"', "hangs", "hung", "hanging", "stuck", "freezes",
       "froze", "deadlock", "卡住", "卡死", "hang住", "挂住"),
      "A run hung or failed in NCCL (told in the writer's words)", tier=3.0,
      yields_to_titles=True,
      example="Multi-node training hangs at NCCL init and then times out after 30 minutes.",
      explanation="The writer says the job hung, timed out or failed inside NCCL, without "
      "pasting NCCL's or the watchdog's message. A hang at initialisation is most often the "
      "ranks not reaching each other (a firewall, the wrong network interface, InfiniBand or "
      "peer-to-peer unusable in a container or VM); a hang later in training is one rank that "
      "crashed or stalled first. " + _COLLECTIVE_ECHO,
      remedy="Rerun with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET) to get NCCL's own "
      "messages and see where it stops; at initialisation, set NCCL_SOCKET_IFNAME to the "
      "interface the nodes share and try NCCL_IB_DISABLE=1 or NCCL_P2P_DISABLE=1 to rule out a "
      "transport. " + _COLLECTIVE_REMEDY)


# A run told fixed by turning one of NCCL's transports off or pointing it at the right network
# ("Setting NCCL_P2P_DISABLE=1 fixed it", "solved the hang by disabling ACS"): the job had
# hung or failed in NCCL, whatever words it was told in.
NCCL_CURES = (r"\bNCCL_(?:P2P_DISABLE|IB_DISABLE|P2P_LEVEL|SHM_DISABLE|SOCKET_IFNAME|NET_GDR_LEVEL|"
              r"IB_HCA|IB_GID_INDEX|CUMEM_ENABLE|NVLS_ENABLE)\b|"
              r"(?i:\b(?:disabl\w*|turn\w* off) (?:the )?(?:P2P|peer[- ]to[- ]peer|ACS|IOMMU)\b|"
              r"\biommu=(?:pt|off)\b)")
fixed("nccl/cure-told", cure_told(NCCL_CURES), CURED_NEEDLES,
      "A run that hung or failed in NCCL was fixed by a transport setting (told in the "
      "writer's words)", tier=3.5, yields_to_titles=True,
      example="The four cards froze at the first step; setting NCCL_P2P_DISABLE=1 fixed it.",
      explanation="The writer says the run went through once one of NCCL's transports was "
      "turned off or pointed elsewhere (peer-to-peer between the GPUs, InfiniBand, shared "
      "memory, the network interface), or once the PCIe switch's access control (ACS) or the "
      "IOMMU was turned off: the job had hung or failed in NCCL on that path. Peer-to-peer over "
      "PCIe is often broken between consumer cards and behind ACS or an IOMMU, which redirect "
      "the GPUs' direct traffic through the root complex. " + _COLLECTIVE_ECHO,
      remedy="Keep the setting for this machine, and check the path it turned off: "
      "`nvidia-smi topo -m` (how the GPUs connect), `sudo lspci -vvv | grep -i acsctl` (ACS on "
      "the switches), and NCCL's own tests (`all_reduce_perf -b 8 -e 256M -g N`) with and "
      "without it. " + _COLLECTIVE_REMEDY)


# NCCL's all-reduce told failing by the writer, the message not pasted: "NCCLAllReduce in
# MirroredStrategy causes a crash", "the NCCL all-reduce crashes with CUDA 12" (TensorFlow's
# cross-device op by its class name, or in words). Not a condition, a question or the reader's:
# "if NCCL all-reduce fails, ...", "does NcclAllReduce crash for you?"
fixed("nccl/allreduce-fails-told",
      unless_words("if|whether|when|how|why|you|your|can|could|may|might|would|does|do")
      + r"(?i:\bNCCL[ -]?all[ -]?reduce\b(?!\w)[^\n]{0,60}?\b"
      r"(?:causes? (?:a |the )?(?:crash|segfault|segmentation fault|core dump)|crash(?:es|ed)|"
      r"segfaults|fails|failed|aborts|aborted)\b)",
      ("NCCL", "Nccl", "nccl"), "NCCL's all-reduce fails (told in the writer's words)",
      tier=3.0,
      example="NCCLAllReduce when used in MirroredStrategy causes a crash.",
      explanation="The writer says the job fails inside NCCL's all-reduce, without pasting "
      "NCCL's message. A failing all-reduce is most often NCCL not matching the CUDA or driver "
      "(a build against another CUDA), a transport the machine cannot use (peer-to-peer or "
      "shared memory in a container or VM), or an earlier error on one rank.",
      remedy="Rerun with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET) to get NCCL's own "
      "message; check that NCCL was built for this CUDA; try NCCL_P2P_DISABLE=1 and "
      "NCCL_SHM_DISABLE=1 to rule out a transport; in TensorFlow, "
      "tf.distribute.HierarchicalCopyAllReduce() or ReductionToOneDevice() avoid NCCL to "
      "confirm it is the cause.")


def _nccl_release(code: str | None) -> str | None:
    """NCCL's version code as its release ("21903" is 2.19.3; before 2.9, "2708" is 2.7.8)."""
    if not code or not code.isdigit():
        return None
    number = int(code)
    if number >= 20900:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def _version_pair(match: re.Match[str], _line: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key in ("rank_a", "rank_b"):
        if match.group(key) is not None:
            found[key] = int(match.group(key))
    for key in ("version_a", "version_b"):
        if (release := _nccl_release(match.group(key))) is not None:
            found[key] = release
    return found


# NCCL's check at communicator start-up that every rank runs the same NCCL ("Mismatched NCCL
# version detected : rank 0 version 21903 rank 8 version 21805", then ncclInvalidUsage), and the
# same told by the writer ("the NCCL versions differ between the nodes", "our two servers had
# different NCCL versions"; not a condition, advice or a question: "hangs if NCCL versions
# differ", "make sure the NCCL versions match")
_VERSIONS_TOLD = (
    unless_words(r"if|whether|when|unless|make sure|ensure|check|should|must|can|could|may|"
                 r"might|would|avoid\w*|prevent\w*|you|your|pitfall\w*|common\w*",
                 start=r"(?:^|(?<=[.!?;:] ))", stop=r"\n.!?;")
    + r"(?i:\bNCCL(?: library)? versions? (?:differ(?:s|ed)?|(?:is|are|was|were) (?:not the "
    r"same|different)|(?:did not|didn't|do not|don't) match|mismatch(?:ed)?)\b[^\n.]{0,30}?"
    r"\b(?:between|across|on|of) (?:the |our |my |both |two |all |these )?(?:\w+ )?(?:nodes|"
    r"machines|servers|hosts|ranks)\b|"
    r"\b(?:the |our |my |both |two |these )?(?:nodes|machines|servers|hosts) (?:have|had|run|ran|"
    r"use|used|were using|are using) (?:a )?different NCCL(?: library)? versions?\b)")


@signature("nccl/version-mismatch",
           r"\bMismatched NCCL version detected ?: ?rank (?P<rank_a>\d{1,9}) version "
           r"(?P<version_a>\d{1,9}) rank (?P<rank_b>\d{1,9}) version (?P<version_b>\d{1,9})|"
           + _VERSIONS_TOLD,
           ("Mismatched NCCL version", "NCCL version", "NCCL library version", "different NCCL"),
           "Ranks run different NCCL versions", tier=1.0, extract=_version_pair,
           example="NCCL WARN Mismatched NCCL version detected : rank 0 version 21903 rank 8 "
           "version 21805")
def _nccl_version_mismatch(sig: Signature, numbers: dict[str, Any],
                           ctx: AdviceContext) -> Advice:
    if "version_a" in numbers and "version_b" in numbers:
        which = (f"Rank {numbers.get('rank_a')} runs NCCL {numbers['version_a']} and rank "
                 f"{numbers.get('rank_b')} NCCL {numbers['version_b']}: ")
    else:
        which = "The writer says the nodes run different NCCL versions: "
    explanation = (which + "NCCL refuses a communicator whose ranks run different versions "
                   "(invalid usage), and where the check does not run the ranks hang or fail at "
                   "their first collective. Each node loads the NCCL of its own environment: "
                   "the one PyTorch's wheel bundles (nvidia-nccl-cu12) or a system libnccl "
                   "that LD_LIBRARY_PATH or LD_PRELOAD puts first.")
    remedy = ("Give every node the same environment: compare `python -c \"import torch; "
              "print(torch.__version__, torch.cuda.nccl.version())\"` and `pip show "
              "nvidia-nccl-cu12` on each node, and remove a system libnccl from LD_LIBRARY_PATH "
              "or LD_PRELOAD where one node loads it; a shared virtual environment or one "
              "container image on all nodes keeps them equal.")
    return advice(sig, numbers, explanation, remedy)


def _missing_ranks(match: re.Match[str], _line: str) -> dict[str, Any]:
    ranks = [int(rank) for rank in re.findall(r"\d+", match.group("missing"))]
    return {"missing_ranks": ranks[:MAX_MISSING_RANKS]}


MAX_MISSING_RANKS = 64  # a stalled op on a thousand nodes lists its missing ranks one by one


# Horovod's stall inspector: some ranks submitted a collective and have waited longer than its
# check time for the others ("One or more tensors were submitted to be reduced, gathered or
# broadcasted by subset of ranks and are waiting for remainder of ranks for more than 60
# seconds"), then each stalled op with the ranks it waits for ("... [missing ranks: 815]": the
# first such line joins the warning above it, or stands for it where the warning was cut off).
@signature("nccl/horovod-missing-ranks", r"\[missing ranks: (?P<missing>[\d, ]{1,600})\]",
           ("[missing ranks: ",), "Horovod's collectives stalled waiting for some ranks",
           tier=3.0, extract=_missing_ranks, group="horovod-stall", attach="prefer", window=40,
           example="HorovodAllreduce_grads_dense_1_0 [missing ranks: 7]")
@signature("nccl/horovod-stall",
           r"\bOne or more tensors were submitted to be reduced, gathered or broadcasted by "
           # (the rest may be cut, or wrapped mid-word by the terminal that printed it)
           r"subset of ranks(?: and are waiting for remainder of ranks for more than "
           r"(?P<stall_s>\d{1,9}) seconds)?",
           ("One or more tensors were submitted",),
           "Horovod's collectives stalled waiting for some ranks", tier=3.0,
           group="horovod-stall",
           example="[2026-06-04 16:49:19.737850: W horovod/common/stall_inspector.cc:105] One or "
           "more tensors were submitted to be reduced, gathered or broadcasted by subset of ranks "
           "and are waiting for remainder of ranks for more than 60 seconds.")
def _horovod_stall_advice(sig: Signature, numbers: dict[str, Any],
                          ctx: AdviceContext) -> Advice:
    waited = f" for more than {numbers['stall_s']} s" if numbers.get("stall_s") else ""
    missing = numbers.get("missing_ranks")
    who = (f": rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} never "
           "joined" if missing else "")
    explanation = (f"Horovod's stall inspector found collectives that some ranks submitted and "
                   f"have waited{waited} for the rest{who}. A rank that never joins crashed or "
                   "hung earlier (look for its own error), is far behind (data loading, a "
                   "checkpoint written by one rank), or runs other collectives than the others "
                   "(a condition that differs between ranks, tensors named or ordered "
                   "differently): the job hangs until Horovod or the scheduler ends it.")
    remedy = ("Read the missing ranks' own logs first; make every rank submit the same tensors "
              "in the same order; set HOROVOD_STALL_SHUTDOWN_TIME_SECONDS so a stall ends the "
              "job instead of hanging it, and record a timeline (horovodrun "
              "--timeline-filename) to see which op each rank is in.")
    return advice(sig, numbers, explanation, remedy)


@signature("nccl/heartbeat",
           # from the class name on: a line cut inside "ProcessGroupNCCL's" is read from its
           # first part, the one the prefilter finds
           r"Heartbeat monitor timed out|(?:ProcessGroupNCCL's )?watchdog got stuck for "
           r"(?P<stuck_s>\d+) seconds",
           ("Heartbeat monitor timed out", "watchdog got stuck"),
           # (after a collective's timeout: the watchdog hangs behind the collective it waits on)
           "The NCCL watchdog itself hung", tier=3.2,
           example="[E ProcessGroupNCCL.cpp:1150] ProcessGroupNCCL's watchdog got stuck for 480 "
           "seconds without making progress in monitoring enqueued collectives.")
def _nccl_heartbeat(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = ("The NCCL watchdog thread itself stopped making progress, usually stuck in a "
                   "CUDA call on a hung GPU or behind a deadlocked collective; PyTorch kills the "
                   "process rather than hang forever.")
    remedy = _COLLECTIVE_REMEDY + " Check the GPUs for Xid errors (`sudo dmesg -T | grep -i xid`)."
    return advice(sig, numbers, explanation, remedy)


@signature("nccl/duplicate-gpu",
           r"Duplicate GPU detected\s*:\s*rank (?P<rank_a>\d+) and rank (?P<rank_b>\d+) both on "
           r"CUDA device (?P<device>\w+)",
           ("Duplicate GPU",), "Two ranks use the same GPU", tier=0.5,
           example="Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000")
def _duplicate_gpu(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (f"Ranks {numbers.get('rank_a', '?')} and {numbers.get('rank_b', '?')} both run "
                   "on the same GPU; NCCL needs one GPU per rank.")
    remedy = ("Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before "
              "init_process_group (or pass device_id=...), and check CUDA_VISIBLE_DEVICES per "
              "process.")
    return advice(sig, numbers, explanation, remedy)


fixed("nccl/no-gpus", r"ProcessGroupNCCL is only supported with GPUs, no GPUs found",
      ("only supported with GPUs",), "NCCL was asked to run without a GPU", tier=0.5,
      example="RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
      explanation="The NCCL backend needs a GPU in every process; this one saw none.",
      remedy="Check CUDA_VISIBLE_DEVICES and the scheduler's GPU request; use backend='gloo' for "
      "CPU-only runs.")


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


@signature("nccl/error-kind",
           r"\bnccl(?P<kind_detail>SystemError|UnhandledCudaError|InternalError|InvalidUsage|"
           r"InvalidArgument|RemoteError)\b",
           ("nccl",), "NCCL error detail", attach="prefer", window=6, tier=3.0,
           example="ncclSystemError: System call (e.g. socket, malloc) or external library call "
           "failed or device error.")
@signature("nccl/error",
           r"NCCL [Ee]rror(?: in: (?P<location>[^,]{1,300}),| (?P<code>\d+):|:) "
           # (its kind ends the line: the line's end, also where more lines follow it)
           r"(?P<kind>[a-z][a-z /]*?[a-z])(?=\s*\(run with|,|"
           r"\.|[ \t]*(?:\r?\n|$))(?:[^\n]{0,1000}?NCCL version "
           r"(?P<nccl_version>\d+(?:\.\d+)+(?:\+\w+(?:\.\d+)*)?))?",
           ("NCCL error", "NCCL Error"), "NCCL call failed", tier=3.0, key_field="kind",
           example="RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:514, "
           "unhandled system error, NCCL version 2.4.8")
@signature("nccl/return-code",
           r"NCCL INFO (?P<location>[\w./-]+\.(?:cc|cu|h|hpp|cpp)):(?P<source_line>\d+) -> "
           r"(?P<result_code>[1-6])\b",
           ("NCCL INFO",), "NCCL call failed (return-code trail)", tier=3.0,
           key_field="result_code", attach="prefer", window=12,
           example="node01:4101:4188 [0] NCCL INFO misc/socket.cc:484 -> 2")
@signature("nccl/error-text",
           r"\b(?P<kind>unhandled system error|unhandled cuda error|remote process exited or "
           r"there was a network error)\b|"
           # ncclInternalError's text: with NCCL's own plea, or alone as TensorFlow's status of
           # its NCCL ops ("Internal:  internal error" over "[[node .../NcclAllReduce_8]]")
           r"\b(?P<kind_>internal error)(?= - please report this issue to the NCCL developers)|"
           r"\bInternal: +(?P<kind__>internal error)\s*$",
           ("unhandled system error", "unhandled cuda error", "remote process exited",
            "internal error - please report", "Internal: "),
           "NCCL call failed", tier=3.0, key_field="kind",
           example="terminate called after throwing an instance of 'std::runtime_error' what(): "
           "unhandled system error")
def _nccl_error(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    kind = str(numbers.get("kind") or nccl_error_text(numbers.get("result_code"))
               or nccl_error_text(numbers.get("kind_detail")) or "").lower()
    detail_kind = str(numbers.get("kind_detail") or "")
    tier, explanation, remedy = _NCCL_KINDS.get(kind, (
        3.0, "An NCCL call failed; NCCL errors usually follow a failure elsewhere (a crashed "
        "rank, a CUDA error) or a network problem.", _COLLECTIVE_REMEDY))
    if numbers.get("shm_path") and numbers.get("_shm_attach"):
        explanation, remedy, tier = _shm_attach_text(numbers["shm_path"]), _SHM_ATTACH_REMEDY, 1.0
    elif numbers.get("shm_path"):
        explanation = (
            f"NCCL could not create its shared-memory segment {numbers['shm_path']} "
            f"({size_text(numbers.get('shm_size_bytes'))}): /dev/shm is too small or full, "
            "as in containers with Docker's 64 MB default.")
        remedy = (f"{_BIGGER_SHM}; in Kubernetes an emptyDir with medium: Memory at /dev/shm); "
                  + _SHM_DISABLE)
        tier = 1.0
    if detail_kind:
        explanation += f" (NCCL: {detail_kind})"
    if numbers.get("result_code") is not None:
        explanation += (f" NCCL's debug output shows the failure passed up as return code "
                        f"{numbers['result_code']}, first from {numbers.get('location', '?')}.")
    title = f"NCCL error: {kind}" if kind else sig.title
    return advice(sig, numbers, explanation, remedy, tier=tier, title=title)


def _shm_attach_text(path: str) -> str:
    where = f" ({path})" if path else " in /dev/shm"
    return (f"An NCCL rank could not attach to the shared-memory segment{where} that another "
            "rank on the same machine created: the ranks do not share one /dev/shm (separate "
            "containers or IPC namespaces), or /dev/shm is too small or was cleaned while they "
            "started.")


_SHM_ATTACH_REMEDY = (f"{_BIGGER_SHM}, and run the ranks of one machine in one container or "
                      f"all with --ipc=host); {_SHM_DISABLE}")


@signature("nccl/shm-segment",
           # NCCL's shared-memory helper (ncclShmOpen) in its own words: "Error while creating
           # shared memory segment PATH (size N)", and the peer's side, "Error while attaching
           # to shared memory segment PATH (size N)" (the path and size cut off where a title
           # quotes it; the path's name garbled or empty in some NCCL versions)
           r"Error while (?:creating|(?P<_shm_attach>attaching to)) shared memory segment"
           r"(?: (?P<shm_path>\S+) \(size (?P<shm_size_bytes>\d+)\))?|"
           # (newer NCCL: "Error: failed to extend /dev/shm/nccl-Ab12Cd to 9637892 bytes")
           r"\bfailed to extend (?P<shm_path_>/dev/shm/\S+) to (?P<shm_size_bytes_>\d+) bytes|"
           # (and its other steps: the file not created, "Error: failed to create shared memory
           # file /dev/shm/nccl-XXXXXX, error No space left on device (28)", or not mapped,
           # "Error: Could not map /dev/shm/nccl-Ab12Cd size 9637892, error: ...")
           r"\bfailed to create shared memory file (?P<shm_path__>/dev/shm/[^\s,]+)|"
           r"\bCould not map (?P<shm_path___>/dev/shm/\S+) size (?P<shm_size_bytes__>\d+)",
           ("shared memory segment", "failed to extend /dev/shm/", "shared memory file",
            "Could not map /dev/shm/"),
           "NCCL could not create a shared-memory segment",
           attach="prefer", window=8, tier=2.0,
           example="node01:4101:4188 [0] include/shm.h:28 NCCL WARN Error while creating shared "
           "memory segment /dev/shm/nccl-vzIpS6 (size 9637888)")
def _shm_segment(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    path = str(numbers.get("shm_path") or "")
    if numbers.get("_shm_attach"):
        return advice(sig, numbers, _shm_attach_text(path), _SHM_ATTACH_REMEDY,
                      title="NCCL could not attach to a shared-memory segment")
    explanation = (f"NCCL could not create a shared-memory segment ({path or '?'}): /dev/shm "
                   "is too small or full, as in containers with Docker's 64 MB default.")
    return advice(sig, numbers, explanation, f"{_BIGGER_SHM}); {_SHM_DISABLE}")


@signature("nccl/cuda-failure", r"Cuda failure '(?P<cuda_error>[^']+)'", ("Cuda failure",),
           "A CUDA call inside NCCL failed", tier=2.5,
           example="node1:812:930 [2] NCCL WARN Cuda failure 'peer access is not supported "
           "between these two devices'")
def _cuda_failure(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = f"A CUDA call inside NCCL failed with '{numbers.get('cuda_error', '?')}'."
    return advice(sig, numbers, explanation, _COLLECTIVE_REMEDY)


# NCCL's shared-memory helper named failing by a writer, its own message not pasted: "the
# `ncclShmOpen` error means torch could not allocate shared memory for NCCL", "ncclShmOpen
# failed in the container". Not a condition, a question or advice to the reader ("if
# ncclShmOpen fails, ..."), nor an explainer's "an ncclShmOpen error".
fixed("nccl/shm-open-told",
      unless_words("if|whether|when|unless|you|your|can|could|may|might|would|should") +
      r"(?:\b(?:the|this|that|same|my|our)\W{1,2}ncclShmOpen\W{0,2} (?:error|failure)|"
      r"\bncclShmOpen\W{0,2} (?:failed|fails|failure|error)\b)",
      ("ncclShmOpen",), "NCCL could not set up shared memory (told in the writer's words)",
      tier=2.0,
      example="The ncclShmOpen error shows the container's /dev/shm was too small for NCCL.",
      explanation="The writer says NCCL's shared-memory helper (ncclShmOpen) failed: NCCL could "
      "not create or attach to its segment in /dev/shm, which in a container is 64 MB unless "
      "configured.",
      remedy=f"{_BIGGER_SHM}); {_SHM_DISABLE}")


# A socket's address as NCCL prints it (ncclSocketToString): host, then the port in angle
# brackets; the host numeric ("10.0.0.2", "fe80::1%ib0") or a name ("node07").
_SOCKET_ADDRESS = r"[\w.:%-]{1,255}<\d{1,5}>"

fixed("nccl/network",
      # (retold without "with" or the colon: "NCCL WARN NET/IB Got completion error 12")
      r"(?:NCCL WARN |NET/\w{1,20} ?:? ?)[^\n]{0,200}?"
      r"(?:Got completion (?:from peer (?P<peer>\S+) )?"
      # (newer NCCL names the status before its number: "with status=IBV_WC_RETRY_EXC_ERR(12)")
      r"(?:with )?(?:error|status=)\s*(?:IBV_WC_[A-Z_]{2,40}\()?(?P<status>\d+)|"
      r"(?P<closed>Connection closed by remote peer|"
      # (the peer as NCCL prints a socket's address: "10.0.0.2<35611>", "node07<48211>")
      rf"Connection reset by peer)(?: (?P<peer__>{_SOCKET_ADDRESS}))?|"
      r"Call to (?P<call>ibv_\w+) failed|(?P<socket>socketProgress\w*|"
      r"socketStartConnect|socketFinalizeAccept)[^\n]{0,500}?"
      r"(?:[Cc]onnect to (?P<peer_____>\S+) )?"
      rf"(?:fail|closed(?: by remote peer (?P<peer____>{_SOCKET_ADDRESS}))?|refused|abort|"
      r"wrong type)|"
      # (a connection to a peer that failed, in any NCCL version's words: "Connect to
      # 10.0.0.2<35611> failed : Connection refused", "... returned 113(No route to host)",
      # "ncclSocketConnect: connect to ... failed", "... returned Connection refused, exceeded
      # error retry count after 35 attempts", "ncclOsSocketPollConnect to ... failed with ...")
      r"(?:\b|(?<=Poll))[Cc]onnect to (?P<peer_>\S+) (?:failed|returned (?:\d+|"
      r"[A-Z][\w ]{2,40}, exceeded error retry count))|"
      # (the verbs device's asynchronous event for a failing link or adapter: "Got async event :
      # port error", "local catastrophic error"; not "port active" or "GID table change")
      r"Got async event ?: ?(?P<async_event>[\w ]{0,40}?(?:error|catastrophic|fatal)\b))|"
      rf"(?P<closed_>Connection closed by remote peer)(?: (?P<peer___>{_SOCKET_ADDRESS}))?|"
      # (the last of NCCL's connect retries, after which it gives up: "NCCL INFO
      # socketPollConnect: connect returned No route to host, retrying (34/34) after sleep ...")
      r"\bconnect returned (?P<connect_error>[A-Z][\w ]{2,40}), retrying "
      r"\((?P<connect_tries>\d+)/(?P=connect_tries)\)|"
      # (an RDMA completion queue's failed entry, as collective libraries on verbs print it:
      # "CQE ERROR wr_id=3 status=12(transport retry counter exceeded) opcode=1 ...")
      r"\bCQE (?:ERROR|[Ee]rror)\b[^\n]{0,120}?\bstatus ?[=:] ?(?P<status_>\d+)|"
      # (NCCL's socket connect that failed, named by its function without "NCCL WARN": the
      # last error torch's NCCL error repeats, a title ("socketStartConnect: Connect to
      # 10.0.0.2<35611> failed : Software caused connection abort"))
      r"\b(?:nccl)?[Ss]ocket(?:Start|Poll)?Connect: [Cc]onnect to (?P<peer______>\S+) failed",
      ("NCCL WARN", "NET/", "Connection closed by remote peer", "connect returned", "CQE ",
       "StartConnect: ", "PollConnect: ", "SocketConnect: "),
      "NCCL network failure between ranks", tier=2.0,
      example="node03:41377:41955 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
      "from peer 10.20.0.14<55437> with status=12 opcode=0 len=0 vendor err 129 (Send)",
      explanation="NCCL lost a connection between ranks. Either a peer process died (its own log "
      "has the first error) or the network failed (an InfiniBand link down or flapping, an RDMA "
      "error).",
      remedy="Check the other ranks' logs first; then the links (`ibstat`, port error counters) "
      "and NCCL_DEBUG=INFO output; set NCCL_IB_HCA / NCCL_SOCKET_IFNAME if the wrong interface is "
      "used.")


# NCCL's socket transport, and its bootstrap, got a longer message from a peer than the
# receive posted for it ("NET/Socket : peer 10.0.0.2<35611> message truncated : receiving
# 1048576 bytes instead of 65536", "Message truncated : received 16 bytes instead of 8"): the
# ranks disagree on a collective (its size, its order, or settings such as NCCL_PROTO that
# differ between them), or the stream was corrupted.
fixed("nccl/message-truncated",
      rf"NET/Socket ?: peer (?P<peer>{_SOCKET_ADDRESS}) message truncated ?: receiving "
      r"(?P<received_bytes>\d+) bytes instead of (?P<expected_bytes>\d+)|"
      r"NCCL WARN Message truncated ?: received (?P<received_bytes_>\d+)(?:,\d+)? bytes instead "
      r"of (?P<expected_bytes_>\d+)",
      ("message truncated", "Message truncated"),
      "A rank received a longer NCCL message than it expected", tier=2.0,
      example="node04:2211:2302 [1] NCCL WARN NET/Socket : peer 10.0.0.2<35611> message "
      "truncated : receiving 1048576 bytes instead of 65536.",
      explanation="NCCL received more data from a peer than the operation it had posted "
      "expects. The ranks disagree about a collective: a different size or order of "
      "collectives on one rank, or an NCCL setting (NCCL_PROTO, NCCL_ALGO, the NCCL version) "
      "that differs between them; more rarely a network that corrupts the stream.",
      remedy="Run every rank with the same code, NCCL version and NCCL_* settings; set "
      "TORCH_DISTRIBUTED_DEBUG=DETAIL to have PyTorch check that the ranks' collectives match; "
      "then check the link to the peer named here.")


@signature("nccl/communicator-aborted",
           r"NCCL communicator was aborted(?: on rank (?P<rank>\d+))?(?:\.\s*Original reason for "
           r"failure was: (?P<reason>.+))?",
           ("communicator was aborted",), "NCCL communicator aborted", tier=3.5,
           example="RuntimeError: NCCL communicator was aborted on rank 3. Original reason for "
           "failure was: NCCL error: unhandled system error, NCCL version 2.14.3")
def _communicator_aborted(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    reason = f" ({numbers['reason']})" if numbers.get("reason") else ""
    explanation = f"The communicator was aborted because of an earlier failure{reason}: an echo."
    return advice(sig, numbers, explanation, _COLLECTIVE_REMEDY)


fixed("nccl/operations-failed",
      r"Some NCCL operations have failed or timed out", ("NCCL operations have failed",),
      "NCCL took the process down after failed collectives", tier=3.5,
      example="[rank0]:[E1122 03:12:40.133101 ProcessGroupNCCL.cpp:1681] [PG ID 0 PG GUID "
      "0(default_pg) Rank 0] Some NCCL operations have failed or timed out. Due to the "
      "asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
      "corrupted/incomplete data.",
      explanation="After a failed or timed-out collective PyTorch takes the process down, since "
      "later GPU work could run on incomplete data: an echo of the failure reported before it.",
      remedy=_COLLECTIVE_REMEDY)


@signature("nccl/unique-id-fetch",
           # (PyTorch 1.11 to 2.0 spelt it "retreiving")
           r"is setting up NCCL communicator and retr(?:ie|ei)ving ncclUniqueId from "
           r"\[(?P<from_rank>\d+)\].*?(?:got error|error): (?P<reason>.+)",
           ("ving ncclUniqueId",), "A rank could not get the NCCL id from another rank",
           tier=3.0,
           example="torch.distributed.DistBackendError: [1] is setting up NCCL communicator and "
           "retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but "
           "store->get('0') got error: Connection reset by peer")
def _unique_id_fetch(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        f"A rank could not get the NCCL id from rank {numbers.get('from_rank', 0)}: that rank "
        "died or hung before creating it (look at its log), or the store at "
        "MASTER_ADDR:MASTER_PORT is unreachable.")
    return advice(sig, numbers, explanation, _COLLECTIVE_REMEDY)


@signature("nccl/store-timeout",
           r"Timed out after (?P<timeout_s>\d+) seconds waiting for clients\.\s*(?P<joined>\d+)/"
           r"(?P<world_size>\d+) clients joined",
           ("waiting for clients",), "Rendezvous timed out: not every rank joined", tier=3.0,
           example="torch.distributed.DistStoreError: Timed out after 901 seconds waiting for "
           "clients. 1/2 clients joined.")
def _store_timeout(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        f"Only {numbers.get('joined', '?')} of {numbers.get('world_size', '?')} ranks reached "
        f"the rendezvous within {numbers.get('timeout_s', '?')} s: the others crashed on "
        "start-up, are still queued, or point at a different MASTER_ADDR/MASTER_PORT.")
    remedy = ("Check the logs of the ranks that did not join; make MASTER_ADDR/MASTER_PORT and "
              "WORLD_SIZE identical everywhere.")
    return advice(sig, numbers, explanation, remedy)


@signature("nccl/gloo-timeout",
           r"Timed out waiting (?P<timeout_ms>\d+)ms for (?P<operation>\w+) operation to complete",
           ("Timed out waiting",), "Gloo collective timed out", tier=3.0,
           example="RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] "
           "Timed out waiting 1800000ms for recv operation to complete")
def _gloo_timeout(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (f"A Gloo {numbers.get('operation', '')} waited {numbers.get('timeout_ms', '?')} "
                   "ms for a peer. " + _COLLECTIVE_ECHO)
    return advice(sig, numbers, explanation, _COLLECTIVE_REMEDY)


fixed("nccl/gloo-peer-closed",
      r"gloo[^\n]{0,500}?Connection closed by peer(?: \[(?P<peer>[^\]]+)\])?",
      ("Connection closed by peer",), "A peer process went away (Gloo)", tier=3.0,
      example="RuntimeError: [/opt/conda/third_party/gloo/gloo/transport/tcp/pair.cc:598] "
      "Connection closed by peer [10.1.1.2]:62581",
      explanation="A peer process closed its connection, most likely because it crashed: look "
      "at its log.",
      remedy=_COLLECTIVE_REMEDY)


# The process group's watchdog ending the job, its reason cut off or on a line of its own
# (with the reason on the same line, the timeout or error signature reads that line first).
# c10d's own socket layer (the TCP store of init_process_group, its rendezvous) raises the
# system's words alone, with no library's name before them ("RuntimeError: Connection reset by
# peer" under the init_process_group frame): other Python libraries raise ConnectionError's
# subclasses for these, not a RuntimeError or torch's DistNetworkError.
fixed("nccl/store-connection",
      LINE_HEAD + r"(?:RuntimeError|(?:torch\.distributed\.)?DistNetworkError): (?P<socket_error>"
      r"Connection reset by peer|Connection refused|No route to host|Broken pipe|Connection "
      r"timed out)\s*$",
      ("RuntimeError: Connection", "RuntimeError: No route", "RuntimeError: Broken pipe",
       "DistNetworkError: "),
      "A rank lost its connection to the rendezvous store or a peer", tier=3.0,
      example="RuntimeError: Connection reset by peer",
      explanation="PyTorch's distributed socket layer (the TCP store that init_process_group "
      "and the rendezvous use) lost or could not open a connection: the rank that hosts the "
      "store (MASTER_ADDR) exited or crashed first, or the network between the machines blocks "
      "the port or routes over the wrong interface.",
      remedy="Check the log of the rank at MASTER_ADDR first; then that MASTER_ADDR:MASTER_PORT "
      "is reachable from every machine (`nc -zv MASTER_ADDR MASTER_PORT`, firewalls) and that "
      "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME name an interface both machines share.")


fixed("nccl/watchdog-terminated", r"watchdog thread terminated with exception",
      ("watchdog thread terminated",), "The NCCL watchdog stopped the process group",
      tier=3.1, group="nccl-timeout",
      example="c10::DistBackendError: [PG 0 Rank 1] Process group watchdog thread terminated "
      "with exception",
      explanation="The process group's watchdog thread raised, which ends the job: a collective "
      "timed out or NCCL reported an error; the message after it (or the rank's lines above it) "
      "says which. " + _COLLECTIVE_ECHO,
      remedy=_COLLECTIVE_REMEDY)


# torch built without NCCL (its Windows and macOS wheels), asked for the NCCL backend:
# "RuntimeError: Distributed package doesn't have NCCL built in".
fixed("nccl/not-built-in",
      r"\bDistributed package doesn'?t have NCCL(?:\W{1,6})? built in\b",
      ("have NCCL",), "This PyTorch has no NCCL (built without it)", tier=0.2,
      example="RuntimeError: Distributed package doesn't have NCCL built in",
      explanation="The job asked torch.distributed for the NCCL backend, but this PyTorch was "
      "built without NCCL: the Windows and macOS wheels have none (NCCL runs on Linux only).",
      remedy="On Windows, use the gloo backend (`init_process_group(backend=\"gloo\")`, or the "
      "launcher's option for it; accelerate and LLaMA-Factory pick it where NCCL is missing), "
      "or run the job under Linux or WSL2 with a CUDA build of PyTorch.")


# NCCL's proxy could not allocate the buffer a remote rank asked it for, over the bootstrap
# network ("bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130)"):
# the shared memory or file descriptors NCCL maps for its connections ran short, in a
# container most often (a small /dev/shm, a low open-files limit).
fixed("nccl/remote-allocation",
      r"\[Rem Allocator\] Allocation failed",
      ("Rem Allocator",), "NCCL could not allocate a buffer a remote rank asked for",
      tier=1.5,
      example="node01:2231:2290 [0] bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation "
      "failed (segment 0, fd 130)",
      explanation="NCCL's proxy thread could not allocate (or map) the buffer another rank "
      "asked for when the ranks connected: the shared memory or file descriptors it maps for "
      "each connection ran short. The collectives of the job then fail or hang at their setup.",
      remedy="Give the job more shared memory and file descriptors: `docker run --shm-size=16g "
      "--ulimit nofile=1048576:1048576` (or `ipc: host`), a larger /dev/shm in Kubernetes (an "
      "emptyDir with medium: Memory), and `ulimit -n` raised where the job starts; rerun with "
      "NCCL_DEBUG=INFO to see which transport it set up. " + _COLLECTIVE_REMEDY)


# A rank told by another to dump its state because a collective timed out (PyTorch 2.3 on: the
# rank whose watchdog caught the timeout signals the others through the store, "Received a dump
# signal due to a collective timeout from this local rank" / "... from rank 3", and each then
# writes its flight recorder): the timeout's own message may be in another rank's log only.
fixed("nccl/dump-signal",
      r"\bReceived a dump signal due to a collective timeout\b|"
      r"\b(?:Observed|Received) flight recorder dump signal from another rank\b",
      ("dump signal",), "NCCL collective timed out (a rank told to dump its state)",
      tier=3.0, group="nccl-timeout", extract=lambda match, line: _progress(line),
      example="[rank6]:[E1022 03:18:42.578589335 ProcessGroupNCCL.cpp:1772] [PG ID 0 PG GUID "
      "0(default_pg) Rank 6] Received a dump signal due to a collective timeout from this "
      "local rank and we will try our best to dump the debug info. Last enqueued NCCL work: "
      "34, last completed NCCL work: 34.",
      explanation="A collective timed out: the rank whose watchdog caught it told every rank to "
      "dump its debug information (the flight recorder), and this rank received that signal. "
      "Its last enqueued and last completed work say how far it got; the rank whose last "
      "completed work is behind the others is the one that stalled. " + _COLLECTIVE_ECHO,
      remedy=_COLLECTIVE_REMEDY)


# The watchdog's timeout seen only in the stack trace c10 prints under it, the message above
# cut off or lost behind a launcher's prefix ("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::
# checkTimeout(...)"): checkTimeout builds an exception only when a collective ran past its
# timeout (an error NCCL reported goes through other frames), so the frame is the timeout's.
fixed("nccl/watchdog-timeout-frame", r"\bProcessGroupNCCL::WorkNCCL::checkTimeout\(",
      ("WorkNCCL::checkTimeout",), "NCCL collective timed out (the watchdog's stack trace)",
      tier=3.0, group="nccl-timeout",
      example="frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::"
      "chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f1c4c10ec62 in "
      "/opt/conda/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)",
      explanation="The stack trace under the watchdog's exception passes through WorkNCCL::"
      "checkTimeout, where the watchdog raises for a collective that ran past its timeout: the "
      "message itself (with its rank, operation and times) is cut from the log or above it. "
      + _COLLECTIVE_ECHO,
      remedy=_COLLECTIVE_REMEDY)


# NCCL found no network interface to use: NCCL_SOCKET_IFNAME names none that exists (or is up),
# or the host has none but loopback ("Bootstrap : no socket interface found", "NET/Socket : no
# interface found").
fixed("nccl/no-interface",
      r"\b(?:Bootstrap|NET/Socket) : no (?:socket )?interface found",
      ("interface found",), "NCCL found no network interface", tier=0.9,
      example="node01:4101:4101 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface "
      "found",
      explanation="NCCL looked for a network interface for its sockets and found none: "
      "NCCL_SOCKET_IFNAME names an interface this host does not have (or that is down), or the "
      "host has no interface but loopback. Every rank on it fails at the communicator's start.",
      remedy="List the interfaces (`ip -brief address`) and set NCCL_SOCKET_IFNAME to one that "
      "is up on every node (a prefix such as `eth` matches eth0, eth1; `^docker,lo` excludes), "
      "or unset it to let NCCL choose.")


# Peer-to-peer access between two GPUs that the platform does not offer: CUDA's status 217
# ("peer access is not supported between these two devices", under NCCL's P2P transport), and
# the same told by the writer ("NCCL P2P issue using two RTX 5090", "training fails with an NCCL
# error saying P2P access is not supported"; not a condition, a question or advice). GeForce
# cards (RTX 4090, 5090) have no P2P over PCIe, and an IOMMU or PCIe ACS can block it on others.
_P2P = r"(?:P2P|peer-to-peer \(P2P\)|peer-to-peer)"
P2P_UNSUPPORTED_TOLD = (
    r"\b" + _P2P + r" (?:access |communication |transport )?(?:is |was )?(?:not supported|"
    r"unsupported)\b|"
    r"\bNCCL " + _P2P + r" (?:access |communication |transport )?(?:issues?|errors?|failures?|"
    r"problems?|fail(?:s|ed)?|bug)\b")
fixed("nccl/p2p-unsupported",
      r"\bpeer access is not supported between these two devices\b|"
      # (not a condition, advice or a guess: "if P2P is not supported ...", "maybe it is an
      # NCCL P2P issue", "this looks like an NCCL P2P problem")
      + unless_words(r"if|whether|you|your|should|could|would|might|may|check\w*|make sure|"
                     r"maybe|perhaps|probably|seems?|looks? like|guess|suspect", stop=r"\n?")
      + r"(?i:"
      + P2P_UNSUPPORTED_TOLD + r")",
      ("peer access is not supported", "P2P", "peer-to-peer"),
      "GPU peer-to-peer (P2P) access is not available to NCCL", tier=0.5,
      example="Training fails with an NCCL error: P2P access is not supported between the "
      "GPUs.",
      explanation="NCCL's peer-to-peer transport needs the GPUs to read each other's memory "
      "directly over PCIe or NVLink. GeForce cards (RTX 3090 without NVLink, 4090, 5090) do not "
      "offer P2P over PCIe, and on other cards an IOMMU or PCIe Access Control Services (ACS) "
      "between them can block it; some NCCL and driver releases also failed on new consumer "
      "GPUs. A collective then fails at its first call while a single GPU works.",
      remedy="Turn the P2P transport off so NCCL goes through host memory: `export "
      "NCCL_P2P_DISABLE=1` (set it in every rank's environment, e.g. the launcher's `env` or a "
      "Ray runtime_env, not only in the driver script); vLLM can also skip its own P2P check "
      "with `--disable-custom-all-reduce`. Check what the GPUs allow with `nvidia-smi topo -p2p "
      "r`; on a server, turn off ACS on the PCIe switches or boot with `iommu=pt`. Update NCCL "
      "and the driver on new GPUs (RTX 50-series needs NCCL 2.26 or later).")


# NCCL's connect retries while a peer is not listening yet ("Call to connect returned
# Connection refused, retrying"): a start prints a few of them and goes on; a log that ends on
# them is a bootstrap that never connected (the peer died, or listens elsewhere).
@signature("nccl/connect-retrying",
           # (older NCCL's words; newer NCCL counts its retries, "retrying (34/34)", and its
           # last one is nccl/network)
           r"\bCall to connect returned (?P<connect_error>[A-Z][\w ]{2,40}), retrying\b",
           ("Call to connect returned",), "NCCL retried a connection to a peer",
           severity=Severity.WARNING, tier=4.0, group="connect-retrying",
           example="node1:16:63 [0] NCCL INFO Call to connect returned Connection refused, "
           "retrying")
def _connect_retrying(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    error = numbers.get("connect_error", "an error")
    count = int(numbers.get("_count") or 1)
    remedy = ("Find why the peer was not listening: its own log (it died or is still starting), "
              "the address NCCL chose (NCCL_DEBUG=INFO shows `NET/Socket : Using ...`; set "
              "NCCL_SOCKET_IFNAME to the interface the nodes reach each other on), and a "
              "firewall between the nodes.")
    if numbers.get("_log_end") and count >= _RETRIES_THAT_END:
        return advice(sig, numbers, f"The log ends while NCCL is still retrying its connection "
                      f"to a peer ({count} times: '{error}'): the ranks never connected, so the "
                      "distributed start failed. The peer process died before it listened, or "
                      "it listens on another address or interface than the one this rank "
                      "dials.", remedy, severity=Severity.ERROR, tier=2.0,
                      title="NCCL could not connect to a peer at start")
    return advice(sig, numbers, f"NCCL retried a connection to a peer ({error}): normal while "
                  "the other ranks start; it matters only when the retries go on until the job "
                  "fails.", remedy)


_RETRIES_THAT_END = 3  # retries the log ends on that make a failed start, not a slow one
