"""Memory and collective failures in more of the words they reach a log in: NCCL's last connect
retry, PyTorch's older spelling of its NCCL id fetch, c10d's socket errors raised bare, XLA's
peak buffers relayed behind a launcher's glog prefix and its out-of-memory quoted without its
status, PyTorch's out-of-memory retyped, the OOM killer's task table behind syslog's and dmesg's
prefixes, the host's RAM told full in a sentence or a title, and expandable segments told as the
condition of a failure. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def failures(text: str) -> list[str]:
    return [i.signature for i in classify_text(text, torch_version=None) if i.is_failure]


@pytest.mark.parametrize(("name", "cls", "sig_id"), [
    ("nccl_connect_retries_exhausted.log", "nccl", "nccl/network"),
    ("xla_peak_buffers_relayed_by_launcher.log", "cuda-oom", "cuda-oom/xla-peak-buffers"),
    ("kernel_task_table_syslog_and_dmesg_prefix.log", "host-oom", "host-oom/task-row"),
    ("runs_until_ram_full_told.log", "host-oom", "host-oom/ram-full-told"),
    ("running_out_of_ram_title.log", "host-oom", "host-oom/ram-full-told"),
])
def test_memory_and_connect_shapes(name: str, cls: str, sig_id: str) -> None:
    found = root(name)
    assert (found.cls, found.signature) == (cls, sig_id)


def test_nccl_connect_retries_that_recover_are_no_failure() -> None:
    found = incidents("nccl_connect_retry_recovered.log")
    assert not [i for i in found if i.is_failure], [(i.cls, i.title) for i in found]


def test_last_connect_retry_reads_the_error_and_tries() -> None:
    numbers = root("nccl_connect_retries_exhausted.log").numbers
    assert (numbers.get("connect_error"), numbers.get("connect_tries")) == (
        "No route to host", 34)


@pytest.mark.parametrize(("text", "expected"), [
    # PyTorch 1.11 to 2.0 spelt the fetch "retreiving"
    ("RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via "
     "c10d key-value store by key '0', but store->get('0') got error: Timeout waiting for key: "
     "default_pg/0/0 after 1800000 ms\n", ["nccl/unique-id-fetch"]),
    ("RuntimeError: CUDA out of the memory. Tried to allocate 120.00 MiB\n",
     ["cuda-oom/caching-allocator"]),
    ("RuntimeError: CUDA: out of memory\n", ["cuda-oom/caching-allocator"]),
    # the run's RAM told full only in a condition
    ("If the notebook runs until the RAM is full, lower the cache size.\n", []),
    # the GPU's RAM is no host memory
    ("stage two running out of GPU RAM\n", []),
    # c10d's socket layer raising the system's words alone
    ("RuntimeError: Connection reset by peer\n", ["nccl/store-connection"]),
    ("torch.distributed.DistNetworkError: Connection refused\n", ["nccl/store-connection"]),
    # ... behind a launcher's per-rank prefix
    ("[rank1]: torch.distributed.DistNetworkError: Connection refused\n",
     ["nccl/store-connection"]),
    ("[default0]:RuntimeError: Connection reset by peer\n", ["nccl/store-connection"]),
    ("3: RuntimeError: No route to host\n", ["nccl/store-connection"]),
    # ... not another library's exception, nor the words inside a sentence
    ("ConnectionResetError: [Errno 104] Connection reset by peer\n", []),
    ("RuntimeError: Connection reset by peer while reading the checkpoint from S3\n", []),
    # the allocator setting as the condition of a failure that happened
    ("When enabling expandable_segments, the RDMA registration of the KV buffers failed.\n",
     ["alloc-conf/expandable-told"]),
    # ... not a general statement nor a condition put to the reader
    ("When using expandable_segments, registration of the buffers fails.\n", []),
    ("If you enable expandable_segments, registration failed in our tests.\n", []),
])
def test_memory_and_collective_wordings(text: str, expected: list[str]) -> None:
    assert failures(text) == expected


def test_xla_out_of_memory_quoted_without_its_status_reads_the_size() -> None:
    text = "Error: 'Out of memory while trying to allocate 2147483648 bytes'\n"
    found = [i for i in classify_text(text, torch_version=None) if i.is_failure]
    assert [i.signature for i in found] == ["cuda-oom/xla"]
    assert found[0].numbers.get("requested_bytes") == 2147483648
