"""Host memory ran out: the kernel's OOM killer, a cgroup or job limit, shared memory.

This is the machine's RAM, not the GPU's. In training it usually comes from DataLoader workers
(each holds its own copy of the dataset's Python objects), pinned-memory buffers, loading a
whole checkpoint into RAM, or a leak that grows every step. The evidence is in the kernel log,
the scheduler's messages, a launcher's exit status (137, -9), or a bare ``Killed`` from the
shell, in the shell's language (``已杀死``, ``Getötet``, ...) at the end of the log; or in the
system's refusal of an allocation (``[Errno 12] Cannot allocate memory``, Windows' ``The paging
file is too small``).
DataLoader workers also pass batches through /dev/shm, which is 64 MB in a container unless
configured.

Why it matters: the kernel's OOM killer, Slurm's cgroup enforcement and Kubernetes kill the
process with SIGKILL, which it cannot report itself: the run ends with no traceback and no
checkpoint.

Example: ``Memory cgroup out of memory: Killed process 5512 (python3) total-vm:...``.

Fix: lower DataLoader ``num_workers`` and ``prefetch_factor``, load checkpoints with
``torch.load(path, mmap=True)``, or raise the job's memory limit (Slurm ``--mem``, Kubernetes
``resources.limits.memory``); a larger /dev/shm for shared-memory failures.
"""

from __future__ import annotations

import re
from typing import Any

from gpu_audit.explain.prefixes import LINE_HEAD
from gpu_audit.explain.signatures.guards import CURED_NEEDLES, cure_told, unless_words
from gpu_audit.explain.signatures.registry import (
    Advice,
    AdviceContext,
    Extractor,
    Signature,
    advice,
    document_class,
    fixed,
    named,
    signature,
)
from gpu_audit.explain.signatures.texts import size_text
from gpu_audit.knowledge.signals import KILLED_WORDS, killed_words_pattern
from gpu_audit.model import Severity
from gpu_audit.units import SIZE, size_or_none

CLASS = document_class("host-oom", __doc__)

_HOST_MEMORY = (
    "Lower DataLoader num_workers and prefetch_factor (every worker holds its own copy of "
    "Python objects: keep datasets in numpy arrays or memory-mapped files); load checkpoints "
    "with torch.load(path, mmap=True); raise the job's memory limit (Slurm --mem, Kubernetes "
    "resources.limits.memory); `gpu-audit scan` shows host memory and swap."
)
_SHM = (
    "Give the container a larger /dev/shm: `docker run --shm-size=16g ...` or `--ipc=host`; in "
    "Kubernetes mount an emptyDir with medium: Memory at /dev/shm; or lower num_workers."
)


