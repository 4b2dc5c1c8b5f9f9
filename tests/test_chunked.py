"""``gpu_audit.chunked_map``: a long encoding job that dies half-way resumes at the next chunk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import gpu_audit
from gpu_audit.chunked import chunked_map
from gpu_audit.errors import InputError

REPO = Path(__file__).resolve().parent.parent


class Encoder:
    """Doubles numbers; remembers which items it saw; can be told to die at some chunk."""

    def __init__(self, die_at_chunk: int | None = None) -> None:
        self.seen: list[int] = []
        self.chunks = 0
        self.die_at_chunk = die_at_chunk

    def __call__(self, chunk: list[int]) -> list[int]:
        if self.die_at_chunk is not None and self.chunks == self.die_at_chunk:
            raise RuntimeError("the machine went away")
        self.chunks += 1
        self.seen.extend(chunk)
        return [2 * x for x in chunk]


def test_results_come_back_in_order_with_one_file_per_chunk(tmp_path: Path) -> None:
    encoder = Encoder()
    result = chunked_map(encoder, range(25), state_dir=tmp_path, chunk_size=10)
    assert result == [2 * x for x in range(25)]
    assert sorted(p.name for p in tmp_path.glob("chunk-*")) == [
        "chunk-000000.pkl", "chunk-000001.pkl", "chunk-000002.pkl"]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["count"] == 25 and manifest["chunks"] == 3


def test_a_crash_resumes_at_the_next_chunk_without_redoing_work(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="went away"):
        chunked_map(Encoder(die_at_chunk=2), range(50), state_dir=tmp_path, chunk_size=10)
    assert len(list(tmp_path.glob("chunk-*"))) == 2
    second = Encoder()
    result = chunked_map(second, range(50), state_dir=tmp_path, chunk_size=10)
    assert result == [2 * x for x in range(50)]
    assert second.seen == list(range(20, 50))  # chunks 0 and 1 were loaded, not recomputed


def test_kill_9_mid_job_then_rerun_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """A real ``kill -9`` while chunk files are being written."""
    script = textwrap.dedent(f"""
        import os, signal, sys, time
        sys.path.insert(0, {str(REPO)!r})
        from gpu_audit.chunked import chunked_map
        log = open({str(tmp_path / 'calls.txt')!r}, 'a')
        def encode(chunk):
            log.write(f"{{chunk[0]}}\\n"); log.flush()
            if chunk[0] == 60 and os.environ.get("DIE"):
                os.kill(os.getpid(), signal.SIGKILL)
            return [x * x for x in chunk]
        out = chunked_map(encode, list(range(100)), state_dir={str(tmp_path / 'state')!r},
                          chunk_size=10)
        print(sum(out))
    """)
    env = dict(os.environ, DIE="1")
    first = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=60)
    assert first.returncode == -9
    env.pop("DIE")
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert int(second.stdout) == sum(x * x for x in range(100))
    calls = [int(line) for line in (tmp_path / "calls.txt").read_text().split()]
    # First run: chunks 0..60 (killed inside 60); second run: 60..90 only.
    assert calls == [0, 10, 20, 30, 40, 50, 60, 60, 70, 80, 90]
    assert not list((tmp_path / "state").glob(".*.tmp"))  # no half-written chunk left


def test_changed_input_is_refused_not_mixed_with_old_chunks(tmp_path: Path) -> None:
    chunked_map(Encoder(), range(30), state_dir=tmp_path, chunk_size=10)
    with pytest.raises(InputError, match="different job"):
        chunked_map(Encoder(), range(1, 31), state_dir=tmp_path, chunk_size=10)
    with pytest.raises(InputError, match="chunk_size"):
        chunked_map(Encoder(), range(30), state_dir=tmp_path, chunk_size=5)


def test_tensor_chunks_combine_and_the_cache_can_be_dropped(tmp_path: Path, torch: Any) -> None:
    def embed(chunk: list[int]) -> torch.Tensor:
        return torch.tensor(chunk, dtype=torch.float32).unsqueeze(1).repeat(1, 4)

    state = tmp_path / "embeddings"
    result = chunked_map(embed, list(range(23)), state_dir=state, chunk_size=8,
                         combine=torch.cat, codec="torch", keep_chunks=False)
    assert result.shape == (23, 4)
    assert torch.equal(result[:, 0], torch.arange(23, dtype=torch.float32))
    assert not state.exists()


def test_oom_in_a_chunk_splits_it_into_halves(tmp_path: Path, torch: Any) -> None:
    sizes: list[int] = []

    def encode(chunk: list[int]) -> list[int]:
        sizes.append(len(chunk))
        if len(chunk) > 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return [x + 1 for x in chunk]

    result = chunked_map(encode, range(16), state_dir=tmp_path, chunk_size=16, oom_retries=3,
                         oom_backoff_s=0)
    assert result == [x + 1 for x in range(16)]
    assert sizes == [16, 8, 4, 4, 4, 4]


def test_fn_must_return_one_result_per_item(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="returned 1 results for 10 items"):
        chunked_map(lambda chunk: [sum(chunk)], range(10), state_dir=tmp_path, chunk_size=10)


def test_exported_lazily_from_the_package() -> None:
    assert gpu_audit.chunked_map is chunked_map
