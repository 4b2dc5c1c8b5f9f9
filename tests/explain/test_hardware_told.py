"""GPU hardware, driver and NCCL failures as threads tell them: a title under the thread's source
line ("owner/repo · issue #N · state"), an Xid or an NVLink error named in a title, and a pull
request's title, which names a change, not a failure. Synthetic fixtures in fixtures/shapes/."""

from __future__ import annotations

import pytest

from gpu_audit.explain import classify_text
from gpu_audit.explain.documents import read_head, title_failure
from gpu_audit.explain.signatures.driver_mismatch import _CUDA_INIT
from gpu_audit.model import Severity
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def test_the_title_is_read_under_a_threads_source_line_and_labels() -> None:
    head = read_head(b"example-lab/trainer \xc2\xb7 issue #412 \xc2\xb7 open \xc2\xb7 Python\n"
                     b"labels: bug\n# Xid 94 on GPU 2\n\nI see it.\n", whole=True)
    assert (head.title, head.title_line) == ("# Xid 94 on GPU 2", 3)


def test_an_xid_named_in_a_title_is_the_gpus_fault_with_its_number() -> None:
    xid = root("thread_source_line_title_xid.log")
    assert (xid.cls, xid.signature) == ("gpu-hardware", "gpu-hardware/xid")
    assert xid.numbers == {"xid": 94} and xid.title.startswith("Named in the title: Xid 94")
    assert xid.locations[0].line == 3


def test_an_uncorrectable_nvlink_error_named_in_a_title() -> None:
    nvlink = root("thread_source_line_nvlink_title.log")
    assert nvlink.signature == "gpu-hardware/nvlink-uncorrectable"


def test_a_pull_requests_title_names_a_change_not_a_failure() -> None:
    assert not [i for i in incidents("thread_source_line_pull_request_xid.log") if i.is_failure]


def test_a_node_that_lost_a_gpu_named_in_a_title() -> None:
    lost = root("thread_source_line_node_lost_gpu.log")
    assert lost.signature == "gpu-hardware/fallen-off-bus"


@pytest.mark.parametrize(("title", "expected"), [
    ("# GPU server loses GPU between jobs", "gpu-hardware"),
    ("# node3 has lost a GPU after reboot", "gpu-hardware"),
    ("# Fabric-wide Xid 145 on an HGX node: NCCL collectives hang", "gpu-hardware"),
    ("# Uncorrectable NVLink error on A100 pair", "gpu-hardware"),
    # its memory or its support, not the GPU itself
    ("# Server loses GPU memory after each epoch", None),
    ("# Container lost GPU access after update", None),
])
def test_hardware_title_wordings(title: str, expected: str | None) -> None:
    sig_id = title_failure(read_head(f"{title}\n\nI see it on my node.\n".encode(), whole=True))
    assert (sig_id.split("/")[0] if sig_id else None) == expected


def test_compact_xid_records_alone_are_the_root_of_a_report() -> None:
    # a kernel log's Xid 31 in a short form (no "NVRM:"), in a report where nothing else failed
    xid = root("xid_compact_records_alone.log")
    assert xid.signature == "gpu-hardware/xid-mention" and xid.numbers["xid"] == 31
    assert xid.severity == Severity.ERROR


def test_a_replys_explaining_phrase_does_not_make_an_issue_an_explainer() -> None:
    # an issue thread reports; the maintainer's "that error usually means" explains its error
    nccl = root("thread_issue_reply_explains_ib_error.log")
    assert nccl.signature == "nccl/network" and nccl.severity >= Severity.ERROR


def test_the_watchdogs_termination_cut_before_its_reason() -> None:
    nccl = root("nccl_watchdog_terminated_cut.log")
    assert (nccl.cls, nccl.signature) == ("nccl", "nccl/watchdog-terminated")


def test_an_nccl_timeout_the_writer_reports_in_english() -> None:
    told = root("nccl_timeout_told_english.log")
    assert told.signature == "nccl/timeout-told"


@pytest.mark.parametrize(("line", "expected"), [
    ("It hangs at step 300 for half an hour and then reports NCCL timeout.", ["nccl"]),
    ("We got NCCL Timeout after the checkpoint on 4 nodes", ["nccl"]),
    # the reader's, a condition, a question of when: not a report
    ("When Do You Hit NCCL Timeouts?", []),
    ("If the job reports NCCL timeout, raise the limit.", []),
    ("Increase the NCCL timeout and add logging.", []),
])
def test_nccl_timeout_told_wordings(line: str, expected: list[str]) -> None:
    assert [i.cls for i in classify_text(line + "\n", torch_version=None)
            if i.is_failure] == expected


def test_a_distributed_hang_then_timeout_named_in_a_title() -> None:
    nccl = root("title_distributed_hang_then_timeout_zh.log")
    assert nccl.signature == "nccl/watchdog-timeout" and nccl.title.startswith("Named in the title")


