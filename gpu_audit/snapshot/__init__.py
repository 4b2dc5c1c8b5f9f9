"""Offline summaries of PyTorch memory snapshots (``gpu-audit snapshot FILE``).

:func:`load_snapshot` unpickles a snapshot without running anything it names;
:func:`summarize` computes segments, pools, fragmentation, the biggest live allocations and
their sites, and the timeline of the recorded history; :mod:`~gpu_audit.snapshot.render` turns
that into JSON, markdown or terminal text, and :mod:`~gpu_audit.snapshot.plot` into a PNG.
"""

from __future__ import annotations

from gpu_audit.snapshot.load import load_snapshot, loads_snapshot
from gpu_audit.snapshot.summary import SnapshotSummary, summarize

__all__ = ["SnapshotSummary", "load_snapshot", "loads_snapshot", "summarize"]
