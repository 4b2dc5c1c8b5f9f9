"""stderr messages: one line in a log, wrapped between words on a terminal."""

from __future__ import annotations

import os
import subprocess
import sys

MESSAGE = "diag level 1 on 3 GPUs: about 13 s; each test may take up to 120 s --device-flag-x"
SCRIPT = f"from gpu_audit.cli.app import err; err({MESSAGE!r})"


def run(stderr_tty: bool) -> str:
    env = {**os.environ, "COLUMNS": "40"}
    if not stderr_tty:
        return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                              text=True, check=True).stderr
    leader, follower = os.openpty()
    try:
        subprocess.run([sys.executable, "-c", SCRIPT], env=env, stderr=follower, check=True)
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode().replace("\r\n", "\n")
    finally:
        os.close(leader)


def test_a_log_gets_one_line():
    assert run(stderr_tty=False) == f"gpu-audit: {MESSAGE}\n"


def test_a_terminal_gets_lines_within_its_width_broken_between_words():
    lines = run(stderr_tty=True).splitlines()
    assert len(lines) > 1 and all(len(line) <= 40 for line in lines)
    assert all(line.startswith("    ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == f"gpu-audit: {MESSAGE}"
