"""A program's printed line reads the same behind a launcher's or a logger's per-line prefix.

Every signature that reads a program's line from its start opens with the one declared
``LINE_HEAD`` (``gpu_audit/explain/prefixes.py``); these tests put each such line behind each
kind of prefix and expect the same signature and the same numbers, through both prefilter
engines and end to end.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_audit.explain.classify import match_signature
from gpu_audit.explain.prefixes import LINE_HEAD
from gpu_audit.explain.signatures import SIGNATURES
from gpu_audit.explain.signatures.guards import SKIP_SENTENCES
from tests.explain.helpers import shape_incidents, text_incidents
from tests.explain.test_grep_engine import assert_same, needs_grep

# One of each kind of prefix a relayed line may carry.
PREFIXES = {
    "torchrun-rank": "[rank3]: ",
    "torchrun-local": "[default1]:",
    "open-mpi": "[1,0]<stderr>:",
    "srun-label": "7: ",
    "python-logging": "2026-03-04 10:11:12,345 - trainer - ERROR - ",
    "python-basic": "ERROR:root:",
    "bracketed-level": "[WARNING] ",
    "glog": "E0304 10:11:12.345678  4242 worker.cc:88] ",
    "kubectl-timestamps": "2026-03-04T10:11:12.345678901Z ",
    "compose": "learner-2  | ",
    "syslog": "Mar  4 10:11:12 gpu-node-7 trainer[4242]: ",
    "nested": "2026-03-04T10:11:12.345678901Z [rank0]: ",
}

# (signature, a program's line of that shape, in this project's words)
PROGRAM_LINES = [
    ("cuda-oom/message-detail", "- Requested memory: 4294967296"),
    ("cuda-oom/message-detail", "- Free memory: 1073741824"),
    ("cuda-oom/message-detail", "Currently allocated     : 71.50 GiB"),
    ("cuda-oom/message-detail", "Device limit            : 79.10 GiB"),
    ("cuda-oom/message-detail", "Free (according to CUDA): 12.00 MiB"),
    ("cuda-oom/caching-allocator",
     "OutOfMemoryError                         Traceback (most recent call last)"),
    ("cuda-oom/tensorflow", "tensorflow.python.framework.errors_impl.ResourceExhaustedError"),
    ("cuda-oom/tensorflow-node", '[[Node: dense/MatMul = MatMul[T=DT_FLOAT, _device="/job:'
     'localhost/replica:0/task:0/device:GPU:2"](x, w)]]'),
    ("cuda-oom/xla-peak-buffers", "XLA Label: fusion.12"),
    ("cuda-oom/smi-processes",
     "|    1   N/A  N/A     31337      C   python finetune.py              8123MiB |"),
    ("cuda-oom/batch-size-search", "Retrying with batch size 48"),
    ("cuda-oom/batch-size-search", "Chosen batch size 24"),
    ("host-oom/memory-error", "MemoryError"),
    ("host-oom/shell-killed", "Killed"),
    ("host-oom/task-row", "[  77120]  1001 77120 23456789  8765432 71234560        0"
     "             0 python3"),
    ("nccl/store-connection", "torch.distributed.DistNetworkError: Connection refused"),
    ("illegal-memory-access/ggml-current-device",
     "  current device: 1, in function ggml_cuda_mul_mat at ggml-cuda.cu:1790"),
    ("gpu-hardware/lspci-rev-ff",
     "c1:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev ff)"),
]


_IDS = [f"{sig}:{line[:24]}" for sig, line in PROGRAM_LINES]


# What may follow a "^" in a signature that does not open with LINE_HEAD: a guard over the whole
# line (a look-ahead, words that must not come before the message: prose that tells a failure)
# or a sentence's start (or whole sentences skipped to reach one), never a program's text.
_WHOLE_LINE_GUARDS = ("(?i:(?:(?!", "(?:(?!", "(?=", "(?!", ")(?=", "|(?<=", SKIP_SENTENCES)


def test_no_signature_reads_a_program_line_from_a_bare_line_start() -> None:
    bare = []
    for sig in SIGNATURES:
        pattern = sig.regex.pattern.replace(LINE_HEAD, "")
        for at in re.finditer(r"(?<![\[\\])\^", pattern):
            if not pattern.startswith(_WHOLE_LINE_GUARDS, at.end()):
                bare.append((sig.id, pattern[at.start():at.end() + 30]))
    assert not bare, "open a program's line with prefixes.LINE_HEAD, not ^: " + repr(bare)


def _read(text: str) -> tuple[str, dict[str, object]] | None:
    found = match_signature(text)
    if found is None:
        return None
    sig, match = found
    return sig.id, (sig.extract(match, text) if sig.extract else {})


@pytest.mark.parametrize("sig_id,line", PROGRAM_LINES, ids=_IDS)
def test_the_bare_line_reads_as_its_signature(sig_id: str, line: str) -> None:
    read = _read(line)
    assert read is not None and read[0] == sig_id


@pytest.mark.parametrize("prefix", list(PREFIXES.values()), ids=list(PREFIXES))
@pytest.mark.parametrize("sig_id,line", PROGRAM_LINES, ids=_IDS)
def test_a_program_line_reads_the_same_behind_a_prefix(prefix: str, sig_id: str,
                                                       line: str) -> None:
    assert _read(prefix + line) == _read(line)


@pytest.mark.parametrize("text", [
    "I saw - Requested memory: 4294967296 in the log",  # not at a line's start, behind words
    "The notes say Killed",
    "Epoch 3: Killed",  # an ordinary word and a colon is no prefix
])
def test_text_before_a_program_line_is_no_prefix(text: str) -> None:
    read = _read(text)
    assert read is None or read[0] not in {"cuda-oom/message-detail", "host-oom/shell-killed"}


def _prefixed_log(prefix: str) -> str:
    return "".join(f"{prefix}{line}\n" for _, line in PROGRAM_LINES)


@needs_grep
@pytest.mark.parametrize("prefix", list(PREFIXES.values()), ids=list(PREFIXES))
def test_both_engines_hand_over_the_same_prefixed_lines(tmp_path: Path, prefix: str) -> None:
    path = tmp_path / "prefixed.log"
    path.write_text(_prefixed_log(prefix))
    assert_same(path)


@pytest.mark.parametrize("prefix", list(PREFIXES.values()), ids=list(PREFIXES))
def test_xgboost_rows_behind_a_prefix_add_their_numbers(tmp_path: Path, prefix: str) -> None:
    log = (f"{prefix}xgboost.core.XGBoostError: Memory allocation error on worker 0: "
           "std::bad_alloc: cudaErrorMemoryAllocation: out of memory\n"
           f"{prefix}- Free memory: 1073741824\n{prefix}- Requested memory: 4294967296\n")
    oom = [i for i in text_incidents(tmp_path, log) if i.cls == "cuda-oom"]
    assert oom and oom[0].numbers.get("requested_bytes") == 4294967296
    assert oom[0].numbers.get("free_bytes") == 1073741824


@pytest.mark.parametrize("prefix", ["[rank0]: ", "learner-2  | ", "3: "],
                         ids=["torchrun", "compose", "srun"])
def test_an_smi_table_behind_a_prefix_names_the_holders(tmp_path: Path, prefix: str) -> None:
    log = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
           "total capacity of 79.15 GiB of which 1.52 GiB is free.\n"
           f"{prefix}| Processes:                                                         |\n"
           f"{prefix}|  GPU   GI   CI        PID   Type   Process name          GPU Memory |\n"
           f"{prefix}|    0   N/A  N/A     31337      C   python other_job.py    40123MiB |\n")
    oom = [i for i in text_incidents(tmp_path, log) if i.cls == "cuda-oom"]
    assert oom and any(p["pid"] == 31337 for p in oom[0].numbers.get("gpu_processes", []))


def test_a_relayed_node_line_names_the_gpu() -> None:
    # TensorFlow 1 names the device only on the node line under its message
    tf = [i for i in shape_incidents("relayed_program_lines.log") if i.cls == "cuda-oom"]
    assert tf and tf[0].numbers.get("gpu_index") == 1


@pytest.mark.parametrize("prefix", ["[rank5]:", "[1,5]<stderr>:"], ids=["torchrun", "open-mpi"])
def test_a_rank_prefixed_line_cut_inside_its_fields_is_joined(tmp_path: Path,
                                                              prefix: str) -> None:
    log = (f"{prefix}[E0304 10:11:12.000001 ProcessGroupNCCL.cpp:1597] [PG ID 0 PG GUID 0 Rank "
           "5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog "
           "caught collective operation timeout: WorkNCCL(S\n"
           "eqNum=4410, OpType=ALLREDUCE, NumelIn=2048, NumelOut=2048, Timeout(ms)=600000) ran "
           "for 600007 milliseconds before timing out.\n")
    nccl = [i for i in text_incidents(tmp_path, log) if i.cls == "nccl"]
    assert nccl and (nccl[0].numbers.get("seq_num"), nccl[0].numbers.get("timeout_ms")) == (
        4410, 600000)


def test_open_mpi_s_tagged_lines_name_their_ranks(tmp_path: Path) -> None:
    log = "".join(f"[1,{rank}]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to "
                  f"allocate 2.00 GiB. GPU {rank} has a total capacity of 79.15 GiB of which "
                  "1.02 GiB is free.\n" for rank in (3, 1))
    oom = [i for i in text_incidents(tmp_path, log) if i.cls == "cuda-oom"]
    assert oom and oom[0].ranks == [1, 3]
