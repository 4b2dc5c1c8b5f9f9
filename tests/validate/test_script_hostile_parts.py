"""What a command can put where ``validate -- COMMAND``'s supervisor reads, piece by piece: its
streams folder (FIFOs, devices, links, other users' files, endless or malformed lines) and its
output (endless lines, markers cut between reads, more than the stage log keeps)."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from gpu_audit.validate.script import output, streams
from gpu_audit.validate.script.hook import MARKER
from gpu_audit.validate.script.output import OutputLines, StageLog, log_limit
from gpu_audit.validate.script.streams import (
    Cycles,
    StreamFolderError,
    StreamReader,
    clean_record,
    open_streams_folder,
)

OTHER_UID = 4242
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (chown, mknod)")


def folder(tmp_path: Path) -> Path:
    path = tmp_path / "streams"
    path.mkdir(mode=0o700)
    return path


def line(record: dict) -> str:
    return json.dumps(record) + "\n"


# -- the streams folder ---------------------------------------------------------------------


def test_a_fifo_a_socket_and_a_link_to_dev_zero_are_skipped_without_blocking(tmp_path):
    path = folder(tmp_path)
    os.mkfifo(path / "rank-1.jsonl")  # opened for reading without a writer, open() would wait
    os.symlink("/dev/zero", path / "rank-2.jsonl")  # read to its end, it never ends
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path / "rank-3.jsonl"))
    (path / "rank-0.jsonl").write_text(line({"n": 0, "src": "monitor", "t": 1.0}))
    reader = StreamReader(path)
    result: list = []
    thread = threading.Thread(target=lambda: result.extend(reader.read()), daemon=True)
    thread.start()
    thread.join(10)
    server.close()
    assert not thread.is_alive(), "the reader blocked on an entry of the streams folder"
    assert result == [("rank-0", {"n": 0, "src": "monitor", "t": 1.0})]
    (note,) = reader.notes()
    assert "3 entries that gpu-audit does not read" in note
    for name, kind in (("rank-1", "a FIFO"), ("rank-2", "a symbolic link"),
                       ("rank-3", "a socket")):
        assert f"{name}.jsonl ({kind})" in note
    assert reader.read() == []  # skipped once, not opened again
    assert len(reader.notes()) == 1


@root_only
def test_another_users_file_a_hard_link_and_a_device_are_not_read(tmp_path):
    path = folder(tmp_path)
    theirs = path / "rank-1.jsonl"
    theirs.write_text(line({"n": 0}))
    os.chown(theirs, OTHER_UID, OTHER_UID)
    secret = tmp_path / "elsewhere.jsonl"
    secret.write_text(line({"n": 5}))
    os.link(secret, path / "rank-2.jsonl")
    os.mknod(path / "rank-3.jsonl", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero
    reader = StreamReader(path)
    assert reader.read() == []
    (note,) = reader.notes()
    assert f"rank-1.jsonl (owned by uid {OTHER_UID}" in note
    assert "rank-2.jsonl (a file with other names (hard links))" in note
    assert "rank-3.jsonl (a character device)" in note


def test_the_streams_folder_must_be_a_private_folder_of_this_user(tmp_path):
    good = tmp_path / "made"
    fd = open_streams_folder(good)  # made by it, mode 0700
    os.close(fd)
    assert stat.S_IMODE(good.stat().st_mode) == 0o700
    shared = folder(tmp_path)
    shared.chmod(0o777)
    with pytest.raises(StreamFolderError, match="is writable by group or others"):
        open_streams_folder(shared)
    link = tmp_path / "link"
    link.symlink_to(good)
    with pytest.raises(StreamFolderError, match="is a symbolic link: name the real folder"):
        open_streams_folder(link)
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, OTHER_UID, OTHER_UID)
        with pytest.raises(StreamFolderError, match=f"owned by uid {OTHER_UID}"):
            open_streams_folder(theirs)


def test_a_streams_folder_under_a_folder_another_user_may_change_is_refused(tmp_path):
    """The folders above it count too: whoever may rename entries of a parent could swap the
    whole branch the streams are read from."""
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)  # writable by all and not sticky
    with pytest.raises(StreamFolderError, match=f"{parent} is writable by group or others"):
        open_streams_folder(parent / "streams")
    assert not (parent / "streams").exists()  # refused before anything was made there
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o755)
        os.chown(theirs, OTHER_UID, OTHER_UID)
        with pytest.raises(StreamFolderError, match=f"{theirs} is owned by uid {OTHER_UID}"):
            open_streams_folder(theirs / "streams")


def test_a_folder_swapped_in_after_opening_is_not_what_is_read(tmp_path):
    """The folder is read by descriptor: the command renaming it away and putting a link in
    its place changes nothing."""
    path = folder(tmp_path)
    (path / "rank-0.jsonl").write_text(line({"n": 0}))
    reader = StreamReader(path)
    path.rename(tmp_path / "moved")
    (tmp_path / "x").mkdir()
    elsewhere = folder(tmp_path / "x")
    (elsewhere / "rank-0.jsonl").write_text(line({"n": 99}))
    path.symlink_to(elsewhere)
    assert reader.read() == [("rank-0", {"n": 0})]


# -- stream lines ---------------------------------------------------------------------------


def test_deep_nesting_long_lines_and_junk_are_counted_not_fatal(tmp_path):
    path = folder(tmp_path)
    lines = ["[" * 50_000, '{"n": ' * 10_000, "[" * 1_000_000, "x" * 200_000, "not json",
             "[1, 2]", '"text"', line({"n": 1, "src": "optimizer"}).strip()]
    (path / "rank-0.jsonl").write_text("\n".join(lines) + "\n")
    reader = StreamReader(path)
    assert list(reader.records(final=True)) == [("rank-0", {"n": 1, "src": "optimizer"})]
    (note,) = reader.notes()
    assert "rank-0: 7 lines skipped as not telemetry" in note
    assert "5 not a JSON object of bounded size and nesting" in note
    assert "2 longer than 64 KiB" in note


def test_a_long_line_arriving_in_pieces_is_skipped_and_the_next_one_read(tmp_path, monkeypatch):
    monkeypatch.setattr(streams, "READ_CHUNK_BYTES", 1000)
    path = folder(tmp_path)
    stream = path / "rank-0.jsonl"
    stream.write_text('{"n": 0}\n{"n": 1')  # a half-written line waits for its end
    reader = StreamReader(path)
    assert reader.read() == [("rank-0", {"n": 0})]
    with open(stream, "a") as handle:
        handle.write("}\n" + "y" * 100_000)
    assert reader.read() == [("rank-0", {"n": 1})]
    assert list(reader.records(final=True)) == []
    assert len(reader.streams["rank-0"].partial) == 0  # the long line is never held
    with open(stream, "a") as handle:
        handle.write('\n{"n": 2}\n')
    assert list(reader.records(final=True)) == [("rank-0", {"n": 2})]
    assert "1 longer than 64 KiB" in reader.notes()[0]


def test_a_stream_is_read_up_to_its_cap_then_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(streams, "MAX_STREAM_BYTES", 4096)
    monkeypatch.setattr(streams, "READ_CHUNK_BYTES", 1024)
    path = folder(tmp_path)
    text = "".join(line({"n": n}) for n in range(1000))
    (path / "rank-0.jsonl").write_text(text)
    reader = StreamReader(path)
    got = list(reader.records(final=True))
    assert 0 < len(got) < 1000 and reader.streams["rank-0"].offset == 4096
    (note,) = reader.notes()
    assert f"{len(text) - 4096} bytes past them were not" in note


def test_records_keep_only_the_hooks_fields_of_their_types():
    assert clean_record([1]) is None
    record = clean_record({"n": 3, "src": "monitor", "t": 1.5, "cycle_s": float("nan"),
                           "rss_bytes": True, "reserved_bytes": 10**30, "junk": "x" * 10_000,
                           "first": "yes", "ev": "x" * 5000,
                           "device": {"name": 7, "total_memory_bytes": 80,
                                      "allocator_settings": {
                                          "max_split_size": 512, "expandable_segments": True,
                                          "roundup_power2_divisions": {"1": 0, "2": [4]},
                                          "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}}})
    assert record == {"n": 3, "src": "monitor", "t": 1.5, "first": False, "ev": "x" * 512,
                      "device": {"total_memory_bytes": 80, "allocator_settings": {
                          "max_split_size": 512, "expandable_segments": True,
                          "roundup_power2_divisions": {"1": 0, "2": None},
                          "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512"}}}
    assert clean_record({"n": -1}) == {} and clean_record({"n": 2.0}) == {}


def test_cycles_that_never_close_stay_bounded(monkeypatch):
    monkeypatch.setattr(streams, "MAX_PENDING_CYCLES", 100)
    written: list[int] = []
    cycles = Cycles({}, cycle_pattern=None, metrics={}, emit=lambda r: written.append(r["cycle"]),
                    restart=lambda reason: None, outside=dict, started=0.0)
    cycles.marker(f"{MARKER}rank-0 monitor 0")  # markers are seen: cycles wait for theirs
    for n in range(1000):
        cycles.stream("rank-0", {"n": n, "src": "monitor", "t": float(n)}, 0.0)
        cycles.stream("rank-1", {"n": 10_000 + n, "src": "monitor"}, 0.0)
    assert len(cycles.pending) <= 100 and len(cycles.ranks["rank-1"]) <= 100
    assert written == sorted(written) and len(written) >= 900


# -- the command's output -------------------------------------------------------------------


def test_markers_are_taken_out_even_when_a_read_cuts_them():
    split = OutputLines()
    text = f"loss=1 {MARKER}rank-0 optimizer 3\nnext\n".encode()
    log, lines = b"", []
    for i in range(len(text)):  # one byte per read: every possible cut
        part, found = split.feed(text[i:i + 1])
        log += part
        lines += found
    assert log == b"loss=1 \nnext\n"
    assert lines == [("loss=1 ", False), (f"{MARKER}rank-0 optimizer 3", True), ("next", False)]


def test_a_long_line_costs_linear_time_and_its_patterns_see_its_start():
    split = OutputLines(scan_bytes=1000)
    chunk = b"x" * 65536
    began = time.perf_counter()
    logged = 0
    for _ in range(160):  # a 10 MiB line
        part, found = split.feed(chunk)
        logged += len(part)
        assert not found
    part, found = split.feed(f" loss=9{MARKER}rank-0 monitor 0\nshort\n".encode())
    took = time.perf_counter() - began
    logged += len(part)
    assert logged == 160 * 65536 + len(" loss=9\nshort\n")
    assert found[0] == ("x" * 1000, False) and found[1][1] and found[2] == ("short", False)
    assert split.long_lines == 1 and split.unscanned == 160 * 65536 + 7 - 1000
    assert took < 5, f"{took:.1f} s for a 10 MiB line"


def test_the_stage_log_keeps_its_head_and_tail_and_says_what_it_left_out(tmp_path):
    path = tmp_path / "log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    log = StageLog(fd, limit=4000)
    for i in range(1000):
        log.write(f"line {i:04d}\n".encode())  # 10 bytes each: 10000 in all
    log.settle()
    log.write(b"after the rerun\n")
    log.close()
    log.write(b"too late\n")
    os.close(fd)
    text = path.read_text()
    assert text.startswith("line 0000\n") and "line 0299\n" in text and "line 0300" not in text
    assert "\n[gpu-audit: 6000 bytes of the command's output left out here" in text
    assert text.endswith("line 0999\nafter the rerun\n")
    assert "line 0900" in text and "too late" not in text
    assert "printed 10025 bytes" in log.note() and "6009 bytes were left out" in log.note()


def test_a_request_for_stacks_writes_the_tail_and_what_follows(tmp_path):
    path = tmp_path / "log"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    log = StageLog(fd, limit=4000)
    log.write(b"a" * 10_000)
    log.spill()
    log.write(b"Thread 0x1 (most recent call first):\n")
    log.flush()
    assert path.read_bytes().endswith(b"a" * 1000 + b"Thread 0x1 (most recent call first):\n")
    for _ in range(10):
        log.spill()
    assert log.spills == output.MAX_SPILLS
    os.close(fd)


def test_the_log_cap_variable():
    assert log_limit(None) == (output.LOG_MAX_BYTES, None)
    assert log_limit("1048576") == (1048576, None)
    for bad in ("12", "1e9", "٣٣٣٣٣٣٣", "9" * 40):
        limit, note = log_limit(bad)
        assert limit == output.LOG_MAX_BYTES and note and "GPU_AUDIT_SCRIPT_LOG_MAX_BYTES" in note
