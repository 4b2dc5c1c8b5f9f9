"""NVML, read tolerantly: the only package in gpu-audit that imports ``pynvml``.

- :mod:`.codes`: NVML's return codes, enumerations and field ids, named.
- :mod:`.binding`: calls by name, newest version first; errors become ``None`` or probe errors.
- :mod:`.device`: the driver's versions and each GPU's fields, read into plain dataclasses.
- :mod:`.deadlines`: every call on a daemon thread under one deadline, GPUs fanned out when
  the driver is slow, hung calls reported; :func:`read_nvml` and :func:`start_read`.

Nothing here raises: a read always returns an :class:`NvmlReading`, whose missing fields are
``None`` and whose problems are probe errors.
"""

from gpu_audit.collect.nvml.deadlines import PendingReading, read_nvml, start_read
from gpu_audit.collect.nvml.device import NvmlReading, cuda_version_text, throttle_reason_names

__all__ = [
    "NvmlReading",
    "PendingReading",
    "cuda_version_text",
    "read_nvml",
    "start_read",
    "throttle_reason_names",
]
