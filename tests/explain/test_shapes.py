"""Logs as people paste them: wrapped messages, other tools' words for the same failures, NCCL
seen only through its debug output, the OOM killer seen from the job's side, allocator asserts
caused by the configuration, and text that only quotes failures. Synthetic fixtures in
fixtures/shapes/, in gpu-audit's own words (real posted logs are scored with
bench/explain_corpus.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.explain import classify_text, explain_sources, parallel
from gpu_audit.explain.joining import join
from gpu_audit.explain.scanner import TAIL_LINES, scan_chunks
from gpu_audit.knowledge.signals import KILLED_WORDS
from gpu_audit.model import Severity
from tests.explain.helpers import FIXTURES, SHAPES
from tests.explain.helpers import shape_incidents as incidents
from tests.explain.helpers import shape_root as root


def span(incident) -> tuple[int, int | None]:  # type: ignore[no-untyped-def]
    return incident.locations[0].line, incident.locations[0].end_line


# --- wrapped messages ------------------------------------------------------------------------

def test_a_message_cut_at_the_terminal_width_is_joined_without_a_space() -> None:
    oom = root("nvml_assert_cut_at_80_columns.log")
    assert (oom.cls, oom.signature) == ("nvml-assert-oom", "nvml-assert-oom/caching-allocator")
    assert span(oom) == (2, 3)
    assert '"../c10/cuda/CUDACachingAllocator.cpp":838' in oom.excerpt
    assert oom.numbers["source_line"] == 838


def test_a_message_wrapped_after_a_dangling_word_is_joined() -> None:
    oom = root("nvml_assert_wrapped_after_at.log")
    assert oom.cls == "nvml-assert-oom" and span(oom) == (4, 5)
    assert 'FAILED at "/opt/pytorch/c10/cuda/CUDACachingAllocator.cpp":1154' in oom.excerpt


def test_kernel_continuation_lines_are_joined_without_their_prefix() -> None:
    bus = root("dmesg_fallen_off_bus_continuation.log")
    assert (bus.cls, bus.signature) == ("gpu-hardware", "gpu-hardware/fallen-off-bus")
    assert bus.numbers["pci_bus_id"] == "0000:b3:00.0"
    assert span(bus) == (3, 5)
    assert "installed in this system has fallen off the bus" in bus.excerpt
    assert bus.excerpt.count("NVRM:") == 1  # the continuation lines' prefixes are gone


def test_indented_kernel_continuations_give_both_versions() -> None:
    mismatch = root("dmesg_api_mismatch_indented.log")
    assert mismatch.signature == "nvml-unavailable/nvrm-api-mismatch"
    assert mismatch.numbers["client_version"] == "550.127.05"
    assert mismatch.numbers["kernel_version"] == "550.90.07"
    assert mismatch.locations[0].line == 1 and mismatch.locations[0].end_line >= 3


def test_a_rich_box_and_a_cut_word_after_it() -> None:
    killed = root("rich_box_dataloader_exited.log")
    assert killed.signature == "host-oom/dataloader-killed" and span(killed) == (7, 8)
    assert killed.excerpt.startswith("RuntimeError: DataLoader worker")  # not the box border
    assert killed.numbers["pids"] == [31337, 31338, 31339, 31340]


def test_lines_that_start_alike_or_repeat_are_never_joined() -> None:
    log = ("node03:41377:41412 [3] NCCL INFO Channel 00/0 : 3[3] -> 11[3] [send] via NET/IB/3\n"
           "node03:41377:41955 [3] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
           "from peer 10.20.0.14<55437> with status=12 opcode=0 len=0 vendor err 129 (Send)\n")
    (network,) = classify_text(log, torch_version=None)
    assert span(network) == (2, None) and network.excerpt.startswith("node03:41377:41955")


def test_a_joined_line_is_read_once() -> None:
    log = "x\n" + "RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at\n" \
          '"../c10/cuda/CUDACachingAllocator.cpp":838, please report a bug to PyTorch.\n'
    found = classify_text(log, torch_version=None)
    assert [(i.signature, i.count, span(i)) for i in found] == [
        ("nvml-assert-oom/caching-allocator", 1, (2, 3))]


def test_joining_reaches_only_the_lines_the_scanner_handed_over() -> None:
    (candidate,) = [c for c in scan_chunks([b"a\nNVRM: The NVIDIA GPU 0000:b3:00.0\n"
                                            b"NVRM: (PCI ID: 10de:1eb8) installed in this "
                                            b"system has\nNVRM: fallen off the bus.\n"])
                    if not c.tail and c.line == 2]
    joined = join(candidate)
    assert joined is not None and joined.spans[0][0] == 2 and joined.spans[-1][0] == 4
    assert join(candidate, floor=0) == joined


# --- other tools' words for the same failures --------------------------------------------------

def test_a_gpu_monitor_that_cannot_load_libnvidia_ml() -> None:
    nvml = root("gpustat_libnvidia_ml_missing_unindented.log")
    assert nvml.signature == "nvml-unavailable/library-missing"
    assert "libnvidia-ml.so.1" in nvml.explanation


def test_nvidia_smi_device_handle_error_and_a_pcie_aer_flood() -> None:
    found = incidents("nvidia_smi_device_handle_aer_flood.log")
    assert [(i.signature, i.role) for i in found] == [
        ("gpu-hardware/device-handle", "root-cause"), ("gpu-hardware/pcie-aer", "consequence"),
        ("gpu-hardware/pcie-aer-corrected", "context")]  # 8 corrected errors: not yet a flood
    assert found[0].numbers["pci_bus_id"] == "0000:03:00.0"
    assert found[0].severity is Severity.CRITICAL
    # a few corrected AER errors are no failure; a flood of them is a failing link
    line = "[  +0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0\n"
    (few,) = classify_text(line * 3, torch_version=None)
    assert few.signature == "gpu-hardware/pcie-aer-corrected" and not few.is_failure
    (flood,) = classify_text(line * 12, torch_version=None)
    assert flood.is_failure and flood.count == 12 and "12 corrected" in flood.explanation


# --- NCCL through its debug output ---------------------------------------------------------

def test_an_nccl_return_code_trail_alone_is_an_nccl_failure() -> None:
    nccl = root("nccl_debug_trail_only.log")
    assert nccl.signature == "nccl/return-code" and nccl.numbers["result_code"] == 2
    assert nccl.title == "NCCL error: unhandled system error"
    assert nccl.count == 1 and [loc.line for loc in nccl.locations] == [3, 4, 5, 6]


def test_connection_closed_by_remote_peer_and_the_remote_error() -> None:
    found = incidents("nccl_remote_peer_closed.log")
    assert found[0].signature == "nccl/network" and found[0].role == "root-cause"
    assert "nccl/error-text" in {i.signature for i in found}


@pytest.mark.parametrize("line", [
    "what():  unhandled system error",
    "ncclRemoteError: A call failed possibly due to a network error or a remote process "
    "exiting prematurely.",
    "RuntimeError: NCCL error: remote process exited or there was a network error, NCCL "
    "version 2.14.3",
])
def test_nccl_errors_without_a_dist_backend_line(line: str) -> None:
    (nccl,) = classify_text(line, torch_version=None)
    assert nccl.cls == "nccl" and nccl.is_failure


# --- the host OOM killer from the job's side ---------------------------------------------------

def test_killed_right_after_a_progress_bar() -> None:
    killed = root("shell_killed_after_progress_bar.log")
    assert killed.signature == "host-oom/shell-killed"


@pytest.mark.parametrize("lang", sorted(KILLED_WORDS))
def test_the_shells_word_for_killed_in_every_listed_language(lang: str) -> None:
    word = KILLED_WORDS[lang]
    log = f"python train.py\nEpoch 1\n{word}\n(base) user@host:~$ \n"
    (killed,) = classify_text(log, torch_version=None)
    assert (killed.cls, killed.line_numbers) == ("host-oom", [3])
    job = classify_text(f"./train.sh: line 12: 48211 {word}                  python train.py",
                        torch_version=None)
    assert [i.numbers.get("pid") for i in job] == [48211]


def test_a_locale_word_is_read_at_the_end_of_a_log_without_a_prefilter_key() -> None:
    killed = root("shell_killed_zh.log")
    assert killed.cls == "host-oom" and killed.excerpt == "已杀死"
    # ... and only there: the word in the middle of a long log is no evidence of a kill
    middle = "已杀死\n" + "step\n" * (TAIL_LINES + 5)
    assert classify_text(middle, torch_version=None) == []


@pytest.mark.parametrize("line", [
    "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit "
    "status 137.",
    "subprocess.CalledProcessError: Command '['accelerate', 'launch', 'train.py']' died with "
    "<Signals.SIGKILL: 9>.",
    "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)",
    "command terminated with exit code 137",
    "ERROR: worker exited with returncode -9",
    "[model:train] Training task exit with status code 137",
])
def test_launchers_report_of_a_sigkill(line: str) -> None:
    (killed,) = classify_text(line, torch_version=None)
    assert killed.signature == "host-oom/sigkill"


def test_torchrun_exitcode_9_with_its_failure_box() -> None:
    killed = root("torchrun_exitcode_9_box.log")
    assert killed.signature == "host-oom/sigkill"
    assert killed.numbers == {"local_rank": 0, "pid": 62498}


@pytest.mark.parametrize("line", ["Killed two birds with one stone", "lr=1e-9 eps=1e-9",
                                  "exit code 1370", "Epoch 137/200"])
def test_lookalikes_of_a_kill_stay_quiet(line: str) -> None:
    assert classify_text(line, torch_version=None) == []


# --- allocator asserts caused by the configuration ---------------------------------------------

def test_expandable_segments_assert_names_the_conflicting_option() -> None:
    conf = root("expandable_segments_with_max_split_assert.log")
    assert (conf.cls, conf.signature) == ("alloc-conf", "alloc-conf/expandable-assert")
    assert conf.numbers["conflicting_options"] == ["max_split_size_mb"]
    assert conf.numbers["alloc_conf"] == "expandable_segments:True,max_split_size_mb:32"
    assert "max_split_size_mb" in conf.explanation
    export = conf.remedy.splitlines()[-1]
    assert export.startswith("export PYTORCH_CUDA_ALLOC_CONF=")
    done = subprocess.run(["bash", "-c", export + '; printf %s "$PYTORCH_CUDA_ALLOC_CONF"'],
                          capture_output=True, text=True, check=True)
    assert done.stdout == "expandable_segments:True"  # paste-able


def test_the_assert_without_the_setting_in_the_log_still_says_what_to_check() -> None:
    (conf,) = classify_text('RuntimeError: !block->expandable_segment_ INTERNAL ASSERT FAILED at '
                            '"../c10/cuda/CUDACachingAllocator.cpp":2814', torch_version="2.3.1")
    assert conf.cls == "alloc-conf" and "conflicting_options" not in conf.numbers
    assert "max_split_size_mb" in conf.remedy


# --- quoted, not reported; caught, not fatal ---------------------------------------------------

def test_docs_that_quote_failures_report_none() -> None:
    assert incidents("docs_quoting_failures.log") == []


def test_an_error_pasted_in_a_sentence_is_still_reported() -> None:
    (oom,) = classify_text("This is my error: `torch.cuda.OutOfMemoryError: CUDA out of memory. "
                           "Tried to allocate 22.00 MiB (GPU 0; 12.00 GiB total capacity)`",
                           torch_version=None)
    assert oom.cls == "cuda-oom" and oom.is_failure


def test_an_error_catalogue_is_not_a_log() -> None:
    page = ("ERROR_ID=cuda/illegal-memory-access\n"
            "SIGNATURE=CUDA error: an illegal memory access was encountered\n\n"
            "CUDA error: an illegal memory access was encountered\n")
    assert classify_text(page, torch_version=None) == []


def test_an_oom_the_training_loop_caught_is_a_warning() -> None:
    (oom,) = incidents("oom_caught_skipping_batch.log")
    assert oom.cls == "cuda-oom" and oom.severity is Severity.WARNING and oom.role == "context"
    assert not oom.is_failure


# --- contracts ---------------------------------------------------------------------------------

def test_json_keeps_its_schema_and_adds_the_end_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "explain", "--json",
                           str(SHAPES / "dmesg_fallen_off_bus_continuation.log")],
                          capture_output=True, text=True, check=False)
    doc = json.loads(done.stdout)
    assert doc["schema"] == "gpu-audit.explain/1"
    (location,) = doc["incidents"][0]["locations"]
    assert set(location) == {"source", "line", "end_line"}
    assert (location["line"], location["end_line"]) == (3, 5)
    assert doc["incidents"][0]["line_numbers"] == [3]


def test_a_wrapped_message_across_a_parallel_range_boundary_reads_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.log"
    wrapped = (SHAPES / "dmesg_fallen_off_bus_continuation.log").read_text()
    with open(path, "w") as handle:
        for i in range(3000):
            handle.write(f"step {i} loss 0.{i:04d}\n")
            if i % 700 == 350:
                handle.write(wrapped)
    sequential = explain_sources([str(path)], torch_version=None, workers=1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1)
    for range_bytes in (9_000, 9_150, 9_300):  # cuts land inside the wrapped messages
        monkeypatch.setattr(parallel, "RANGE_BYTES", range_bytes)
        split = explain_sources([str(path)], torch_version=None, workers=2)
        assert [(i.signature, i.count, i.locations, i.excerpt) for i in split.incidents] == [
            (i.signature, i.count, i.locations, i.excerpt) for i in sequential.incidents]
    assert sequential.incidents[0].count == 4


def test_only_prefiltered_lines_and_the_tail_are_decoded() -> None:
    noise = b"".join(b"step %d loss 0.1234 lr 1e-4 tokens/s 12345 exit code 0\n" % i
                     for i in range(20000))
    found = list(scan_chunks([noise]))
    assert len(found) == TAIL_LINES and all(c.tail for c in found)


OOM_MESSAGE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.52 GiB is free. Including non-PyTorch memory, this process "
    "has 77.62 GiB memory in use. Of the allocated memory 60.12 GiB is allocated by PyTorch, and "
    "16.98 GiB is reserved by PyTorch but unallocated.")


@pytest.mark.parametrize("width", [80, 97, 100, 120])
def test_an_oom_message_cut_at_any_terminal_width_is_one_incident(width: int) -> None:
    pieces = [OOM_MESSAGE[i:i + width] for i in range(0, len(OOM_MESSAGE), width)]
    log = "step 1\n" + "\n".join(pieces) + "\n$ \n"
    (oom,) = classify_text(log, torch_version=None)
    assert oom.diagnosis == "fragmentation" and oom.numbers["requested_bytes"] == 2 << 30
    assert oom.numbers["reserved_unallocated_bytes"] == round(16.98 * 2**30)
    assert span(oom) == (2, 1 + len(pieces)) and oom.count == 1


def test_a_line_of_a_usual_width_before_a_new_record_is_not_joined() -> None:
    first = "[W1122 08:00:01 AllocatorConfig.cpp:28] Warning: something harmless here "
    first += "x" * (120 - len(first))
    log = first + "\nRuntimeError: CUDA error: device-side assert triggered\n"
    assert [i.cls for i in classify_text(log, torch_version=None)] == ["device-assert"]


@pytest.mark.parametrize(("text", "classes"), [
    ("I get `RuntimeError: CUDA error: out of memory` error when training", ["cuda-oom"]),
    ("A job killed by `CUDA error: an illegal memory access was encountered` names no GPU", []),
    ("Run the script and you will see:\n\nRuntimeError: CUDA error: an illegal memory access "
     "was encountered", ["illegal-memory-access"]),
    ("PyTorchの「device-side assert triggered」の原因と解決策", []),
    ("| Xid | Meaning |\n|---|---|\n| 79 | GPU has fallen off the bus |", []),
])
def test_quoted_or_reported(text: str, classes: list[str]) -> None:
    assert [i.cls for i in classify_text(text, torch_version=None)] == classes


def _terminal_wrap(text: str, width: int) -> str:
    return "\n".join(piece for line in text.split("\n")
                     for piece in ([line] if len(line) <= width else
                                   [line[i:i + width] for i in range(0, len(line), width)]))


@pytest.mark.parametrize("width", [80, 100, 120])
def test_every_fixture_reads_the_same_when_a_terminal_wraps_it(width: int) -> None:
    changed = []
    for path in sorted([*FIXTURES.glob("*.log"), *SHAPES.glob("*.log")]):
        text = path.read_text(errors="replace")
        before = [(i.signature, i.numbers.get("pci_bus_id")) for i in
                  classify_text(text, torch_version=None) if i.is_failure][:1]
        after = [(i.signature, i.numbers.get("pci_bus_id")) for i in
                 classify_text(_terminal_wrap(text, width), torch_version=None)
                 if i.is_failure][:1]
        if before != after:
            changed.append(f"{path.name}: {before} -> {after}")
    assert not changed, changed
