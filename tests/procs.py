"""Real processes with realistic command lines, for tests that join NVML PIDs with the OS."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_SLEEPER = textwrap.dedent(
    """\
    #!{python}
    # Stands in for a server: sleeps until killed (argv looks like the real program's).
    import time
    while True:
        time.sleep(60)
    """
)


def install_program(bin_dir: Path, name: str) -> Path:
    """An executable script called ``name`` (``uvicorn``, ``gpu_daemon``) that just sleeps."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(_SLEEPER.format(python=sys.executable))
    path.chmod(0o755)
    return path


@contextmanager
def running(argvs: list[list[str]], env: dict[str, str] | None = None) -> Iterator[list[int]]:
    """Start each argv as a real process; yield their PIDs; always stop them."""
    procs = [
        subprocess.Popen(
            argv,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for argv in argvs
    ]
    try:
        deadline = time.monotonic() + 10
        # The command line shows up in /proc once exec has happened.
        for p in procs:
            while time.monotonic() < deadline:
                try:
                    if Path(f"/proc/{p.pid}/cmdline").read_bytes():
                        break
                except OSError:
                    pass
                time.sleep(0.01)
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)


def uvicorn_argvs(program: Path, ports: list[int], *extra: str) -> list[list[str]]:
    """Started through the script's shebang, as a real ``uvicorn`` is: its name is ``uvicorn``."""
    return [
        [str(program), "app:app", "--host", "127.0.0.1", "--port", str(port), *extra]
        for port in ports
    ]


def current_user() -> str:
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name
