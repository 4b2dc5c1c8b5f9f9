"""Inputs that are not what they seem: FIFOs never block, devices are refused where a file is
meant, sizes and decompressed sizes are capped, each with a one-line error and exit 3."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit import inputs
from gpu_audit.errors import InputError
from gpu_audit.explain import sources

COMMANDS = {
    "scan --config": ["scan", "--no-report", "--config"],
    "scan --from": ["scan", "--no-report", "--from"],
    "check --policy": ["check", "--no-report", "--policy"],
    "check --from": ["check", "--no-report", "--from"],
    "snapshot": ["snapshot", "--no-report"],
}


def gpu_audit(args: list[str], env: dict, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60, **kwargs)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_or_dev_zero_where_a_file_is_meant_is_exit_3_at_once(command, cli_env, tmp_path):
    fifo = tmp_path / "input.pipe"
    os.mkfifo(fifo)
    for target in (str(fifo), "/dev/zero"):
        started = time.monotonic()
        result = gpu_audit([*COMMANDS[command], target], cli_env, tmp_path)
        assert result.returncode == 3, (target, result.stderr)
        assert re.search("a regular file is needed|not a file", result.stderr), result.stderr
        assert "Traceback" not in result.stderr
        assert time.monotonic() - started < 30


def test_explain_refuses_a_device_and_reads_a_fifo_without_a_writer_as_empty(cli_env, tmp_path):
    refused = gpu_audit(["explain", "/dev/zero"], cli_env, tmp_path)
    assert refused.returncode == 3
    assert "character device" in refused.stderr
    fifo = tmp_path / "log.pipe"
    os.mkfifo(fifo)
    empty = gpu_audit(["explain", str(fifo)], cli_env, tmp_path)
    assert empty.returncode == 0, empty.stderr
    assert "No known GPU failure signature" in empty.stdout


def test_a_file_over_its_limit_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "policy.toml"
    big.write_bytes(b"#" * 2048)
    with pytest.raises(InputError, match=r"more than a configuration file may hold"):
        inputs.read_input(big, limit=1024, what="configuration file")
    assert inputs.read_input(big, limit=4096) == b"#" * 2048


def test_config_files_past_the_cap_are_a_clean_config_error(cli_env, tmp_path):
    big = tmp_path / "gpu-audit.toml"
    with open(big, "wb") as handle:
        handle.truncate(inputs.CONFIG_LIMIT + 1)  # sparse: costs no disk
    result = gpu_audit(["scan", "--no-report", "--config", str(big)], cli_env, tmp_path)
    assert result.returncode == 3
    assert "configuration file may hold" in result.stderr


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress],
                         ids=["gzip", "bzip2", "xz"])
def test_decompressed_size_is_capped(compress, tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "DECOMPRESSED_LIMIT", 1 << 20)
    bomb = tmp_path / "train.log.bin"
    bomb.write_bytes(compress(b"\0" * (4 << 20)))
    stream, kind = sources.open_log(str(bomb))
    with pytest.raises(InputError, match=rf"more than 1\.0 MiB once {kind}-decompressed"):
        for _ in sources.read_chunks(str(bomb), stream, kind):
            pass
    fine = tmp_path / "fine.log.bin"
    fine.write_bytes(compress(b"CUDA out of memory\n" * 100))
    stream, kind = sources.open_log(str(fine))
    assert b"".join(sources.read_chunks(str(fine), stream, kind)).count(b"\n") == 100


def test_stdin_is_capped(monkeypatch):
    monkeypatch.setattr(sources, "STREAM_LIMIT", 1000)
    stream, kind = sources.open_log("-", io.BytesIO(b"x\n" * 1000))
    with pytest.raises(InputError, match="from a pipe"):
        for _ in sources.read_chunks("-", stream, kind):
            pass


def test_a_large_cap_sets_no_memory_aside(tmp_path: Path) -> None:
    """Reading a small file under a cap of many GiB works with little address space."""
    small = tmp_path / "small.json"
    small.write_text("{}")
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30));"
            "from gpu_audit.inputs import read_input;"
            f"print(read_input({str(small)!r}, limit=64 << 30))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "b'{}'"