def _kernel_oom(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    if "oom_reaper" in match[0]:  # sizes after the reaper freed the memory: all 0
        return found
    for field in ("total-vm", "anon-rss", "file-rss", "shmem-rss"):
        kb = re.search(rf"{field}:(\d+)kB", line)
        if kb:
            found[field.replace("-", "_") + "_bytes"] = int(kb[1]) * 1024
    return found


def _pids(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    if isinstance(found.get("pids"), str):
        found["pids"] = [int(p) for p in re.findall(r"\d+", found["pids"])]
    elif isinstance(found.get("pids"), int):
        found["pids"] = [found["pids"]]
    return found


def _dataloader(match: re.Match[str], line: str) -> dict[str, Any]:
    found = _pids(match, line)
    if isinstance(found.get("signal"), str):  # "killed", "bus error": as PyTorch writes them
        signal = found["signal"]
        found["signal"] = {"killed": "Killed", "bus error": "Bus error",
                           "terminated": "Terminated"}.get(signal.lower(), signal)
    return found


def _sizes_to_bytes(*keys: str) -> Extractor:
    def extract(match: re.Match[str], line: str) -> dict[str, Any]:
        found = named(match, line)
        for key in keys:
            if isinstance(found.get(key), str):
                found[key + "_bytes"] = size_or_none(found.pop(key))
        return found
    return extract


def _no_numbers(_match: re.Match[str], _line: str) -> dict[str, Any]:
    return {}


_OOM_KILLER = r"oom[- ]?killer"
_TOLD_OOM_KILL = (
    # (not avoided or asked: "How do I avoid being OOM-killed when ...", "How can we prevent
    # our pods from being OOM killed")
    r"(?i:" + unless_words(r"how|avoid\w*|prevent\w*") +
    r"\b(?:I|we|my|our|me|us)\b(?:(?!\b(?:if|whether|avoid\w*|prevent\w*|without)\b)"
    r"[^.?!\n]){0,60}?"
    rf"(?:\b(?:killed|terminated) by (?:the )?(?:(?:linux|kernel|system)(?:'s)? )?{_OOM_KILLER}"
    rf"|\boom[- ]?killed|\bthe {_OOM_KILLER} (?:killed|terminated))\b"
    # (the clause before "被" says no "if" (如果, 若, 假如) and no "whether" (是否))
    rf"|(?:^|(?<=[。！？，,.!?\s]))(?:(?![如若假]|是否)[^\n。！？，,]){{0,20}}?被\s*(?:系统|内核)?的?\s*{_OOM_KILLER}\s*(?:给)?(?:杀死|杀掉|干掉|终止|kill)"
    rf"|{_OOM_KILLER}\s*(?:に|によって|により)\s*(?:kill|殺|強制終了)\s*され(?!た場合)"
    rf"|{_OOM_KILLER}\s*(?:에 의해|가)\s*(?:종료|죽|kill)(?:되었|됐|였|었|했))")


@signature("host-oom/task-row",
           # a row of the task table the OOM killer prints (dump_tasks): [pid] uid tgid total_vm
           # rss (rss_anon rss_file rss_shmem) pgtables_bytes swapents oom_score_adj name, after
           # dmesg's or journald's prefix; seen alone when a post keeps only the table's rows
           # (syslog's prefix may hold dmesg's too: "Apr 25 19:05:01 node kernel: [ 70.1] ")
           LINE_HEAD + r"(?:\S+ +\d+ [\d:]+ \S+ kernel: )?(?:\[[^\]\n]{1,40}\]\s*)?"
           r"\[ *\d+\] +\d+ +\d+"
           r"(?: +\d+){4,7} +-?\d{1,4} +\S.{0,40}$",
           ("]",), "The kernel's OOM killer listed the tasks it chose from",
           extract=_no_numbers, group="oom-killer", attach="prefer", window=64,
           example="[ 9001.118220] [   4012]  1000  4012 17530751  7527750 60694528        0"
           "             0 python")
@signature("host-oom/memcg-oom-path",
           r"\b(?P<scope>mem_cgroup_out_of_memory)\+0x",
           ("mem_cgroup_out_of_memory",),
           "The OOM killer ran for a memory cgroup (continued)", extract=named,
           group="oom-killer", attach="only", window=24,
           example="[ 7781.223099]  mem_cgroup_out_of_memory+0x131/0x150")
@signature("host-oom/killed-process",
           r"Killed process (?P<pid>\d+) \((?P<process_name>[^)]{0,256})\)", ("Killed process",),
           "The kernel's OOM killer killed a process", extract=_kernel_oom, group="oom-killer",
           attach="prefer", window=4, overrides=True,
           example="[ 9001.120399] Killed process 4012 (python) total-vm:70123004kB, "
           "anon-rss:30111000kB, file-rss:0kB, shmem-rss:0kB")
@signature("host-oom/kernel-oom-killer",
           r"(?P<scope>Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?)"
           r": [Kk]ill(?:ed)? process (?P<pid>\d+) \((?P<process_name>[^)]{0,256})\)|"
           # the kernel's report around a kill, when its "Killed process" line is cut or
           # filtered out: the task that triggered it, the reaper that freed the victim
           r"(?P<trigger>[^\s\]]{1,64}) invoked oom-killer: gfp_mask=|"
           r"oom_reaper: reaped process (?P<pid_>\d+) \((?P<process_name_>[^)]{0,256})\)|"
           # its one-line summary of the kill, and the task table it prints before it
           r"oom-kill:constraint=(?P<scope_>CONSTRAINT_\w+)[^\n]{0,1000}?,task=(?P<process_name__>[^,\s]+)"
           r",pid=(?P<pid__>\d+)|Tasks state \(memory values in pages\)|"
           # the kubelet's event for the kernel's kill on its node ("Warning  SystemOOM ...")
           r"System OOM encountered(?:, victim process: (?P<process_name___>[^,\s]{1,256}), "
           r"pid: (?P<pid___>\d+))?|"
           # the writer telling the kill in their own words: "my job was killed by the OOM
           # killer", "I get: killed by OOM killer", "进程被 OOM killer 杀死了", "OOM killerに
           # killされた" (not "if"/"whether" it was: a question or a conditional)
           + _TOLD_OOM_KILL,
           ("out of memory: Kill", "Out of memory: Kill", "Out of memory: kill",
            "oom_kill_allocating", "invoked oom-killer", "oom_reaper", "oom-kill:constraint",
            "Tasks state (memory values", "killer", "Killer", "KILLER", "killed", "Killed",
            "KILLED", "System OOM encountered"),
           "The kernel's OOM killer killed a process", extract=_kernel_oom, group="oom-killer",
           example="[ 301.772100] Memory cgroup out of memory: Killed process 5512 (python3) "
           "total-vm:30000000kB, anon-rss:20000000kB, file-rss:0kB, shmem-rss:0kB")
def _oom_killer(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if (numbers.get("pid") is None or numbers.get("trigger")
            or str(numbers.get("scope", "")).startswith("CONSTRAINT_")):
        return _oom_killer_at_work(sig, numbers)
    who = f"{numbers.get('process_name', 'a process')} (pid {numbers.get('pid', '?')}"
    if numbers.get("anon_rss_bytes") is not None:
        who += f", {size_text(numbers['anon_rss_bytes'])} resident"
    who += ")"
    cgroup = "cgroup" in str(numbers.get("scope", "")).lower()
    where = ("The memory limit of its cgroup (container or job) was reached"
             if cgroup else "The host ran out of RAM")
    explanation = (
        f"{where} and the kernel's OOM killer killed {who}. This is host memory, not GPU memory: "
        "in training it usually comes from DataLoader workers (each holds its own copy of the "
        "dataset's Python objects), pinned-memory buffers, loading a whole checkpoint into RAM, "
        "or a leak that grows every step.")
    title = "The cgroup memory limit was hit (OOM killer)" if cgroup else (
        "The host ran out of RAM (OOM killer)")
    return advice(sig, numbers, explanation, _HOST_MEMORY, title=title)


def _oom_killer_at_work(sig: Signature, numbers: dict[str, Any]) -> Advice:
    """The OOM killer seen without its "Killed process" line (cut or filtered out)."""
    scope = str(numbers.get("scope", "")).lower()
    cgroup = "cgroup" in scope or "memcg" in scope
    where = ("A memory cgroup (container or job) reached its limit"
             if cgroup else "The host ran out of RAM")
    parts = [f"{where} and the kernel's OOM killer ran"]
    if numbers.get("trigger"):
        parts.append(f"; {numbers['trigger']} asked for memory that could not be found")
    if numbers.get("pid") is not None:
        parts.append(f"; it killed {numbers.get('process_name', 'a process')} "
                     f"(pid {numbers['pid']})")
    explanation = (
        "".join(parts) + ". This is host memory, not GPU memory: in training it usually comes "
        "from DataLoader workers (each holds its own copy of the dataset's Python objects), "
        "pinned-memory buffers, loading a whole checkpoint into RAM, or a leak that grows every "
        "step. `sudo dmesg -T | grep -i 'killed process'` names the process that was killed.")
    title = ("The cgroup memory limit was hit (OOM killer)" if cgroup
             else "The host ran out of RAM (OOM killer)")
    return advice(sig, numbers, explanation, _HOST_MEMORY, title=title)


def _systemd_unit(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    # the unit's name systemd writes before its message: "ollama.service: Failed with ..."
    unit = re.search(r"([\w@.\\:-]{1,256}\.(?:service|scope|slice)): *$",
                     line[max(0, match.start() - 300):match.start()])
    if unit and "cgroup" not in found:
        found["unit"] = unit[1]
    if isinstance(found.get("oomd_reason"), str):  # systemd-oomd's: pressure, or swap in use
        found["oomd_reason"] = "pressure" if found["oomd_reason"].startswith("pressure") else "swap"
    return found


# systemd's own words when a unit's process was killed for memory: the unit's result after the
# kernel's OOM killer chose one of its processes ("ollama.service: Failed with result
# 'oom-kill'.", "A process of this unit has been killed by the OOM killer."; older releases
# "A process has been killed by the OOM killer."), and systemd-oomd killing (or, in newer
# releases, marking for killing) a whole cgroup for memory pressure or for swap in use
# ("Killed /user.slice/.../app.scope due to memory pressure for /user.slice/... being 61.20% >
# 50.00% for > 20s with reclaim activity", "... due to memory used (N) / total (N) and swap
# used (N) / total (N) being more than 90.00%").
@signature("host-oom/systemd-oom-kill",
           r"\bFailed with result 'oom-kill'|"
           r"\bA process (?:of this unit )?has been killed by the OOM killer\b|"
           r"\b(?:Killed|Marked) (?P<cgroup>/[^\s]{1,512}) (?:for killing )?due to memory "
           r"(?P<oomd_reason>pressure for|used \()",
           ("result 'oom-kill'", "killed by the OOM killer", "due to memory pressure for",
            "due to memory used ("),
           "systemd reported a unit's process killed for memory", extract=_systemd_unit,
           example="Jun 02 11:40:07 gpu-host systemd[1]: trainer.service: Failed with result "
           "'oom-kill'.")
def _systemd_oom_kill(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    unit = numbers.get("unit") or numbers.get("cgroup") or "a unit"
    if numbers.get("oomd_reason"):
        reason = ("its memory pressure" if numbers["oomd_reason"] == "pressure"
                  else "the host's memory and swap in use")
        explanation = (
            f"systemd-oomd killed {unit} (the whole control group, with SIGKILL) for {reason}: "
            "the host was short of RAM. The program is killed without an error of its own; it "
            "is host memory, not GPU memory.")
    else:
        explanation = (
            f"systemd says the kernel's OOM killer killed a process of {unit}: the host's RAM, "
            "or the unit's own MemoryMax=, ran out. The program is killed without an error of "
            "its own (a model server's runner, a training script); it is host memory, not GPU "
            "memory.")
    # (systemd-oomd kills from user space: the kernel log has no "Killed process" line then)
    where = ("systemd-oomd's log (`journalctl -u systemd-oomd`, `oomctl` for its limits)"
             if numbers.get("oomd_reason") else
             "the kernel log (`journalctl -k | grep -i 'killed process'`)")
    remedy = (f"Read the kill in {where} and the unit's limits (`systemctl show UNIT -p "
              "MemoryMax -p MemoryHigh`); raise MemoryMax= or add RAM or swap, or use less host "
              "memory (a smaller model or quantisation, fewer workers). " + _HOST_MEMORY)
    return advice(sig, numbers, explanation, remedy)


fixed("host-oom/slurm-oom-kill",
      # (also cut after "event(s)", as a title keeps it)
      r"Detected (?P<events>\d+) oom[-_]kill events?(?:\(s\))?(?: in (?:StepId=|step )?"
      r"(?P<step>[\w.]+))?|task (?P<task>\d+): Out Of Memory|"
      # (the job's state after it, as scontrol, sacct (cut to ten columns) and Slurm's mail
      # show it: "JobState=OUT_OF_MEMORY Reason=OutOfMemory", "OUT_OF_ME+", "Failed, Run time
      # 00:10:12, OUT_OF_MEMORY"; not a library's status, "CUDA_ERROR_OUT_OF_MEMORY")
      r"(?<![A-Za-z0-9_])OUT_OF_ME(?:MORY(?![A-Za-z0-9_])|\+)",
      ("oom-kill", "oom_kill", "Out Of Memory", "OUT_OF_ME"),
      "Slurm's cgroup OOM handler killed the job",
      example="slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your "
      "processes may have been killed by the cgroup out-of-memory handler.",
      explanation="Slurm's cgroup memory enforcement killed a task of the job: the job's --mem or "
      "--mem-per-cpu limit for host RAM was reached (not GPU memory).",
      remedy="Raise --mem (or --mem-per-gpu) for the job, or use less host memory: "
      + _HOST_MEMORY)

def _slurm_limit(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    for key in ("used", "limit"):  # Slurm's accounting and Torque count in KiB, Moab in MiB
        if isinstance(kib := found.pop(f"{key}_kib", None), int):
            found[f"{key}_bytes"] = kib * 1024
        if isinstance(mib := found.pop(f"{key}_mib", None), int):
            found[f"{key}_bytes"] = mib << 20
        if isinstance(count := found.pop(f"{key}_b", None), int):  # PBS Professional: bytes
            found[f"{key}_bytes"] = count
    return found


def _used_of_allowed(numbers: dict[str, Any]) -> str:
    """`` (9.00 GiB used, 8.00 GiB allowed)`` when a scheduler's line gave both sizes."""
    used, limit = numbers.get("used_bytes"), numbers.get("limit_bytes")
    if used is None or limit is None:
        return ""
    return f" ({size_text(used)} used, {size_text(limit)} allowed)"


@signature("host-oom/slurm-memory-limit",
           # Slurm's accounting (not the cgroup) saw the job above its --mem and killed it
           r"Job (?P<job>\d+) exceeded memory limit \((?P<used_kib>\d+) > (?P<limit_kib>\d+)"
           r"\),? being killed|Exceeded (?:job|step) memory limit",
           ("exceeded memory limit", "Exceeded job memory limit", "Exceeded step memory limit"),
           "Slurm killed the job for exceeding its memory limit", extract=_slurm_limit,
           example="slurmstepd: error: Job 4242 exceeded memory limit (9437184 > 8388608), being "
           "killed")
def _slurm_memory_limit(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    figures = _used_of_allowed(numbers)
    explanation = (
        f"Slurm's memory accounting saw the job's processes use more host RAM than its --mem or "
        f"--mem-per-cpu allows{figures} and killed the job: host memory, not GPU memory.")
    remedy = ("Raise --mem (or --mem-per-gpu) for the job, within what the node has (`sinfo "
              "-o '%n %m'`), or use less host memory: " + _HOST_MEMORY)
    return advice(sig, numbers, explanation, remedy)


@signature("host-oom/batch-memory-limit",
           # PBS/Torque's node daemon: "=>> PBS: job killed: mem 9437184kb exceeded limit
           # 8388608kb" (vmem and pmem alike); Moab: "job 4242 exceeded MEM usage hard limit
           # (9216 > 8192)", in MB; LSF's exit reason TERM_MEMLIMIT
           # (PBS Professional writes the sizes in bytes, without a unit: "vmem 59867090944
           # exceeded limit 53687091200")
           r"PBS: job killed: (?P<memory_kind>[pv]?mem) (?:(?P<used_kib>\d+)kb exceeded limit "
           r"(?P<limit_kib>\d+)kb|(?P<used_b>\d+)b? exceeded limit (?P<limit_b>\d+)b?\b)|"
           r"\b[Jj]ob (?P<job>\d+) exceeded MEM usage hard limit "
           r"\((?P<used_mib>\d+) > (?P<limit_mib>\d+)\)|TERM_MEMLIMIT: job killed after reaching "
           r"LSF memory usage limit|"
           # (Torque's server, aborting the job in its mail and its job log, sizes apart in the
           # "resources_used.vmem=" lines under it)
           r"\b[Jj]ob exceeded a memory resource limit\b",
           ("PBS: job killed", "exceeded MEM usage", "TERM_MEMLIMIT",
            "exceeded a memory resource limit"),
           "The batch scheduler killed the job for exceeding its memory limit",
           extract=_slurm_limit,
           example="=>> PBS: job killed: mem 9437184kb exceeded limit 8388608kb")
def _batch_memory_limit(sig: Signature, numbers: dict[str, Any],
                        ctx: AdviceContext) -> Advice:
    figures = _used_of_allowed(numbers)
    explanation = (
        f"The batch scheduler (PBS/Torque, Moab or LSF) saw the job's processes use more host "
        f"RAM than the job asked for{figures} and killed it: host memory, not GPU memory.")
    remedy = ("Ask for more memory when submitting (PBS/Torque: -l mem=32gb; LSF: -M and "
              "-R 'rusage[mem=...]'), within what a node has, or use less host memory: "
              + _HOST_MEMORY)
    return advice(sig, numbers, explanation, remedy)


# YARN's node manager (Spark and Hadoop jobs, TensorFlow or PyTorch on YARN) killing a container
# over its memory: "Container [pid=4242,containerID=...] is running beyond physical memory
# limits. Current usage: 8.1 GB of 8 GB physical memory used; ... Killing container." (or beyond
# its virtual memory limit, which YARN enforces on its own setting)
fixed("host-oom/yarn-memory-limit",
      r"\bis running (?:\d+B )?beyond (?:the '[A-Z]+' )?(?P<memory_kind>physical|virtual) memory "
      r"limits?\b",
      ("beyond physical memory", "beyond virtual memory", "beyond the '"),
      "YARN killed the container for exceeding its memory limit",
      example="Container [pid=4242,containerID=container_1_0001_01_000002] is running beyond "
      "physical memory limits. Current usage: 8.1 GB of 8 GB physical memory used; 10.2 GB of "
      "16.8 GB virtual memory used. Killing container.",
      explanation="YARN's node manager saw the container's processes use more host memory than "
      "the container was given and killed it (exit code 137 or 143): host memory, not GPU "
      "memory. Beyond its virtual memory limit is YARN's own check of the address space "
      "(yarn.nodemanager.vmem-check-enabled), which native libraries such as CUDA's exceed "
      "without using the memory.",
      remedy="Give the container more memory (Spark: spark.executor.memory and "
      "spark.executor.memoryOverhead; MapReduce: mapreduce.map.memory.mb and "
      "mapreduce.reduce.memory.mb), or use less host memory; for the virtual limit, raise "
      "yarn.nodemanager.vmem-pmem-ratio or turn yarn.nodemanager.vmem-check-enabled off. "
      + _HOST_MEMORY)


fixed("host-oom/notebook-session-ram",
      # Google Colab's notice when the runtime's host RAM ran out and its kernel was killed
      r"Your session crashed after using all available RAM",
      ("Your session crashed after using all available RAM",),
      "The notebook's runtime ran out of host RAM",
      example="Your session crashed after using all available RAM. If you are interested in "
      "access to high-RAM runtimes, you may want to check out Colab Pro.",
      explanation="The notebook's runtime (Google Colab's virtual machine) used all its host RAM "
      "and its kernel was killed: host memory, not GPU memory. A smaller batch rarely helps; "
      "what fills RAM is the dataset held in Python objects, copies of it, or a leak.",
      remedy="Load the data in pieces (a generator, tf.data or a DataLoader over files) instead "
      "of whole arrays, free copies (del, gc.collect()), or use a runtime with more RAM: "
      + _HOST_MEMORY)


# Ray's memory monitor (in the raylet) killing workers when the node's host memory passes its
# threshold, in the words of Ray's releases: the exception's message ("Task was killed due to
# the node running low on memory", from 2.55 "2 worker(s) were killed due to ..."), the node's
# figures below it (with or without "where the task ..."), the raylet's summary that the driver
# prints ("13 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed
# due to other reasons": a count of 0 kills is no kill), and Ray 1.x's RayOutOfMemoryError
# ("More than 95% of the memory on node ... is used").
fixed("host-oom/ray-oom-killer",
      r"Memory on the node \(IP: [^)]*\) (?:where the (?:task|actor)|was \d)|Ray killed this "
      r"worker|ray\.exceptions\.OutOfMemoryError|exceeds the memory usage threshold|"
      r"\b(?:Task was|(?P<workers>\d+) worker\(s\) were) killed due to the node running low on "
      r"memory|\b(?P<workers_>[1-9]\d*) Workers \(tasks / actors\) killed due to memory pressure"
      r"|\bRayOutOfMemoryError\b",
      ("Memory on the node", "Ray killed this worker", "ray.exceptions.OutOfMemoryError",
       "exceeds the memory usage threshold", "killed due to the node running low on memory",
       "killed due to memory pressure", "RayOutOfMemoryError"),
      "Ray's memory monitor killed a worker: the node ran low on RAM",
      example="ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
      "memory. Memory on the node (IP: 10.0.0.5, ID: 7f3c) where the task (task ID: 1a2b, "
      "name=train, pid=4503, memory used=30.5GB) was running was 31.2GB / 32.0GB (0.975), which "
      "exceeds the memory usage threshold of 0.95. Ray killed this worker",
      explanation="Ray's memory monitor saw the node's host memory above its threshold "
      "(RAY_memory_usage_threshold, 0.95 by default) and killed a worker to save the node: "
      "host RAM, not GPU memory.",
      remedy="Give the task more memory (num_cpus/memory in its resources, fewer tasks per node), "
      "or use less host memory: " + _HOST_MEMORY)

# Dask's nanny restarting (killing) a worker that passed its memory limit's terminate share:
# "Worker exceeded 95% memory budget. Restarting", "Worker tcp://10.0.0.5:40001 (pid=4242)
# exceeded 95% memory budget. Restarting..."
fixed("host-oom/dask-nanny-restart",
      r"\bWorker (?:[\w:/.-]{1,80} )?(?:\(pid=\d{1,10}\) )?exceeded (?P<share>\d{1,3})% memory "
      r"budget\. Restarting",
      ("memory budget. Restarting",),
      "Dask's nanny killed a worker over its memory limit", tier=1.5,
      example="distributed.nanny.memory - WARNING - Worker tcp://10.0.0.5:40001 (pid=4242) "
      "exceeded 95% memory budget. Restarting...",
      explanation="The worker's host memory passed the share of its memory limit at which Dask's "
      "nanny terminates it (distributed.worker.memory.terminate, 95% by default): the nanny "
      "killed and restarted it, losing the tasks it held. Host RAM, not GPU memory.",
      remedy="Give each worker more memory (--memory-limit, fewer workers per node), use smaller "
      "partitions, or use less host memory: " + _HOST_MEMORY)

fixed("host-oom/kubernetes-evicted",
      # (and the kubelet's words when it evicts or turns away pods for the node's memory
      # pressure: "The node had condition: [MemoryPressure].")
      r"(?:The node was|node was|Node is) low on resource: memory|"
      r"\b[Nn]ode had condition: \[MemoryPressure\]",
      ("low on resource: memory", "condition: [MemoryPressure]"),
      "Kubernetes evicted the pod: the node ran low on memory",
      example="Warning  Evicted  3m  kubelet  The node was low on resource: memory. Container "
      "trainer was using 30Gi, which exceeds its request of 8Gi.",
      explanation="The node ran short of RAM and the kubelet evicted (killed) pods, starting "
      "with those using most above their memory request: this job's containers were killed "
      "for host memory.",
      remedy="Set resources.requests.memory close to what the job really uses (and a limit), "
      "or use less host memory: " + _HOST_MEMORY)

fixed("host-oom/kubernetes-oomkilled",
      # (and runc's words when the limit killed the container's first process as it started:
      # "container init was OOM-killed (memory limit too low?)")
      # (not docker inspect's state of a container that was not: "OOMKilled": false)
      r"\bOOMKilled\b(?!\"?\s*[:=]\s*false\b)|\bcontainer (?:init )?was OOM-killed\b",
      ("OOMKilled", "was OOM-killed"),
      "The container was OOMKilled",
      example="      Reason:       OOMKilled",
      explanation="Kubernetes killed the container for exceeding its memory limit (exit code "
      "137). A memory-backed /dev/shm counts toward that limit too.",
      remedy="Raise resources.limits.memory for the pod, or use less host memory: "
      + _HOST_MEMORY)


# Kubernetes' record of a container's last end, as kubectl describe and the pod's status (YAML
# or JSON) give it: "Exit Code:    137", "exitCode: 137". Under "Reason: OOMKilled" it is the
# same end, and joins that incident.
fixed("host-oom/container-exit-137",
      r"\b(?:Exit Code:|exitCode\"?:)\s*137\b", ("Exit Code", "exitCode"),
      "A container was killed with SIGKILL (exit code 137)", tier=1.5, attach="prefer",
      window=8,
      example="      Exit Code:    137",
      explanation="The container's main process ended with exit code 137 (128 + 9): it was "
      "killed with SIGKILL, which it cannot catch or report. On Kubernetes that is most often "
      "its memory limit (the reason then reads OOMKilled; a memory-backed /dev/shm counts toward "
      "the limit too), otherwise a failed liveness probe, the node's eviction or a preemption.",
      remedy="Read the reason beside it and the pod's events (`kubectl describe pod POD`, "
      "`kubectl get events --field-selector involvedObject.name=POD`); if it was memory, raise "
      "resources.limits.memory or use less host memory: " + _HOST_MEMORY)


# A pod, a container or a job told killed for its memory limit or evicted for memory, in the
# writer's words ("the predictor pod exceeded its memory limit and restarted", "our pods were
# evicted because the node ran out of memory"; not in a condition or advice: "if a container
# exceeds its memory limit, ...", "to avoid pods being evicted for memory, ...").
fixed("host-oom/memory-limit-told",
      unless_words(r"if|whether|unless|avoid\w*|prevent\w*|you|your|should|would|make sure")
      + r"(?i:\b(?:pods?|containers?|jobs?|process(?:es)?|workers?|tasks?|replicas?|"
      r"predictors?|servers?)\b[^\n]{0,60}?(?:\bexceed(?:s|ed|ing)? (?:(?:its|their|the|my|our) )?"
      r"(?:(?!GPU|CUDA|VRAM|video|device|graphics)[\w-]+ ){0,2}memory limits?\b"
      r"(?![^\n]{0,30}\b(?:GPU|CUDA|VRAM)\b)|\b(?:was|were|got|gets?|is|are|being|been|keeps? "
      r"(?:getting|being)) (?:\w+ )?evicted\b[^\n]{0,60}?\b(?:memory|RAM|MemoryPressure)\b))",
      ("emory",),
      "A pod or container was killed for its memory limit (told in the writer's words)",
      tier=1.5,
      example="The predictor pod exceeded its memory limit and restarted without a message.",
      explanation="The writer says a pod, container or job went over its memory limit or was "
      "evicted for memory. Kubernetes (and docker's --memory) kills a container that goes over "
      "its limit with SIGKILL (exit code 137, reason OOMKilled) and the kubelet evicts pods from a "
      "node that runs short of RAM: the program is killed without an error of its own. Host "
      "memory, not GPU memory; a memory-backed /dev/shm counts toward the limit too.",
      remedy="Confirm with `kubectl describe pod POD` (Last State: Terminated, Reason: OOMKilled, "
      "Exit Code: 137; or Reason: Evicted) and `kubectl get events`; raise "
      "resources.limits.memory (and the request, so the pod lands on a node with that much "
      "free), or use less host memory: " + _HOST_MEMORY)


# A job, a pod or a process told killed for an out-of-memory, in the writer's words ("my jobs
# are kicked out with `out of memory`", "the pod is being killed due to OOM"): a program that
# runs out of GPU memory raises an error, it is not killed; what kills a job for memory is the
# kernel, a cgroup, the scheduler or the container runtime, over host memory. Not in a
# condition or advice ("if a job is killed for OOM, ..."), not a GPU's ("killed due to CUDA
# OOM" does not read: the word before OOM is the GPU's).
fixed("host-oom/killed-for-memory-told",
      unless_words(r"if|whether|unless|avoid\w*|prevent\w*|you|your|should|would|make sure")
      + r"(?i:\b(?:pods?|containers?|jobs?|process(?:es)?|workers?|tasks?|runs?|trainings?|"
      r"programs?|scripts?|they|it)\b[^\n]{0,40}?\b(?:is|are|was|were|gets?|got|being|been|keeps? "
      r"(?:getting|being))(?: \w+)? (?:killed|kicked out|terminated)\b(?:[^\n]{0,20}?\b(?:with|by|"
      r"due to|because of|for)(?: an?| the)? [`'\"]?(?:out[- ]of[- ]memory|OOM)\b(?![\s-]{0,3}kill)"
      r"(?![^\n]{0,30}\b(?:GPU|CUDA|VRAM)\b)|"
      # (... or because it took too much of the host's memory: "the process is being killed
      # during offload because it is consuming too much CPU memory")
      r"[^\n.;]{0,40}?\b(?:because|as|since|due to)\b[^\n.;]{0,30}?\b(?:consum\w*|us(?:es|ed|"
      r"ing)|tak(?:es|ing)|took|need(?:s|ed)|allocat\w*|exhaust\w*) (?:too much|to much|all"
      r"(?: the)?|most of the|more) (?:CPU|host|system|machine) (?:memory|RAM)\b)|"
      # (... or told by its cure: the job given more memory, and then it ran: "I allocated
      # more memory and it worked", "we requested more RAM for the job and it finished"; not
      # the GPU's)
      r"\b(?:I|we)(?: \w+)? (?:allocated|requested|asked for|assigned|reserved|gave (?:it|the "
      r"(?:job|run|process|container|VM))) (?:more|extra|additional) (?:host |system )?"
      r"(?:memory|RAM|mem)\b(?! (?:to|for|on) (?:the )?(?:GPU|VRAM|CUDA))(?: (?:to|for) "
      r"(?:the |my |our |this )?(?:jobs?|runs?|containers?|VMs?|pods?|nodes?|process(?:es)?|"
      r"docker|WSL))? ?(?:and|,|then) (?:now )?(?:it|that|this|the (?:job|run|process)) "
      r"(?:now )?(?:worked|works|ran|runs|finished|completed|succeeded|went through)\b)",
      ("OOM", "out of memory", "out-of-memory", "Out of memory", "CPU memory", "host memory",
       "system memory", "machine memory", "CPU RAM", "host RAM", "system RAM", "machine RAM",
       "more memory", "more RAM", "more mem", "extra memory", "extra RAM", "additional memory",
       "additional RAM", "more host memory", "more system memory"),
      "A job was killed for memory (told in the writer's words)", tier=1.5,
      example="Our long jobs on the gpu nodes are kicked out with `out of memory` after a day.",
      explanation="The writer says a job, pod or process was killed for an out-of-memory. A "
      "program out of GPU memory raises an error of its own; one that is killed was stopped "
      "from outside for host memory: the kernel's OOM killer, the job's cgroup, the batch "
      "scheduler's memory limit, or the container runtime's.",
      remedy="Confirm what killed it: `sudo dmesg -T | grep -i 'killed process'` on the node, "
      "the scheduler's record of the job (`sacct -j JOB -o State,MaxRSS,ReqMem`, `qstat -f JOB`), "
      "or `kubectl describe pod POD` (Reason: OOMKilled); then ask for more memory for the job, "
      "or use less host memory: " + _HOST_MEMORY)


# The host's RAM told full and the run ended, in one sentence of the writer's ("the colab is
# crashed due to RAM is full", "physical RAM usage is nearly at 128GB and a few moments later the
# application was terminated", "memory use occupies the entire available CPU memory, leading to
# system OOM errors"); and a notebook's session told crashing on a line that names its RAM ("the
# session always crashes" in Colab). RAM alone is the host's; not the GPU's RAM, nor after "if",
# "when" or "your" (a condition, advice), nor a setting's value ("cache=ram", "'ram'").
_RAM = (r"(?<![\w='\"-])(?<!GPU )(?<!GPU's )(?<!video )(?<!\bif )(?<!\bwhen )(?<!\byour )"
        r"(?<!\bif the )(?<!\bwhen the )(?<!\bonce the )(?:RAM|(?:system|host|CPU|physical|main|"
        r"machine) memory)\b")
_RAM_FULL = (r"(?:(?:completely |almost |nearly |totally )?full\b|fill(?:s|ed|ing)? up\b|"
             r"(?:is |was |gets |got )?used up\b|"
             r"exhausted\b|r[au]n(?:s|ning)? out\b|max(?:es|ed)? out\b|(?:nearly|almost) at \d|"
             r"at 100 ?%|(?:reach(?:es|ed)?|hit(?:s|ting)?) (?:its |the )?(?:max\w*|limit|100 ?%)|"
             # (a figure passed: "the RAM reaches over 12GB and it crashes")
             r"(?:reach(?:es|ed)?|go(?:es)?|went|climb(?:s|ed)?|get(?:s)?|got) (?:over|above|"
             r"past|beyond) \d|"
             r"occup(?:y|ies|ied) (?:the |all )(?:\w+ ){0,2}?(?:available|entire|whole)|"
             # (or growing until the run ends: "the RAM use increases every epoch until it
             # crashes")
             r"(?:keeps? )?(?:(?:increas|grow|climb|ris)\w*|go(?:es)? up|going up|went up)\b"
             r"(?=[^.!?\n]{0,60}?\buntil\b))")
_RUN_ENDED = (r"(?:crash(?:es|ed|ing)?|killed|kills|terminated|dies|died|froze|freezes|fails|"
              r"(?:system |host )?OOM)\b")
fixed("host-oom/ram-full-told",
      # (the RAM and the first word of it full taken as one: a line of "RAM full RAM full ..."
      # then looks for the run's end once per RAM, not once per pair)
      rf"(?i:(?>{_RAM}[^.!?\n]{{0,60}}?\b{_RAM_FULL})[^.!?\n]{{0,120}}?\b{_RUN_ENDED}|"
      rf"(?<!\bif it )(?<!\bwhen it )\b{_RUN_ENDED}[^.!?\n]{{0,40}}?\b(?:due to|because|as|since|"
      rf"when|after|from)\b[^.!?\n]{{0,20}}?{_RAM}[^.!?\n]{{0,20}}?\b{_RAM_FULL}|"
      # (a notebook's session told crashing, on a line that names the notebook and its RAM)
      # (the run told going on until the RAM filled: "it runs until the RAM is full")
      rf"(?<!\bif )(?<!\bwhen )\b(?:it|training|the (?:\w+ )?(?:training|job|run|script|process|"
      rf"program|notebook|cell)) (?:runs?|ran|goes|went|keeps? running|kept running) until "
      rf"(?:all )?(?:the |my |our )?{_RAM}[^.!?\n]{{0,20}}?\b{_RAM_FULL}|"
      r"^(?=[^\n]*\b(?:colab|kaggle|notebook|jupyter)\b)(?=[^\n]*(?<![\w-])(?<!GPU )RAM\b)"
      r"[^\n]*?(?<!\bif )\b(?:the|my|our) (?:\w+ )?(?:session|runtime|kernel)s? (?:always |"
      r"keeps? |kept |then |just |suddenly |eventually )?(?:crash(?:es|ed|ing)?|dies|died)\b)"
      r"(?![^.!?\n]{0,120}\b(?:GPU|VRAM|CUDA)\b)",
      ("RAM", "ram", "Ram", "memory"),
      "The host ran out of RAM and the run ended (told in the writer's words)", tier=1.5,
      example="After 12 epochs the system RAM is full and the training process is killed.",
      explanation="The writer says the machine's RAM (host memory, not the GPU's) filled up and "
      "the run ended: the kernel's OOM killer, a notebook's runtime or the job's memory limit "
      "stopped it without an error of its own. A growth of a fixed size every epoch is a leak "
      "(a list that keeps tensors, a cache, a data pipeline that is rebuilt each epoch).",
      remedy="Watch the process's memory across epochs (`free -h`, `top`, `gpu-audit scan`); "
      "if it grows every epoch, look for what keeps references (history lists of tensors: "
      "append `loss.item()`, not `loss`); otherwise: " + _HOST_MEMORY)


# Jupyter's server restarting a kernel that died under it ("KernelRestarter: restarting kernel
# (1/5), keep random ports", Colab's runtime log), and the notebook's own notice of it (Jupyter's
# "The kernel for train.ipynb appears to have died. It will restart automatically.", VS Code's
# "The Kernel crashed while executing code in the current cell or a previous cell."): the kernel
# process ended without a Python error of its own, which in a notebook is most often the host's
# OOM killer (a native crash the other cause). Weaker than any message printed (a Python error in
# the cell is the cause then).
fixed("host-oom/notebook-kernel-restarted",
      r"\bKernelRestarter: restarting kernel\b|\b[Kk]ernel (?:for \S{1,200} )?appears to have "
      r"died\b|\bKernel crashed while executing code in the (?:current|executing) cell\b",
      ("KernelRestarter: restarting kernel", "appears to have died",
       "Kernel crashed while executing"),
      "The notebook's kernel died and was restarted (most often for host RAM)", tier=3.0,
      example="[I 2024-05-02 10:14:07.212 ServerApp] KernelRestarter: restarting kernel (1/5), "
      "keep random ports",
      explanation="The notebook server restarted a kernel that had died: the kernel process "
      "ended without a Python error, which is what the kernel's OOM killer does when the "
      "notebook's host RAM runs out (a runtime's log often shows a large allocation just "
      "before, such as tcmalloc's 'large alloc' of a few GB); a crash in native code (a "
      "segmentation fault) is the other cause. Host memory, not GPU memory.",
      remedy="Watch the runtime's RAM while the cell runs (`free -h`, the notebook's resource "
      "monitor); load the data in pieces rather than whole arrays, free copies (del, "
      "gc.collect()), or use a runtime with more RAM. If RAM stays low, run the cell as a "
      "script in a terminal to see the native crash: " + _HOST_MEMORY)

# A dataset cache in RAM told filling the host's memory and ending the run, in one line of the
# writer's: detectors that keep every decoded image in RAM (YOLOv5's --cache, Ultralytics'
# cache=ram) do it for the training and the validation set ("after the cache is turned on, the
# memory taken by the val data is too large and the training crashes", "even with --cache off
# a memory shortage stops training in colab"). Not the trainer's own notice that it will not
# cache ("... GB RAM required to cache images ... not caching images": no run ended), not the
# GPU's or an LLM's KV cache, and not advice or a rule ("if you", "to avoid", "may cause", "when
# the RAM is full ..., so use cache=disk").
_DATA_CACHE = (r"(?:--cache\b|\bcache ?= ?['\"]?(?:ram|true|disk|false)\b|\bcach(?:e|ing) "
               r"(?:the |all )?(?:images|dataset|data|val\w*|train\w*)\b|(?<!KV )(?<!kv )"
               r"\bcache (?:is|was) (?:turned|switched) on\b|\b(?:turn|switch|enabl)\w* on "
               r"(?:the )?cache\b)")
_CACHE_SHORT = (r"(?:\b(?:memory|RAM) (?:shortage|(?:\w+ ){0,6}?(?:is|was|becomes|became|gets|got) "
                r"(?:too (?:large|high|big|much)|not enough|full|exhausted|used up)\b|fills? up|"
                r"r[au]ns? out)|\b(?:not enough|insufficient|lack of|shortage of|out of) "
                r"(?:memory|RAM)\b|\b(?:occup|us|fill|tak|eat|consum)\w* (?:up )?all (?:of )?"
                r"(?:the |my )?(?:remaining |available |free )?(?:memory|RAM)\b)")
fixed("host-oom/dataset-cache-told",
      r"^(?!(?i:[^\n]*\b(?:GPU|CUDA|VRAM|KV|empty_cache|if you|you should|to avoid|to prevent|"
      r"make sure|whether|may|might|would|can cause|could cause|when (?:the |your )?(?:RAM|memory)|"
      r"once (?:the |your )?(?:RAM|memory)|so use|instead use|try)\b))"
      rf"(?i:(?=[^\n]*{_DATA_CACHE})(?=[^\n]*{_CACHE_SHORT})"
      r"[^\n]*?(?:\b(?:crash(?:es|ed|ing)?|killed|stops?|stopped|terminat\w*|dies|died|"
      r"froze|freezes)\b|\^C))",
      ("cach", "Cach"),
      "A dataset cache filled the host's RAM and the run ended (told in the writer's words)",
      tier=1.5,
      example="With --cache ram the images of the val set take all the remaining memory and the "
      "training crashes.",
      explanation="The writer says the dataset cache filled the machine's memory and the run "
      "ended. A cache in RAM (YOLOv5's --cache, Ultralytics' cache=ram or cache=True) keeps "
      "every decoded image of the training and the validation set in host memory (not the "
      "GPU's), about width x height x 3 bytes each at the training size, in every DDP process; "
      "the run is then killed or fails to allocate.",
      remedy="Cache on disk (--cache disk, cache=disk) or not at all, train at a smaller image "
      "size, lower the DataLoader workers; the trainer prints the RAM it needs to cache before "
      "it starts ('GB RAM required to cache images'). " + _HOST_MEMORY)


# The host's memory told as the failure in other words: "the RAM OOM occurred", "workers=8
# caused a CPU OOM" (the host's memory named before OOM); a reply that says the error is the
# system's memory and not the GPU's ("The error is system memory, not VRAM"); and in Chinese,
# where 内存 is the host's memory (显存 the GPU's): the system's memory told full or overflowing
# ("系统内存溢出了"), or memory told full on a line that says the run was killed ("内存爆掉，最终
# 触发killed"). Not on a line that asks how to fix or avoid it, nor in a condition or a rule
# ("一般系统内存不足会..."). And the writer's machine told killing the run on a line that names
# its RAM.
_HOST_SHORT_ZH = r"(?:占用)?(?:过大|爆掉|爆了|溢出|不足|不够|耗尽|用完|占满|满了)"
_NOT_ZH_CONDITION = r"(?<!如果)(?<!若)(?<!避免)(?<!防止)(?<!可能)(?<!当)(?<!一般)(?<!通常)"
_KILLED_MEMORY_KO = (r"^(?![^\n]*(?:GPU|VRAM|CUDA|그래픽|비디오|显存))"
                     r"(?=[^\n]*(?:[Kk]illed|강제 ?종료))"
                     r"(?=[^\n]*(?:었습니다|았습니다|였습니다|됐습니다|었어요|었다|됐다|됐어요))"
                     r"[^\n]*?메모리 ?(?:가 |이 )?(?:초과|부족)")
fixed("host-oom/host-memory-told",
      unless_words(r"if|whether|unless|avoid\w*|prevent\w*|you|your|should|would|how|fix\w*|"
                   r"diagnos\w*|vs")
      + r"(?i:(?<![\w-])(?<!GPU )(?<!video )(?:RAM|CPU|host|system|"
      r"(?:system|host|CPU|machine) memory) (?:OOM|out[- ]of[- ]memory)\b(?![- ]?kill))|"
      r"(?i:(?<!\bif )\b(?:error|problem|issue|crash|culprit) (?:is|was) (?:the )?(?:system|host|"
      r"CPU|machine) (?:memory|RAM)\b|\b(?:system|host|CPU|machine) (?:memory|RAM),? not (?:the )?"
      r"(?:VRAM|GPU))|"
      # (the machine told killing the run, on a line that names its RAM: "my computer, which has
      # 32GB of RAM, kills the process near the end"; not the GPU's)
      r"^(?=[^\n]*(?<![\w-])RAM\b)(?![^\n]*\b(?:GPU|VRAM|CUDA)\b)(?i:[^\n]*?(?<!\bif )"
      r"(?<!\bwhen )\b(?:my|our|the) (?:computer|machine|system|laptop|server|OS)\b[^.\n]{0,60}?"
      r"\b(?:kills|killed) (?:the|my|our) (?:python )?(?:process|training|job|script|program|run)"
      r"\b)|"
      # (the writer's machine told running out of memory: "after 20 epochs my system runs out
      # of memory", "the server ran out of RAM", "the machine go out of memory"; not the GPU's,
      # unless the line names the RAM too, not a condition)
      r"^(?:(?![^\n]*\b(?:GPU|VRAM|CUDA|device)\b)|(?=[^\n]*(?<![\w-])RAM\b))"
      r"(?i:[^\n]*?(?<!\bif )(?<!\bwhen )(?:\b(?:my|our) "
      r"(?:system|machine|computer|PC|laptop|server|host|workstation)s? (?:\w+ )?(?:r[au]ns?|"
      r"running)|\bthe (?:system|machine|computer|PC|laptop|server|host|workstation) (?:\w+ )?"
      r"(?:ran|go|goes|went)) out of (?:memory|RAM)\b)|"
      rf"{_NOT_ZH_CONDITION}(?:系统|机器|主机|物理|运行|CPU ?)内存{_HOST_SHORT_ZH}|"
      r"^(?![^\n]*(?:显存|顯存|显卡|CUDA|VRAM|如果|若|避免|防止|一般|通常))"
      r"(?=[^\n]*(?:[Kk]ill|杀死|杀掉|被杀|退出|崩溃|挂掉|挂了|闪退|被终止))"
      r"[^\n]*?(?<!GPU)(?<!GPU )内存" + _HOST_SHORT_ZH + "|"
      # (in Korean: memory told exceeded or short on a line that says, in the past, that the
      # run was killed: "메모리 초과 시에 ... killed 에러가 뜨면서 종료되었습니다")
      + _KILLED_MEMORY_KO,
      ("OOM", "out of memory", "out-of-memory", "system memory", "System memory", "host memory",
       "CPU memory", "machine memory", "RAM", "内存", "메모리"),
      "The host ran out of memory (told in the writer's words)", tier=1.5,
      example="With eight workers the RAM OOM came back after two epochs.",
      explanation="The text says the machine's memory (RAM, the host's; not the GPU's) ran out: "
      "a process then fails to allocate or is killed from outside (the kernel's OOM killer, the "
      "job's memory limit) without an error of its own. Each DataLoader worker holds its own "
      "copy of the dataset's Python objects, and saving a checkpoint gathers it in host memory "
      "too.",
      remedy="Watch the process's memory (`free -h`, `top`, `gpu-audit scan`) as it runs; then "
      + _HOST_MEMORY)

# The host's memory told running out under a run, or the OOM killer told ending it, in the
# writer's words and in the languages such reports are written in: "the job runs out of RAM
# during tokenization", "the Linux OOM killer terminated my training process", "加载时内存不足
# 程序退出", "メモリ不足でプロセスが強制終了されました", "RAM이 부족해서 프로세스가 죽었습니다",
# "процесс убивается OOM killer'ом", "der Arbeitsspeicher läuft voll", "tué par le OOM killer",
# "se queda sin memoria RAM", "morto por falta de memória RAM". Only the host's memory (RAM, or
# memory named the system's, the host's, the CPU's): a line that names the GPU, VRAM or CUDA is
# the GPU's; not a condition, advice or a rule ("if the process is killed by the OOM killer",
# "to avoid running out of RAM", "si el proceso se queda sin RAM", "もし ... 場合").
_GPU_WORDS = r"(?:\b(?:GPU|VRAM|CUDA|vram)\b|显存|顯存|显卡|ビデオ|그래픽)"
# (the GPU named before the telling, or in its own sentence after it; a later sentence may
# set the GPU apart: "der Arbeitsspeicher ist voll ... Die GPU hat noch genug Speicher frei")
_NOT_GPU_BEFORE = rf"(?:(?!{_GPU_WORDS})[^\n])*?"
_NOT_GPU_AFTER = rf"(?![^\n.。!！?？]*{_GPU_WORDS})"
_HOST_RAM = (r"(?:RAM|(?:system|host|CPU|main|physical) memory|memory \((?:RAM|host)\))")
_RAM_GUARD = (r"if|whether|unless|avoid\w*|prevent\w*|should|would|could|might|may|how|when|"
              r"once|to fix")
_RAM_TOLD_EN = (
    # (a reply's reading of the writer's run: "You're running out of RAM", "your machine is
    # running out of memory"; and the RAM told too little: "Colab's 12GB of RAM is not enough
    # for the fp32 weights", "not enough system RAM")
    # (the guard runs from a sentence's start to its end: linear in the line)
    unless_words(_RAM_GUARD, start=r"(?:^|(?<=[.!;:] ))", stop=r"\n.!?;")
    + r"(?i:\b(?:you(?:'re| are)(?: just| simply)? (?:running|run) out of|you(?: just| simply)? "
    r"ran out of|your (?:machine|system|PC|computer|server|node|VM|container|Colab|instance)"
    r"(?: \w+)? (?:is|was) (?:running )?out of) (?:all (?:of )?)?(?:(?:the|your) )?"
    r"(?:\d{1,4} ?[GM]i?B (?:of )?)?" + _HOST_RAM + r"\b|"
    r"(?<!GPU )(?<!GPU's )(?<!video )\b(?:RAM|system memory|host memory)\b[^\n.]{0,30}?\b(?:(?:is "
    r"not|isn't|was not|wasn't) (?:enough|sufficient)|(?:is|was) insufficient)\b|"
    r"\b(?:not enough|insufficient) (?:host |system |CPU )?RAM\b|"
    # (a reply's reading put the other way: "it's mainly due to you don't have enough RAM")
    r"\byou (?:don't|do not|didn't|did not) have enough (?:(?:host |system |CPU )?RAM|"
    r"(?:host|system|CPU) memory)\b(?! on (?:the |your )?(?:GPU|card)))|"
    + unless_words(_RAM_GUARD + r"|you|your")
    + r"(?i:\b(?:job|process|training|script|program|run|notebook|container|machine|node|"
    r"server|system|computer|PC|laptop|workstation|kernel|it)s? (?:\w+ ){0,2}?(?:r[au]ns?|"
    r"running|went|goes) out of " + _HOST_RAM + r"\b|"
    # (the run told taking all of it: "loading the 7B model uses up all my system memory",
    # "the process eats all 32GB of RAM")
    r"\b(?:job|process|training|script|program|run|notebook|model|loader|loading|load|it)s? "
    r"(?:\w+ ){0,2}?(?:(?:uses?|used|using|takes?|took|taking|fills?|filled|filling) up|"
    r"eats?|ate|eating|consumes?|consumed|consuming|devours?|devoured|hogs?|hogged) "
    r"(?:up )?(?:all|every bit|the whole|the entire)(?: of)? (?:the |my |our )?"
    r"(?:\d{1,4} ?[GM]i?B (?:of )?)?(?:available )?" + _HOST_RAM + r"\b|"
    r"\bOOM[- ]?killer\b[^\n.]{0,20}?\b(?:killed|terminated|took out|reaped|stopped|shot down)"
    r" (?:my|our|the)\b|"
    # (the run told OOM-killed: "then the job gets OOM killed", "the pod was killed by the OOM
    # killer")
    r"\b(?:job|process|training|script|program|run|container|pod|worker|notebook|it)s? "
    r"(?:\w+ )?(?:gets?|got|was|were|is|being) (?:\w+ )?(?:OOM[- ]?killed|killed by (?:the )?"
    r"(?:Linux |kernel(?:'s)? |system(?:'s)? )?OOM[- ]?killer)\b|"
    # (the kernel as the killer: "the kernel killed my python process")
    r"\bthe (?:Linux )?kernel (?:\w+ )?killed (?:my|our|the) (?:\w+ )?(?:process|job|training|"
    r"script|program|run)\b)")
_RAM_TOLD_OTHER = (
    # (Japanese: memory short, then the process killed or ended)
    r"(?:メモリ|RAM)(?:が|の)?(?:不足|足りな|溢れ|あふれ|枯渇|いっぱい)[^\n]{0,30}?(?:強制終了|"
    r"killed|Killed|殺され)(?![^\n]{0,20}?(?:ことがあ|ことも|かもしれ|可能性))|"
    # (Korean: the RAM short, then the process dead or ended, in the past)
    r"(?:RAM|램)(?:이|가)? ?(?:부족|모자라|꽉 차)[^\n]{0,30}?"
    r"(?:죽었|종료되었|종료됐|꺼졌|강제 ?종료)|"
    # (Russian: the OOM killer or the RAM, then killed)
    r"(?i:(?:убива\w*|убит\w*|убил\w*) (?:\w+ )?OOM[- ]?killer\w*|OOM[- ]?killer\w* "
    r"(?:убива\w*|убил\w*)|(?:оперативн\w* памят\w*|ОЗУ)[^\n.]{0,40}?(?:не хватает|кончается|"
    r"заканчивается|закончилась|забивается)|(?:не хватает|кончается|заканчивается|"
    r"закончилась|нехватк\w*|не хватило) "
    r"(?:\w+ )?(?:оперативн\w* памят\w*|ОЗУ))|"
    # (German: the RAM running full, the process killed by the OOM killer)
    r"(?i:\b(?:Arbeitsspeicher|RAM|Hauptspeicher)\b[^\n.]{0,20}?\b(?:läuft|lief) "
    r"(?:\w+ ){0,4}?voll\b|"
    # (full, told in a main clause: "dann ist der Arbeitsspeicher voll", "der RAM war voll";
    # a condition puts its verb last: "wenn der Arbeitsspeicher voll ist")
    r"\b(?:ist|war) (?:der |mein |dann |auch )?(?:Arbeitsspeicher|RAM|Hauptspeicher) "
    r"(?:\w+ ){0,4}?voll\b|\b(?:Arbeitsspeicher|RAM|Hauptspeicher) (?:ist|war) (?:\w+ ){0,4}?"
    r"voll\b|"
    r"\bvom OOM[- ]?Killer (?:\w+ )?(?:beendet|gekillt|abgeschossen)\b)|"
    # (French, Spanish, Portuguese: killed by the OOM killer, out of RAM)
    r"(?i:\b(?:tué|tuée|arrêté|arrêtée) par (?:le |l')?OOM[- ]?killer\b|\bmémoire (?:vive|RAM) "
    r"(?:est |était )?(?:saturée|pleine)\b|"
    r"\b(?:se queda|se quedó|me quedo|me quedé|nos quedamos) sin (?:memoria )?RAM\b|"
    # (the RAM told filling up: "la memoria RAM se llena por completo", "a memória RAM enche")
    r"\bmemoria RAM (?:se (?:llena|llenó|agota|agotó)|(?:está|estaba) (?:llena|agotada))\b|"
    r"\bse (?:llena|llenó|agota|agotó) (?:toda )?la memoria RAM\b|"
    r"\bmemória RAM (?:enche|encheu|acaba|acabou|esgota|esgotou|fica cheia|ficou cheia)\b|"
    r"\bmatado por (?:el )?OOM[- ]?killer\b|"
    r"\bmort[oa] (?:pelo OOM[- ]?killer|por (?:falta de )?(?:memória )?RAM)\b|"
    r"\b(?:fica|ficou) sem (?:memória )?RAM\b)")
fixed("host-oom/out-of-ram-told",
      rf"(?:{_RAM_TOLD_EN})|^(?!(?i:[^\n]*(?:\b(?:if|when|avoid|prevent|falls|"
      r"wenn|si|pour éviter|para evitar|caso|если|чтобы|como|comment)\b|もし|場合|만약|경우)))"
      rf"{_NOT_GPU_BEFORE}(?:{_RAM_TOLD_OTHER}){_NOT_GPU_AFTER}",
      ("RAM", "memory", "OOM", "メモリ", "램", "ОЗУ", "памят", "Arbeitsspeicher",
       "Hauptspeicher", "mémoire"),
      "The host ran out of RAM (told in the writer's words)", tier=1.5,
      yields_to_titles=True,
      example="The job runs out of RAM during tokenization and the node kills it.",
      explanation="The writer says the machine's memory (RAM, the host's; not the GPU's) ran "
      "out under the run, or that the kernel's OOM killer ended it: a process killed that way "
      "gets SIGKILL and prints nothing of its own (the shell's \"Killed\", exit status 137).",
      remedy="Confirm with `sudo dmesg -T | grep -i 'killed process'` and watch the process's "
      "memory as it runs (`free -h`, `top`, `gpu-audit scan`); then " + _HOST_MEMORY)


# A run told fixed by giving the host more memory or by using less of it: swap added, a larger
# memory request for the job, the model loaded with low_cpu_mem_usage ("Adding 32 GB of swap
# fixed it", "solved it by requesting --mem=64G"): it had run out of the host's memory, most
# often killed without a word of its own.
HOST_MEMORY_CURES = (r"(?i:\b(?:add\w*|increas\w*|enlarg\w*|more|bigger|larger|extra|creat\w*)\b"
                     r"[^\n]{0,20}?\bswap(?:file| file| space| partition)?\b|"
                     r"--mem(?:-per-cpu|-per-gpu)?[= ]\s?\d+|"
                     r"\b(?:more|extra|additional) (?:host |system |CPU )?RAM\b|"
                     r"\blow_cpu_mem_usage\b)")
fixed("host-oom/cure-told", cure_told(HOST_MEMORY_CURES), CURED_NEEDLES,
      "A run was fixed by more host memory (told in the writer's words)", tier=3.5,
      yields_to_titles=True,
      example="The merge died at 60% with no message; adding 32 GB of swap fixed it.",
      explanation="The writer says the run went through once the host had more memory (swap "
      "added, a larger memory request for the job) or the program used less of it (loading the "
      "weights with low_cpu_mem_usage): it had run out of the host's RAM, and a process out of "
      "RAM is most often killed from outside without a message of its own (the shell's "
      "\"Killed\", exit status 137).",
      remedy="Check what the run needs against what the host has (`free -h`, the scheduler's "
      "`sacct -j JOB -o MaxRSS,ReqMem`), and " + _HOST_MEMORY)


_DATALOADER = (r"(?i:DataLoader) (?:worker|process)"
               r"(?: \(pids?(?:\(s\))? (?P<pids>[\d, ]+)\))?")
_DATALOADER_NEEDLES = ("DataLoader worker", "DataLoader process", "Dataloader worker",
                       "Dataloader process", "dataloader worker", "dataloader process")


@signature("host-oom/dataloader-crashed",
           # another signal than SIGKILL or SIGBUS: the worker's own crash (a native library, a
           # bad sample), no memory limit; a fact, so that the same death told above without its
           # signal is not read as one
           _DATALOADER.replace("?P<pids>", "?:") + r"\s*(?:is|was|got|has been) killed by "
           r"signal: ?(?P<dataloader_crash_signal>(?!(?i:killed|bus error|terminated)\b)"
           r"[A-Z][a-z]+"
           r"(?: [a-z]+){0,2})",
           _DATALOADER_NEEDLES, "A DataLoader worker crashed", severity=Severity.INFO, tier=5.0,
           fact=True,
           example="RuntimeError: DataLoader worker (pid 2831817) is killed by signal: "
           "Segmentation fault.")
def _dataloader_crash_fact(sig: Signature, numbers: dict[str, Any],
                           ctx: AdviceContext) -> Advice:
    # a fact: it makes a DataLoader death told without its signal a crash, it opens nothing
    return advice(sig, numbers, "A DataLoader worker crashed of a signal other than SIGKILL.",
                  "Nothing.")


@signature("host-oom/dataloader-killed",
           # (PyTorch's message without its pid, as people retell it ("DataLoader process ...
           # was killed by"), or cut before its signal: another signal, a segmentation fault, is
           # the dataset's own crash)
           # (typed by hand: "Dataloader worker ... killed by signal:killed")
           _DATALOADER + r"\s*(?:(?:exited (?:and )?)?(?:is|was|got|has been) killed by"
           r"(?: signal(?:: ?(?P<signal>(?i:Killed|Bus error|Terminated))|[\s:.]*$)|[\s:.]*$)"
           r"|exited unexpectedly)",
           _DATALOADER_NEEDLES, "A DataLoader worker process died", extract=_dataloader,
           example="RuntimeError: DataLoader worker (pid 9833) is killed by signal: Killed.")
def _dataloader_killed(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    signal = str(numbers.get("signal") or "")
    crashed = ctx.facts.get("dataloader_crash_signal")
    if not signal and crashed:  # a death told without its signal, which the log names below
        signal = str(crashed)
        explanation = (f"A DataLoader worker died of {signal}: a crash in the worker itself (a "
                       "native library the dataset uses, a bad sample), not a memory limit and "
                       "not the GPU. The worker's own traceback or core dump names the code.")
        return advice(sig, numbers, explanation, "Run with num_workers=0 to get the crash in "
                      "the main process with its traceback; then fix or update the library that "
                      "crashed.", title=f"A DataLoader worker crashed ({signal})",
                      severity=Severity.WARNING)
    if signal == "Bus error":
        explanation = ("A DataLoader worker got SIGBUS writing to shared memory: /dev/shm is too "
                       "small (Docker's default is 64 MB).")
        return advice(sig, numbers, explanation, _SHM,
                      title="A DataLoader worker ran out of shared memory")
    if signal == "Terminated":
        explanation = (
            "A DataLoader worker was stopped with SIGTERM from outside the program: not a crash "
            "of its own, but a memory watchdog (earlyoom, systemd-oomd, a container runtime "
            "near its limit) or the scheduler ending the job. During training it is most often "
            "host memory running out: the workers together used more RAM than allowed.")
        return advice(sig, numbers, explanation, _HOST_MEMORY,
                      title="A DataLoader worker was terminated from outside")
    if signal == "Killed":
        explanation = (
            "A DataLoader worker was killed with SIGKILL, almost always by the kernel's OOM "
            "killer or the container's memory limit: the workers together used more host RAM "
            "than allowed. PyTorch's nearby hint about shared memory is a generic guess; with "
            "'Killed' the limit hit is RAM.")
        return advice(sig, numbers, explanation, _HOST_MEMORY,
                      title="A DataLoader worker was killed for memory")
    explanation = ("A DataLoader worker died without an error of its own: usually the kernel OOM "
                   "killer (check `sudo dmesg -T | grep -i 'killed process'`), otherwise a crash "
                   "in a native library used by the dataset.")
    return advice(sig, numbers, explanation, _HOST_MEMORY)


fixed("host-oom/shared-memory",
      r"Unexpected bus error encountered in worker|insufficient shared memory \(shm\)|unable to "
      r"(?:write to file|open shared memory object) </?torch_[^>]*>|out of shared memory",
      ("bus error", "shared memory", "unable to write to file"),
      "Shared memory (/dev/shm) ran out for DataLoader workers", group="shm",
      example="RuntimeError: unable to write to file </torch_18692_1954506449>: No space left on "
      "device (28)",
      explanation="DataLoader workers pass batches to the main process through shared memory "
      "(/dev/shm), and it ran out; in containers /dev/shm is 64 MB unless configured. When the "
      "same worker was also reported 'killed by signal: Killed', the limit actually hit was RAM, "
      "and this hint is PyTorch's generic guess.",
      remedy=_SHM)

# (also without its allocator's name, as a title or a retold line keeps it: "can't allocate
# memory: you tried to allocate 655360000 bytes. Error code 12 (Cannot allocate memory)"; the
# words "you tried to allocate N bytes" are c10's CPU allocator's, the GPU's say "Tried to
# allocate 2.00 GiB"; and its name and words without the size: "DefaultCPUAllocator: Can't
# allocate memory when finetuning", a title)
fixed("host-oom/cpu-allocator",
      r"(?:DefaultCPUAllocator: |(?<![A-Za-z]))(?:can't allocate memory|not enough memory): "
      r"you tried to allocate (?P<requested_bytes>\d+) bytes|"
      r"Torch: not enough memory: you tried to allocate|"
      # (its name and words without the size, as a title keeps them)
      r"\bDefaultCPUAllocator: (?:[Cc]an't allocate|[Nn]ot enough) memory\b",
      ("DefaultCPUAllocator", "not enough memory", "can't allocate memory"),
      "PyTorch could not allocate host memory",
      example="RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not "
      "enough memory: you tried to allocate 3355443200 bytes.",
      explanation="PyTorch could not allocate host memory for a CPU tensor.", remedy=_HOST_MEMORY)

# A framework's allocator for host memory: PaddlePaddle's CPU allocator ("Fail to alloc memory
# of 5060694016 size, error code is 12.": posix_memalign's ENOMEM; its GPU allocator says "Out of
# memory error on GPU 0"), and ONNX Runtime's arena on the CPU, whose failure reads as its CUDA
# arena's ("BFCArena::AllocateRawInternal ... Failed to allocate memory for requested buffer"):
# explain turns that one into this signature where the log says the arena was the CPU's.
def _host_allocator(match: re.Match[str], line: str) -> dict[str, Any]:
    found = named(match, line)
    if found.pop("mxnet", None) is not None:
        found["framework"] = "mxnet"
    found.setdefault("framework", "paddle")
    return found


_HOST_FRAMEWORKS = {"onnxruntime": ("ONNX Runtime's CPU arena", "ONNX Runtime"),
                    "mxnet": ("MXNet's CPU storage", "MXNet"),
                    "paddle": ("PaddlePaddle's CPU allocator", "PaddlePaddle")}


@signature("host-oom/framework-allocator",
           r"\bFail to alloc memory of (?P<requested_bytes>\d+) size\b"
           r"(?:, error code is (?P<error_code>\d+))?|"
           # MXNet's CPU storage, plain or shared (what its DataLoader workers pass batches in)
           r"\bFailed to allocate CPU (?i:memory)\b(?P<mxnet>)",
           ("Fail to alloc memory of", "Failed to allocate CPU"),
           "A framework could not allocate host memory (PaddlePaddle, ONNX Runtime, MXNet)",
           extract=_host_allocator,
           example="ResourceExhaustedError: Fail to alloc memory of 5060694016 size, error code "
           "is 12.")
def _framework_host_allocator(sig: Signature, numbers: dict[str, Any],
                              ctx: AdviceContext) -> Advice:
    framework = str(numbers.get("framework"))
    name, short = _HOST_FRAMEWORKS.get(framework, _HOST_FRAMEWORKS["paddle"])
    size = (f" {size_text(numbers['requested_bytes'])}" if numbers.get("requested_bytes")
            else " memory")
    explanation = (
        f"{name} could not get{size} of host memory (RAM, not the GPU's): the machine or the "
        "job's memory limit is full, or one request is larger than the RAM there is (a large "
        "input, a model loaded on the CPU, many sessions or workers in one process).")
    return advice(sig, numbers, explanation, f"{_HOST_FRAMEWORK_REMEDIES[short]}\n{_HOST_MEMORY}",
                  title=f"Host out of memory ({short})")


_HOST_FRAMEWORK_REMEDIES = {
    "ONNX Runtime": "ONNX Runtime keeps freed memory in its arena: turn the CPU arena off "
                    "(SessionOptions.enable_cpu_mem_arena = False) or run fewer sessions per "
                    "process; check which execution providers the session really uses (a CUDA "
                    "provider that failed to load leaves the model on the CPU).",
    "PaddlePaddle": "PaddlePaddle's CPU allocator asked the system for it: lower the input size "
                    "or the batch (rec_batch_num, the image's longest side in OCR), and check "
                    "that the GPU build is installed and used when a GPU was meant.",
    "MXNet": "MXNet's DataLoader workers pass each batch to the main process in shared CPU "
             "memory: lower num_workers and the batch size, give a container a larger /dev/shm "
             "(docker run --shm-size=16g), or set thread_pool=True on the DataLoader.",
}


# OpenCV's allocator for host memory refusing a buffer (its error code -4, "Insufficient
# memory", raised from cv::OutOfMemoryError), as OpenCV 3 and later print it and as OpenCV 2 did
# ("OpenCV Error: Insufficient memory (Failed to allocate N bytes) in OutOfMemoryError"); its
# CUDA module's failures read "Gpu API call" instead. In training it comes most often from a
# detector's dataset cache that keeps every decoded image in RAM (YOLOv5's --cache,
# Ultralytics' cache=ram).
fixed("host-oom/opencv-allocator",
      r"\(-4:Insufficient memory\)(?: Failed to allocate (?P<requested_bytes>\d+) bytes)?|"
      r"\bOpenCV Error: Insufficient memory \(Failed to allocate (?P<requested_bytes_>\d+) bytes",
      ("Insufficient memory",), "OpenCV could not allocate host memory",
      example="cv2.error: OpenCV(4.8.0) /io/opencv/modules/core/src/alloc.cpp:73: error: "
      "(-4:Insufficient memory) Failed to allocate 1228800 bytes in function "
      "'OutOfMemoryError'",
      explanation="OpenCV could not allocate a buffer in host memory (RAM, not the GPU's): the "
      "machine or the job's memory limit is full. In training it comes most often from caching "
      "the dataset's decoded images in RAM (YOLOv5's --cache, Ultralytics' cache=ram or "
      "cache=True), which needs about width x height x 3 bytes per image at the training size, "
      "for the training and the validation set, in every DDP process.",
      remedy="Cache on disk instead (--cache disk, cache=disk) or not at all, train at a smaller "
      "image size, lower the DataLoader workers; check `free -h` before caching. "
      + _HOST_MEMORY)

fixed("host-oom/numpy",
      # (NumPy before 1.17 named no size: "Unable to allocate array with shape (24012, 10716)
      # and data type float32")
      rf"Unable to allocate (?:(?P<requested>{SIZE}) for an )?array with shape "
      r"(?P<shape>\([^)]*\))",
      ("Unable to allocate",), "NumPy could not allocate host memory",
      extract=_sizes_to_bytes("requested"),
      example="numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.20 GiB for an "
      "array with shape (1000, 1000, 430) and data type float64",
      explanation="NumPy could not allocate host memory for an array.", remedy=_HOST_MEMORY)

# The operating system refusing memory, in its own words: ENOMEM from fork, mmap or an allocation
# ("OSError: [Errno 12] Cannot allocate memory", "bash: fork: Cannot allocate memory") and
# Windows' commit limit, RAM and page file together ("OSError: [WinError 1455] The paging file is
# too small for this operation to complete"). Both are the host's memory, never the GPU's; a
# kill or a GPU's out-of-memory elsewhere in the log comes first (the tier of a kill).
def _os_allocation(match: re.Match[str], _line: str) -> dict[str, Any]:
    return {"os_error": "paging-file" if match["paging"] is not None else "enomem"}


@signature("host-oom/os-allocation",
           r"\[Errno 12\] Cannot allocate memory|"
           r"\b(?:fork|vfork|clone|mmap|posix_spawn|pthread_create)(?:\(\))?: (?:retry: )?"
           r"Cannot allocate memory|"
           r"(?P<paging>\bWinError 1455\b|\bThe paging file is too small for this operation\b)",
           ("Cannot allocate memory", "WinError 1455", "paging file is too small"),
           "The operating system refused memory to the process", tier=1.5,
           extract=_os_allocation,
           example="OSError: [Errno 12] Cannot allocate memory")
def _os_refused(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    if numbers.get("os_error") == "paging-file":
        explanation = (
            "Windows could not commit more virtual memory (WinError 1455): the RAM and the page "
            "file together are smaller than what the processes asked for. With PyTorch on "
            "Windows it comes most often from DataLoader workers: each worker is a process of "
            "its own that loads the CUDA libraries (cuDNN, cuBLAS: gigabytes of commit each), so "
            "many workers use up the commit limit. It is the host's memory, not the GPU's.")
        remedy = ("Lower the DataLoader's num_workers (0 or 2 to check); let Windows manage the "
                  "page file's size, or raise it (System Properties > Advanced > Performance > "
                  "Virtual memory) on a drive with free space; close other programs. "
                  + _HOST_MEMORY)
        return advice(sig, numbers, explanation, remedy,
                      title="Windows' page file is too small (host memory)")
    explanation = (
        "The kernel refused the process memory (errno 12, ENOMEM, 'Cannot allocate memory'): "
        "from fork, mmap or an allocation. In training it comes most often when DataLoader "
        "workers start (fork of a parent that holds much RAM, refused under the kernel's "
        "overcommit rules) or when the host's RAM or the job's memory limit is full. It is the "
        "host's memory, not the GPU's.")
    remedy = ("Lower num_workers (persistent_workers=True starts them once); check `free -h` "
              "and the overcommit mode (`cat /proc/sys/vm/overcommit_memory`: 2 refuses a large "
              "process's forks). " + _HOST_MEMORY)
    return advice(sig, numbers, explanation, remedy,
                  title="The system could not allocate host memory (errno 12)")


# (also told in a sentence: "it often come error : MemoryError , finally it quit")
fixed("host-oom/memory-error", rf"(?:{LINE_HEAD}|[\]>]\s*|:\s)MemoryError(?::\s|\s*$|\s?,)",
      ("MemoryError",),
      "Python ran out of host memory", example="MemoryError",
      explanation="Python raised MemoryError: a host memory allocation failed.",
      remedy=_HOST_MEMORY)


# A native program's own allocation of host memory failing: C++'s operator new throwing
# std::bad_alloc with nothing to catch it ("terminate called after throwing an instance of
# 'std::bad_alloc'"), and LLVM's handler for a failed allocation ("LLVM ERROR: out of memory",
# in a GPU program: the OpenCL or CUDA compiler building its kernels in host memory). Not
# thrust's or RAPIDS' device allocators, which throw their own types or add the CUDA status.
# (And OpenCL's status for the runtime's own host memory, as hashcat prints a call's result:
# "clCreateBuffer(): CL_OUT_OF_HOST_MEMORY"; the device's is CL_MEM_OBJECT_ALLOCATION_FAILURE.)
# (And nvcc's own passes building a CUDA project: its front end's "catastrophic error: out of
# memory" after the header it was in, and "ptxas fatal : Memory allocation failure".)
fixed("host-oom/native-allocation",
      r"\bterminate called after throwing an instance of 'std::bad_alloc'|"
      r"\bLLVM ERROR: out of memory\b|\bCL_OUT_OF_HOST_MEMORY\b|"
      r"\bcatastrophic error ?: out of memory\b|\bptxas fatal\s{0,8}: Memory allocation failure\b",
      ("instance of 'std::bad_alloc'", "LLVM ERROR: out of memory", "CL_OUT_OF_HOST_MEMORY",
       "catastrophic error", "ptxas fatal"),
      "A native program could not allocate host memory", tier=1.5,
      example="terminate called after throwing an instance of 'std::bad_alloc'",
      explanation="The program's own allocation of host memory (RAM, not the GPU's) failed: C++'s "
      "operator new threw std::bad_alloc and nothing caught it, or LLVM (the compiler a GPU "
      "runtime builds its kernels with), nvcc's passes (cicc, ptxas) building CUDA sources, or "
      "the OpenCL runtime could not get host memory. The machine's RAM, or the job's memory "
      "limit, was too small for what the program holds: data loaded into RAM, one process per "
      "GPU or MPI rank each with its own copy, kernels compiled for several GPUs at once, or a "
      "build compiling many large CUDA files in parallel.",
      remedy="Check `free -h` and the job's memory limit while the program runs; load less into "
      "RAM (read from disk instead of preloading, smaller inputs), run fewer processes or MPI "
      "ranks per machine, build with fewer parallel jobs (`--parallel 2`, `MAX_JOBS=2`, "
      "`make -j2`) and for fewer GPU architectures, or add RAM. " + _HOST_MEMORY)


_KILLED = killed_words_pattern()
# The writer telling that their run was killed, with no word of who killed it ("my training
# gets killed at epoch 3", "I get a Killed message", "程序被杀死"; not "if the process is
# killed"; "it was killed" is too vague to read). Read on any line: the prefilter keeps every
# line with "killed" (and "Kill"); "杀死" and "杀掉" only where another key or the log's end is.
_TOLD_KILLED = (
    # (a word before the noun, "the running process", and the shell's word in quotes: 'the
    # running process was "Killed" at epoch 25'; a server is the writer's program: "the server
    # will be killed when executing the valid function")
    r"(?i:(?<!\bif )(?<!\bwhether )(?<!\bwhen )(?<!\bwill )(?<!\bwould )(?<!\bcan )"
    r"(?<!\bcould )(?<!\bdoes )(?<!\bmight )\b(?:the|my|our) (?:(?:running|whole|main|"
    r"entire|python) )?(?:training|process|program|application|"
    r"job|script|run|container|pod|thread|task|python|server|runner)(?: process| job)?(?:es|s)? "
    r"(?:is|was|"
    r"gets?|got|were|has been|keeps? getting|will be)(?: (?:always|then|just|simply|suddenly|"
    r"immediately|eventually|randomly|still|also|automatically))? [\"'`*]?killed\b|"
    r"\bI(?: \w+)? (?:get|got|see|saw|receive[sd]?|getting) (?:a |an |the )?[\"'`*]*killed\b|"
    # (the run's end told with the shell's word quoted as its message: "generate.py fails at
    # 52% with message `killed`"; not "if it fails with ...")
    r"(?<!\bif )(?<!\bif it )\b(?:fails|failed|crash(?:es|ed)|stops|stopped|exits|exited|dies|"
    r"died|ends|ended)\b(?: \S+){0,8}? with (?:the |a )?(?:message|output|error)s?:? "
    r"[\"'`*]+killed\b[\"'`*]+|"
    # (the shell's word quoted as what the run printed: 'the script just prints "Killed" and
    # exits', "python only says `Killed`"; not the shell's habit told in general, "... prints
    # 'Killed' when the kernel ...")
    r"(?<!\bif )\b(?:it|script|process|program|training|job|python|terminal|console|run)\b"
    r"[^\n]{0,30}?\b(?:just |only |simply |then )?(?:prints|printed|says|said|shows|showed|"
    r"outputs|output|displays|displayed|gives|gave)(?: me)? (?:a |the )?[\"'`*]+killed\b"
    r"[\"'`*.!]+(?! (?:when|if|whenever|once)\b))|"
    # (and where it was when killed: "程序在加载模型中被kill了", "训练到第3轮时被杀死")
    # (not in a condition or a question anywhere before it on the line: "如果训练进程被kill")
    + unless_words("if", also="如果|假如|要是|若|可能|是否") +
    r"(?:程序|进程|训练|任务)(?:[在到][^\n，。,！？!?]{1,16}?(?:中|时|的时候))?"
    # (up to two adverbs: "进程就会被kill", and the English verb before a comma: "被kill, ...")
    r"(?:就|又|会|直接|突然|总是|还是){0,2}(?:被(?:系统)?)?"
    r"(?:[Kk]illed|[Kk]ill(?:[掉了]|(?=[,，。.!！]))|杀死|杀掉)")


@signature("host-oom/shell-killed",
           # the shell's word alone on its line (bold in markdown, or right after a progress
           # bar that had no newline), after "line N: PID", or after a job number
           rf"{LINE_HEAD}[\s*_`>]*(?:{_KILLED})[\s*_`.!]*$|(?<=[\]|])\s*(?:{_KILLED})\s*$|"
           # (or after a progress bar that ends on its estimate, mmcv's "... ETA: 2621s")
           rf"\bETA: ?\d{{1,7}}s\s*(?:{_KILLED})\s*$|"
           rf"\w{{1,40}} \d+:\s+(?P<pid>\d+) (?:{_KILLED})\s+(?P<command>\S.*)|"
           # (a job's notice from bash or zsh, "[1]    14875 killed     python main.py", also
           # right after a progress bar that had no newline: "... 7/8 [00:12<00:01][1]  ...")
           # (zsh marks the current job after spaces: "[2]  + 5120 killed ...")
           rf"(?:{LINE_HEAD}|(?<=[\]|]))\[\d+\](?:\s*[+-])?\s+(?:(?P<pid_>\d+)\s+)?(?:{_KILLED}|killed)"
           rf"\s{{2,}}(?P<command_>\S.*)|"
           rf"{LINE_HEAD}zsh: killed\s+(?P<command__>\S.*)|" + _TOLD_KILLED,
           ("Killed", "killed", "被kill", "被Kill",
            *sorted(set(KILLED_WORDS.values()) - {"Killed"})),
           "The job was killed (SIGKILL)", tier=1.5,
           example="./train.sh: line 12: 48211 Killed                  python train.py")
@signature("host-oom/sigkill",
           r"Signal 9 \(SIGKILL\) received by PID (?P<pid>\d+)|"
           # (torch.distributed.elastic's error record, cut after the signal: a title)
           r"\btraceback ?: ?Signal 9 \(SIGKILL\)(?! received by PID)|"
           # (its pid cut off, as a title copies it: "... failed (exitcode: -9) local_rank: 0")
           r"failed \(exitcode: -9\) local_rank: (?P<local_rank>\d+)(?: \(pid: (?P<pid_>\d+)\))?|"
           r"exitcode\s*: -9 \(pid: (?P<pid__>\d+)\)|"
           r"(?:exit(?:ed|s)?(?: with)?(?: a)? (?:status|code)(?: code)?|returned non-zero exit "
           # (docker build's "The command '/bin/sh -c ...' returned a non-zero code: 137")
           # (and a task runner's log, "Return code: -9")
           r"status|returned a non-zero code|[Rr]eturn ?code|"
           # (SageMaker's "ExitCode 137" of the user's script)
           r"exit_code|error code|ExitCode|"
           # (YARN's "Container killed on request. Exit code is 137")
           r"[Ee]xit code is)[\s:=]*(?:137|-9)(?!\d|\.\d)|"
           r"died with (?:<Signals\.)?SIGKILL|"
           # (the status alone after the verb: docker's "Exited (137)", a title's "Exit 137", "the
           # container keeps exiting due to 137")
           r"\b[Ee]xit(?:ed|ing|s)?(?: with| due to)? \(?137(?!\d|\.\d)|"
           # (torch.multiprocessing.spawn: "process 3 terminated with signal SIGKILL")
           # (PyCharm's "interrupted by signal 9: SIGKILL", also retyped in lower case)
           r"(?:terminated|killed) (?:by|with) signal (?:SIGKILL|9)\b|signal 9: (?i:SIGKILL)|"
           # Slurm's srun for a task that died of SIGKILL: "srun: error: node7: task 0: Killed"
           r"srun: error: [^:\n]{1,64}: tasks? (?P<task>[\d,-]+): Killed\b|"
           # a Go program's words for its child's SIGKILL, after its own ("llama runner process
           # has terminated: signal: killed", ollama's), and systemd's for a unit's main process
           # ("Main process exited, code=killed, status=9/KILL")
           r"(?:(?<=: )|(?<=[\"'`=]))signal: killed\b|\bcode=killed, status=9/KILL\b",
           ("SIGKILL", "-9", "137", ": Killed", ": sigkill", ": Sigkill", "signal: killed",
            "status=9/KILL"),
           "A worker was killed with SIGKILL", tier=1.5,
           example="torch.distributed.elastic.multiprocessing.api:[ERROR] failed (exitcode: -9) "
           "local_rank: 0 (pid: 88123) of binary: /usr/bin/python3 ... Signal 9 (SIGKILL) "
           "received by PID 88123")
def _sigkill(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    explanation = (
        "The process was killed with SIGKILL (signal 9), which it cannot catch or report. It "
        "comes from outside: most often the kernel's OOM killer, otherwise the scheduler (a time "
        "or memory limit, preemption) or a manual `kill -9`.")
    remedy = ("Confirm with `sudo dmesg -T | grep -i 'killed process'` and the scheduler's job "
              "record (`sacct -j <job> -o State,MaxRSS,ReqMem`); if it was memory: " + _HOST_MEMORY)
    return advice(sig, numbers, explanation, remedy)

# XLA's and TensorFlow's stream executor failing to get page-locked (pinned) host memory for
# its transfers ("failed to alloc 34359738368 bytes on host: CUDA_ERROR_OUT_OF_MEMORY", "could
# not allocate pinned host memory of size: N"): the driver's out-of-memory status, about the
# host's memory; the framework goes on with pageable memory or smaller buffers.
fixed("host-oom/pinned-host-memory",
      r"\bfailed to alloc (?P<requested_bytes>\d+) bytes on host: CUDA_ERROR_OUT_OF_MEMORY"
      r"(?:: out of memory)?|\bcould not allocate pinned host memory of size: "
      r"(?P<requested_bytes_>\d+)",
      ("bytes on host", "pinned host memory"), "Page-locked host memory could not be allocated",
      severity=Severity.WARNING, tier=4.0,
      example="E external/xla/xla/stream_executor/cuda/cuda_driver.cc:1617] failed to alloc "
      "34359738368 bytes on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
      explanation="The framework asked the driver for page-locked (pinned) host memory for its "
      "transfers to the GPU and the driver refused: the host's memory, or the limit on locked "
      "memory, is short. It is not the GPU's memory; the run goes on with smaller or pageable "
      "buffers, more slowly.",
      remedy="Nothing if the run goes on. If the host is short of memory, lower what the job "
      "keeps in host memory (data loader workers, prefetch buffers) or raise the locked-memory "
      "limit (ulimit -l, a container's --ulimit memlock=-1).")

# Ollama refusing to load a model whose layers left on the CPU would not fit in the host's free
# memory ("Error: model requires more system memory (44.0 GiB) than is available (7.6 GiB)").
fixed("host-oom/model-exceeds-system-memory",
      rf"\bmodel requires more system memory(?: \((?P<requested>{SIZE})\) than is available "
      rf"\((?P<available>{SIZE})\))?",
      ("requires more system memory",), "The model needs more host memory than is free",
      extract=_sizes_to_bytes("requested", "available"),
      example="Error: model requires more system memory (44.0 GiB) than is available (7.6 GiB)",
      explanation="Ollama checked, before loading, that the part of the model it cannot place "
      "on the GPUs fits in the host's free memory, and it does not.",
      remedy="Use a smaller model or a smaller quantisation (a q4_K_M tag), unload other models "
      "(`ollama ps`, `ollama stop NAME`), shorten the context (num_ctx), free host memory or "
      "add swap; check with `ollama ps` that the model is placed on the GPU at all.")
