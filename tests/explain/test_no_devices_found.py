"""nvidia-smi's "No devices were found": the driver answered, but NVML lists no GPU."""

from __future__ import annotations

from tests.explain.helpers import shape_root


def test_nvidia_smi_finding_no_gpu_is_the_root_cause():
    root = shape_root("nvidia_smi_no_devices_found.log")
    assert (root.cls, root.signature) == ("nvml-unavailable", "nvml-unavailable/no-devices-found")
