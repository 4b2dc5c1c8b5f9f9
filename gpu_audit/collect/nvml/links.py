"""NVLink as NVML reports it: how many links of each GPU are up, and to which PCI devices.

``gpu-audit diag`` puts this beside the peer-access matrix that CUDA reports: two GPUs the
driver joins by NVLink should be able to reach each other directly. A driver or GPU without
NVLink answers "not supported": the GPU's entry is then ``None`` (unknown, not "no links").
The calls run on a daemon thread under one deadline, like every other NVML read.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from gpu_audit.collect.nvml.binding import error_code, import_pynvml
from gpu_audit.collect.nvml.codes import (
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_SUPPORTED,
)

MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS
_NO_SUCH_LINK = {NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT,
                 NVML_ERROR_FUNCTION_NOT_FOUND}


def _read_one(nvml: Any, index: int) -> dict[str, Any] | None:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    active, peers, supported = 0, [], False
    for link in range(MAX_LINKS):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except Exception as exc:
            if error_code(exc) in _NO_SUCH_LINK or not hasattr(exc, "value"):
                break
            raise
        supported = True
        if state:
            active += 1
            try:
                info = nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link)
                bus = info.busId.decode() if isinstance(info.busId, bytes) else str(info.busId)
                peers.append(bus.lower())
            except Exception:
                pass
    if not supported:
        return None
    return {"active_links": active, "peer_pci_bus_ids": sorted(set(peers))}


def read_nvlinks(indices: Sequence[int], timeout_s: float = 5.0) -> dict[int, dict | None]:
    """NVML index -> ``{"active_links", "peer_pci_bus_ids"}`` or ``None`` (no NVLink reading).

    Call after a :func:`~gpu_audit.collect.nvml.read_nvml` (which initialises NVML)."""
    nvml = import_pynvml()
    result: dict[int, dict | None] = dict.fromkeys(indices)
    if nvml is None:
        return result

    def work() -> None:
        for index in indices:
            try:
                result[index] = _read_one(nvml, index)
            except Exception:
                result[index] = None

    thread = threading.Thread(target=work, name="nvml-nvlink", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return dict(result)
