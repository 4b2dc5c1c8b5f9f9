"""The node's name, read one way wherever gpu-audit names the node: documents, report file
names, hooks, fleets and the monitor's publications."""

from __future__ import annotations

import os
import sys


def host_name() -> str:
    """The node's host name: on Linux the kernel's node name, which is what glibc's
    ``gethostname`` returns (read here without importing :mod:`socket`, some 9 million
    instructions of every start); elsewhere :func:`socket.gethostname`."""
    if sys.platform.startswith("linux"):
        return os.uname().nodename
    import socket

    return socket.gethostname()
