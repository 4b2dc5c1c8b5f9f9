"""Real child processes that publish through gpu_audit.monitor (see ``tests.monitor.child``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class Child:
    """A running ``tests.monitor.child`` process."""

    def __init__(self, runtime_dir: Path, *args: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        env["GPU_AUDIT_RUNTIME_DIR"] = str(runtime_dir)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.monitor.child", *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        line = self.proc.stdout.readline()
        if not line.startswith("ready "):
            self.proc.kill()
            raise AssertionError(f"child did not start: {line!r} {self.proc.stderr.read()}")
        self.path = Path(line.split(" ", 1)[1].strip())
        self.pid = self.proc.pid

    def readline(self) -> str:
        return self.proc.stdout.readline().strip()

    def finish(self) -> int:
        """Let it exit normally (atexit runs)."""
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
