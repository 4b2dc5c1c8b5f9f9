"""NVML, read tolerantly: the only package in gpu-audit that imports ``pynvml``.

- :mod:`.codes`: NVML's return codes, enumerations and field ids, named.
- :mod:`.binding`: calls by name, newest version first; errors become ``None`` or probe errors.
- :mod:`.reading`: what a read returns (:class:`NvmlReading`).
- :mod:`.device`: the driver's versions and each GPU's fields, read into plain dataclasses.
- :mod:`.deadlines`: every call on a daemon thread under one deadline, GPUs fanned out when
  the driver is slow, hung calls reported; :func:`read_nvml`.
- :mod:`.isolated`: :func:`start_read`, a read begun in a child process (or on a thread) that
  overlaps the caller's own start-up.

Nothing here raises: a read always returns an :class:`NvmlReading`, whose missing fields are
``None`` and whose problems are probe errors.
"""

from gpu_audit.lazy import exports

# Loaded on first use: starting a read in a child process (:mod:`.isolated`) must not wait for
# pynvml or the data model to import.
__getattr__, __dir__ = exports(__name__, {
    "NvmlReading": "gpu_audit.collect.nvml.reading",
    "PendingReading": "gpu_audit.collect.nvml.deadlines",
    "cuda_version_text": "gpu_audit.collect.nvml.device",
    "read_nvml": "gpu_audit.collect.nvml.deadlines",
    "start_read": "gpu_audit.collect.nvml.isolated",
    "throttle_reason_names": "gpu_audit.collect.nvml.device",
}, globals())

__all__ = [
    "NvmlReading",
    "PendingReading",
    "cuda_version_text",
    "read_nvml",
    "start_read",
    "throttle_reason_names",
]
