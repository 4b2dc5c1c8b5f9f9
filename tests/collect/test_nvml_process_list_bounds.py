"""A driver that always answers "insufficient size" to the process-list call.

The process list is asked for again with a bigger buffer while the driver says the buffer is
too small; a driver that never stops saying so must cost a bounded number of calls, bounded
memory and no more than the read's deadline, and leave a probe error naming the call.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time

from gpu_audit.serial import from_jsonable
from tests.collect.test_nvml import READ
from tests.fakegpu import h100_node

pytest_plugins = ["tests.fakegpu"]

NVML_ERROR_INSUFFICIENT_SIZE = 7
ADDRESS_SPACE_CAP = 3 * 1024**3  # far above a normal read, far below an unbounded retry


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_CAP, ADDRESS_SPACE_CAP))


def test_endless_insufficient_size_is_bounded_and_reported(fake_nvml, tmp_path):
    from gpu_audit.collect.nvml import NvmlReading

    scenario = h100_node(1, pids=[801])
    name = "nvmlDeviceGetComputeRunningProcesses_v3"
    scenario["gpus"][0]["errors"] = {name: NVML_ERROR_INSUFFICIENT_SIZE}
    log = tmp_path / "calls.log"
    env = fake_nvml(scenario)
    env["FAKE_NVML_CALL_LOG"] = str(log)
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-c", READ, "2", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_cap_memory,
    )
    wall_s = time.monotonic() - started
    assert completed.returncode == 0, completed.stderr[-2000:]
    import json

    reading = from_jsonable(NvmlReading, json.loads(completed.stdout)["readings"][0])
    assert wall_s < 2 + 10  # the deadline holds (plus interpreter start on a loaded runner)
    calls = log.read_text().split().count(name)
    assert 1 <= calls <= 8
    errors = [e for e in reading.probe_errors if e.call == name]
    assert len(errors) == 1, reading.probe_errors
    assert "NVML_ERROR_INSUFFICIENT_SIZE" in errors[0].message
    assert errors[0].subject == "gpu:0"
    # The rest of the GPU is still read.
    assert reading.gpus[0].uuid == scenario["gpus"][0]["uuid"]
