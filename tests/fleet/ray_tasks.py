"""Functions the Ray tests run on the cluster's nodes (importable there by module name)."""

from __future__ import annotations

import os
import time


def slow_on_marked_node() -> dict:
    """Answers at once, except on a node whose raylet has GPU_AUDIT_TEST_SLOW set: that one
    sleeps far past any test's deadline."""
    if os.environ.get("GPU_AUDIT_TEST_SLOW"):
        time.sleep(300)
    return {"pid": os.getpid()}
