"""The GPU, its memory or its links failed: Xid events, ECC errors, a GPU off the bus.

The NVIDIA driver reports GPU faults to the kernel log as Xid events (``NVRM: Xid (PCI:...):
79, ...``); each Xid is judged from gpu-audit's Xid catalogue, the same one `gpu-audit scan`
uses, so an Xid has one meaning and one severity everywhere. Some Xids are the program's own
fault (a kernel's bad memory access), most are the machine's. CUDA reports the same faults to
the program as ECC, NVLink or unknown errors.

Why it matters: a machine fault (a GPU off the bus, uncorrectable memory errors, an NVLink
failure) fails the next job on the node the same way, or lets it compute on corrupted data.

Example: ``NVRM: Xid (PCI:0000:00:1e): 48, pid='<unknown>', ...`` or
``pynvml.NVMLError_GpuIsLost: GPU is lost``.

Fix: for the machine's faults, drain the node and reset the GPU or reboot, and return a GPU
that fails again; the remedy is the Xid catalogue's action for the code found.
"""

from __future__ import annotations

import re
from typing import Any

from gpu_audit.explain.prefixes import LINE_HEAD
from gpu_audit.explain.signatures.guards import (
    CURED_NEEDLES,
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
    named,
    signature,
)
from gpu_audit.knowledge.cuda_errors import status_check
from gpu_audit.knowledge.xid import recovery_action, xid_info, xid_severity
from gpu_audit.model import Severity

CLASS = document_class("gpu-hardware", __doc__)

_PCI = r"(?:[0-9A-Fa-f]{3,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"  # a PCI bus id

# Where in the causal chain an Xid of each origin sits (see the registry's tiers).
_XID_TIER = {"hardware": 0.0, "driver": 0.0, "informational": 0.5, "unknown": 0.5,
             "application": 1.5, "consequence": 2.5}


