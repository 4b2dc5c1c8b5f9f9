"""What each finding of ``gpu-audit diag`` means: declared into the finding catalogue
(:mod:`gpu_audit.knowledge.findings`, which holds each id's severity) and listed by ``gpu-audit
rules`` beside the scan rules. :mod:`gpu_audit.diag.judge` emits exactly these ids (a test keeps
the two in step).
"""

from __future__ import annotations

from gpu_audit.knowledge import findings as catalogue
from gpu_audit.model import Finding, Severity

SECTION = "Active GPU tests (gpu-audit diag)"

# id -> documentation: a summary line, then the explanation ({name}: a declared figure)
DIAG_DOCS: dict[str, str] = {
    "diag-cuda-failed": """\
CUDA did not work on a GPU: no context, a kernel that did not run or answered wrong.

Level 1 creates a CUDA context on each selected GPU in a child process, launches a small kernel
and checks its answer. The finding carries torch's error. A torch that cannot use any GPU (not
installed, or a CPU-only build) is not this finding: that is software, so diag gives no verdict
(exit 3) and names the install of a CUDA build for this driver.

Why it matters: no GPU work can run on that GPU, whatever NVML reports; a job placed there
fails at its first CUDA call.

Example: `kernel-launch failed on GPU 2` - CUDA error: unspecified launch failure.

Fix: run `gpu-audit scan --torch` (it says whether the torch build, the driver or
`CUDA_VISIBLE_DEVICES` is at fault) and `nvidia-smi -q -i N`; a GPU that cannot run a kernel
needs a reset or service.""",
    "diag-memory-error": """\
GPU memory returned data other than what was written.

Level 1 copies a few hundred MiB of a counting pattern to the GPU and back; level 2 writes
patterns over most of the free memory (walking ones and zeros, every word's own address and its
complement, seeded random words) and reads each back. The finding names the byte offset of the
first bad word, the bit that flipped, the pattern and how many words were wrong.

Why it matters: consumer GPUs have no ECC to catch this: a model trained on such a GPU learns
from corrupted numbers.

Example: `Memory error on GPU 1` - pattern walking-ones: byte offset 3221225472 (0xc0000000)
bit 17 read ..., expected ...; 3 bad words.

Fix: run `gpu-audit diag --level 2 --gpus N` again: an error at the same offset is a bad cell.
Stop using this GPU for training; on data-center parts check
`nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT`; otherwise return it under warranty.""",
    "diag-matmul-wrong": """\
A matrix product on the GPU differs from the same product computed on the CPU.

Level 1 multiplies two 512x512 fp32 matrices on the GPU (TF32 off) and compares with float64 on
the CPU; the bound allows for rounding.

Why it matters: a GPU that computes wrong answers without raising an error is worse than one
that fails: the run goes on and its results are wrong.

Example: `Matmul answers wrong on GPU 0` - largest error 3.2 against float64 on the CPU (bound
0.0004).

Fix: do not train on this GPU; reset it (`sudo nvidia-smi -r -i N`) and run
`gpu-audit diag --level 2 --gpus N` again.""",
    "diag-allreduce-wrong": """\
An NCCL all-reduce across the node's GPUs returned a wrong sum.

Level 2 all-reduces tensors of ones across every selected GPU from one process and checks that
each element equals the number of GPUs.

Why it matters: a wrong sum means data is corrupted on a GPU-to-GPU path (NVLink, PCIe
peer-to-peer or the host) without an error being raised: distributed training averages wrong
gradients.

Example: `NCCL all-reduce answered wrong` - the all-reduce across GPUs [0, 1, 2, 3] returned a
wrong sum.

Fix: run nccl-tests' `all_reduce_perf` with `NCCL_DEBUG=INFO` to see which link corrupts.""",
    "diag-bandwidth-low": """\
A measured bandwidth is well below what this GPU or its link should deliver.

Device memory bandwidth (a large copy) is compared with the model's datasheet figure, host
transfers (pinned memory, each direction) with what the PCIe link's generation and current
width carry, peer copies and the NCCL all-reduce with NVLink's or PCIe's figure. Each
expectation is the peak times the share a healthy GPU reaches with this method; the finding
fires below {low_fraction_pct}% of that, or below {peer_fraction_pct}% of the median of the
node's other GPUs of the same model. A model without a table row is judged against those
peers only.

Why it matters: data loading, offload and multi-GPU communication run at that reduced speed
for the whole run, and a slow GPU holds every rank of a distributed job back.

Example: `Host-to-device bandwidth low on GPU 3 (...)` - 6.1 GB/s, expected 22.4 (27%; ...).

Fix: for device memory, check clocks and throttling (`nvidia-smi -q -d PERFORMANCE,CLOCK`) and
rerun with the GPU idle; for host or peer transfers, pin the process near the GPU (`numactl`,
per `nvidia-smi topo -m`), check IOMMU/ACS settings, and reseat the card.""",
    "diag-throughput-low": """\
Matrix-multiply throughput in a dtype is well below this GPU model's peak.

Level 2 times square matmuls in fp32, tf32, fp16, bf16 and fp8 (where the GPU and torch have
it) and compares TFLOPS with the model's dense datasheet peak times the share a healthy GPU
reaches ({matmul_share_pct}%); below {low_fraction_pct}% of that, or {peer_fraction_pct}% of
the node's other GPUs of the same model, fails. Clocks held low, a power limit set below the
default, or a GPU sharing its time cause it.

Why it matters: training steps are mostly matmuls: the whole run is that much slower, and in
a distributed job every rank waits for this GPU.

Example: `bf16 matmul throughput low on GPU 0 (...)` - 310 TFLOPS, expected 620 (50%; ...).

Fix: check the power limit (`nvidia-smi -q -d POWER`; restore the default with
`sudo nvidia-smi -i N -pl DEFAULT_W`), application clocks (`sudo nvidia-smi -i N -rac`) and
other processes on the GPU.""",
    "diag-pcie-link-limited": """\
Host transfers were limited by a PCIe link trained narrower than its maximum.

The GPU's link runs at fewer lanes than it and the slot support (x8 instead of x16 is common
after a reseat, a riser or a bent pin). The finding puts the measured bandwidth beside what
the full-width link would carry.

Why it matters: data loading and host offload get that share of their speed for the whole run.

Example: `PCIe link at x8 of x16 on GPU 1 (...)` - host transfers reached 11.8 GB/s on a x8
link (evidence: `pcie_width_current`, `pcie_width_max`, `full_width_link_gbs`).

Fix: reseat the GPU and its riser or cable, check the slot's lanes in the board manual and
the BIOS PCIe settings; `nvidia-smi -q -d PCIE` shows the link.""",
    "diag-p2p-unavailable": """\
Two GPUs cannot access each other's memory directly (peer-to-peer).

It is an error when NVML reports NVLink between the two (the link is up, yet CUDA cannot use
it), and a warning otherwise (GeForce cards and some virtual machines do not offer P2P).

Why it matters: without peer access, copies and NCCL between them go through host memory:
slower and using the CPU.

Example: `GPUs 0 and 1 cannot access each other directly` - peer access 0->1: False, 1->0:
False; NVML reports NVLink between them.

Fix: check `nvidia-smi topo -m` and `nvidia-smi topo -p2p r`; on NVSwitch systems start the
fabric manager (`systemctl status nvidia-fabricmanager`); disable ACS or set the IOMMU to
passthrough (`iommu=pt`) for PCIe P2P.""",
    "diag-thermal-decay": """\
Throughput fell during the sustained load (level 3) beyond the allowed decay.

The median of the last fifth of the load is compared with the median of its first seconds; more
than {decay_bound_pct}% lower fails. The finding shows the clocks, temperature and power over
the run and the throttle reasons NVML reported, so it says whether heat, power or something
else pulled the clocks down.

Why it matters: a GPU that slows down after two minutes makes every long run slower.

Example: `Throughput decayed 18% under load on GPU 2 (...)` - 290 TFLOPS in the first seconds,
238 at the end; SM clock 1980 -> 1545 MHz, up to 89 C; throttle reasons: sw_thermal_slowdown.

Fix: check cooling (fans, airflow, dust, the server's fan profile) and the power limit
(`nvidia-smi -q -i N -d TEMPERATURE,POWER,PERFORMANCE`); rerun
`gpu-audit diag --level 3 --gpus N` after.""",
    "diag-throttle-unexpected": """\
NVML reported a thermal or hardware slowdown, or a power cap below the power limit, under load.

Hardware slowdown, thermal slowdown (software or hardware) and the power brake should not
appear on a healthy, well-cooled GPU running within its power limit. A software power cap while
the GPU draws clearly less than its limit (under {power_cap_share_pct}%) is reported as a
warning: the enforced limit is lower than the one configured.

Why it matters: the clocks drop whenever the reason is active, so a long run is slower than the
GPU should be, and it points at cooling or power trouble that gets worse.

Example: `Slowdown under load on GPU 0 (...)` - NVML reported hw_slowdown in 42 of 180 samples
(up to 92 C, 398 W).

Fix: thermal: check cooling and airflow; hardware slowdown or power brake: check the power
supply and cables; a power cap: compare the enforced and default limits
(`nvidia-smi -q -i N -d POWER`), a platform or BMC cap may be set.""",
    "diag-counter-moved": """\
An error counter moved while diag loaded the GPU.

ECC errors, remapped rows, retired pages or an Xid event in the kernel log. Level 3 reads
these counters every second and the kernel log's Xid events before and after the load.

Why it matters: any change during a few minutes of clean load means the memory or the GPU is
failing under stress; a long run will meet it again.

Example: `Error counters moved under load on GPU 1 (...)` - ecc_uncorrected_volatile 0 -> 2.

Fix: run `nvidia-smi -q -i N -d ECC,ROW_REMAPPER,PAGE_RETIREMENT` and `gpu-audit explain` on
the kernel log; take the GPU out of service and contact the vendor if errors repeat.
`gpu-audit rules gpu-hardware/xid` and the vendor's field diagnostics say what to do next.""",
    "diag-test-hung": """\
A test did not finish within its deadline; its worker process was stopped.

Each test announces itself and gets a deadline (`--timeout`); a kernel that never returns, a
copy that stalls or a GPU that stops answering ends here. The worker and anything it started are
killed, so no process is left holding the GPU.

Why it matters: a GPU that hangs a short test hangs a long run too, holding its node until the
job's time limit.

Example: `memtest hung on GPU 3 (...)` - the memtest test did not finish within 120 s; its
worker was stopped.

Fix: check `sudo dmesg | grep -i xid` for driver errors; the GPU may need a reset
(`sudo nvidia-smi -r -i N`) or the machine a reboot.""",
    "diag-worker-died": """\
The worker process running the tests on a GPU died (a signal, an abort in a CUDA library).

The finding carries the exit status and the last lines the worker wrote.

Why it matters: a process that dies on this GPU in a short test can die the same way hours
into a run, without a Python traceback.

Example: `The tests worker died on GPU 0 (...)` - the worker died during matmul (exit status
-6).

Fix: read the log lines in the evidence; `sudo dmesg | tail` shows driver errors (Xid) and
kills by the kernel's out-of-memory killer.""",
    "diag-model-unknown": """\
This GPU model has no row in gpu-audit's table of expectations.

Its figures are judged against the node's other GPUs of the same model and, for the sustained
load, against its own first seconds; nothing fails for lack of a row.

Why it matters: a GPU that is slow on every copy of the node cannot be told from a healthy one
without a datasheet figure to compare with.

Example: `No expectations for NVIDIA L20` (evidence: `name`, `gpus`).

Fix: compare the figures in the report with the vendor's datasheet; nothing to fix on the
machine.""",
    "diag-mig-not-tested": """\
A selected GPU has MIG mode on but no MIG instance diag could test: no verdict on it.

With Multi-Instance GPU on, work runs in MIG instances, each a slice of the GPU's memory and
SMs, and diag tests each instance in a worker of its own (``CUDA_VISIBLE_DEVICES=MIG-...``,
findings about ``gpu:N/mig:GI/CI``). A GPU in MIG mode with no instance created (or none NVML
lists) has nothing to test. The run counts as unknown (exit 3) unless another GPU fails.

An instance's correctness tests and memory test are judged as a GPU's; its bandwidth and
throughput only against the node's instances of the same profile (the datasheet figures are
the whole GPU's), and alone they are reported without a verdict. Host transfers (PCIe), the
tests between GPUs and the sustained load are not run per instance: the results say so.

Why it matters: the whole GPU cannot be used while MIG mode is on, and an untested GPU must not
pass for a healthy one.

Example: `GPU 0 (...) was not tested: MIG mode is on`.

Fix: `nvidia-smi mig -lgip` lists the profiles, `nvidia-smi mig -cgi PROFILES -C` creates
instances; or turn MIG off to test the whole GPU.""",
}


for _id, _doc in DIAG_DOCS.items():
    catalogue.document(_id, catalogue.DIAG, _doc)


def diag_finding(finding_id: str, subject: str, title: str, detail: str, remedy: str,
                 evidence: dict | None = None, severity: Severity | None = None) -> Finding:
    """A finding of a catalogued id, with the catalogue's severity unless one is given."""
    default = catalogue.severity_of(finding_id)
    return Finding(subject=subject, title=title, detail=detail, remedy=remedy,
                   evidence=evidence or {}, id=finding_id, severity=severity or default)
