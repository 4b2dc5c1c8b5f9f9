"""The prefilter run by GNU grep gives the Python passes' candidates, byte for byte, and
falls back to them whenever grep is missing, untrusted, not GNU's, or fails midway."""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
import tracemalloc
from pathlib import Path

import msgspec
import pytest

from gpu_audit.explain import explain_sources, grepscan, parallel
from gpu_audit.explain.render import to_document
from gpu_audit.explain.scanner import (
    BLOCK_SIZE,
    KEYS,
    MAX_CARRY,
    PREFILTER,
    BlockScanner,
    Candidate,
    scan_chunks,
)
from gpu_audit.explain.signatures import SIGNATURES

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIXTURE_LOGS = sorted(p for p in FIXTURES.rglob("*") if p.is_file())
GREP = grepscan.find_grep()
needs_grep = pytest.mark.skipif(GREP is None, reason="no trusted GNU grep here")


def python_candidates(path: Path) -> list[Candidate]:
    with open(path, "rb") as handle:
        return list(scan_chunks(iter(lambda: handle.read(BLOCK_SIZE), b"")))


def grep_candidates(path: Path) -> tuple[list[Candidate], list[int]]:
    """The candidates through grep's anchors, and (blocks grep served, blocks it did not)."""
    grep = grepscan.find_grep()  # GREP, or the one a test put in GREP_PATHS
    assert grep is not None
    handle = open(path, "rb")  # noqa: SIM115 - the reader closes it
    reader = grepscan.PreadReader(handle)
    try:
        with grepscan.GrepPrefilter(grep, handle.fileno()) as prefilter:
            found = list(scan_chunks(iter(lambda: reader.read(BLOCK_SIZE), b""),
                                     BlockScanner(prefilter=prefilter)))
    finally:
        reader.close()
    return found, prefilter.blocks


def explain_json(path: Path, **kwargs: object) -> bytes:
    result = explain_sources([str(path)], torch_version="2.3.1", **kwargs)  # type: ignore[arg-type]
    document = to_document(dataclasses.replace(result, elapsed_s=None), tool_version="0",
                           generated_at="now")
    return msgspec.json.encode(document)


def assert_same(path: Path) -> None:
    found, (served, by_python) = grep_candidates(path)
    assert found == python_candidates(path)
    assert served and not by_python, "grep's anchors served no block: nothing was compared"


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def test_every_key_hit_lies_on_a_line_that_holds_one_of_its_anchors() -> None:
    texts = [p.read_bytes() for p in FIXTURE_LOGS]
    texts += [sig.example.encode() for sig in SIGNATURES if sig.example]
    missed = []
    for text in texts:
        for key, pattern in zip(KEYS, PREFILTER, strict=True):
            at = pattern.groupindex.get("at", 0)
            for hit in pattern.finditer(text):
                pos = hit.start(at)
                line = text[text.rfind(b"\n", 0, pos) + 1:(text.find(b"\n", pos) + 1
                                                           or len(text) + 1) - 1]
                if not any(anchor in line for anchor in key.anchors):
                    missed.append((key.pattern[:20], line[:120]))
    assert not missed


def test_every_key_has_anchors_within_one_line() -> None:
    for key in KEYS:
        assert key.anchors and all(b"\n" not in anchor for anchor in key.anchors)


@needs_grep
@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_each_fixture_gives_the_same_candidates_through_grep(path: Path) -> None:
    if not path.stat().st_size:
        pytest.skip("empty")
    assert_same(path)


