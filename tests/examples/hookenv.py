"""What an administrator installs for the Slurm hooks, made in a test's folder: the shipped
scripts copied unchanged, a settings file (``/etc/default/gpu-audit``'s stand-in), a gpu-audit
command that plays a fake NVIDIA node, and a syslog socket that keeps what the hooks log."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
HOOKS = {"prolog": "slurm-prolog.sh", "epilog": "slurm-epilog.sh",
         "healthcheck": "slurm-healthcheck.sh"}
LIBRARY = "gpu-audit-hook-lib.sh"
# What the fake gpu-audit command carries over from the test's environment (slurmd passes none).
CARRIED = ("PYTHONPATH", "LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO", "NO_COLOR", "HOME")


def install_hooks(folder: Path) -> dict[str, Path]:
    """The shipped scripts as an admin installs them (gpu-audit-<kind>.sh beside the library),
    root's and not writable by others."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / LIBRARY, folder / LIBRARY)
    (folder / LIBRARY).chmod(0o644)
    installed = {}
    for kind, script in HOOKS.items():
        target = folder / f"gpu-audit-{kind}.sh"
        shutil.copy(EXAMPLES / script, target)
        target.chmod(0o755)
        installed[kind] = target
    return installed


def fake_gpu_audit(path: Path, env: Mapping[str, str], transcript: Path | None = None) -> Path:
    """An executable at ``path`` that runs this checkout's gpu-audit against the fake NVML of
    ``env`` (as a venv's console script would run the installed one); with ``transcript``, each
    run's arguments, output and exit code are appended there (for a failing test's message)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    exports = "".join(f"export {k}={shlex.quote(env[k])}\n" for k in CARRIED if k in env)
    run = f"{shlex.quote(sys.executable)} -m gpu_audit \"$@\""
    if transcript is None:
        body = f"exec {run}\n"
    else:
        log = shlex.quote(str(transcript))
        body = (f"out=$({run} 2>&1); rc=$?\n"
                f"printf '%s\\n' \"$* -> $rc: $out\" >> {log}\n"
                "printf '%s\\n' \"$out\"; exit $rc\n")
    path.write_text(f"#!/bin/sh\n{exports}{body}")
    path.chmod(0o755)
    return path


def settings_file(path: Path, **keys: str) -> Path:
    """A settings file of ``GPU_AUDIT*`` keys, 0644 in a folder of its own."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o755)
    path.write_text("# test settings\n" + "".join(f"{k}={v}\n" for k, v in keys.items()))
    path.chmod(0o644)
    return path


class Syslog:
    """A datagram socket standing in for ``/dev/log``: the lines logger sends to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        os.chmod(path, 0o666)
        self.sock.setblocking(False)
        self.lines: list[str] = []

    def read(self) -> list[str]:
        while True:
            try:
                self.lines.append(self.sock.recv(65536).decode("utf-8", "replace"))
            except BlockingIOError:
                return self.lines

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@contextlib.contextmanager
def syslog(path: Path) -> Iterator[Syslog]:
    log = Syslog(path)
    try:
        yield log
    finally:
        log.close()
