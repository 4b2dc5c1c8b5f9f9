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

The `imports` stage imports torch and every module the workload names in a fresh process: a
missing package, a torch built for another Python, or an error at the workload's import time
stops the run here, before any GPU time is spent. The finding carries the import error.

Why it matters: the long run would die at its first line, after its queue wait.

Example: `stage imports: torch or the workload does not import` - No module named 'timm'.

Fix: run `python -c "import torch"` and import your workload module in the same environment;
install what is missing (torch from https://pytorch.org/get-started/locally/ so your CUDA
build is kept).""",
    "cuda-unavailable": """\
CUDA does not work on the chosen device.

torch imported, but CUDA did not initialise or a small allocation did not round-trip: a CPU-only
torch build, a driver too old for the build, no visible GPU (`CUDA_VISIBLE_DEVICES`), or a GPU in
a bad state.

Why it matters: nothing of the workload can run on the GPU; the long run would fail at its
first CUDA call.

Example: `stage imports: CUDA does not work on the chosen device` - CUDA error: no CUDA-capable
device is detected.

Fix: run `gpu-audit scan`, which says which cause it is (the driver, the GPUs and what holds
them); check that torch is a CUDA build (`python -c "import torch; print(torch.version.cuda)"`).""",
    "oom-unrecovered": """\
A cycle ran out of memory, and so did every retry, if there was one.

Each out-of-memory is retried after garbage collection, synchronisation and `empty_cache` with
the batch scale halved, up to `--max-retries`. When the last retry fails too, the workload's state
and the partial results are saved and the stage fails with what memory was in use. A command run
with `validate -- COMMAND` gets no retry inside a step (half a step of its own loop cannot be
re-run): its out-of-memory fails the stage, read from its output, unless the command takes a
batch placeholder (and `--batch N`), when the stage runs again at half the batch. The title
says "not recovered by retrying" only when there was a retry.

Why it matters: the real run would meet the same limit and die with `CUDA out of memory`,
however long it had run.

Example: `stage smoke: out of memory, not recovered by retrying` - Tried to allocate 2.00 GiB;
the finding adds the memory in use.

Fix: lower the batch size, free the GPU (see `gpu-audit scan`), or try
`--max-split-size-mb 128,512` / `--alloc-conf expandable_segments:True` to see whether
fragmentation is the cause; for a command, the remedy points to an allocator sweep or a smaller
batch.""",
    "stage-hung": """\
A cycle ran past the hang limit and the stage's worker was stopped.

The limit is derived from the stage's own cycle times (`--hang-factor` times the slowest cycle so
far, between `--hang-min` and `--hang-max`). The worker's stack at that moment is in the stage
log; the finding names the line it was waiting on. A command run with `validate -- COMMAND`
hangs when it completes no cycle and prints nothing for that long; its first cycle, whose time
includes the start-up, does not count towards the limit (`--hang-min` until a second cycle).
Each of its Pythons dumps its stacks, and the finding names the line each rank's main thread
waits on in your own code (rank 0 first); every process of the command, torchrun's ranks in
their own sessions included, is then ended.

Why it matters: a hung run holds its GPUs until the job's time limit and produces nothing.

Example: `stage soak: a cycle hung` - waiting in `torch.distributed.all_reduce` (train.py:88).

Fix: look at the stack in the stage log; a data loader, a collective or a device sync that
never returns is the usual cause. Raise `--hang-min` / `--hang-factor` if the cycle is
legitimately that slow.""",
    "worker-died": """\
The stage's worker process died (a signal, an abort, an unexpected exit).

The runner survives its workers. The stage log's last lines are classified with the same
signatures as `gpu-audit explain`, so the finding says whether it was the host's OOM killer, a
CUDA error, an illegal memory access, and so on.

Why it matters: the same death would end the long run without a Python traceback to go on.

Example: `stage smoke: the stage's process died` - killed by signal 9. The log says: host
out of memory.