@pytest.mark.parametrize(("title", "body", "expected"), [
    # the title says the failure is still there after the writer's change
    ("增加 nccl 超时时间设置后，仍然报错", "谢谢。", "nccl"),
    ("NCCL timeout raised to 2 hours, still times out", "Thanks.", "nccl"),
    # a distributed run's hang, even with no error: a rank that never joined a collective
    ("Distributed training across machines hangs with no error", "```\nlog\n```", "nccl"),
    # a question: no failure named
    ("为什么多卡训练卡住，超时后报错", "```\nlog\n```", None),
])
def test_title_told_nccl_wordings(title: str, body: str, expected: str | None) -> None:
    sig_id = title_failure(read_head(f"{title}\n\n{body}\n".encode(), whole=True))
    assert (sig_id.split("/")[0] if sig_id else None) == expected


_ISSUE_LINE = "example-lab/fabric · issue #90 · open · C++\n"


@pytest.mark.parametrize(("source", "title", "expected"), [
    # an issue's source line says the thread reports its title's failure
    (_ISSUE_LINE, "# A `RETRY_EXC_ERR` completion on one QP hangs all ranks", "nccl"),
    (_ISSUE_LINE, "# Transport retry counter exceeded on mlx5_2 during allreduce", "nccl"),
    # ... without it, and without the writer's words or a pasted block, a subject
    ("", "# A `RETRY_EXC_ERR` completion on one QP hangs all ranks", None),
])
def test_an_ib_retry_exhaustion_named_in_an_issues_title(source: str, title: str,
                                                         expected: str | None) -> None:
    text = f"{source}{title}\n\nThe queue pair shows the status after the wedge.\n"
    sig_id = title_failure(read_head(text.encode(), whole=True))
    assert (sig_id.split("/")[0] if sig_id else None) == expected


def test_a_julia_packages_driver_too_old_wrapped_by_its_logger() -> None:
    old = root("driver_older_than_cuda_julia_wrapped.log")
    assert old.signature == "driver-mismatch/driver-older-than-cuda"
    assert old.numbers == {"required_cuda": "11.2", "driver_cuda_version": "10.1"}


@pytest.mark.parametrize(("line", "expected"), [
    ('level=DEBUG msg="Unable to load cudart" error="your nvidia driver is too old or missing."',
     ["driver-mismatch"]),
    ("When I run my program, the msg is that my Nvidia version is too old.",
     ["driver-mismatch"]),
    ("After the upgrade torch says our NVIDIA driver is too old", ["driver-mismatch"]),
    # a proposal's condition names no program's failure
    ("It should print a warning if the GPU driver is too old to support the CUDA version.", []),
])
def test_a_driver_too_old_in_other_programs_words(line: str, expected: list[str]) -> None:
    assert [i.cls for i in classify_text(line + "\n", torch_version=None)
            if i.is_failure] == expected


def test_a_driver_too_old_title_in_a_thread_where_someone_has_a_similar_issue() -> None:
    old = root("title_driver_too_old_similar_issue.log")
    assert old.signature == "driver-mismatch/driver-too-old"


@pytest.mark.parametrize("width", [1000, 1024])
def test_a_message_cut_where_a_tool_cuts_long_lines(width: int) -> None:
    # a traceback pasted as one line, cut at the tool's length inside "illegal" (built here: a
    # fixture file would be cut again by the terminal-wrap test, two cuts in one word)
    frames = "".join(f'File "/work/vla/train/step_{i}.py", line {100 + i}, in run_{i} '
                     f"out = self.run_{i + 1}(batch) ^^^^^^^^^^^^^^^^ " for i in range(40))
    tail = "RuntimeError: CUDA error: an illeg"
    first = frames[:width - len(tail)] + tail
    rest = ("al memory access was encountered Compile with TORCH_USE_CUDA_DSA to enable "
            "device-side assertions.")
    text = f"# Post-training stops with a CUDA error\n\nI get this:\n{first}\n{rest}\n"
    found = [i for i in classify_text(text, torch_version=None) if i.is_failure]
    assert [(i.signature, i.line_numbers) for i in found] == [
        ("illegal-memory-access/illegal-address", [4])]


def test_a_gpu_lost_told_in_a_cluster_thread() -> None:
    lost = root("gpu_lost_told_cluster_thread.log")
    assert (lost.cls, lost.signature) == ("gpu-hardware", "gpu-hardware/lost-told")
    assert lost.count == 2


@pytest.mark.parametrize(("line", "expected"), [
    ("Lost GPU occurs again on node3, only 3 GPUs left.", ["gpu-hardware"]),
    ("The servers keep losing the GPU between two jobs.", ["gpu-hardware"]),
    # its memory, its hours, advice to the reader, a condition: no GPU lost here
    ("We lost GPU memory to fragmentation after the eval step.", []),
    ("Preemption means we lost GPU hours last week.", []),
    ("If you lose a GPU mid-run, the job restarts from the last checkpoint.", []),
    ("To avoid losing the GPU, keep the persistence daemon running.", []),
])
def test_gpu_lost_told_wordings(line: str, expected: list[str]) -> None:
    assert [i.cls for i in classify_text(line + "\n", torch_version=None)
            if i.is_failure] == expected


