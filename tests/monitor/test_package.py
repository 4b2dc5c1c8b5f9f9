"""``gpu_audit.monitor`` loads the monitor itself on first use: a scan only reads publications."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from gpu_audit import monitor
before = sorted(m for m in sys.modules if m.startswith("gpu_audit.monitor.") or m == "logging")
names = {name: getattr(monitor, name).__module__ for name in monitor.__all__}
from gpu_audit.monitor import *  # noqa: F403
print(json.dumps({"before": before, "names": names, "listed": sorted(set(monitor.__all__) -
                  set(dir(monitor))), "interval": monitor.start.__defaults__[0]}))
"""


def test_importing_the_package_loads_no_monitor_until_it_is_used():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    completed = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    assert result["before"] == ["gpu_audit.monitor.api"]
    assert result["names"] == {
        "AllocatorReading": "gpu_audit.monitor.sources",
        "AllocatorSource": "gpu_audit.monitor.sources",
        "DeviceReading": "gpu_audit.monitor.sources",
        "Monitor": "gpu_audit.monitor.core",
        "RecordedAllocatorSource": "gpu_audit.monitor.sources",
        "TorchAllocatorSource": "gpu_audit.monitor.sources",
        "active": "gpu_audit.monitor.core",
        "dump_snapshot": "gpu_audit.monitor.api",
        "monitored": "gpu_audit.monitor.api",
        "start": "gpu_audit.monitor.api",
        "step": "gpu_audit.monitor.api",
        "stop": "gpu_audit.monitor.api",
    }
    assert result["listed"] == []  # dir() shows every public name, loaded or not
    assert result["interval"] == 5.0


def test_an_unknown_name_is_an_attribute_error():
    from gpu_audit import monitor

    with pytest.raises(AttributeError, match="no_such_thing"):
        monitor.no_such_thing  # noqa: B018
