"""Why did my GPU job die? Known failure signatures in logs, their numbers, and what to do.

Public API (``validate`` uses the first two to explain a dead stage worker):

- :func:`classify_lines` / :func:`classify_text`: incidents in some log text, root cause first;
- :func:`explain_sources`: the same for files, ``-`` (stdin) and compressed logs, with per-input
  statistics, as ``gpu-audit explain`` runs it;
- :class:`Incident`, :data:`CLASSES` (the fixed set of ``class`` values), :data:`SCHEMA`.

The signatures, one module per failure class, are in :mod:`gpu_audit.explain.signatures`.
"""

from gpu_audit.explain.api import (
    DETECT,
    SCHEMA,
    ExplainResult,
    InputStats,
    classify_lines,
    classify_text,
)
from gpu_audit.explain.classify import Incident, Location
from gpu_audit.explain.files import explain_sources
from gpu_audit.explain.signatures import CLASSES

__all__ = [
    "CLASSES", "DETECT", "SCHEMA", "ExplainResult", "Incident", "InputStats", "Location",
    "classify_lines", "classify_text", "explain_sources",
]
