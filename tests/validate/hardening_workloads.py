"""Workloads for the validate tests of runs that end badly after their cycles: each rehearses
one situation, switched on by an environment variable so that a resume can run without it."""

from __future__ import annotations

import errno
import os
import signal
from typing import Any

from tests.validate.tiny_workloads import Counter


class KilledInTeardown(Counter):
    """Every cycle logged, then the worker is killed (``kill -9``) while tearing down."""

    def teardown(self, ctx: Any) -> None:
        if os.environ.get("HARDENING_KILL_IN_TEARDOWN"):
            os.kill(os.getpid(), signal.SIGKILL)


class DiskFillsUp(Counter):
    """The disk is full from cycle 3 on while the file named by ``HARDENING_DISK_FULL``
    exists: checkpoints fail with ENOSPC as on a full disk."""

    def cycle(self, ctx: Any) -> dict[str, float]:
        marker = os.environ.get("HARDENING_DISK_FULL")
        if ctx.cycle == 3 and marker and os.path.exists(marker):
            import gpu_audit.validate.checkpoints as checkpoints

            def full(path: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

            checkpoints.write_atomic = full
        return super().cycle(ctx)
