"""Host memory ran out: the kernel's OOM killer, a cgroup or job limit, shared memory.

This is the machine's RAM, not the GPU's. In training it usually comes from DataLoader workers
(each holds its own copy of the dataset's Python objects), pinned-memory buffers, loading a
whole checkpoint into RAM, or a leak that grows every step. The kernel's OOM killer, Slurm's
cgroup enforcement and Kubernetes kill the process with SIGKILL, which it cannot report itself,
so the evidence is in the kernel log, the scheduler's messages, or a bare ``Killed``. DataLoader
workers also pass batches through /dev/shm, which is 64 MB in a container unless configured.
"""

from __future__ import annotations

import re
from typing import Any

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


def _sizes_to_bytes(*keys: str) -> Extractor:
    def extract(match: re.Match[str], line: str) -> dict[str, Any]:
        found = named(match, line)
        for key in keys:
            if isinstance(found.get(key), str):
                found[key + "_bytes"] = size_or_none(found.pop(key))
        return found
    return extract


@signature("host-oom/killed-process",
           r"Killed process (?P<pid>\d+) \((?P<process_name>[^)]*)\)", ("Killed process",),
           "The kernel's OOM killer killed a process", extract=_kernel_oom, group="oom-killer",
           attach="prefer", window=4,
           example="[ 9001.120399] Killed process 4012 (python) total-vm:70123004kB, "
           "anon-rss:30111000kB, file-rss:0kB, shmem-rss:0kB")
@signature("host-oom/kernel-oom-killer",
           r"(?P<scope>Memory cgroup out of memory|Out of memory(?: \(oom_kill_allocating_task\))?)"
           r": [Kk]ill(?:ed)? process (?P<pid>\d+) \((?P<process_name>[^)]*)\)",
           ("out of memory: Kill", "Out of memory: Kill", "Out of memory: kill",
            "oom_kill_allocating"),
           "The kernel's OOM killer killed a process", extract=_kernel_oom, group="oom-killer",
           example="[ 301.772100] Memory cgroup out of memory: Killed process 5512 (python3) "
           "total-vm:30000000kB, anon-rss:20000000kB, file-rss:0kB, shmem-rss:0kB")
def _oom_killer(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
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


fixed("host-oom/slurm-oom-kill",
      r"Detected (?P<events>\d+) oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )?"
      r"(?P<step>[\w.]+)|task (?P<task>\d+): Out Of Memory",
      ("oom-kill", "oom_kill", "Out Of Memory"), "Slurm's cgroup OOM handler killed the job",
      example="slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.0. Some of your "
      "processes may have been killed by the cgroup out-of-memory handler.",
      explanation="Slurm's cgroup memory enforcement killed a task of the job: the job's --mem or "
      "--mem-per-cpu limit for host RAM was reached (not GPU memory).",
      remedy="Raise --mem (or --mem-per-gpu) for the job, or use less host memory: "
      + _HOST_MEMORY)

fixed("host-oom/kubernetes-oomkilled", r"\bOOMKilled\b", ("OOMKilled",),
      "The container was OOMKilled",
      example="      Reason:       OOMKilled",
      explanation="Kubernetes killed the container for exceeding its memory limit (exit code "
      "137). A memory-backed /dev/shm counts toward that limit too.",
      remedy="Raise resources.limits.memory for the pod, or use less host memory: "
      + _HOST_MEMORY)


@signature("host-oom/dataloader-killed",
           r"DataLoader worker \(pids?(?:\(s\))? (?P<pids>[\d, ]+)\)\s*(?:is killed by signal: "
           r"(?P<signal>Killed|Bus error)|exited unexpectedly)",
           ("DataLoader worker",), "A DataLoader worker process died", extract=_pids,
           example="RuntimeError: DataLoader worker (pid 9833) is killed by signal: Killed.")
def _dataloader_killed(sig: Signature, numbers: dict[str, Any], ctx: AdviceContext) -> Advice:
    signal = str(numbers.get("signal") or "")
    if signal == "Bus error":
        explanation = ("A DataLoader worker got SIGBUS writing to shared memory: /dev/shm is too "
                       "small (Docker's default is 64 MB).")
        return advice(sig, numbers, explanation, _SHM,
                      title="A DataLoader worker ran out of shared memory")
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

fixed("host-oom/cpu-allocator",
      r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory): you tried to "
      r"allocate (?P<requested_bytes>\d+) bytes",
      ("DefaultCPUAllocator",), "PyTorch could not allocate host memory",
      example="RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not "
      "enough memory: you tried to allocate 3355443200 bytes.",
      explanation="PyTorch could not allocate host memory for a CPU tensor.", remedy=_HOST_MEMORY)

fixed("host-oom/numpy",
      rf"Unable to allocate (?P<requested>{SIZE}) for an array with shape (?P<shape>\([^)]*\))",
      ("Unable to allocate",), "NumPy could not allocate host memory",
      extract=_sizes_to_bytes("requested"),
      example="numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.20 GiB for an "
      "array with shape (1000, 1000, 430) and data type float64",
      explanation="NumPy could not allocate host memory for an array.", remedy=_HOST_MEMORY)

fixed("host-oom/memory-error", r"(?:^|[\]>]\s*|:\s)MemoryError(?::\s|\s*$)", ("MemoryError",),
      "Python ran out of host memory", example="MemoryError",
      explanation="Python raised MemoryError: a host memory allocation failed.",
      remedy=_HOST_MEMORY)


@signature("host-oom/shell-killed",
           r"^\s*Killed\s*$|line \d+:\s+(?P<pid>\d+) Killed\s+(?P<command>.+)", ("Killed",),
           "The job was killed (SIGKILL)", tier=1.5,
           example="./train.sh: line 12: 48211 Killed                  python train.py")
@signature("host-oom/sigkill",
           r"Signal 9 \(SIGKILL\) received by PID (?P<pid>\d+)", ("SIGKILL",),
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
