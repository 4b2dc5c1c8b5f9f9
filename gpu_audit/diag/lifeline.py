"""A diag worker dies with the gpu-audit process that started it.

A worker leads a process group of its own (so Ctrl-C reaches only gpu-audit, which then kills
each worker's group), so nothing stops it when gpu-audit itself is killed outright (``kill -9``,
the out-of-memory killer, a scheduler tearing a job down): it would run its test to the end,
holding most of a GPU's memory. Three guards, each enough on its own:

- Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills the worker the moment its parent
  exits. The kernel counts the *thread* that started the worker, so the parent asks for it only
  when it starts workers from its main thread (:func:`parent_environment`): the thread that lives
  as long as gpu-audit. The parent may die before the worker asks: the worker then checks that
  its parent is still the process that started it, and exits if not.
- Everywhere: the worker's stdin is a pipe whose write end only the parent holds (``Popen``
  closes every other descriptor in the children it starts); end of file means the parent is
  gone.
- POSIX: ``os.getppid()`` stops being the parent's pid (the worker was handed to init or a
  subreaper), polled every :data:`POLL_S` seconds.

When a guard fires, the worker kills its own process group (what it started goes too) or, when
it leads none, itself. The code runs in the worker: standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

PARENT_ENV = "GPU_AUDIT_DIAG_PARENT"  # "<pid>[:deathsig]": the parent; stdin is the lifeline
POLL_S = 0.5
GUARDS = ("pdeathsig", "pipe", "pid")
PR_SET_PDEATHSIG = 1


def parent_environment() -> dict[str, str]:
    """What the parent adds to a worker's environment (and it gives the worker ``stdin=PIPE``).

    ``deathsig`` is asked for only from the main thread: ``PR_SET_PDEATHSIG`` fires when the
    thread that started the worker exits, which for any other thread may be long before
    gpu-audit does; the pipe and the pid poll still guard such a worker."""
    main = threading.current_thread() is threading.main_thread()
    return {PARENT_ENV: f"{os.getpid()}{':deathsig' if main else ''}"}


def parse(value: str | None) -> tuple[int | None, bool]:
    """``"4242:deathsig"`` -> (4242, True); anything else -> (None, False)."""
    pid, _, flag = (value or "").partition(":")
    valid = pid.isascii() and pid.isdigit() and len(pid) <= 10  # a pid, never more
    return (int(pid), flag == "deathsig") if valid else (None, False)


def die() -> None:
    """Kill this worker's process group when it leads one (what it started goes too), else
    itself."""
    if os.name == "posix":
        with contextlib.suppress(OSError):
            if os.getpgid(0) == os.getpid():
                os.killpg(0, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(137)  # pragma: no cover - Windows


def set_death_signal() -> bool:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``; False where the platform or kernel refuses it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_pipe(fd: int, on_death: Callable[[], None]) -> None:
    try:
        while os.read(fd, 4096):
            continue
    except OSError:
        pass
    on_death()


def _watch_pid(parent: int, on_death: Callable[[], None], poll_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(poll_s)
    on_death()


def hold(environ: dict[str, str] | None = None, *, stdin_fd: int = 0,
         on_death: Callable[[], None] = die, poll_s: float = POLL_S,
         guards: tuple[str, ...] = GUARDS) -> list[str]:
    """Arm the guards the parent asked for (:data:`PARENT_ENV`); returns those armed.

    Without the variable (a worker run by hand) nothing is armed: its stdin is then not a
    lifeline. ``guards`` narrows them (the tests prove each alone)."""
    parent, wanted = parse((os.environ if environ is None else environ).get(PARENT_ENV))
    if parent is None:
        return []
    armed = []
    if "pdeathsig" in guards and wanted and set_death_signal():
        armed.append("pdeathsig")
    if os.name == "posix" and os.getppid() != parent:
        on_death()  # the parent died before the guards were up
        return armed
    if "pipe" in guards:
        threading.Thread(target=_watch_pipe, args=(stdin_fd, on_death), daemon=True,
                         name="diag-lifeline-pipe").start()
        armed.append("pipe")
    if "pid" in guards and os.name == "posix":
        threading.Thread(target=_watch_pid, args=(parent, on_death, poll_s), daemon=True,
                         name="diag-lifeline-pid").start()
        armed.append("pid")
    return armed
