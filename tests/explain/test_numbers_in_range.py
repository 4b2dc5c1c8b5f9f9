"""A number no program prints (past 64 bits) in a hostile or corrupt log is left unread: the
incident is still found, its documents stay within the schema's integers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_audit.explain.classify import in_range

HOSTILE = [
    "slurmstepd: error: Job 12 exceeded memory limit (18446744073709551617 > "
    "99999999999999999999999), being killed",
    "PxgCudaDeviceMemoryAllocator fail to allocate memory " + "9" * 300 + " bytes",
    "torch.OutOfMemoryError: Allocation on device 99999999999999999999999 would exceed "
    "allowed memory. (out of memory)",
]


def test_numbers_past_64_bits_are_left_unread():
    assert in_range({"a": 2**64 - 1, "b": 2**64, "c": -(2**63) - 1, "d": [1, 10**30],
                     "e": True, "f": "text", "g": 1.5}) == {
        "a": 2**64 - 1, "b": None, "c": None, "d": [1, None], "e": True, "f": "text", "g": 1.5}


def test_a_hostile_log_gives_its_incidents_without_its_huge_numbers(tmp_path: Path, cli_env):
    log = tmp_path / "hostile.log"
    log.write_text("\n".join(HOSTILE) + "\n")
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "explain", str(log), "--json"],
                          env=cli_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    incidents = json.loads(done.stdout)["incidents"]
    assert {i["class"] for i in incidents} >= {"host-oom", "cuda-oom"}

    def ints(value):
        if isinstance(value, dict):
            return [n for v in value.values() for n in ints(v)]
        if isinstance(value, list):
            return [n for v in value for n in ints(v)]
        return [value] if isinstance(value, int) and not isinstance(value, bool) else []

    numbers = [n for i in incidents for n in ints(i["numbers"])]
    assert numbers and all(-(2**63) <= n <= 2**64 - 1 for n in numbers)
    slurm = next(i for i in incidents if i["class"] == "host-oom")
    assert slurm["numbers"]["job"] == 12
    assert slurm["numbers"]["used_bytes"] is None and slurm["numbers"]["limit_bytes"] is None