def _synthetic(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


NOISE = b"step 1234 loss 0.1234 lr 1e-4 tokens/s 12345 indexing errors ahead\n"
SHAPES = {
    "progress-bars": (b"Epoch 1: 45%|####  | 45/100\r" * 30 + b"RuntimeError: CUDA error: an "
                      b"illegal memory access was encountered\n") * 20 + NOISE * 100,
    "not-utf8": NOISE * 50 + b"\xff\xfe\x00 torch.OutOfMemoryError: CUDA out of \xc3memory\n"
                + NOISE * 50,
    "no-trailing-newline": NOISE * 40 + b"RuntimeError: CUDA error\nexit status 137\nMemoryErr"
                           b"or",
    "error-at-line-ends": NOISE * 10 + b"NCCL error\nsome Error\r\nCUDA errors\nrror\n"
                          b"Error:\x00\nfoo rror\xff\n" + NOISE * 10 + b"ends in rror",
    "killed-first-line": "Убито\n".encode() + NOISE * 3 + "[1]+  48211 Getötet    python x\n"
                         .encode() + NOISE * 3 + "Убито".encode(),
    "wrapped-exit-status": NOISE * 30 + b"Process exited with status code:\n   137\nreturn"
                           b"code =\r\n\t-9\nexited with a code 137x\n" + NOISE * 30,
    "table": NOISE * 5 + b"| Processes:                 |\n|  GPU  PID  Type  Process name |\n"
             b"|    0  4242  C  python  79000MiB |\n+-----------------+\n" + NOISE * 5,
    "overlapping-anchors": NOISE + b"NCCL error: unhandled\nProcess 12 has 3.0 GiB memory in "
                           b"use\nGPU 0 has a total capacity of 79 GiB\nCUDAError\n"
                           b"NCCL INFO init.cc:1234 -> 3\n(according to CUDA): 0 bytes\n",
    "long-line": NOISE * 10 + b"x" * (MAX_CARRY + 5000) + b" CUDA error: out of memory "
                 + b"y" * (3 * MAX_CARRY) + b" Killed\n" + NOISE * 10 + b"Xid 79\n",
    "flood": b"[E ProcessGroupNCCL.cpp:607] Watchdog caught collective operation timeout\n"
             * 40_000,
}


@needs_grep
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_synthetic_shapes_give_the_same_candidates_and_json(tmp_path: Path, name: str,
                                                            monkeypatch) -> None:
    path = _synthetic(tmp_path, f"{name}.log", SHAPES[name])
    found, _ = grep_candidates(path)
    assert found == python_candidates(path)
    through_grep = explain_json(path, workers=1)
    monkeypatch.setattr(grepscan, "GREP_PATHS", ())
    assert explain_json(path, workers=1) == through_grep


@needs_grep
def test_blocks_full_of_lines_at_block_boundaries(tmp_path: Path) -> None:
    # failures every few KiB over many blocks: lines cut by blocks, wrapped numbers across them
    chunk = (NOISE * 150 + b"exit status:\n 137\nRuntimeError: boom\n| Processes: |\n| 0 4242 |"
             b"\nNVRM: Xid 79\n")
    path = _synthetic(tmp_path, "blocks.log", chunk * (3 * BLOCK_SIZE // len(chunk) + 7))
    assert_same(path)


@needs_grep
def test_a_file_above_the_parallel_threshold_reads_as_the_workers_read_it(
        tmp_path: Path, monkeypatch) -> None:
    chunk = NOISE * 997 + b"RuntimeError: CUDA error: an illegal memory access\n"
    path = _synthetic(tmp_path, "big.log", chunk * 40)
    through_grep = explain_json(path, workers=2)
    monkeypatch.setattr(grepscan, "GREP_PATHS", ())
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(parallel, "RANGE_BYTES", 200_000)
    assert explain_json(path, workers=2) == through_grep


@needs_grep
def test_a_flood_of_anchors_is_scanned_by_the_python_passes_in_flat_memory(
        tmp_path: Path) -> None:
    # 2.5 million anchors ("return" without an exit code after it: no candidate), and a flood
    # of candidates in one block: the blocks are scanned by the Python passes, grep's output
    # for them is skipped unread
    data = (b"return value\n" * 2_500_000
            + b"RuntimeError: CUDA error: an illegal memory access was encountered\n" * 5_000)
    path = _synthetic(tmp_path, "flood.log", data)
    tracemalloc.start()
    result = explain_sources([str(path)], torch_version=None, workers=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.inputs[0].engine.startswith("grep") and "; 0 by" not in result.inputs[0].engine
    assert result.incidents[0].count == 5_000
    assert peak < 40e6, f"peak {peak / 1e6:.1f} MB"
    found, (_, by_python) = grep_candidates(path)
    assert by_python and found == python_candidates(path)


@needs_grep
def test_grep_ends_on_a_line_longer_than_its_memory_and_the_python_passes_go_on(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(grepscan, "GREP_MEMORY", 48 << 20)
    data = NOISE * 100 + b"x" * (40 << 20) + b" Killed\n" + NOISE * 100 + b"NVRM: Xid 79\n"
    path = _synthetic(tmp_path, "long.log", data)
    found, (served, by_python) = grep_candidates(path)
    assert found == python_candidates(path)
    assert by_python and not served  # grep ended in the line: no block was vouched for


@needs_grep
def test_a_flood_of_anchors_costs_about_what_the_python_passes_cost(tmp_path: Path) -> None:
    # grep writes each anchor as found (a system call each); reading 2.5 million of them took
    # 14-28 s (the Python passes: 0.2 s). A block with too many is left to the Python passes,
    # and a new grep starts after it: 0.4-2 s. Wall time: grep's time counts.
    path = _synthetic(tmp_path, "flood.log", b"return value\n" * 2_500_000)
    started = time.perf_counter()
    result = explain_sources([str(path)], torch_version=None, workers=1)
    spent = time.perf_counter() - started
    assert result.inputs[0].lines == 2_500_000 and not result.incidents
    assert spent < 10, f"{spent:.1f} s"


@needs_grep
def test_after_a_flooded_block_a_new_grep_serves_the_next_ones(tmp_path: Path) -> None:
    chunk = NOISE * 150 + b"exit status:\n 137\nRuntimeError: boom\nNVRM: Xid 79\n"
    data = (b"return value\n" * 5_000 + chunk * (BLOCK_SIZE // len(chunk) + 3)
            + b"NCCL error\n" * 5_000 + chunk * (2 * BLOCK_SIZE // len(chunk)))
    path = _synthetic(tmp_path, "mixed.log", data)
    found, (served, by_python) = grep_candidates(path)
    assert found == python_candidates(path)
    assert served >= 2 and by_python == 2


def _script(folder: Path, body: str, mode: int = 0o755) -> str:
    path = folder / "grep"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(mode)
    return str(path)


@needs_grep
@pytest.mark.parametrize("case", ["missing", "world-writable", "not-gnu", "relative"])
def test_without_a_trusted_gnu_grep_the_python_passes_run(tmp_path: Path, monkeypatch,
                                                         case: str) -> None:
    assert GREP is not None
    path = _synthetic(tmp_path, "x.log", SHAPES["wrapped-exit-status"])
    expected = explain_json(path, workers=1)
    folder = tmp_path / "bin"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    grep = {
        "missing": str(folder / "grep"),
        "world-writable": _script(folder, f'exec {GREP} "$@"\n', mode=0o777),
        "not-gnu": _script(folder, 'echo "grep (BSD grep) 2.6.0"; exit 0\n'),
        "relative": "grep",
    }[case]
    monkeypatch.setattr(grepscan, "GREP_PATHS", (grep,))
    assert grepscan.find_grep() is None
    result = explain_sources([str(path)], torch_version="2.3.1", workers=1)
    assert result.inputs[0].engine == "python"
    assert explain_json(path, workers=1) == expected


@needs_grep
@pytest.mark.parametrize("ending", ["exit 2", "kill -9 $$", "exit 0"])
def test_a_grep_that_fails_midway_changes_nothing(tmp_path: Path, monkeypatch,
                                                  ending: str) -> None:
    # grep answers as GNU grep, prints the anchors of the first few MiB, then fails (or stops
    # without a word in the middle of a line); the blocks it did not vouch for are scanned by
    # the Python passes.
    assert GREP is not None
    chunk = NOISE * 150 + b"exit status:\n 137\nRuntimeError: boom\nNVRM: Xid 79\n"
    path = _synthetic(tmp_path, "x.log", chunk * (6 * BLOCK_SIZE // len(chunk)))
    folder = tmp_path / "bin"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    # (after "exit 0", the line cut in its middle tells)
    cut = "head -c 50000" if ending != "exit 0" else (
        "awk 'NR < 4000 { print } NR == 4000 { printf \"%s\", substr($0, 1, 3); exit }'")
    grep = _script(folder, f'case "$1" in --version) exec {GREP} --version;; esac\n'
                           f'{GREP} "$@" | {cut}\n{ending}\n')
    monkeypatch.setattr(grepscan, "GREP_PATHS", (grep,))
    assert grepscan.find_grep() == grep
    found, (served, by_python) = grep_candidates(path)
    assert served and by_python
    assert found == python_candidates(path)
    expected = explain_json(path, workers=1)
    monkeypatch.setattr(grepscan, "GREP_PATHS", ())
    assert explain_json(path, workers=1) == expected


@needs_grep
@pytest.mark.parametrize("output", ["5:not an anchor", "five:Xid", "9:Xid\n3:Xid"])
def test_output_that_is_not_grep_s_changes_nothing(tmp_path: Path, monkeypatch,
                                                   output: str) -> None:
    assert GREP is not None
    path = _synthetic(tmp_path, "x.log", SHAPES["overlapping-anchors"] + b"NVRM: Xid 79\n")
    folder = tmp_path / "bin"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    grep = _script(folder, f'case "$1" in --version) exec {GREP} --version;; esac\n'
                           f"printf '{output}\\n'\n")
    monkeypatch.setattr(grepscan, "GREP_PATHS", (grep,))
    found, (served, _) = grep_candidates(path)
    assert found == python_candidates(path) and not served


def test_stdin_and_compressed_logs_use_the_python_passes(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "x.log.gz"
    path.write_bytes(gzip.compress(SHAPES["wrapped-exit-status"]))
    result = explain_sources([str(path)], torch_version=None, workers=1)
    assert result.inputs[0].engine == "python"


def test_the_grep_pattern_list_is_derived_from_the_keys() -> None:
    patterns = grepscan.grep_patterns().split(b"\n")[:-1]
    assert len(patterns) == sum(len(grepscan.searched(key)) for key in KEYS)
    assert b"rror([^s]|$)" in patterns and b"NCCL\\(" in patterns


def test_an_anchor_that_holds_another_of_its_key_is_not_searched() -> None:
    # "driver is too old" holds "is too old", an anchor of the same key: its lines are found
    patterns = grepscan.grep_patterns().split(b"\n")[:-1]
    assert b"is too old" in patterns and b"driver is too old" not in patterns
    assert len(patterns) < sum(len(key.anchors) for key in KEYS)
    for key in KEYS:  # every anchor's lines are still found by one searched of its own key
        kept = grepscan.searched(key)
        assert all(any(other in anchor for other in kept) for anchor in key.anchors)


def test_an_anchor_that_may_hide_another_runs_both_keys() -> None:
    masks = grepscan.anchor_masks()
    index = {key.pattern: i for i, key in enumerate(KEYS)}
    rror = 1 << index[rb"rror(?!s)"]
    assert masks[b"NCCL error"] & rror  # grep -o prints "NCCL error", not its "rror "
    assert not masks[b"Xid"] & rror


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("grep") is None, reason="needs root")
def test_the_running_users_own_grep_in_a_private_folder_is_trusted(tmp_path: Path,
                                                                    monkeypatch) -> None:
    folder = tmp_path / "bin"
    folder.mkdir(mode=0o755)
    grep = folder / "grep"
    shutil.copy(shutil.which("grep"), grep)  # type: ignore[arg-type]
    grep.chmod(0o755)
    monkeypatch.setattr(grepscan, "GREP_PATHS", (str(grep),))
    assert grepscan.find_grep() == (str(grep) if GREP else None)
