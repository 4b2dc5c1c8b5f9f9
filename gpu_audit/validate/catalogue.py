"""What each finding of ``gpu-audit validate`` means: declared into the finding catalogue
(:mod:`gpu_audit.knowledge.findings`, which holds each id's severity) and listed by ``gpu-audit
rules`` beside the scan rules. :mod:`gpu_audit.validate.findings` emits exactly these ids; a test
keeps the two in step.
"""

from __future__ import annotations

from gpu_audit.knowledge import findings as catalogue

SECTION = "Validation runs (gpu-audit validate)"

# id -> documentation: a summary line, then the explanation ({name}: a declared default)
VALIDATION_DOCS: dict[str, str] = {
    "workload-import-failed": """\
torch or the workload could not be imported in the stage's worker.

The `imports` stage imports torch and every module the workload names in a fresh process. A
missing package, a torch built for another Python, or an error at the workload's import time
stops the run here, before any GPU time is spent. The finding carries the import error.""",
    "cuda-unavailable": """\
CUDA does not work on the chosen device.

torch imported, but CUDA did not initialise or a small allocation did not round-trip: a CPU-only
torch build, a driver too old for the build, no visible GPU (`CUDA_VISIBLE_DEVICES`), or a GPU in
a bad state. `gpu-audit scan` says which.""",
    "oom-unrecovered": """\
A cycle still ran out of memory after every retry.

Each out-of-memory is retried after garbage collection, synchronisation and `empty_cache` with
the batch scale halved, up to `--max-retries`. When the last retry fails too, the workload's state
and the partial results are saved and the stage fails with what memory was in use. A command run
with `validate -- COMMAND` gets no retry (half a step of its own loop cannot be re-run): its
out-of-memory fails the stage at once, read from its output, and the remedy points to an
allocator sweep or a smaller batch.""",
    "stage-hung": """\
A cycle ran past the hang limit and the stage's worker was stopped.

The limit is derived from the stage's own cycle times (`--hang-factor` times the slowest cycle so
far, between `--hang-min` and `--hang-max`). The worker's stack at that moment is in the stage
log; the finding names the line it was waiting on. A command run with `validate -- COMMAND`
hangs when it completes no cycle and prints nothing for that long.""",
    "worker-died": """\
The stage's worker process died (a signal, an abort, an unexpected exit).

The runner survives its workers. The stage log's last lines are classified with the same
signatures as `gpu-audit explain`, so the finding says whether it was the host's OOM killer, a
CUDA error, an illegal memory access, and so on.""",
    "workload-error": """\
The workload raised an error, or does not follow the workload protocol.

The traceback is in the stage log. Fix it and continue with `--resume RUN`: cycles already done
are kept.""",
    "disk-full": """\
The disk holding the run folder filled up while a checkpoint or the cycle log was written.

This says nothing about the GPU or the workload, so the run ends UNKNOWN (exit 3), not failed.
Every cycle logged before it is kept: free some space and continue with `--resume RUN`. A stage
whose cycles were all logged is then judged from its log without running again.""",
    "alloc-fragmentation": """\
Fragmentation above the limit during a stage.

The share of reserved memory held in inactive split blocks passed the gate
(`alloc_fragmentation_pct`, {alloc_fragmentation_pct}% by default): the allocator keeps memory
it cannot hand out for the requests the workload makes. Expandable
segments (`--alloc-conf expandable_segments:True`) usually help; `--max-split-size-mb 128,512`
compares values.""",
    "stage-swap-pressure": """\
Swap use rose above `max_swap_used_gib` ({max_swap_used_gib} GiB by default) while a stage ran.

A gate of the stage: the highest swap use sampled during its cycles is compared with the limit,
and above it the stage fails, because the run being rehearsed would page host memory in and out
for its whole length. This differs from the scan's `swap-pressure`, a warning about swap in use
at the moment of the scan (possibly other programs', before any run started): here the swap was
in use while the workload ran.""",
    "requirement-failed": """\
A `--require` gate on the workload's metrics failed.

The finding names the expression, the stage and the value that failed it: a workload whose
numbers go wrong (a loss that diverges, a metric below what the run needs) is caught in the short
stages, before the long one.""",
    "alloc-conf-not-applied": """\
The allocator reports other settings than the ones asked for.

The worker sets both `PYTORCH_CUDA_ALLOC_CONF` and `PYTORCH_ALLOC_CONF` before torch is imported
and reads back what the CUDA allocator took; a difference means this torch ignored or rewrote a
setting.""",
    "oom-recovered": """\
Out-of-memory errors were recovered by retrying with a smaller batch.

The stage passed, but only at a reduced batch scale: the full run would meet the same limit.""",
    "alloc-retries": """\
The allocator had to free its cache to satisfy allocations.

`num_alloc_retries` grew during the stage: each retry is a synchronising `cudaFree` of cached
blocks, slow and a sign that memory is nearly exhausted or fragmented.""",
    "reserved-drift": """\
Reserved GPU memory grows cycle after cycle: a leak suspect.

A steady slope over the stage (reported in bytes per cycle) would reach the GPU's capacity in a
long run; look for tensors kept across cycles (losses accumulated with their graphs, caches).
Raised only from a stage of at least {drift_min_cycles} completed cycles: the least-squares fit
after the warm-up needs that many to tell a leak from a one-off step.""",
    "rss-drift": """\
Host memory (RSS) grows cycle after cycle: a leak suspect.

Reported with its slope in bytes per cycle. Python objects kept across cycles (metrics lists
holding tensors, growing caches, data-loader workers) are the usual cause. Raised only from a
stage of at least {drift_min_cycles} completed cycles, like `reserved-drift`.""",
    "cpu-fallback": """\
`--device auto` found no usable GPU and the validation ran on the CPU.

The run proves the workload's logic, not the GPU: memory figures are null and no allocator
setting applies.""",
    "alloc-conf-cpu": """\
Allocator settings were given, but the run was on the CPU, where they do not apply.

`--alloc-conf` and `--max-split-size-mb` configure PyTorch's CUDA caching allocator; on the CPU
the run went ahead without them, so its figures say nothing about those settings.""",
    "stage-warning": """\
Something else the stage's worker noticed (a warning from torch or the workload).

Shown so that nothing the worker reported is lost; read it in the stage log under the run
folder, where it appears with its context.""",
}

for _id, _doc in VALIDATION_DOCS.items():
    catalogue.document(_id, catalogue.VALIDATE, _doc)
