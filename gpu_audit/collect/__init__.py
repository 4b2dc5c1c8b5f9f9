"""Collectors: the only code that touches NVML, /proc, psutil, the environment or torch.

Each returns plain structs from :mod:`gpu_audit.model` plus probe errors; none raises on a
missing field, a lost GPU or a vanished process. :func:`collect_scan` runs them all; which
processes are copies of one server is judged by the rules, not here.
"""

from gpu_audit.lazy import exports

# Loaded on first use: a command starts its NVML read (gpu_audit.collect.nvml.isolated) before
# the data model, and with it msgspec, is imported.
__getattr__, __dir__ = exports(__name__, {"collect_scan": "gpu_audit.collect.scan"}, globals())

__all__ = ["collect_scan"]