@pytest.mark.parametrize(("line", "signature", "numbers"), [
    # CUDA's initialisation statuses by their names
    ("RuntimeError: CUDA error: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "driver-mismatch/cuda-init", {}),
    ("cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "driver-mismatch/cuda-init", {}),
    ("cudaErrorSystemNotReady: system not ready", "driver-mismatch/cuda-init", {}),
    ("UserWarning: CUDA initialization: CUDA unknown error - this may be due to an incorrectly "
     "set up environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.",
     "driver-mismatch/cuda-init", {"text": "CUDA unknown error - this may be due to"}),
    # the kernel's NVLink fatal error, a monitor's "Xid Error 79", ECC retold with "an ... was"
    ("[ 5022.301] NVRM: NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0)",
     "gpu-hardware/nvlink-uncorrectable", {"link": 3}),
    ("Detected Critical Xid Error 79 on GPU 00000000:3B:00.0", "gpu-hardware/xid-mention",
     {"xid": 79}),
    ("RuntimeError: CUDA error: an uncorrectable ECC error was encountered",
     "gpu-hardware/uncorrectable-ecc", {}),
    # TensorFlow's diagnosis of libcuda against the kernel module, an NGC container's banner
    ("2023-01-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_diagnostics.cc:313] "
     "kernel version 470.57.2 does not match DSO version 510.47.3 -- cannot find working "
     "devices in this configuration", "driver-mismatch/cuda-init",
     {"kernel_version": "470.57.2", "dso_version": "510.47.3"}),
    ("ERROR: This container was built for NVIDIA Driver Release 535.104 or later, but version "
     "470.82.01 was detected and compatibility mode is UNAVAILABLE.",
     "driver-mismatch/container-driver-release",
     {"required_driver": "535.104", "driver_version": "470.82.01", "unavailable": True}),
    # an NCCL timeout told in Chinese with the word for communication
    ("训练时出现NCCL通信超时，程序直接退出", "nccl/timeout-told", {}),
])
def test_more_driver_hardware_and_nccl_wordings(line: str, signature: str,
                                                numbers: dict[str, object]) -> None:
    found = [i for i in classify_text(line + "\n", torch_version=None) if i.is_failure]
    assert [i.signature for i in found] == [signature]
    assert numbers.items() <= found[0].numbers.items()


@pytest.mark.parametrize(("line", "code"), [
    ("CUDA_ERROR_SYSTEM_NOT_READY", "802"), ("cudaErrorSystemDriverMismatch", "803"),
    ("cudaErrorCompatNotSupportedOnDevice", "804"),
])
def test_a_status_by_its_name_gets_its_numbers_advice(line: str, code: str) -> None:
    (incident,) = classify_text(f"RuntimeError: {line}\n", torch_version=None)
    assert incident.explanation == _CUDA_INIT[code][0]


@pytest.mark.parametrize("title", [
    "# Add support for Xid 154 in the health checks",
    "# Detect GPUs that fell off the bus",
    "# Feature: report uncorrectable NVLink errors per link",
])
def test_an_issue_asking_for_a_change_about_a_failure_names_none(title: str) -> None:
    text = f"{_ISSUE_LINE}{title}\n\nThe checker should flag it.\n"
    assert title_failure(read_head(text.encode(), whole=True)) is None


@pytest.mark.parametrize(("line", "peer"), [
    ("node2:311:402 [0] misc/socket.cc:538 NCCL WARN Net : Connect to 10.1.1.1<43231> failed : "
     "Software caused connection abort", "10.1.1.1<43231>"),
    ("node2:311:402 [1] include/socket.h:403 NCCL WARN Connect to 192.168.1.2<51417> failed : "
     "No route to host", "192.168.1.2<51417>"),
    ("node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to "
     "10.0.0.4<56849> returned 113(No route to host) errno 11", "10.0.0.4<56849>"),
])
def test_a_failed_connection_to_a_peer_is_nccls_network_failure(line: str, peer: str) -> None:
    (incident,) = [i for i in classify_text(line + "\n", torch_version=None) if i.is_failure]
    assert incident.signature == "nccl/network" and incident.numbers["peer"] == peer


def test_a_kernels_quoted_condition_kept_without_its_file_and_block() -> None:
    (incident,) = classify_text("Assertion `input_val >= zero && input_val <= one` failed.\n",
                                torch_version=None)
    assert incident.signature == "device-assert/unquoted-condition"
    assert incident.numbers["assertion"] == "input_val >= zero && input_val <= one"
    assert "BCEWithLogitsLoss" in incident.numbers["hint"]


def test_an_ngc_banner_in_forward_compatibility_mode_is_a_warning() -> None:
    line = ("WARNING: This container was built for NVIDIA Driver Release 550.54 or later, but "
            "version 535.161.08 was detected and compatibility mode is enabled.\n")
    (incident,) = classify_text(line, torch_version=None)
    assert incident.signature == "driver-mismatch/container-driver-release"
    assert incident.severity == Severity.WARNING and not incident.numbers["unavailable"]
