"""Pickles that are small on disk but stand for huge data (memo bombs) are refused quickly.

A memo reference costs two bytes in the file and a whole shared subtree to whoever walks the
result; ``set(list)`` copies its list once per reference. Both must fail with exit 3 in well
under a few seconds, within a bounded amount of memory, whatever the file says.
"""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit.errors import InputError
from gpu_audit.plain_pickle import PickleTooLargeError, expanded_items
from gpu_audit.snapshot import loads_snapshot

MEMORY_CAP_KIB = 1024 * 1024  # 1 GiB resident at most


def snapshot_shaped_bomb(width: int = 6000) -> bytes:
    """``{"segments": [seg] * width}`` where ``seg["blocks"]`` is ``[block] * width``: 36
    million blocks to summarise from a ~25 KB file (pickle memoises the shared objects)."""
    block = {"address": 0, "size": 512, "requested_size": 512, "state": "active_allocated",
             "frames": []}
    segment = {"device": 0, "address": 0, "total_size": 512 * width, "allocated_size": 0,
               "active_size": 512 * width, "segment_type": "large", "stream": 0,
               "blocks": [block] * width}
    return pickle.dumps({"segments": [segment] * width}, protocol=4)


def set_copy_bomb(copies: int = 20000, length: int = 16000) -> bytes:
    """``[set(L)] * copies`` built afresh each time from one memoised list of ``length`` ints."""
    out = io.BytesIO()
    w = out.write
    w(b"\x80\x02]\x94(")
    w(b"".join(b"J" + i.to_bytes(4, "little") for i in range(length)))
    w(b"e0c__builtin__\nset\n\x94](")
    w(b"h\x01h\x00\x85R" * copies)
    w(b"e.")
    return out.getvalue()


def nested_bomb(levels: int = 20, width: int = 30) -> bytes:
    """A list holding the previous level ``width`` times, ``levels`` deep: 30**20 items."""
    out = io.BytesIO()
    w = out.write
    w(b"\x80\x04]\x94")
    for level in range(1, levels):
        w(b"]\x94(" + (b"h" + bytes([level - 1])) * width + b"e0")
    w(b"h" + bytes([levels - 1]) + b".")
    return out.getvalue()


@pytest.mark.parametrize("make", [snapshot_shaped_bomb, set_copy_bomb, nested_bomb])
def test_memo_bombs_are_refused_in_process(make):
    data = make()
    assert len(data) < 250_000
    started = time.monotonic()
    with pytest.raises(InputError, match="refusing this pickle"):
        loads_snapshot(data, "bomb.pickle")
    assert time.monotonic() - started < 3


def test_a_cycle_is_refused():
    data = b"\x80\x04]\x94h\x00a."  # a list that contains itself
    with pytest.raises(InputError, match="refers to itself"):
        loads_snapshot(data, "cycle.pickle")


def test_frames_shared_as_pytorch_shares_them_are_fine():
    """torch reuses one dictionary per distinct frame in every stack trace that holds it."""
    frames = [{"filename": "train.py", "line": i, "name": "step"} for i in range(30)]
    events = [{"action": "alloc", "addr": i, "size": 512, "frames": list(frames)}
              for i in range(20_000)]
    data = {"segments": [], "device_traces": [events]}
    assert expanded_items(data, 10**9) > 20_000 * 30 * 7
    assert loads_snapshot(pickle.dumps(data), "real.pickle") == data


def test_expanded_items_counts_shared_references_each_time():
    inner = [1, 2, 3]
    assert expanded_items([inner, inner], 100) == 1 + 2 * 4
    with pytest.raises(PickleTooLargeError):
        expanded_items([inner] * 30, 100)


# Runs a command and reports its peak resident memory (KiB) on stderr's last line.
PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


@pytest.mark.parametrize("make", [snapshot_shaped_bomb, set_copy_bomb])
def test_snapshot_command_refuses_a_memo_bomb_fast(make, tmp_path: Path, cli_env):
    path = tmp_path / "oom.pickle"
    path.write_bytes(make())
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", PEAK_RSS, sys.executable, "-m", "gpu_audit",
                             "snapshot", str(path)],
                            capture_output=True, text=True, env=cli_env, cwd=tmp_path, timeout=60)
    elapsed = time.monotonic() - started
    assert result.returncode == 3, result.stderr[-2000:]
    peak_kib = int(result.stderr.split()[-1])
    assert peak_kib < MEMORY_CAP_KIB
    assert "refusing this pickle" in result.stderr
    assert "Traceback" not in result.stderr
    assert elapsed < 10  # interpreter start-up included, on a loaded runner