Fix: read the stage log (path in the report) and run `gpu-audit explain` on it; the finding's
remedy adds the classified cause's fix.""",
    "workload-error": """\
The workload raised an error, or does not follow the workload protocol.

The traceback is in the stage log. Cycles already done are kept.

Why it matters: an error in the short stages is an error the long run would hit too, after
hours instead of seconds.

Example: `stage smoke: the workload raised an error` - RuntimeError: mat1 and mat2 shapes
cannot be multiplied.

Fix: fix the error shown in the stage log, then continue with `--resume RUN`; for a protocol
problem, see `python -c "import gpu_audit.validate.protocol as p; help(p)"`.""",
    "disk-full": """\
The disk holding the run folder filled up while a checkpoint or the cycle log was written.

This says nothing about the GPU or the workload, so the run ends UNKNOWN (exit 3), not failed.
Every cycle logged before it is kept. A stage whose cycles were all logged is then judged from
its log without running again.

Why it matters: the long run writes the same checkpoints and would fail the same way, losing
the work since its last complete checkpoint.

Example: `stage soak: the disk of the run folder is full` - No space left on device.

Fix: free space on the run folder's disk (`df -h <run folder>`), then continue with
`gpu-audit validate --resume RUN`.""",
    "alloc-fragmentation": """\
Fragmentation above the limit during a stage.

The share of reserved memory held in inactive split blocks passed the gate
(`alloc_fragmentation_pct`, {alloc_fragmentation_pct}% by default) in a cycle that held
{fragmentation_min_mib} MiB or more in such blocks. Below that it is no fragmentation: the small
pool's 2 MiB segments are always split, so a job that holds little can show a share near 100%.

Why it matters: the allocator keeps memory it cannot hand out for the requests the workload
makes, so a long run meets `CUDA out of memory` with memory nominally free.

Example: `stage soak: allocator fragmentation above the limit` (evidence:
`worst_fragmentation_pct`, `limit_pct`).

Fix: expandable segments (`--alloc-conf expandable_segments:True`) usually help;
`gpu-audit validate --max-split-size-mb 128,256,512` compares values.""",
    "stage-swap-pressure": """\
Swap use rose above `max_swap_used_gib` ({max_swap_used_gib} GiB by default) while a stage ran.

A gate of the stage: the highest swap use sampled during its cycles is compared with the limit,
and above it the stage fails. This differs from the scan's `swap-pressure`, a warning about
swap in use at the moment of the scan (possibly other programs', before any run started): here
the swap was in use while the workload ran.

Why it matters: the run being rehearsed would page host memory in and out for its whole
length, slowing by orders of magnitude.

Example: `stage soak: swap in use above the limit` (evidence: `swap_used_bytes`,
`limit_bytes`).

Fix: free host memory (fewer data-loader workers, smaller pinned buffers) or add RAM;
`gpu-audit scan` shows what uses it.""",
    "requirement-failed": """\
A `--require` gate on the workload's metrics failed.

The finding names the expression, the stage and the value that failed it.

Why it matters: a workload whose numbers go wrong (a loss that diverges, a metric below what
the run needs) is caught in the short stages, before the long one spends its hours.

Example: `stage soak: require loss < 2.5 failed` (evidence: `value`, `limit`).

Fix: check the workload's metric, or the requirement's threshold.""",
    "alloc-conf-not-applied": """\
The allocator reports other settings than the ones asked for.

The worker sets both `PYTORCH_CUDA_ALLOC_CONF` and `PYTORCH_ALLOC_CONF` before torch is imported
and reads back what the CUDA allocator took; a difference means this torch ignored or rewrote a
setting, or something else sets the allocator (the workload calling
`torch.cuda.memory._set_allocator_settings`, a sitecustomize, or a launcher).

Why it matters: the run's memory figures do not describe the settings being tested, and the
long run would not get them either.

Example: `the allocator did not take the requested settings` (evidence: `asked`,
`in_effect`).

Fix: remove other allocator configuration from the workload and its launcher.""",
    "cycles-overshoot": """\
A command told the stage's length through its cycles placeholder ran well past it.

`validate -- COMMAND` puts the stage's cycle count (3 for smoke) where the command has the
cycles placeholder, and counts the cycles the command runs (optimizer steps,
`gpu_audit.monitor.step()` calls or `--cycle-pattern` lines). A command that runs more than one
cycle past that count was given the number in a flag that counts something else: epochs (an
`--epochs` flag given 3 ran 48 steps), or batches of several optimizer steps. One cycle more is
not flagged: a `while step <= max_steps` loop runs it.

Why it matters: each stage ran longer than planned, so the run took longer, and its limits
(hang, leak slopes, `--require` gates) were judged on other cycles than the stage meant.

Example: `stage smoke: the command ran 48 cycles for the 3 it was given` (evidence:
`cycles_run`, `cycles_planned`).

Fix: put the cycles placeholder where the script takes a number of steps (`--max-steps`), or
leave it out and let gpu-audit stop the script after the stage's cycles; with several optimizer
steps per cycle, call `gpu_audit.monitor.step()` once per cycle.""",
    "oom-recovered": """\
Out-of-memory errors were recovered by retrying with a smaller batch.

The stage passed, but only at a reduced batch scale.

Why it matters: the full run would meet the same limit: it needs the same recovery, or a
smaller batch.

Example: `stage soak: out of memory, recovered by retrying` - 2 out-of-memory errors from
cycle 14 on were recovered; the stage ended at batch scale 0.5.

Fix: use `gpu_audit.retry_on_oom` around the training step, or start at the batch scale the
stage ended at.""",
    "alloc-retries": """\
The allocator had to free its cache to satisfy allocations.

`num_alloc_retries` grew during the stage: allocations failed at first and succeeded only
after PyTorch freed its whole cache.

Why it matters: each retry is a synchronising `cudaFree` of cached blocks, slow, and a sign
that memory is nearly exhausted or fragmented: the run is at the edge of the GPU's memory.

Example: `stage soak: the allocator flushed its cache to find memory` (evidence:
`alloc_retries`, `peak_reserved_bytes`).

Fix: lower peak memory (batch, sequence length), or try `expandable_segments:True`.""",
    "reserved-drift": """\
Reserved GPU memory grows cycle after cycle: a leak suspect.

Reported with its slope in bytes per cycle. Raised only from a stage of at least
{drift_min_cycles} completed cycles: the least-squares fit after the warm-up needs that many to
tell a leak from a one-off step.

Why it matters: a steady slope over the stage would reach the GPU's capacity in a long run.

Example: `stage soak: reserved GPU memory grows cycle after cycle` - rises by 20.0 MiB per
cycle (R² 0.98); over 500 cycles that is 9.8 GiB.

Fix: look for tensors kept across cycles (losses accumulated with their graphs, caches): keep
metrics as Python floats (`loss.item()`), detach what you store, and check with
`torch.cuda.memory._record_memory_history` and `gpu-audit snapshot`.""",
    "rss-drift": """\
Host memory (RSS) grows cycle after cycle: a leak suspect.

Reported with its slope in bytes per cycle. Raised only from a stage of at least
{drift_min_cycles} completed cycles, like `reserved-drift`.

Why it matters: over a long run the growth reaches the host's memory, and the kernel's OOM
killer ends the job.

Example: `stage soak: host memory (RSS) grows cycle after cycle` - rises by 4.0 MiB per cycle
(R² 0.95).

Fix: Python objects kept across cycles (metrics lists holding tensors, growing caches,
data-loader workers) are the usual cause: keep metrics as Python floats (`loss.item()`) and
detach what you store.""",
    "cpu-fallback": """\
`--device auto` found no usable GPU and the validation ran on the CPU.

The run proves the workload's logic, not the GPU: memory figures are null and no allocator
setting applies.

Why it matters: a passing run here says nothing about the GPU run it was meant to rehearse.

Example: `no usable GPU: the validation ran on the CPU` (evidence: `requested`).

Fix: check the GPU with `gpu-audit scan`; pass `--device cuda` to require one.""",
    "alloc-conf-cpu": """\
Allocator settings were given, but the run was on the CPU, where they do not apply.

`--alloc-conf` and `--max-split-size-mb` configure PyTorch's CUDA caching allocator; on the CPU
the run went ahead without them.

Why it matters: the run's figures say nothing about those settings.

Example: `allocator settings do not apply on the CPU` (evidence: `alloc_conf`).

Fix: run on a GPU (`--device cuda`) to test the settings.""",
    "stage-warning": """\
Something else the stage's worker noticed (a warning from torch or the workload).

Shown so that nothing the worker reported is lost. The finding's title is the warning itself;
a warning given by several stages is one finding, on the first of them, whose detail lists them.

Why it matters: a warning in a short stage (a deprecated setting, a fallback to a slower
kernel) applies to the whole long run.

Example: `stage-warning` on `stage:smoke`: the warning's text, as the worker printed it.

Fix: read it in the stage log under the run folder, where it appears with its context.""",
}

for _id, _doc in VALIDATION_DOCS.items():
    catalogue.document(_id, catalogue.VALIDATE, _doc)
