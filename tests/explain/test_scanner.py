"""Reading logs as they come: colour, progress bars, odd bytes, huge lines, compression, scale."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import random
import re
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_audit.errors import InputError
from gpu_audit.explain import classify_text, explain_sources, parallel
from gpu_audit.explain.scanner import MAX_CARRY, PREFILTER, BlockScanner, scan_chunks
from gpu_audit.explain.signatures import SIGNATURES
from tests.explain.test_signatures import SINGLE_LINES

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
       "capacity of 23.69 GiB of which 1.56 GiB is free. Of the allocated memory 12.32 GiB is "
       "allocated by PyTorch, and 9.40 GiB is reserved by PyTorch but unallocated.")
ILLEGAL = "RuntimeError: CUDA error: an illegal memory access was encountered"


def candidates(data: bytes, chunk: int | None = None) -> list[tuple[int, str]]:
    chunks = [data] if chunk is None else [data[i:i + chunk] for i in range(0, len(data), chunk)]
    return [(c.line, c.text) for c in scan_chunks(chunks) if not c.tail]


def test_ansi_colour_codes_are_removed_before_matching() -> None:
    line = f"\x1b[31m\x1b[1m{OOM[:24]}\x1b[0m{OOM[24:]}\x1b[0m"
    (oom,) = classify_text(line, torch_version=None)
    assert oom.cls == "cuda-oom" and "\x1b" not in oom.excerpt
    assert oom.numbers["requested_bytes"] == 2 * 1024**3


def test_traceback_after_a_progress_bar_redraw_keeps_its_line_number() -> None:
    log = ("epoch 1\n"
           " 10%|#         | 10/100\r 45%|####      | 45/100\r" + ILLEGAL + "\n"
           "after\n")
    (illegal,) = classify_text(log, torch_version=None)
    assert illegal.line_numbers == [2]
    assert illegal.excerpt.startswith("RuntimeError")  # the progress bar is another segment


def test_windows_line_endings() -> None:
    log = "a\r\nb\r\n" + ILLEGAL + "\r\nc\r\n"
    (illegal,) = classify_text(log, torch_version=None)
    assert illegal.line_numbers == [3]
    assert not illegal.excerpt.endswith("\r")


def test_bytes_that_are_not_utf8_are_replaced_not_fatal() -> None:
    data = b"\xff\xfe garbage \x80\n" + b"\xc3(" + ILLEGAL.encode() + b" \xe9\xe8\n"
    (line, text), = candidates(data)
    assert line == 2 and "illegal memory access" in text and "\ufffd" in text


def test_a_failure_inside_a_huge_line_is_found_with_bounded_context() -> None:
    padding = "x" * (3 * MAX_CARRY)
    data = ("first\n" + padding + " " + ILLEGAL + " " + padding + "\n" + OOM + "\n").encode()
    found = candidates(data, chunk=1 << 20)
    assert [line for line, _ in found] == [2, 3]
    assert len(found[0][1]) < 10_000 and "illegal memory access" in found[0][1]


def test_a_key_split_across_the_pieces_of_a_huge_line_is_not_lost() -> None:
    scanner = BlockScanner()
    prefix = b"y" * (MAX_CARRY + 10)
    data = prefix + ILLEGAL.encode() + b"y" * 100_000 + b"\n"
    found = []
    for i in range(0, len(data), 65536):  # cuts land everywhere, including inside the key
        found.extend(scanner.feed(data[i:i + 65536]))
    found.extend(scanner.finish())
    assert len(found) == 1 and found[0].line == 1 and "illegal memory access" in found[0].text


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=40))
def test_results_do_not_depend_on_how_the_stream_is_chunked(sizes: list[int]) -> None:
    data = ("noise\n" * 7 + OOM + "\r\n" + "x" * 300 + "\r" + ILLEGAL + "\n" + "tail").encode()
    pieces, start = [], 0
    for size in sizes:
        pieces.append(data[start:start + size])
        start += size
    pieces.append(data[start:])
    scanner = BlockScanner()
    got = list(scan_chunks(pieces, scanner))
    assert got == list(scan_chunks([data]))  # texts, context and tail lines alike
    assert scanner.line_count == 10


def test_line_count_with_and_without_a_final_newline() -> None:
    for data, lines in ((b"", 0), (b"a", 1), (b"a\n", 1), (b"a\nb", 2), (b"\n\n", 2)):
        scanner = BlockScanner()
        list(scan_chunks([data], scanner))
        assert scanner.line_count == lines, data


# --- inputs -------------------------------------------------------------------------------------

LOG = f"step 1\nstep 2\n{OOM}\nstep 3\n".encode()


@pytest.mark.parametrize(("suffix", "compress"), [
    (".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress), ("", lambda b: b)])
def test_compressed_logs_read_like_plain_ones(tmp_path: Path, suffix: str, compress) -> None:
    path = tmp_path / f"train.log{suffix}"
    path.write_bytes(compress(LOG))
    result = explain_sources([str(path)], torch_version=None)
    (oom,) = result.incidents
    assert oom.cls == "cuda-oom" and oom.line_numbers == [3]
    stats = result.inputs[0]
    assert (stats.lines, stats.bytes) == (4, len(LOG))
    assert stats.compression == (suffix.strip(".").replace("gz", "gzip").replace("bz2", "bzip2")
                                 or None)


def test_a_gzip_stream_on_stdin_is_detected_by_its_bytes() -> None:
    result = explain_sources(["-"], torch_version=None, stdin=io.BytesIO(gzip.compress(LOG)))
    assert [i.cls for i in result.incidents] == ["cuda-oom"]
    assert result.inputs[0].source == "<stdin>" and result.inputs[0].compression == "gzip"


def test_plain_stdin() -> None:
    result = explain_sources(["-"], torch_version=None, stdin=io.BytesIO(LOG))
    assert result.inputs[0].lines == 4 and len(result.incidents) == 1


def test_missing_file_and_directory_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        explain_sources([str(tmp_path / "nope.log")], torch_version=None)
    with pytest.raises(InputError, match="is a directory"):
        explain_sources([str(tmp_path)], torch_version=None)


def test_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file; permissions cannot be tested")
    path = tmp_path / "secret.log"
    path.write_bytes(LOG)
    path.chmod(0)
    with pytest.raises(InputError, match="permission denied"):
        explain_sources([str(path)], torch_version=None)


def test_gz_name_without_gzip_content_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "train.log.gz"
    path.write_bytes(LOG)
    with pytest.raises(InputError, match="not a valid gzip file"):
        explain_sources([str(path)], torch_version=None)


def test_corrupt_and_truncated_gzip_are_input_errors(tmp_path: Path) -> None:
    packed = gzip.compress(LOG * 200)
    truncated = tmp_path / "truncated.log.gz"
    truncated.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(InputError, match=r"truncated.*zcat .*truncated\.log\.gz \| gpu-audit"):
        explain_sources([str(truncated)], torch_version=None)
    corrupt = tmp_path / "corrupt.log.gz"
    corrupt.write_bytes(packed[:20] + bytes(b ^ 0x5A for b in packed[20:]))
    with pytest.raises(InputError, match="corrupt"):
        explain_sources([str(corrupt)], torch_version=None)


# --- scale --------------------------------------------------------------------------------------

def synthetic_log(path: Path, lines: int, seed: int = 3) -> None:
    rng = random.Random(seed)
    noise = ["step {i} loss {l:.4f}", "[rank{r}]: eval {i} acc {l:.3f}",
             "node0:12:12 [{r}] NCCL INFO Channel {r}/24 : 0 1 2 3",
             "\x1b[32mINFO\x1b[0m fetched shard {i}", "{{'loss': {l:.3f}, 'epoch': 0.{i}}}"]
    failures = [OOM, ILLEGAL, "[Rank 2] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
                "ran for 600001 milliseconds before timing out."]
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(lines):
            if i % 997 == 500:
                handle.write(failures[i % 3] + "\n")
            else:
                handle.write(rng.choice(noise).format(i=i, l=rng.random(), r=i % 8) + "\n")


def _summary(result):  # type: ignore[no-untyped-def]
    return [(i.cls, i.signature, i.count, i.line_numbers, i.numbers) for i in result.incidents]


def test_parallel_scan_gives_the_same_result_as_one_process(tmp_path: Path,
                                                            monkeypatch) -> None:
    path = tmp_path / "big.log"
    synthetic_log(path, 12_000)
    sequential = explain_sources([str(path)], torch_version=None, workers=1)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(parallel, "RANGE_BYTES", 20_000)  # many ranges, cut inside lines
    split = explain_sources([str(path)], torch_version=None, workers=2)
    assert _summary(split) == _summary(sequential)
    assert split.inputs == sequential.inputs
    assert sequential.incidents[0].count > 3


def test_without_worker_processes_the_file_is_read_in_this_one(tmp_path: Path,
                                                                monkeypatch) -> None:
    path = tmp_path / "big.log"
    synthetic_log(path, 3_000)
    expected = explain_sources([str(path)], torch_version=None, workers=1)

    class NoPool:
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            raise NotImplementedError("no POSIX semaphores in this sandbox")

    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(parallel, "ProcessPoolExecutor", NoPool)
    fallback = explain_sources([str(path)], torch_version=None, workers=4)
    assert _summary(fallback) == _summary(expected)
    assert fallback.inputs == expected.inputs


def test_memory_stays_bounded_on_a_large_stream() -> None:
    block = ("step 1234 loss 0.1234 lr 1e-4 tokens/s 12345 " * 2 + "\n").encode() * 20_000
    total = 0

    def stream():  # ~64 MB, generated on the fly so only the scanner holds data
        nonlocal total
        for i in range(36):
            chunk = block + (ILLEGAL.encode() + b"\n" if i % 9 == 0 else b"")
            total += len(chunk)
            yield chunk

    tracemalloc.start()
    result = explain_sources(["-"], torch_version=None, stdin=_Reader(stream()))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert total > 60e6
    assert result.incidents[0].count == 4
    assert peak < 40e6, f"peak {peak / 1e6:.1f} MB while reading {total / 1e6:.0f} MB"


class _Reader(io.RawIOBase):
    """A binary stream over a generator, like a pipe."""

    def __init__(self, chunks) -> None:  # type: ignore[no-untyped-def]
        self._chunks = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def]
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


@pytest.mark.parametrize("line", [
    "Requested               : 2.00 GiB",
    "Device limit            : 79.15 GiB",
    "Free (according to CUDA): 0 bytes",
    "[1]+  48211 Getötet                 python train.py",
    "Убито",
])
def test_cudamallocasync_figures_and_a_local_killed_word_are_keyed_mid_log(line: str) -> None:
    noise = b"step 1 loss 0.5 lr 1e-4\n" * 500
    found = [c for c in scan_chunks([noise + line.encode() + b"\n" + noise]) if not c.tail]
    assert [(c.line, c.text) for c in found] == [(501, line)]


@pytest.mark.parametrize("line", [
    "my training was killed by the OOM killer after two hours",
    "the pod was OOM-killed twice last night",
    "Oom killer took pid 4012 (python)",
    "1c:00.0 VGA compatible controller: NVIDIA Corporation TU102GL [Quadro RTX 6000] (rev ff)",
])
def test_the_oom_killer_in_capitals_and_a_gpu_off_the_bus_in_lspci_are_keyed_mid_log(
        line: str) -> None:
    noise = b"step 1 loss 0.5 lr 1e-4\n" * 500
    found = [c for c in scan_chunks([noise + line.encode() + b"\n" + noise]) if not c.tail]
    assert [(c.line, c.text) for c in found] == [(501, line)]


def test_the_prefilter_is_few_passes_each_with_a_literal_first_byte() -> None:
    # Each pass costs about 30 ms per 100 MiB whatever it looks for, and one without a literal
    # first byte ten times that (bench/RESULTS.md): a new key joins the pass of its first byte.
    literal = re._parser.LITERAL  # type: ignore[attr-defined]
    assert all(re._parser.parse(p.pattern)[0][0] is literal  # type: ignore[attr-defined]
               for p in PREFILTER)
    # (16: the capitals' "OOM killer" has no first byte in common with another pass; 17: the
    # driver's tools named in lower case, "nvidia-smi: command not found", neither; 18: a kill
    # told in lower case on any line, "my process gets killed in the pod", neither; 19: a GPU's
    # memory told in Chinese, "显存不足", neither)
    assert len(PREFILTER) <= 19


# Read only beside the lines they belong with (a connect retry ends in a failure or is nothing;
# a row of the OOM killer's task table under its header), or told in words so general that
# keying them would take most lines of a log ("OC mode", "x16 slots", "mainboard", "ignores",
# "--cuda-malloc"): these are read in a thread's title and in a text's last lines.
_NOT_KEYED_ALONE = {"nccl/connect-retrying", "host-oom/task-row", "alloc-conf/async-fails-told",
                    "alloc-conf/option-ignored-told", "gpu-hardware/overclock-told",
                    "gpu-hardware/slot-told", "gpu-hardware/board-swap-told"}


def _mid_log_lines() -> list[tuple[str, str, str]]:
    examples = [(sig.example.strip().splitlines()[0], sig.cls, sig.id) for sig in SIGNATURES
                if sig.example and not sig.fact and not sig.handles
                and sig.attach not in ("only", "latest")]
    return [(line, cls, sig) for line, cls, sig in [*SINGLE_LINES, *examples]
            if sig not in _NOT_KEYED_ALONE and "\n" not in line]


def test_every_message_and_telling_is_keyed_in_the_middle_of_a_long_log(tmp_path: Path) -> None:
    # A short fixture is all tail (its last lines are candidates whatever the prefilter says):
    # the same line between 40 lines of progress on each side is read only if a key finds it.
    noise = "".join(f"step {i} loss 0.5\n" for i in range(40))
    log = tmp_path / "mid.log"
    unread = []
    gpus = {sig.id for sig in SIGNATURES if sig.needs_gpu_subject}
    for line, cls, sig in _mid_log_lines():
        # (a telling that leaves whose memory open is read in a text about a GPU)
        head = "run on GPU 0 (RTX 3090)\n" if sig in gpus else ""
        log.write_text(head + noise + line + "\n" + noise)
        found = explain_sources([str(log)], torch_version=None, workers=1).incidents
        if not any(i.signature == sig or i.cls == cls for i in found):
            unread.append(f"{sig}: {line[:80]}")
    assert unread == []
