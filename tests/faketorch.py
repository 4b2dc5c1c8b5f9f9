"""A stand-in ``torch`` package for tests of ``scan --torch`` on machines without a GPU.

:func:`install_fake_torch` writes a tiny ``torch`` package (and its ``dist-info``, so package
metadata agrees) into a folder; put that folder first on ``PYTHONPATH`` of a child process and
the probe imports it instead of the real torch. It answers the handful of calls the probe makes,
as a CUDA build on a given set of GPUs would: version, CUDA version, architecture list,
availability (with the warning torch prints when the driver is too old), device properties and
the allocator configuration check.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_PACKAGE = '''
import json, os, warnings
_SPEC = json.loads({spec!r})

__version__ = _SPEC["version"]


class version:
    cuda = _SPEC.get("cuda")
    hip = None


class backends:
    class cudnn:
        @staticmethod
        def version():
            return _SPEC.get("cudnn")


def _allocator_settings():
    value = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", os.environ.get("PYTORCH_ALLOC_CONF", ""))
    for key in _SPEC.get("refuse_keys", []):
        if key in value:
            raise ValueError(f"Unrecognized key '{{key}}' in CUDA allocator config.")
    return value


class _C:
    _accelerator_getAllocatorSettings = staticmethod(_allocator_settings)


class _Props:
    def __init__(self, device):
        self.name = device["name"]
        self.major, self.minor = (int(x) for x in device["cc"].split("."))
        self.total_memory = device["memory"]
        self.uuid = device.get("uuid")


class cuda:
    class memory:
        @staticmethod
        def get_allocator_backend():
            return "native"

    @staticmethod
    def get_arch_list():
        return list(_SPEC.get("arch_list", []))

    @staticmethod
    def is_available():
        if _SPEC.get("driver_too_old"):
            warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old "
                          "(found version 12020).")
            return False
        return bool(_SPEC.get("devices"))

    @staticmethod
    def device_count():
        return len(_SPEC.get("devices", []))

    @staticmethod
    def get_device_properties(index):
        return _Props(_SPEC["devices"][index])
'''


def install_fake_torch(folder: Path, version: str = "2.8.0+cu128", cuda: str | None = "12.8",
                       arch_list: list[str] | None = None,
                       devices: list[dict[str, Any]] | None = None,
                       driver_too_old: bool = False, refuse_keys: list[str] | None = None,
                       broken: str | None = None) -> Path:
    """Write the fake into ``folder`` and return it (the path to put on ``PYTHONPATH``).

    ``devices``: ``[{"name", "cc": "6.1", "memory": bytes, "uuid"}]``. ``broken``: make
    ``import torch`` raise ``ImportError(broken)``.
    """
    spec = {"version": version, "cuda": cuda, "cudnn": 91002 if cuda else None,
            "arch_list": arch_list if arch_list is not None else [],
            "devices": devices or [], "driver_too_old": driver_too_old,
            "refuse_keys": refuse_keys or []}
    package = folder / "torch"
    package.mkdir(parents=True, exist_ok=True)
    body = (f"raise ImportError({broken!r})\n" if broken
            else _PACKAGE.format(spec=json.dumps(spec)))
    (package / "__init__.py").write_text(body)
    info = folder / f"torch-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n\n")
    return folder