def _xid(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    rest = found.pop("rest", "") or ""
    if pid := re.search(r"\bpid=['\"]?(\d+)", rest):
        found["pid"] = int(pid[1])
    name = re.search(r"\bname=([^,\s]+)", rest)
    if name and not name[1].startswith("<"):  # "<unknown>" is no name
        found["process_name"] = name[1]
    if action := recovery_action(line):
        found["recovery_action"] = action
    detail = re.sub(r"\b(?:pid|name)=[^,]*,\s*", "", rest).strip(" ,.")
    if detail:
        found["detail"] = detail[:200]
    return found


@signature("gpu-hardware/device-plugin-xid",
           # the NVIDIA device plugin for Kubernetes: it passes over the Xids a program causes
           # and takes the GPU out of service for the others
           r"XidCriticalError: Xid=(?P<xid>\d+)(?: on Device=(?P<device>[^\s,;]+))?",
           ("XidCriticalError",), "The device plugin marked a GPU unhealthy after an Xid",
           key_field="xid", tier=0.0,
           example="I0723 08:12:44.000000 1 health.go:150] XidCriticalError: Xid=79 on "
           "Device=GPU-5c3a1e2b-0000-0000-0000-000000000000; marking device as unhealthy.")
def _device_plugin_xid(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    info = xid_info(int(numbers.get("xid", 0)))
    numbers = dict(numbers, xid_mnemonic=info.mnemonic)
    device = str(numbers.get("device") or "a GPU")
    explanation = (
        f"The NVIDIA device plugin saw Xid {info.xid} on {device} and marked it unhealthy: "
        "Kubernetes schedules no more pods on it. The plugin ignores the Xids a program causes "
        f"itself, so it took this one for a fault of the GPU or the driver. Xid {info.xid}: "
        f"{info.meaning}.")
    severity = max(xid_severity(info.xid), Severity.ERROR, key=lambda s: s.rank)
    return advice(sig, numbers, explanation, info.action, severity=severity,
                  title=f"The device plugin marked a GPU unhealthy (Xid {info.xid})")


@signature("gpu-hardware/xid-mention",
           # a report names the GPU (a number, a PCI address) or the node, or says the GPU met
           # the Xid ("the GPU encountered Xid 79 again", "we hit an Xid 31"; not "if you hit
           # Xid 79"); prose about Xids in general does not
           r"^(?=[^\n]*?(?:\bGPU ?#?\d|\bPCI\b|[0-9a-fA-F]{2}:[0-9a-fA-F]{2}[.:]|\bnode\w*\d)|"
           + unless_words("if|whether|you|your|may|might|can|could|should|would|when", start="")
           + r"\b(?i:encounter(?:ed|s|ing)?|hit|hits|hitting|got|gets|getting|threw|throws|"
           r"reported|logged|triggered|experienc(?:ed|es|ing)|saw|noticed|observed|"
           # (a tool's report of its GPU: "the device plugin reports that there is XID 94")
           r"reports?(?: that)? there (?:is|was|are|were)) (?:an? |the |another )?X[Ii][Dd]\b)"
           r"[^\n]*?(?<![\w-])X[Ii][Dd](?:\s+[Ee]rror)?[\s:=#]+(?P<xid>\d{1,3})\b(?P<rest>.*)",
           # (an Xid that alone is a warning is the root of a report where nothing else
           # failed, in a health tool's or a compact kernel log's form as in the driver's own)
           ("Xid", "XID"), "GPU Xid event", extract=_xid, key_field="xid", alone_root=True,
           example="gpu-health: node07 GPU 3 reported XID 79 at 02:41")
@signature("gpu-hardware/xid",
           r"NVRM: Xid \((?:PCI:)?(?P<pci_bus_id>[0-9A-Fa-f:.]+)\):\s*(?P<xid>\d+)"
           r"(?:,\s*(?P<rest>.*))?",
           # (an Xid that alone is a warning, 13 or 31, is what a report where nothing else
           # failed is about: the kernel's record of the fault, its root cause)
           ("Xid",), "GPU Xid event", extract=_xid, key_field="xid", alone_root=True,
           example="[ 5112.204870] NVRM: Xid (PCI:0000:00:1e): 48, pid='<unknown>', "
           "name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU "
           "in the framebuffer at partition 6, subpartition 0.")
def _xid_event(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    info = xid_info(int(numbers.get("xid", 0)))
    numbers = dict(numbers, xid_mnemonic=info.mnemonic)
    action = str(numbers.get("recovery_action") or "")
    severity = xid_severity(info.xid, action)
    where = f" on the GPU at PCI {numbers['pci_bus_id']}" if numbers.get("pci_bus_id") else ""
    name = f", {numbers['process_name']}" if numbers.get("process_name") else ""
    who = f" (pid {numbers['pid']}{name})" if numbers.get("pid") else ""
    explanation = f"The NVIDIA driver logged Xid {info.xid}{where}{who}: {info.meaning}."
    if info.origin == "application":
        explanation += " It usually comes from the program's own kernels, not from the hardware."
    elif info.origin == "consequence":
        explanation += " It follows another failure; on its own it is not the cause."
    if action:
        explanation += f" Required recovery action: {action}."
    title = f"Xid {info.xid}: {info.meaning.split(':')[0]}"
    return advice(sig, numbers, explanation, info.action, title=title, severity=severity,
                  tier=_XID_TIER.get(info.origin, 0.0))


_XID_ON_LINE = re.compile(r"\bXid\W{0,3}(79)\b", re.IGNORECASE)


def _off_the_bus(match: re.Match[str], line: str) -> dict[str, Any]:
    """The GPU's bus id, and the Xid where the same line names it ("A GPU that has fallen off
    the bus (Xid 79) ...")."""
    found = named(match, line)
    if xid := _XID_ON_LINE.search(line):
        found["xid"] = int(xid[1])
    return found


fixed("gpu-hardware/fallen-off-bus",
      # "GPU 0000:3b:00.0: GPU has fallen off the bus", and the kernel's longer "The NVIDIA GPU
      # 0000:b3:00.0 (PCI ID: ...) installed in this system has fallen off the bus"
      rf"(?:GPU (?:at )?(?:PCI:)?(?P<pci_bus_id>{_PCI})\b[^\n]{{0,160}}?)?(?:GPU )?has fallen "
      r"off the bus|fallen off the bus and is not responding|GPU is lost|NVMLError_GpuIsLost|"
      # the driver's status for it, in its assertions: "GPU lost from the bus [NV_ERR_GPU_IS_LOST]"
      r"GPUIsLost|GPU lost from the bus|NV_ERR_GPU_IS_LOST",
      ("fallen off the bus", "GPU is lost", "IsLost", "lost from the bus", "GPU_IS_LOST"),
      "GPU has fallen off the bus",
      severity=Severity.CRITICAL, tier=0.0, group="off-the-bus", extract=_off_the_bus,
      example="pynvml.NVMLError_GpuIsLost: GPU is lost",
      explanation="The driver can no longer reach the GPU over PCIe (Xid 79): a PCIe link "
      "failure, a power or thermal event, or a failing GPU. Everything running on it died, and "
      "it stays unusable until it is reset, usually by a reboot.",
      remedy=xid_info(79).action)

# A GPU lost, told in the writer's words ("we lost 1 GPU after the reboot", "one GPU is loss",
# "Lost GPU occurs again"): not its memory, its support or its hours, not in a condition or
# advice to the reader ("if you lose a GPU", "to avoid losing the GPU").
fixed("gpu-hardware/lost-told",
      unless_words(r"if|whether|you|your|may|might|prevent\w*|avoid\w*") +
      r"(?:\b(?:[Ll]ost|losing) (?:a |one |the |\d )?GPUs?\b(?!s? (?:memory|support|"
      r"acceleration|access|util\w*|hours?|time|cycles|compute|days|capacity|resources)\b)|"
      r"\bGPU is loss\b|"
      # (the GPU told being lost: "there is a message of GPU being lost")
      r"\bGPUs? (?:being|was|were|got|gets|keeps getting) lost\b|"
      # (or disconnected from the machine: "during training the GPU disconnected", "GPU
      # disconnection leads to training failure"; not a display or a session disconnected)
      r"\b(?:(?:the|my|our|one|a) (?:[\w-]+ )?)?GPUs? (?:(?:was|were|got|has|had|have|just|"
      r"suddenly|randomly|keeps?|kept) ){0,2}disconnect(?:ed|s|ing)?\b(?! from (?:the )?(?:"
      r"display|monitor|session))|\bGPU disconnections?\b|"
      # (or told falling off the bus: "our 4090 keeps falling off the bus mid-training", "GPU 3
      # fell off the bus again"; the writer's card, not a card in general: "a GPU that falls
      # off the bus ...")
      r"(?i:\b(?:(?:the|my|our|one|a|this) (?:[\w-]+ )?)?(?:GPUs?|cards?|[1-5]0[5-9]0(?: ?Ti)?|"
      r"[AHL]\d{2,3}s?|V100s?)(?: #?\d{1,2})?\b(?: (?!(?:that|which|when|if)\b)[\w-]+){0,4}? "
      r"(?:keeps |kept )?(?:fell|falls|falling|dropped|drops|"
      r"dropping) off the (?:PCIe? )?bus\b)|"
      # (a node that came back from a reboot with a GPU fewer: "gpu-3 came up short a GPU")
      # (or will be put back into service so: "gpu-2-4 will be added back short a GPU")
      r"(?i:\b(?:(?:came|comes|come|booted|boots) up|(?:added|brought|put|came|comes) back) "
      r"(?:short|missing) (?:a |one |\d )?GPUs?\b))|"
      # (in Chinese: the card lost, "发现显卡丢失", "训练时经常掉卡"; not in a clause that sets a
      # condition or guesses: "如果训练时掉卡，...")
      + unless_marks("如果|若|假如|要是|万一|可能|避免|防止|是否|会不会",
                     start=r"(?:^|(?<=[。！？；;!?，,]))", stop=r"\n。！？；;!?，,")
      + r"(?:(?:显卡|GPU|卡)丢失|掉卡)",
      ("lost", "Lost", "losing", "GPU is loss", "up short", "up missing", "back short",
       "back missing", "disconnect", "off the bus", "off the PCI", "丢失", "掉卡"),
      "A GPU was lost (told in the writer's words)",
      tier=0.0, group="off-the-bus",
      example="After the reboot we lost 1 GPU on node7, and slurmd does not start.",
      explanation="The writer says a GPU disappeared (or disconnected) from the machine: what "
      "the driver logs as Xid 79 (\"GPU has fallen off the bus\") and lspci shows as a device "
      "whose revision reads ff. Jobs on it die, and it stays unusable until it is reset, "
      "usually by a reboot.",
      remedy=xid_info(79).action)

# A GPU told vanishing from the machine in the writer's words and in the languages such reports
# are written in: "after a few hours the GPU disappears from nvidia-smi", "GPU 3 no longer shows
# up", "the card vanishes mid-training", "训练时经常掉卡", "GPUがnvidia-smiから消えて",
# "GPU가 nvidia-smi에서 사라지고", "видеокарта пропадает из nvidia-smi", "verschwindet die GPU",
# "la GPU desaparece", "le GPU disparaît", "a GPU some do nvidia-smi": what the driver logs as
# Xid 79. The card, not a process on it ("the python process disappears from nvidia-smi"), not
# a GPU described in general ("a GPU that falls off the bus disappears ..."), nor a condition,
# a question or advice ("if the GPU disappears ...", "显卡掉了怎么办").
_GONE_EN = (r"(?:disappear(?:s|ed)?|vanish(?:es|ed)?|drops? off|dropped off|drops? out|"
            r"dropped out|goes missing|went missing|is no longer (?:detected|visible|recogni[sz]ed|"
            r"listed|seen)|(?:no longer|stops?|stopped) (?:shows?|showing|appears?|appearing)"
            r"(?: up)?|(?:does ?n[o']t|did ?n[o']t) show up any ?more)")
fixed("gpu-hardware/vanished-told",
      unless_words(r"if|whether|you|your|may|might|could|would|should|can|prevent\w*|avoid\w*|"
                   r"when|how|what|why|typically|usually|often")
      + r"(?i:(?<!\ba )(?<!\bany )\b(?:GPU|card|graphics card|video card|[AHLV]100|H200|A6000|"
      r"A10G?|L40S?|T4|RTX ?\d{4}(?: ?Ti)?)s?(?: #?\d{1,2})? (?!(?:memory|usage|util\w*|load|"
      r"process\w*|fans?|clocks?|temp\w*|power)\b)(?:(?!that\b|which\b)\w+ ){0,3}?"
      + _GONE_EN + r"\b)|"
      + unless_marks("如何|怎么|怎样|如果|若|是否|为什么|避免|防止|可能|会不会|吗|もし|場合|方法|"
                     "ですか|만약|경우|방법|나요|까요")
      + r"(?:掉卡|显卡掉了|掉显卡|GPU掉了|卡掉了|显卡(?:突然|直接|就)?(?:消失|不见)了|"
      r"GPUが[^\n]{0,30}?(?:消え|認識されな|見えなくな)|"
      r"GPU(?:가|이)[^\n]{0,30}?(?:사라지|사라졌|사라집|인식이 안|인식되지 않|안 보이))"
      r"(?![^\n]*?(?:怎么办|怎么解决|吗|場合|ときは|경우|[？?]))|"
      r"^(?!(?i:[^\n]*\b(?:если|как|чтобы|wenn|falls|wie|si|cómo|para evitar|comment|"
      r"pour éviter|se (?:a|o)|caso|como)\b))(?i:[^\n]*?(?:(?:видеокарт\w*|GPU)[^\n.]{0,20}?"
      r"(?:пропада\w*|пропал\w*|отвалива\w*|отвалил\w*|исчеза\w*|исчез\w*)|"
      r"\b(?:verschwindet|verschwand) (?:die |eine |meine )?(?:GPU|Grafikkarte)|"
      r"\b(?:GPU|Grafikkarte) (?:\w+ )?(?:verschwindet|verschwand)|"
      r"\bGPU (?:\w+ ){0,3}?(?:desaparece|desapareció|disparaît|disparait|a disparu|"
      r"some d[oae]s?|sumiu|"
      r"desapareceu)\b|\bcarte graphique (?:\w+ )?(?:disparaît|a disparu)))",
      ("GPU", "card", "Card", "掉", "显卡", "видеокарт", "Grafikkarte", "100", "H200", "A6000",
       "A10", "L40", "T4", "RTX"),
      "A GPU vanished from the machine (told in the writer's words)",
      tier=0.0, group="off-the-bus",
      yields_to_titles=True,
      example="After a few hours the GPU disappears from nvidia-smi and only a reboot brings "
      "it back.",
      explanation="The writer says a GPU disappeared from the machine (nvidia-smi no longer "
      "lists it): what the driver logs as Xid 79 (\"GPU has fallen off the bus\") and lspci "
      "shows as a device whose revision reads ff. Jobs on it die, and it stays unusable until "
      "it is reset, usually by a reboot; a card that does it again needs service.",
      remedy=xid_info(79).action)

# A machine that powers off, reboots or goes dark under GPU load, told in the writer's words
# ("PC shuts down during an iteration", "Machine restarts when running TensorFlow with GPU",
# "The power keeps cutting off during training", "训练时电脑自动重启"): the machine, then its
# going off, then when (or the going off, then the machine); read in a thread's title, where the
# writer says what happened to their own machine.
# (the going off as a verb, not "a system reboot is required"; then when: under a load)
_GOES_OFF = (r"(?:shuts? ?down|shutdowns|shuts off|turns? off|powers? (?:off|down)|reboots|"
             r"rebooted|"
             r"restarts|restarted|cold[- ]boots|go(?:es)? (?:black|blank|off|dark)|"
             r"(?:went|turns?|turned) (?:black|blank|dark)|(?:just|will|"
             r"would|then|suddenly|randomly) (?:shut ?down|shutdown|reboot|restart|turn off|"
             r"power off))")
_UNDER_LOAD = (r"[^\n]{0,40}?\b(?:during|while|in the middle of)\b|[^\n]{0,40}?\b(?:when|"
               r"whenever|after|under)\b[^\n]{0,40}?\b(?:train\w*|epochs?|iterations?|steps?|running|run|inference|generat\w*|"
               r"render\w*|load\w*|GPU|CUDA|TensorFlow|PyTorch|model|example|batch\w*|sampl\w*|"
               # (a heavier mode switched on: "when I activate Hires.fix", "when I enable
               # the upscaler")
               r"benchmark\w*|activat\w*|enabl\w*|upscal\w*)")
POWER_LOSS_TOLD = (
    # (not in a condition, a possibility or advice: "if your PC restarts when ...")
    # (nor a screen that sleeps while the run goes on: "the screen goes black after 10 minutes
    # of idle, training keeps running")
    r"^(?!(?i:[^\n]*\b(?:idle|screen ?savers?|sleep mode|power[- ]sav\w+|keeps? running|"
    r"still running)\b))"
    + unless_words(r"if|whether|you|your|may|might|can|could|should|would|avoid\w*|prevent\w*",
                   start="") +
    r"(?i:"
    # (and the operating system named for the machine: "Windows 10 shuts down when ...")
    # (and the whole OS, its release run on: "Ubuntu18 crashes and reboots while training",
    # "the O/S freezes and restarts during an epoch")
    r"\b(?:PC|computer|machine|desktop|system|workstation|laptop|rig|monitor|screen|display|"
    r"server|Windows(?: \d{1,2})?|Ubuntu(?: ?\d{2}(?:\.\d{2})?)?|Linux|OS|O/S)s? (?:just |"
    r"suddenly |randomly |always |then |keeps? |hard )?(?:(?:crash(?:es|ed)?|freez(?:es|ed)|"
    r"hangs|hung) and )?" + _GOES_OFF
    + r"(?: automatically| by itself)?\b(?:"
    + _UNDER_LOAD + r")|"
    r"\b(?:shuts? ?down|shutdowns?|reboots|restarts|turns? off) (?:my |the |our )?(?:PC|"
    r"computer|machine|desktop|workstation)\b(?:" + _UNDER_LOAD + r")|"
    # (the system's crash and reboot as nouns: "repeating system crash/reboot when using the
    # imagenet examples")
    r"\bsystem (?:crash(?:es)?(?:/| and | or ))?(?:reboots?|restarts?|shutdowns?)\b(?:"
    + _UNDER_LOAD + r")|"
    # (the going off alone, told sudden: "Immediate reboot (hard crash) when training"; not a
    # general statement: "sudden power-offs under load are often caused by ...")
    r"\b(?:immediate|sudden|instant|random|hard) (?:reboot|restart|shutdown|power[- ]off)s?\b"
    r"(?![^\n]*\b(?:often|usually|typically|commonly|generally|can|may|might)\b)(?:"
    + _UNDER_LOAD + r")|"
    r"\bpower (?:keeps |is |was |gets )?(?:cut(?:s|ting)? off|goes off|shuts off)\b(?:"
    + _UNDER_LOAD + r")|"
    # (the load first: "training crashing and rebooting the server")
    r"\b(?:train\w*|running|inference)\b[^\n]{0,40}?\b(?:reboot(?:s|ing)|restart(?:s|ing)|"
    r"shut(?:s|ting) down|turn(?:s|ing) off|power(?:s|ing) off) (?:my |the |our |a )?(?:PC|"
    r"computer|machine|desktop|workstation|server|system)\b|"
    # (when first, then the machine going off: "every time I run train.py, my computer
    # restarts"; not a program that restarts something: "the server restarts the job")
    r"\b(?:every ?time|whenever|each time|as soon as|when|while|after)\b[^\n]{0,60}?\b(?:run|"
    # (and the power itself: "when I train it on my laptop, after a while the power goes off")
    # (and the screens: "after a few minutes of training the monitors go black")
    r"start|launch|train)\w*\b[^\n]{0,60}?\b(?:my|the|our|both|all) (?:whole |entire )?(?:PC|"
    r"computer|machine|"
    r"desktop|workstation|laptop|system|server|power|monitor|screen|display)s? (?:just |"
    r"suddenly |randomly |always |then |immediately )?" + _GOES_OFF + r"(?! (?:the|a|an|my|"
    r"its?|from|training|jobs?|process\w*|services?)\b)|"
    # (the screens going black beside the card's fans at full speed, a GPU that stopped
    # answering: "the monitors go black and the GPU fans go to 100%")
    r"\b(?:screens?|monitors?|displays?) (?:just |suddenly |then )?(?:go|goes|went|turns?|"
    r"turned) (?:black|blank|dark)\b[^\n]{0,60}?\bfans?\b[^\n]{0,30}?\b(?:100 ?%|max\w*|"
    r"full(?: speed| blast)?)|"
    r"\bfans?\b[^\n]{0,30}?\b(?:100 ?%|max\w*|full(?: speed| blast)?)[^\n]{0,60}?\b(?:screens?|"
    r"monitors?|displays?) (?:just |suddenly |then )?(?:go|goes|went|turns?|turned) (?:black|"
    r"blank|dark)\b|"
    r"(?:训练|跑|运行|推理)[^\n]{0,15}?(?:电脑|主机|机器|系统)?(?:会|就|直接|突然|自动)*"
    r"(?:重启|关机|断电|黑屏))")
fixed("gpu-hardware/power-loss-told", POWER_LOSS_TOLD,
      ("shut", "reboot", "restart", "turns off", "turn off", "cold boot", "cold-boot", "power",
       "goes ", "black", "blank", "dark", "重启", "关机", "断电", "黑屏"),
      "The machine powers off or restarts under GPU load (told in the writer's words)",
      tier=3.0, group="power-loss",
      example="PC shuts down during an iteration",
      explanation="The writer says the whole machine turns off, reboots or loses its display "
      "while the GPU works hard, with no error message: what the power supply does when the "
      "GPU's load (and its short spikes, far above its rated power on recent cards) exceeds "
      "what it or its cables can deliver, or what the board or the GPU does to protect itself "
      "from overheating. It is no software failure, and the run leaves no error behind.",
      remedy="Check the power supply: its rating against the GPU's (with headroom for the "
      "spikes), separate PCIe power cables rather than one daisy-chained, a healthy unit (swap "
      "it to test). Cap the GPU's power meanwhile (`sudo nvidia-smi -pl <watts>`, below its "
      "default) and watch its temperature and draw during the run (`nvidia-smi "
      "--query-gpu=temperature.gpu,power.draw,clocks.sm --format=csv -l 1`); clean the cooler "
      "and improve the case's air flow if it runs hot. After a reboot, `journalctl -b -1 -k` "
      "(Linux) or the Event Viewer's Kernel-Power 41 entries (Windows) show how it stopped.")

# The writer naming the power supply as what failed ("It is a hardware PSU issue", "our issue
# turned out to be an issue with the power supply", "caused by an undersized PSU"): the machine
# that crashed or went off under GPU load, told by its cause (not advice, a condition or a
# general statement: "check whether your PSU ...", "reboots are often caused by a weak PSU").
_POWER_SUPPLY = r"(?:PSUs?|power suppl(?:y|ies))"
# a supply's protections: over-current, over-power, under- and over-voltage, short circuit
_PROTECTION = (r"(?:OCP|OPP|UVP|OVP|SCP|over-?current|over-?power|under-?voltage)"
               r"(?:/(?:OCP|OPP|UVP|OVP|SCP))*\b")
POWER_SUPPLY_TOLD = (
    unless_words(r"if|whether|you|your|may|might|can|could|should|would|check\w*|make sure|often|"
                 r"usually|typically|common\w*|most") + r"(?i:"
    r"\b(?:it|this|that|the (?:issue|problem|crash\w*|cause))(?:'s| is| was| turned out to be| "
    r"turns out to be)(?: a| an| the)?(?: hardware)? " + _POWER_SUPPLY
    + r" (?:issue|problem|fault|failure)\b|"
    r"\b(?:issue|problem|crash\w*|reboots?|shutdowns?)\b[^\n]{0,20}?\b(?:turned out to be|was|is)"
    r"(?: (?:an? )?(?:issue|problem))? with (?:the |our |my )?" + _POWER_SUPPLY + r"\b|"
    r"\b(?:caused|triggered) by (?:an? |the |our |my )?(?:undersized |weak |faulty |insufficient |"
    r"failing |bad |broken )?" + _POWER_SUPPLY + r"\b|"
    # the supply's protection tripping ("latched PSU OCP/UVP protection", "tripped the power
    # supply's over-current protection", "the PSU's OCP trips"), or the supply tripping
    r"\b(?:trip(?:s|ped|ping)?|latch(?:es|ed|ing)?|trigger(?:s|ed|ing)?|set(?:s|ting)? off) "
    r"(?:the |its |our |my |a )?" + _POWER_SUPPLY + r"(?:'s?)? " + _PROTECTION + r"|"
    # (not any supply: "a PSU's OCP trips when ...")
    r"(?<!\ba )" + _POWER_SUPPLY + r"(?:'s?)? " + _PROTECTION + r"(?: protection)? (?:(?:was |got "
    r"|is )?(?:trip(?:s|ped|ping)?|latch(?:es|ed|ing)?|triggered|kick(?:s|ed)? in))\b|"
    r"(?<!\ba )" + _POWER_SUPPLY + r" (?:(?:keeps |kept |was |is )?tripping|trips|tripped)\b|"
    # the card's power cable found at fault: "it seems to be because of a weak power cable",
    # "the culprit was a loose PCIe power connector"
    r"\b(?:because of|due to|caused by|culprit (?:was|is)|cause (?:was|is)|problem (?:was|is)|"
    r"issue (?:was|is)) (?:an? |the |my |our )?(?:weak|faulty|bad|loose|broken|damaged|"
    r"defective|burnt|melted|cheap) (?:PCIe |PCI-E |GPU |[68][- ]?pin |12VHPWR )?power "
    r"(?:cables?|connectors?|leads?|plugs?)\b)")
fixed("gpu-hardware/power-supply-told", POWER_SUPPLY_TOLD,
      ("PSU", "power suppl", "Power suppl",
       *(f"ower {part}" for part in ("cable", "Cable", "connector", "Connector", "lead", "Lead",
                                     "plug", "Plug"))),
      "The power supply failed under GPU load (told in the writer's words)",
      tier=3.0, group="power-loss",
      example="It is a hardware PSU issue: the card trips the supply's limiter at full load.",
      explanation="The writer says the power supply is what failed: under the GPU's load (and "
      "its short spikes, far above its rated power on recent cards) the supply, its cables or "
      "its protection (over-current or per-rail limits) cut the machine off or made it crash. "
      "It is no software failure, and the run leaves no error behind.",
      remedy="Check the power supply: its rating against the GPU's (with headroom for the "
      "spikes), separate PCIe power cables rather than one daisy-chained, per-rail limits on "
      "workstation supplies, a healthy unit (swap it to test). Cap the GPU's power meanwhile "
      "(`sudo nvidia-smi -pl <watts>`, below its default) and watch its draw during the run "
      "(`nvidia-smi --query-gpu=power.draw,clocks.sm --format=csv -l 1`).")

# lspci reads a revision of ff when the device's PCIe configuration space answers all ones:
# the GPU no longer responds on the bus (its other functions, audio and USB, read ff too).
fixed("gpu-hardware/lspci-rev-ff",
      rf"(?:{LINE_HEAD}|(?<![\w.:]))"
      r"(?P<pci_bus_id>(?:[0-9A-Fa-f]{4}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})\.0 "
      r"(?:VGA compatible|3D) controller(?: \[[0-9a-f]{4}\])?: NVIDIA Corporation "
      r"(?:(?!\(rev )[^\n]){0,160}\(rev ff\)",  # (not across another device's revision)
      ("(rev ff)",), "A GPU no longer answers on the PCIe bus (lspci reads rev ff)",
      severity=Severity.CRITICAL, tier=0.0, group="off-the-bus",
      example="3b:00.0 3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev ff)",
      explanation="lspci read the GPU's revision as ff: its PCIe configuration space answers "
      "with all ones, which is what a device that has dropped off the bus returns (the driver "
      "logs Xid 79, 'GPU has fallen off the bus', for the same event). Nothing can run on it "
      "until it is reset, usually by a reboot.",
      remedy=xid_info(79).action)

fixed("gpu-hardware/uncorrectable-ecc",
      r"uncorrectable ECC error (?:was )?encountered|CUDA_ERROR_ECC_UNCORRECTABLE|"
      r"cudaErrorECCUncorrectable|" + status_check("cudaErrorECCUncorrectable"),
      ("ECC error", "ECC_UNCORRECTABLE", "ECCUncorrectable", "cudaSuccess"),
      "Uncorrectable ECC error in GPU memory", severity=Severity.CRITICAL, tier=0.0,
      example="RuntimeError: CUDA error: uncorrectable ECC error encountered",
      explanation="The GPU's memory returned data its ECC could not correct. Results computed on "
      "it since then cannot be trusted; the GPU needs a reset so the bad row or page is retired.",
      remedy="Drain the node and reset the GPU or reboot; check `nvidia-smi -q -d "
      "ECC,ROW_REMAPPER,PAGE_RETIREMENT`; repeated uncorrectable errors mean replacing the GPU.")

# An uncorrectable ECC error told as what a GPU has or what made it unusable ("one GPU on the host
# is abnormal due to Uncorrectable ECC Error", "GPU 1 had an uncorrectable ECC error"): the root
# of what the jobs on it then print (a CUDA out-of-memory, a launch failure). Not a condition or
# a general statement ("if a GPU hits an uncorrectable ECC error, ...").
fixed("gpu-hardware/uncorrectable-ecc-told",
      unless_words("if|whether|you|your|may|might|could|should|would|once") +
      r"(?i:\b(?:GPU|card|device|it)s?\b[^\n]{0,60}?\b(?:due to|because of|caused by|has|had|"
      r"hit|hits|got|gets|ran into|runs? into|shows?|showed|reports?|reported|with) (?:an? |the |"
      r"\d+ )?(?:volatile )?uncorrectable ECC errors?)\b",
      ("ECC error", "ECC Error", "ECC ERROR"),
      "Uncorrectable ECC error in GPU memory (told in the writer's words)",
      severity=Severity.CRITICAL, tier=0.0,
      example="One GPU on node4 is unusable due to an uncorrectable ECC error.",
      explanation="The writer says a GPU has an uncorrectable ECC error: its memory returned "
      "data ECC could not correct. Until it is reset, every job scheduled on it fails, often "
      "with messages that name something else (a CUDA out-of-memory, a launch failure); those "
      "are consequences, and the GPU is the cause.",
      remedy="Drain the node (or take the GPU out of the scheduler) and reset the GPU or reboot; "
      "check `nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT`; repeated uncorrectable errors "
      "mean replacing the GPU.")

fixed("gpu-hardware/nvlink-uncorrectable",
      r"uncorrectable NVLink error (?:was )?detected|CUDA_ERROR_NVLINK_UNCORRECTABLE|"
      r"cudaErrorNvlinkUncorrectable|"
      # the kernel's record of it: "NVRM: NVLink: fatal error detected on link 3(0x0, ...)"
      r"NVRM: [^\n]*?NVLink: fatal error detected on link (?P<link>\d+)",
      ("NVLink error", "NVLINK_UNCORRECTABLE", "NvlinkUncorrectable", "NVLink: fatal error"),
      "Uncorrectable NVLink error", severity=Severity.CRITICAL, tier=0.0,
      example="RuntimeError: CUDA error: an uncorrectable NVLink error was detected during the "
      "execution",
      explanation="An uncorrectable error on an NVLink connection between GPUs aborted the work "
      "using it.",
      remedy=xid_info(74).action)

# CUDA 12's status for a hardware error the GPU contained to the contexts it touched (an
# uncorrectable memory error, a bad access over NVLink to a peer, a fabric fault on NVLink
# switches): "CUDA_ERROR_CONTAINED: Invalid access of peer GPU memory over nvlink or a hardware
# error"
fixed("gpu-hardware/contained",
      r"CUDA_ERROR_CONTAINED\b|cudaErrorContained\b|"
      r"Invalid access of peer GPU memory over nvlink or a hardware error",
      ("CUDA_ERROR_CONTAINED", "cudaErrorContained", "Invalid access of peer GPU memory"),
      "A hardware error on the GPU or its NVLink fabric killed the process's CUDA context",
      severity=Severity.CRITICAL, tier=0.0,
      example="RuntimeError: CUDA driver error: CUDA_ERROR_CONTAINED: Invalid access of peer "
      "GPU memory over nvlink or a hardware error",
      explanation="The GPU detected a hardware error (an uncorrectable memory error, or a bad "
      "access to a peer GPU's memory over NVLink, often a fault of the NVLink switches) and "
      "contained it to the processes using that memory: their CUDA contexts are gone, the rest "
      "of the machine goes on. Ranks sharing an NVLink domain with it fail together.",
      remedy="Look for the Xid at the same time on the node (`sudo dmesg -T | grep -i xid`: 94 "
      "and 95 for memory, 74 and 144 to 150 for NVLink) and read `nvidia-smi -q -d "
      "ECC,ROW_REMAPPER` and `nvidia-smi nvlink -e`; restart the job from its checkpoint "
      "without the node (and, on NVLink switch domains, report the fabric fault); drain the "
      "node if it recurs.")

fixed("gpu-hardware/rm-init-failed",
      rf"(?:GPU (?P<pci_bus_id>{_PCI}): )?RmInitAdapter failed!?(?: \((?P<code>[^)]+)\))?",
      ("RmInitAdapter",),
      "The NVIDIA driver failed to initialise a GPU", severity=Severity.CRITICAL, tier=0.0,
      example="[  30.112100] NVRM: RmInitAdapter failed! (0x26:0xffff:1401)",
      explanation="The NVIDIA driver could not initialise a GPU (RmInitAdapter failed): failed "
      "hardware, a GPU that fell off the bus earlier, insufficient power, or a driver/firmware "
      "problem.",
      remedy="Check `sudo dmesg -T | grep -i -e nvrm -e xid` around it; reboot; reseat the GPU "
      "and check its power cables; if it persists, the GPU or board needs service.")

fixed("gpu-hardware/launch-timeout",
      r"launch timed out and was terminated|CUDA_ERROR_LAUNCH_TIMEOUT|cudaErrorLaunchTimeout",
      ("launch timed out", "LAUNCH_TIMEOUT", "LaunchTimeout"),
      "A CUDA kernel was killed by the display watchdog", tier=1.2,
      example="RuntimeError: CUDA error: the launch timed out and was terminated",
      explanation="A kernel ran longer than the display watchdog allows: this GPU also drives a "
      "display.",
      remedy="Run on a GPU with no display attached (stop the desktop/X server on it), or split "
      "the work into shorter kernels.")

fixed("gpu-hardware/unknown-error",
      r"CUDA error: unknown error|(?:cuda runtime error \(\d+\)|\berror=\d+) : unknown error|"
      # (not where a context is being created: Taichi's "CUDAContext@14] Cuda Error
      # CUDA_ERROR_UNKNOWN", the driver not starting, read as CUDA's start-up failure)
      r"(?<!cuInit results in )(?<!CUDAContext@\d\] Cuda Error )"
      r"(?<!CUDAContext@\d\d\] Cuda Error )CUDA_ERROR_UNKNOWN\b|cudaErrorUnknown\b",
      ("unknown error", "CUDA_ERROR_UNKNOWN", "cudaErrorUnknown"),
      "CUDA reported an unknown error", tier=2.0,
      example="RuntimeError: CUDA error: unknown error",
      explanation="CUDA reported an unspecified error. It usually follows a driver reset, a GPU "
      "that fell off the bus, or a crash of another process on the same GPU.",
      remedy="Look for an Xid at the same time (`sudo dmesg -T | grep -i xid`) and run `gpu-audit "
      "scan`; if the GPU is missing or unusable, reset it or reboot.")


fixed("gpu-hardware/device-handle",
      rf"Unable to determine the device handle for GPU ?(?P<pci_bus_id>{_PCI}): "
      r"(?P<reason>Unknown Error|GPU is lost)",
      ("Unable to determine the device handle",),
      # (after the Xid that says why, in the kernel log beside it)
      "nvidia-smi cannot reach one of the GPUs", severity=Severity.CRITICAL, tier=0.1,
      key_field="pci_bus_id",
      example="Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error",
      explanation="nvidia-smi lists the GPU on the PCI bus but the driver cannot talk to it: the "
      "GPU fell off the bus, hangs, or failed to initialise (the kernel log has the Xid, often "
      "79, or PCIe errors). Jobs on it are dead or hung.",
      remedy=xid_info(79).action)

# nvidia-smi prints "ERR!" in a field NVML could not read. One field alone (the power draw, the
# utilisation) is often a passing sensor read and says little; the GPU's name unreadable, or its
# fan, temperature and performance state all at once, means the driver no longer reaches the GPU
# even though nvidia-smi itself exits 0.
fixed("gpu-hardware/smi-unreadable",
      rf"{LINE_HEAD}\|\s{{0,6}}(?P<gpu_index>\d{{1,2}})\s{{1,6}}ERR!\s|"
      rf"{LINE_HEAD}\|\s{{0,3}}ERR!\s{{1,6}}ERR!\s{{1,6}}ERR!\s",
      ("ERR!",), "nvidia-smi cannot read a GPU (its table shows ERR!)",
      severity=Severity.CRITICAL, tier=0.1,
      example="|   0  ERR!                Off  | 00000000:00:1E.0 Off |                 ERR! |",
      explanation="nvidia-smi lists the GPU but reads ERR! for its name, or for its fan, "
      "temperature and performance state together: NVML cannot query the GPU, which has crashed, "
      "hangs, or fell off the bus (the kernel log has the Xid, often 79). nvidia-smi still exits "
      "0, so a health check that trusts its exit status passes. Jobs on this GPU are dead or "
      "hung.",
      remedy=xid_info(79).action)

fixed("gpu-hardware/gsp-timeout",
      r"NVRM: [^\n]*?(?:GSP Timeout|Heartbeat timed out|Memory Subsystem Error detected|"
      r"Timeout waiting for RPC from GSP)",
      ("GSP Timeout", "Heartbeat timed out", "Memory Subsystem Error", "RPC from GSP"),
      "The GPU's firmware (GSP) stopped responding", severity=Severity.CRITICAL, tier=0.0,
      example="[   24.302465] NVRM: GPU6 _kgspIsHeartbeatTimedOut: Heartbeat timed out, "
      "currentTimeMs 812751949 heartbeat 1899482 heartbeatWithOffsetMs 812745879 diff 6070 "
      "timeout 5200",
      explanation="The GPU System Processor (the firmware that runs the GPU on recent drivers) "
      "stopped answering the driver, or the GPU's memory subsystem failed: the same fault the "
      "driver reports as Xid 119/120 when it gets that far. The GPU hangs until it is reset.",
      remedy=xid_info(119).action)

fixed("gpu-hardware/reset-required",
      # (and nvidia-smi's words for such a GPU: "Unable to determine the device handle for GPU
      # 0000:41:00.0: GPU requires reset"; not "if the GPU requires reset")
      r"NVRM: [^\n]{0,300}?NV_ERR_RESET_REQUIRED|(?<!\bif the )(?<!\bif )\bGPU requires reset\b",
      ("NV_ERR_RESET_REQUIRED", "GPU requires reset"),
      "The driver says the GPU needs a reset", severity=Severity.CRITICAL, tier=0.0,
      example="[ 1204.118302] NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required "
      "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from status @ kernel_channel.c:2827",
      explanation="The NVIDIA driver refused work on the GPU because an earlier fatal fault (an "
      "Xid, a firmware or memory error) left it in a state only a reset clears. Every CUDA call "
      "on it fails until then, most often as \"CUDA-capable device(s) is/are busy or "
      "unavailable\".",
      remedy="Drain the node and look for the fault before it (`sudo dmesg -T | grep -i -e xid "
      "-e nvrm`); reset the GPU (`sudo nvidia-smi -r -i <index>` with nothing running on it) or "
      "reboot; a GPU that needs it again needs service.")

fixed("gpu-hardware/pcie-aer",
      r"AER: (?:Multiple )?(?P<aer_severity>Uncorrected \((?:Fatal|Non-Fatal)\)) error "
      r"received|PCIe Bus Error: severity=(?P<aer_severity_>Uncorrected \((?:Fatal|Non-Fatal)\))|"
      rf"nvidia (?P<pci_bus_id>{_PCI}): AER: can't recover",
      ("AER:", "PCIe Bus Error"), "Uncorrectable PCIe error on the GPU's link (AER)",
      tier=0.2, group="pcie-aer",
      example="pcieport 0000:00:03.0: AER: Multiple Uncorrected (Fatal) error received: "
      "0000:00:03.0",
      explanation="The PCIe link between the host and the GPU reported an uncorrectable error "
      "(Advanced Error Reporting): the GPU can drop off the bus or hang, and the jobs on it with "
      "it. A flood of corrected errors on the same port points at the same failing link, riser "
      "or slot.",
      remedy="Drain the node; check `sudo dmesg -T | grep -i -e aer -e xid` and `lspci -vvv -s "
      "<bus id>` (link speed and width); reseat the GPU and its riser or cable, update the "
      "system BIOS; a GPU that keeps failing needs service.")


AER_FLOOD = 10  # corrected PCIe errors on one port that mean a failing link, not noise


@signature("gpu-hardware/pcie-aer-corrected",
           rf"(?P<port>{_PCI})?:? ?AER: Corrected error received|PCIe Bus Error: "
           r"severity=Corrected",
           ("AER: Corrected", "severity=Corrected"), "Corrected PCIe errors (AER)",
           severity=Severity.WARNING, tier=4.0, group="pcie-aer-corrected",
           example="pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0")
def _aer_corrected(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    count = int(numbers.get("_count") or 1)
    remedy = ("Watch the count (`sudo dmesg -T | grep -ci 'AER: Corrected'`); if it grows, drain "
              "the node, reseat the GPU and its riser or cable, and check `lspci -vvv` for a "
              "link trained below its speed or width.")
    if count >= AER_FLOOD:
        explanation = (f"The kernel logged {count} corrected PCIe errors: each was fixed by a "
                       "retry, but a flood like this means the link to the device is failing; a "
                       "GPU behind it hangs, slows down or drops off the bus.")
        return advice(sig, numbers, explanation, remedy, severity=Severity.ERROR, tier=0.3,
                      title="A flood of corrected PCIe errors: the link is failing")
    explanation = ("The PCIe link corrected an error by retrying; a few are harmless, many in a "
                   "row point at a failing link, riser or slot.")
    return advice(sig, numbers, explanation, remedy)

# A card (or the board under it) told dead by its owner: "my GPU is toast", "the card died during
# training", "it fried my GPU", "the example burnt my motherboard", "显卡烧了". Not a condition,
# a possibility or advice ("if your GPU dies", "you could fry the card"), not a process ("the GPU
# process died"), not gpu-burn, the stress test.
_CARD = r"(?:GPU|graphics card|graphic card|video card|card|显卡)"
_BOARD = r"(?:mother ?board|mainboard|laptop)"
CARD_DEAD_TOLD = (
    unless_words(r"if|whether|you|your|may|might|can|could|should|would|will|avoid\w*|prevent\w*|"
                 r"risk\w*") + r"(?i:"
    # (also with where it sits: "a GTX 780 card in gpu-2-4 died", "the GPU in slot 3 is dead")
    r"\b(?:my|our|the|this|one|a) (?:[\w-]+ ){0,2}?" + _CARD + r"s?(?: (?:in|on) (?:node |"
    r"machine |server |slot |host )?[\w.-]{1,30})? (?:(?:is|was|are|were|has|"
    r"have|had|just|finally|now|got) ){0,2}(?:toast|dead|fried|bricked|died|burn(?:ed|t)(?: "
    r"(?:out|up))?)\b(?! (?:lock|code|slow))|"
    r"(?<![\w-])(?:burn(?:ed|t|s)?|fried|fry|destroyed|blew up) (?:up )?(?:my|our|the) "
    r"(?:[\w-]+ )?(?:" + _CARD + r"|" + _BOARD + r")s?\b(?! (?:test|benchmark))|"
    r"\b(?:my|our|the) " + _BOARD + r"s? (?:(?:was|got|has|had|just) )?(?:burn(?:ed|t|s)?|"
    r"fried|died|dead)\b|"
    # (a cluster's node told to have a bad card: "machine 12 has a bad GPU", "a node has one
    # faulty gpu")
    r"\b(?:node|machine|server|host|box|worker)\b[\w .-]{0,20}? (?:has|had|with) (?:a|one|\d) "
    r"(?:bad|faulty|defective|broken|failing) GPUs?\b|"
    # (one of a machine's or a cluster's GPUs told failing or dead: "One of the cluster GPUs is
    # failing", "two of our GPUs have died"; not failing to do something)
    r"\b(?:one|two|some|several|\d+) of (?:the|our|my|its|their) (?:[\w-]+ ){0,2}?GPUs (?:is|"
    r"are|was|were|has|have|had|just|keeps?) ?(?:(?:been|now|started|begun|begin) )?(?:failing|"
    r"failed|dead|died|fried|broken|faulty|defective)\b(?! to\b)|"
    r"显卡(?:被)?(?:烧了|烧坏|烧毁)|烧(?:坏|毁)?了?(?:我的|一张)?显卡)")
fixed("gpu-hardware/card-dead-told", CARD_DEAD_TOLD,
      ("toast", "dead", "died", "fried", "bricked", "burn", "Burn", "fry", "destroyed", "blew up",
       "烧", "GPUs ", *(f"{word} {gpu}" for word in ("bad", "faulty", "defective", "broken",
                                                    "failing") for gpu in ("GPU", "gpu", "Gpu"))),
      "The card (or its board) died under GPU load (told in the writer's words)", tier=0.0,
      group="card-dead",
      example="FYI: my GPU is toast after last week's long renders.",
      explanation="The writer says the hardware itself failed: the GPU, or the board that powers "
      "it, died or burnt out while the GPU worked hard. No software fix brings it back, and the "
      "job failed because the card did; long runs at full power on a card or laptop that "
      "cannot cool or feed it are the usual story.",
      remedy="Replace or return the card (or have the board repaired); before running the same "
      "load on the replacement, check its cooling and power: watch temperature and draw during "
      "a run (`nvidia-smi --query-gpu=temperature.gpu,power.draw,clocks.sm --format=csv -l 1`), "
      "cap its power (`sudo nvidia-smi -pl <watts>`), set a firmer fan curve, and on a laptop "
      "keep long jobs short or on a machine built for sustained load.")

# Overheating told as the cause of a crash or a shutdown: "This was more than likely due to
# overheating", "It seems to be an overheating problem", "my GPU keeps overheating". Not a
# general statement or advice ("crashes are often caused by overheating", "check whether your
# GPU overheats").
_HOT = r"(?:9[5-9]|1[0-2]\d)(?:\.\d)?(?:-(?:9[5-9]|1[0-2]\d))? ?°C\b"  # a GPU too hot to run
OVERHEAT_TOLD = (
    unless_words(r"if|whether|you|your|may|might|can|could|should|would|check\w*|make sure|often|"
                 r"usually|typically|common\w*|most|avoid\w*|prevent\w*") + r"(?i:"
    r"\b(?:it|this|that|the (?:issue|problem|crash\w*|cause|shutdowns?|reboots?|restarts?))"
    r"(?:'s| is| was| seems to be| seemed to be| turned out to be| turns out to be| sounds like|"
    r" looks like)"
    r"(?: (?:more than |very )?likely| probably| definitely| clearly)?"
    r"(?: (?:due to|caused by|because of))?(?: an?| the)?(?: GPU)? (?:over-?heating|thermal)"
    r"(?: (?:issue|problem))?\b|"
    # (the card's cooling named as what failed: "this sounds like a cooling issue on your side")
    r"\b(?:it|this|that|the (?:issue|problem|crash\w*|cause))(?:'s| is| was| seems to be| "
    r"sounds like| looks like| turned out to be)(?: (?:more than |very )?likely| probably)? "
    r"(?:an? |the )?(?:GPU )?cooling (?:issue|problem|failure)\b|"
    r"\b(?:my|our|the) (?:[\w-]+ )?(?:GPU|graphics card|video card|card)s? (?:(?:is|was|were|are|"
    r"keeps|kept|started|starts|gets|got|get|became|becomes) )?over-?heat(?:s|ed|ing)\b|"
    # (the card's temperature told too high: "The graphics card temperature is too high", "my
    # GPU's temps get way too high")
    r"\b(?:my|our|the) (?:[\w-]+ )?(?:GPU|graphics card|video card|card)(?:s|'s|s')? "
    r"temp(?:erature)?s? (?:(?:is|was|were|are|gets?|got|goes|went|runs?|ran|keeps?|kept) )?"
    r"(?:(?:way|much|far) )?(?:too|very|extremely|dangerously) high\b|"
    # the card at its critical temperature, told ("Approaching critical junction temp (>107)
    # when running torch"): its hottest point, where it throttles and then shuts down
    r"\b(?:reach\w*|approach\w*|hit(?:s|ting)?|exceed\w*|at) (?:the |its )?critical "
    r"(?:junction |hotspot |hot spot |GPU |edge )?temp(?:erature)?s?\b|"
    # the temperature the crashes come at, told: "temps around 110°C, which is the range where
    # the crashes occur", "it crashed at 96°C" (95 °C and above: where GPUs throttle or shut down)
    r"\btemp(?:erature)?s? (?:[\w-]+ ){0,3}?(?:around|of|at|reach\w*|hit\w*|to|over|above) ~?"
    + _HOT + r"[^\n.]{0,80}?\b(?:crash\w*|hang\w*|hung|freez\w*|froze|shut\w* down|faults?|"
    r"died|dies)\b|"
    r"\b(?:crash\w*|hangs|hung|froze|freezes|shuts? down|died|dies)\b[^\n.]{0,40}?\bat "
    r"(?:about |around )?~?" + _HOT + r"|"
    # a program that stops itself at its temperature limit, told: "hashcat quits after a few
    # minutes because the GPU exceeds 90º C", "the temperature limit keeps getting reached",
    # "my card keeps hitting the temp limit and the miner aborts"
    r"\b(?:quits?|aborts?|aborted|exits?|exited|stops?|stopped|shuts? down|shut down)\b"
    r"[^\n.]{0,40}?\b(?:because|once|as soon as|every time) (?:the |my |our |a |each )?"
    r"(?:GPU|card|graphics card)s? (?:exceeds?|exceeded|reach(?:es|ed)?|hits?|goes over|went "
    r"over|gets? (?:to|over|above)|got (?:to|over|above)) (?:the |its )?(?:temp(?:erature)? "
    r"limit\b|(?:8[5-9]|9\d|1[0-2]\d) ?[°º] ?C\b)|"
    r"\btemp(?:erature)? limits? (?:keeps? |kept )?(?:getting |being |gets |got |is |was )"
    r"(?:reached|hit|exceeded)\b|"
    r"\b(?:GPU|card)s? (?:keeps? |kept )?(?:reach(?:es|ed|ing)?|hit(?:s|ting)?|exceed(?:s|ed|ing)?)"
    r" (?:the |its |hashcat's )?temp(?:erature)? limit\b|"
    # the temperature read just before the machine went off: "Condition just before shutdown:
    # GPU 97°C" (90 °C and up: where consumer cards hold at their limit)
    r"\b(?:just )?(?:before|at the time of) (?:the |a |each |every )?(?:thermal )?(?:shut ?down|"
    r"crash|freeze|reboot)s?\b[^\n.]{0,60}?\b(?:GPU|card)\b[^\n.]{0,20}?"
    r"(?:9\d|1[0-2]\d)(?:\.\d)? ?°C\b|"
    # thermal shutdowns the writer's machine gets: "I am getting constant thermal shutdowns
    # when I run ...", "the rig keeps doing thermal shutdowns"
    r"\b(?:I|we|it|my \w+|our \w+|the (?:PC|machine|computer|rig|system|laptop|GPU|card))"
    r"(?:'m| am| are| is| was| were| keeps?| kept)? (?:getting|get|got|having|had|hitting|hit|"
    r"doing|did|experienc\w+|suffer\w*)(?: (?:a|an|constant|frequent|repeated|random|several|"
    r"many|these))? thermal (?:shut ?downs?|shutoffs?|trips?)\b|"
    # an operator's terse answer, the cause as a sentence of its own at a line's or a
    # sentence's start: "thermal shutdown. bringing hosts back up", "Nodes down. Thermal
    # shutdown!" (not a heading of a guide, its next sentence a condition or the reader's:
    # "Thermal shutdown. When you let the core pass ...")
    r"(?:(?<![^\n])|(?<=[.!?] ))[>*_ ]{0,4}thermal shut ?down[.!](?=\s|$)"
    r"(?![^\n.!?]{0,300}?\b(?:if|when|whenever|once|you|your|may|might|can|could|should|would|"
    r"will)\b))")
# DCGM's health watch finding a GPU slowed down for its temperature: "Detected clocks event due
# to thermal violation in GPU 2. Verify that the cooling on this machine is functional,
# including ..." (its Thermal health system; older DCGM words it "clocks throttling").
@signature("gpu-hardware/thermal-violation",
           r"\bDetected clocks? (?:event|throttling) due to thermal violation in GPU "
           r"(?P<gpu_index>\d{1,4})",
           ("due to thermal violation",), "DCGM found a GPU slowed down by its temperature",
           tier=0.5,
           example="ERROR [[Health]] Detected a WARNING in health system Thermal: 'Detected clocks "
           "event due to thermal violation in GPU 2. Verify that the cooling on this machine is "
           "functional, including aisle and fan configuration.'")
def _thermal_violation(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    gpu = f"GPU {numbers['gpu_index']}" if "gpu_index" in numbers else "A GPU"
    explanation = (f"{gpu} lowered its clocks because it reached its thermal limit (DCGM's "
                   "health watch records it as a thermal violation): its cooling does not keep "
                   "up, so jobs on it run slower, and a GPU that stays this hot can fault or "
                   "shut down.")
    remedy = ("Check that GPU's temperature and clocks under load (`nvidia-smi -q -d "
              "TEMPERATURE,PERFORMANCE -i N`: 'HW Thermal Slowdown' or 'SW Thermal Slowdown' "
              "active), its fans and the airflow through the chassis (blanking panels, a blocked "
              "inlet, the aisle's temperature); move jobs off it until it is fixed.")
    return advice(sig, numbers, explanation, remedy)


fixed("gpu-hardware/overheat-told", OVERHEAT_TOLD,
      ("heat", "thermal", "Thermal", "°C", "cooling", "temp", "Temp", "º C", "ºC", "° C"),
      "The GPU overheated (told in the writer's words)", tier=3.0, group="overheat",
      example="This was more than likely due to overheating.",
      explanation="The writer says the crash or shutdown came from heat: a GPU (or the machine "
      "around it) that gets too hot throttles, then hangs, drops off the bus or is switched off "
      "by its protection, with no error message from the program.",
      remedy="Watch the temperature during a run (`nvidia-smi --query-gpu=temperature.gpu,"
      "clocks_throttle_reasons.active,power.draw --format=csv -l 1`); clean the cooler, improve "
      "the case's air flow or set a firmer fan curve; cap the power (`sudo nvidia-smi -pl "
      "<watts>`) to run cooler; a card that overheats at normal load needs its cooling "
      "serviced.")

# A run told fixed by slowing the PCIe link or changing the riser the card sits on ("the
# suggestion to downgrade from gen3 to gen2 resolved the error", "forcing the slot to PCIe Gen2
# fixed it", "swapping the riser did the trick"): the link, not the program, was at fault.
PCIE_LINK_CURES = (r"(?i:\b(?:downgrad\w*|forc\w*|set\w*|switch\w*|lower\w*|drop\w*|limit\w*|"
                   r"chang\w*)\b[^\n]{0,30}?\b(?:to|at) (?:PCI-?e? ?)?gen ?[12]\b|"
                   r"\b(?:replac\w*|swap\w*|chang\w*|new|another|different|powered)\b"
                   r"[^\n]{0,15}?\brisers?\b)")
fixed("gpu-hardware/pcie-link-cure-told", cure_told(PCIE_LINK_CURES), CURED_NEEDLES,
      "A crash was fixed by slowing the PCIe link or changing the riser (told in the writer's "
      "words)", tier=3.5, reads_titles=False, yields_to_titles=True,
      example="The card sat on a 1x riser in a gen3 slot; setting the slot to gen2 fixed it.",
      explanation="The writer says the crashes stopped once the card's PCIe link ran at a lower "
      "generation or its riser was changed: the link between the card and the board (a riser, "
      "its cable, the slot) corrupted transfers at full speed, and the program died of it.",
      remedy="Keep the slot at the generation that is stable (the board's setup, PCIe link "
      "speed), or replace the riser or cable; check the link for errors during a run "
      "(`nvidia-smi -q -d PCIE` for the link and its replay counter, `sudo dmesg -T | grep -i "
      "-e aer -e xid`).")

# A program that stopped itself at its temperature limit: hashcat's watchdog ("Temperature limit on
# GPU #3 reached, aborting"; its device number counts from 1). The GPU's heat ended the run.
fixed("gpu-hardware/temperature-abort",
      r"\bTemperature limit on GPU #(?P<device>\d{1,3}) reached\b",
      ("Temperature limit on GPU",),
      "The program aborted at its GPU temperature limit", tier=0.0, group="overheat",
      key_field="device",
      example="Temperature limit on GPU #1 reached, aborting",
      explanation="The program's watchdog read the GPU's temperature above its abort limit (90 "
      "°C by default in hashcat) and stopped the run to protect the card: the GPU could not "
      "shed the heat of a sustained full load (a clogged or weak cooler, poor air flow, a "
      "laptop on mains power running at its highest clocks).",
      remedy="Watch the temperature during a run (`nvidia-smi --query-gpu=temperature.gpu,"
      "clocks_throttle_reasons.active,power.draw --format=csv -l 1`); clean the cooler, improve "
      "the air flow or set a firmer fan curve; cap the power (`sudo nvidia-smi -pl <watts>`) or "
      "lower the workload (hashcat's `-w 1`) to run cooler. Raise the program's limit "
      "(`--hwmon-temp-abort`) only within the card's rated maximum.")


# A miner's own check of the GPU's memory failing: lolMiner's "Unrecoverable memory error by GPU 2."
# (followed by its "Reset of all Cuda GPUs required." and advice to check the memory overclock and
# undervolt). The card returned wrong data from its memory: clocks or voltages it is not stable at.
fixed("gpu-hardware/miner-memory-error",
      r"\bUnrecoverable memory error by GPU (?P<gpu_index>\d{1,3})\b",
      ("Unrecoverable memory error by GPU",),
      "The GPU's memory returned wrong data (a miner's own check)", tier=0.0,
      key_field="gpu_index",
      example="Unrecoverable memory error by GPU 0.",
      explanation="The miner checks what the GPU computes and found its memory returning wrong "
      "data, past what it can recover from: the card's memory runs at a clock or a voltage it is "
      "not stable at (an overclock or an undervolt, often after hours of heat), or the memory is "
      "failing. The CUDA context on the card is unusable until the GPUs are reset.",
      remedy="Lower the card's memory clock (and undo any undervolt) in steps until the error "
      "stays away for a day of load, and watch the memory's temperature; reset the GPUs or "
      "reboot to run again. A card that fails at its reference clocks has faulty memory.")


# The writer's own finding that the card was at fault: another card of the same kind in its
# place ran the same job ("swapped the GPU and the error is gone", "换了张显卡没问题了"), or the
# card turned out faulty. Not a condition or advice to the reader ("if it persists, replace the
# GPU"), not a question.
fixed("gpu-hardware/card-swap-told",
      unless_words(r"if|whether|you|your|may|might|maybe|should|try\w*", also="如果|是否|可能",
                   stop=r"\n?？") + r"(?:"
      r"\b(?i:replac|swapp|chang)ed (?:the|my|our) GPUs?\b[^\n.?]{0,60}?\b(?i:fixed|solved|"
      r"resolved|works|worked|working|(?:is|are) gone|went away|disappeared|no (?:more )?(?:"
      r"errors?|problems?|issues?|crash\w*))|"
      r"\b(?i:turned out (?:to be )?(?:a |the )?)(?:faulty|defective) GPU|"
      # (a node that had its GPU replaced by the vendor: "CN 110 has had its GPU replaced,
      # tested and put back into service", "the faulty GPU was swapped")
      r"\b(?i:(?:has had|had|got) (?:its|the|their|one of its) (?:faulty |bad |broken |"
      r"defective )?GPUs? (?:replaced|swapped)|the (?:faulty|bad|broken|defective) GPUs? (?:was|"
      r"were|has been|have been|got) (?:replaced|swapped))\b|"
      r"换了?[一]?[张块个]?(?:新的?|同型号的?)?显卡[^\n?？]{0,12}?(?:没问题|没有问题|好了|正常|解决)|"
      r"显卡(?:硬件)?(?:坏了|出问题了|出了问题))|"
      # the writer's own machine found with a bad card, in a sentence of a longer paragraph
      # ("On the other machine we simply have what appears to be a faulty card"; a condition
      # or advice in that sentence still keeps it out; "a faulty card" is read where the line is
      # a candidate anyway, as the Chinese tellings below, "a faulty GPU" wherever it is)
      + unless_words(r"if|whether|you|your|may|might|maybe|should|try\w*",
                     start=r"(?:^|(?<=[.!;:] ))", stop=r"\n?.!;")
      + r"\b(?i:(?:we|I) (?:\w+ )?(?:have|had|got) (?:what (?:appears|seems|"
      r"turned out) to be )?an? (?:faulty|defective|bad|broken) (?:GPU|card|graphics card|"
      r"video card))\b",
      # (the Chinese tellings are read where the line is a candidate anyway: a log's last
      # lines, or a line with another key)
      ("ed the GPU", "ed my GPU", "ed our GPU", "faulty GPU", "defective GPU", "显卡",
       "its GPU", "the GPU", "their GPU", "GPU replaced", "GPUs replaced",
       *(f"{word} {card}" for word in ("faulty", "defective", "bad", "broken", "Faulty",
                                       "Defective", "Bad", "Broken")
         for card in ("GPU", "card", "graphics card", "video card"))),
      "The card was at fault (told in the writer's words)", tier=0.0,
      example="Swapped the GPU for another of the same model and the launch failures are gone.",
      explanation="The writer found the GPU itself at fault: another card in its place runs the "
      "same job, or the card proved defective. Kernel crashes such as an unspecified launch "
      "failure or an illegal address on that card were the hardware's, not the program's.",
      remedy="Keep the card out of service (drain the node or remove it) and return it; on a "
      "shared machine, run `gpu-audit diag` and look for Xids (`sudo dmesg -T | grep -i xid`) on "
      "the card that replaced it.")

# The board under the card found at fault, told: a new motherboard (often with a new CPU) and
# the same GPU, and the crashes are gone ("Bought a new CPU and motherboard, now everything works
# perfectly"). The GPU's slot, its PCIe link or the board's power to it made kernels fail. Not a
# condition, a plan or advice ("if you replace the motherboard ...", "try another board").
fixed("gpu-hardware/board-swap-told",
      unless_words(r"if|whether|you|your|may|might|maybe|should|would|could|try\w*|plan\w*|"
                   r"going to|will") +
      r"(?i:\b(?:bought|got|installed|replaced|swapped|changed)(?: (?:out|in))? (?:an? |the |my |"
      r"our )?(?:new |another |different )?(?:(?:CPU|processor) (?:and|\+|&) )?(?:the )?"
      r"(?:mother ?board|mainboard)s?(?: (?:and|\+|&) (?:the |a )?(?:new )?(?:CPU|processor))?\b"
      r"[^\n?]{0,160}?\b(?:fixed|solved|resolved|works?|worked|working|(?:is|are) gone|went away|"
      r"no (?:more )?(?:errors?|crash\w*|problems?|issues?))\b)",
      ("otherboard", "other board", "ainboard"),
      "The board under the card was at fault (told in the writer's words)", tier=0.0,
      example="Bought a new CPU and motherboard and now everything is working, no more crashes.",
      explanation="The writer replaced the motherboard (with the same GPU) and the failures "
      "stopped: the slot, the PCIe link or the board's power to the card made the GPU's work "
      "fail. Kernel crashes such as an illegal memory access or an unspecified launch failure "
      "on that machine were the hardware's, not the program's.",
      remedy="Keep the old board out of service; on a machine that shows the same crashes, "
      "check the PCIe link the card trained at (`nvidia-smi -q | grep -A2 'Link Width'`, "
      "`sudo lspci -vv` for its LnkSta), reseat the card in another slot, drop a riser or "
      "extension cable, and look for corrected PCIe errors and Xids in `sudo dmesg -T`.")


# The card's slot or riser found at fault, told: the failures stop once the cards sit in other
# slots ("after I moved all the GPUs to the x16 slots it's working fine"), or the writer names
# the slot or the riser as the cause ("it was an issue of GPU 3 on a slower PCIe slot", "the
# culprit was a bad riser"). Not a condition, a guess or advice ("one of your risers may be
# bad", "try another slot").
_SLOT = (r"(?:(?:PCI[- ]?[Ee](?:xpress)?|pci[- ]?e(?:xpress)?|pci[- ]express|PCI[- ]Express|"
         r"x16|x8|x4|x1|other|another|different|faster|black|white|lower|upper|top|bottom|"
         r"first|second)[- ]){0,2}slots?")
SLOT_TOLD = (
    unless_words(r"if|whether|you|your|may|might|maybe|should|would|could|try\w*|perhaps|"
                 r"possibly|often|usually|check\w*", stop=r"\n?") + r"(?i:"
    # the cards moved, then the failures gone
    r"\b(?:moved|moving|switched|switching|swapped|put|plugged|reseated|reinstalled|"
    r"connected) (?:all |both |the |my |our |each )?(?:(?:\w+ )?(?:GPU|card)['’]?s?|"
    r"them|it|\d+)?[^\n.?]{0,30}?\b(?:to|into|in|on) (?:the |a |an |all |other |another |"
    r"different )?" + _SLOT + r"\b[^\n?]{0,60}?\b(?:fixed|solved|resolved|(?:it['’]?s |is |"
    r"everything (?:is )?)?working (?:fine|again|now|well|perfectly)|works (?:fine|again|now|"
    r"well|perfectly)|(?:is|are) gone|went away|no (?:more )?(?:errors?|crash\w*|problems?|"
    r"issues?))\b|"
    # the slot or the riser named as the cause
    r"\b(?:(?:was|turned out to be) an? (?:issue|problem) (?:of|with)|(?:issue|problem|cause|"
    r"culprit) (?:was|turned out to be)|caused by|because of|due to)\b[^\n.?]{0,50}?"
    r"\b(?:(?:bad|faulty|broken|cheap|defective|loose|slow(?:er)?) (?:PCI[- ]?e(?:xpress)?|"
    r"pci[- ]express) (?:slots?|ports?|risers?)|(?:bad|faulty|broken|cheap|defective|loose|"
    r"the|a|my|our) risers?(?: cards?| cables?)?|(?:bad|faulty|broken|defective|loose|"
    r"slow(?:er)?) slots?)\b)")
fixed("gpu-hardware/slot-told", SLOT_TOLD,
      ("slot", "Slot", "riser", "Riser", "PCI express", "pci express", "PCI Express",
       "pci-express", "PCI-Express"),
      "The card's slot or riser was at fault (told in the writer's words)", tier=0.0,
      example="After I moved all the GPUs to the x16 slots it's working fine with four cards.",
      explanation="The writer found the slot or the riser under a card at fault: with the "
      "cards moved to other slots (or the riser removed) the same job runs. A link that is "
      "slow, narrow or flaky (a mining riser, a x1 or chipset slot) makes transfers and "
      "collectives stall or fail on that card, and kernels crash as the hardware's fault, not "
      "the program's.",
      remedy="Run each card in a slot wired to the CPU without risers or extension cables; "
      "check the link each card trained at (`nvidia-smi -q | grep -A2 'Link Width'`, `sudo "
      "lspci -vv` for its LnkSta) and look for corrected PCIe errors and Xids in `sudo dmesg "
      "-T`.")

# The card's overclock found to be the cause ("it turns out that Blender doesn't play well with
# the default OC mode for my GPU", "the crashes were caused by my overclock", "disabling the
# factory overclock fixed it"): clocks the chip is not stable at, whatever the program. Not a
# condition, a guess or advice ("if you overclock ...", "maybe it is the OC").
_OC = r"(?:\bOC(?:'d|ed)?\b|(?i:\bover-?clock\w*))"
OVERCLOCK_TOLD = (
    unless_words(r"if|whether|you|your|may|might|maybe|could|should|would|perhaps|possibly|"
                 r"try\w*|often|usually|typically|generally|common\w*", stop=r"\n?") + r"(?:"
    r"\b(?i:turn(?:s|ed) out|(?:was|were) caused by|(?:was|were) due to|the (?:issue|problem|"
    r"culprit|cause) (?:was|is))\b[^\n?]{0,80}?" + _OC + r"|"
    r"\b(?i:disabl(?:ed|ing)|remov(?:ed|ing)|turn(?:ed|ing) off|revert(?:ed|ing)|undo(?:ing)?|"
    r"undid) (?:the |my |its |our )?(?:[\w-]+ ){0,2}?" + _OC + r"[^\n?]{0,60}?\b(?i:fixed|"
    r"solved|resolved|stable|no (?:more )?(?:crash\w*|errors?|problems?|issues?))|"
    # the card's clocks told too high, or lowering them told as the fix: "it looks like my
    # memory clock was too high", "I beat it with a little memory downclock", "lowering the
    # memory clock fixed the crashes"
    r"(?i:\b(?:my|the|our|its) (?:memory |mem |core |GPU |VRAM )?clocks? (?:(?:was|were|is|are)"
    r" (?:set |just |simply )?|(?:set )?)too high\b|"
    r"\b(?:beat|fixed|solved|cured|resolved|stopped) (?:it|this|that|the (?:issue|problem|"
    r"crash\w*|errors?|freez\w*)) (?:with|by) (?:an? (?:little |small |slight )?)?(?:memory |"
    r"mem |core |GPU )?(?:down-?clock\w*|under-?clock\w*|lower\w* (?:the |my )?(?:memory |mem |"
    r"core )?clocks?)\b|"
    r"\b(?:lower(?:ed|ing)|reduc(?:ed|ing)|turn(?:ed|ing) down|dropp(?:ed|ing)|decreas(?:ed|ing)"
    r"|down-?clock(?:ed|ing)) (?:the |my |our )?(?:memory |mem |core |GPU |VRAM )?(?:clocks?|"
    r"over-?clock|OC)?\b[^\n?]{0,40}?\b(?:fixed|solved|resolved|cured|did the trick|"
    r"stable now|no (?:more )?(?:crash\w*|errors?|freez\w*))))")
fixed("gpu-hardware/overclock-told", OVERCLOCK_TOLD,
      ("OC", "verclock", "ver-clock", "clock", "Clock"),
      "The GPU's overclock made it unstable (told in the writer's words)", tier=0.0,
      example="It turns out the renderer does not play well with the factory OC mode of my card.",
      explanation="The writer found the card's overclock (a factory OC mode, a tool's profile) "
      "to be the cause: at those clocks the chip computes wrong results or faults under "
      "sustained load, and the program's kernels die with an illegal address, a launch failure "
      "or a freeze that the program did not cause.",
      remedy="Run the card at its reference clocks: switch off the vendor's OC mode or tool "
      "profile (or `sudo nvidia-smi -rgc` and `-rmc` to reset locked clocks), then run the same "
      "job again; a card that fails at reference clocks too is faulty.")


# DCGM's health checks and diagnostics (dcgmi health, dcgmi diag, the exporter's and job
# schedulers' health hooks) name a GPU's memory or fabric fault in their own sentences:
# "Detected 2 volatile double-bit ECC error(s) in GPU 3.", "GPU 5 had uncorrectable memory errors
# and row remapping failed.", "Found 14 faulty memory elements on GPU 6", "Detected fatal
# errors on NvSwitch 2 link 17". Remapped rows and remappings pending are the same memory
# fault, handled by the GPU: a reset applies them.
def _gpu(n: int) -> str:
    return rf"GPU (?P<gpu_index{'_' * n}>\d+)"  # (one group name per alternative)


_DCGM_HEALTH = (
    rf"\bDetected (?P<count>\d+) volatile double-bit ECC error\(s\) in {_gpu(0)}(?P<dbe>)"
    rf"|\bCUDA APIs have indicated that a double-bit ECC error has occur+ed on {_gpu(1)}"
    r"(?P<dbe_>)"
    rf"|\bPending page retirements together with a DBE were detected on {_gpu(2)}(?P<dbe__>)"
    rf"|\b{_gpu(3)} had uncorrectable memory errors and row remapping failed(?P<remap_failed>)"
    rf"|\bFound (?P<count_>\d+) faulty memory elements on {_gpu(4)}(?P<faulty_memory>)"
    r"|\bGPU had an uncontained error \(XID 95\)(?P<uncontained>)"
    r"|\bDetected fatal errors on NvSwitch (?P<nvswitch>\d+) link (?P<link>\d+)"
    r"(?P<nvswitch_fatal>)"
    rf"|\b{_gpu(5)} had (?:uncorrectable )?memory errors and (?:(?P<rows>\d+) rows were "
    r"remapped|row remappings are pending)(?P<remapped>)"
    # (the NVSwitch's own fatal error by its SXID; NVLink counters that must stay at 0, its
    # replay and recovery errors; CRC errors above DCGM's limit of 100 a second)
    r"|\bDetected fatal NvSwitch SXID (?P<sxid>\d+)(?P<sxid_fatal>)"
    rf"|\bDetected (?P<count__>\d+) (?P<nvlink_counter>[\w. ]{{1,64}}?) NvLink errors on "
    rf"{_gpu(6)}'s NVLink \(should be 0\)(?P<nvlink_critical>)"
    r"|\b(?P<per_second>\d+(?:\.\d+)?) (?P<nvlink_counter_>[\w. ]{1,64}?) NvLink errors found "
    rf"occur+ing per second on {_gpu(7)}, exceeding the limit(?P<nvlink_crc>)"
    # (and errors under that rate, over the health check's threshold: a warning)
    rf"|\bDetected (?P<count___>\d+) (?P<nvlink_counter__>[\w. ]{{1,64}}?) NvLink errors on "
    rf"{_gpu(8)}'s NVLink which exceeds threshold of (?P<threshold>\d+)(?P<nvlink_threshold>)")
_DCGM_KINDS = ("dbe", "remap_failed", "faulty_memory", "uncontained", "nvswitch_fatal",
               "remapped", "sxid_fatal", "nvlink_critical", "nvlink_crc", "nvlink_threshold")
_DCGM_WORDS = ("nvlink_counter", "per_second")  # numbers kept as written


def _dcgm_health(match: re.Match[str], line: str) -> dict[str, Any]:
    groups = {key.rstrip("_"): value for key, value in match.groupdict().items()
              if value is not None}
    found: dict[str, Any] = {key: int(value) for key, value in groups.items()
                             if key not in _DCGM_KINDS and value.isdigit()}
    found.update((key, groups[key]) for key in _DCGM_WORDS if key in groups)
    found["fault"] = next(kind for kind in _DCGM_KINDS if kind in groups)
    return found


_NVSWITCH_REMEDY = (
    "Drain the node; read the switch's SXIDs in the kernel log (`sudo dmesg -T | grep -i "
    "sxid`) and the fabric manager's log, and check `nvidia-smi nvlink -s` and "
    "`nvidia-smi -q -d ERROR`. A fatal SXID needs the GPUs and switches reset (a reboot); one "
    "that returns is a hardware fault to report with `nvidia-bug-report.sh`.")


def _dcgm_nvlink(sig: Signature, numbers: dict[str, Any], on_gpu: str) -> Advice:
    """DCGM's NVLink error counters: replay and recovery errors (which must stay at 0), or CRC
    errors faster than DCGM's limit of 100 a second."""
    counter = numbers.get("nvlink_counter", "NVLink")
    if numbers.get("fault") == "nvlink_threshold":
        explanation = (f"DCGM counts {numbers.get('count', '?')} {counter} errors on {on_gpu}'s "
                       f"NVLinks, over its threshold of {numbers.get('threshold', '?')}: a link "
                       "is degrading, though below the rate at which DCGM fails it.")
        return advice(sig, numbers, explanation,
                      "Watch the links' counters (`nvidia-smi nvlink -e`); a counter that keeps "
                      "growing marks the part to reseat or replace at the next maintenance.",
                      severity=Severity.WARNING, tier=3.0,
                      title="DCGM: NVLink errors over the threshold on a GPU's links")
    if "per_second" in numbers:
        found = f"{numbers['per_second']} {counter} errors a second (DCGM's limit is 100)"
    else:
        found = f"{numbers.get('count', '?')} {counter} errors (the counter should stay at 0)"
    explanation = (f"DCGM counts {found} on {on_gpu}'s NVLinks: a link is retrying or "
                   "retraining its traffic, so collectives over it slow down or fail. A cable, "
                   "a connector, the GPU or the switch is at fault.")
    remedy = ("Drain the node; read the links' counters with `nvidia-smi nvlink -e` (replay, "
              "recovery and CRC errors per link) and `dcgmi diag -r 3`; reseat or replace the "
              "part on the link whose counters grow, and reset the GPUs.")
    return advice(sig, numbers, explanation, remedy,
                  title="DCGM: NVLink errors on a GPU's links")


@signature("gpu-hardware/dcgm-health", _DCGM_HEALTH,
           ("double-bit ECC", "DBE were detected", "row remapping failed", "faulty memory "
            "elements", "uncontained error", "NvSwitch", "rows were remapped",
            "row remappings are pending", "NvLink errors"),
           "DCGM found a hardware fault on a GPU", severity=Severity.CRITICAL, tier=0.0,
           extract=_dcgm_health,
           example="Error: Detected 2 volatile double-bit ECC error(s) in GPU 3. Drain the GPU "
           "and reset it or reboot the node.")
def _dcgm(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    fault = numbers.get("fault")
    gpu = numbers.get("gpu_index")
    on_gpu = f"GPU {gpu}" if gpu is not None else "a GPU"
    if fault == "remapped":
        return advice(
            sig, numbers,
            f"DCGM reports memory errors on {on_gpu} that the GPU handled by remapping rows of "
            "its memory; the remapping takes effect at the GPU's next reset.",
            "Drain the node and reset the GPU (nvidia-smi -r) or reboot; then check "
            "`nvidia-smi -q -d ROW_REMAPPER`. A GPU that keeps remapping rows is failing.",
            severity=Severity.WARNING, tier=3.0, title="DCGM: memory rows remapped on a GPU")
    if fault == "sxid_fatal":
        explanation = (f"DCGM found a fatal NVSwitch error (SXID {numbers.get('sxid', '?')}): "
                       "the NVLink fabric between the GPUs failed, and the work using it was "
                       "aborted.")
        return advice(sig, numbers, explanation, _NVSWITCH_REMEDY,
                      title="DCGM: a fatal NVSwitch error (SXID)")
    if fault in ("nvlink_critical", "nvlink_crc", "nvlink_threshold"):
        return _dcgm_nvlink(sig, numbers, on_gpu)
    if fault == "nvswitch_fatal":
        explanation = (f"DCGM found fatal errors on NVSwitch {numbers.get('nvswitch', '?')}, "
                       f"link {numbers.get('link', '?')}: the NVLink fabric between the GPUs "
                       "failed, and the work using it was aborted.")
        return advice(sig, numbers, explanation, xid_info(74).action)
    what = {
        "dbe": "uncorrectable (double-bit) ECC errors in its memory",
        "remap_failed": "uncorrectable memory errors that row remapping could not repair (no "
                        "spare rows left)",
        "faulty_memory": "faulty memory elements",
        "uncontained": "an uncontained error (Xid 95): a memory error the GPU could not keep to "
                       "one context",
    }.get(str(fault), "a hardware fault")
    explanation = (f"DCGM reports {what} on {on_gpu}. Results computed on it since then cannot "
                   "be trusted.")
    remedy = ("Drain the node and reset the GPU or reboot; check `nvidia-smi -q -d "
              "ECC,ROW_REMAPPER,PAGE_RETIREMENT` and run `dcgmi diag -r 3`. A GPU whose row "
              "remapping failed, or that keeps failing the diagnostic, needs replacing.")
    return advice(sig, numbers, explanation, remedy)
