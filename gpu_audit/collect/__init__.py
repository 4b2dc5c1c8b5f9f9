"""Collectors: the only code that touches NVML, /proc, psutil, the environment or torch.

Each returns plain dataclasses from :mod:`gpu_audit.model` plus probe errors; none raises on a
missing field, a lost GPU or a vanished process. :func:`collect_scan` runs them all; which
processes are copies of one server is judged by the rules, not here.
"""

from gpu_audit.collect.scan import collect_scan

__all__ = ["collect_scan"]
