"""``gpu-audit diag`` on the MIG instances of a real GPU in MIG mode (skipped without one, or
when no GPU has MIG instances: creating them needs root and a GPU reset, so it is left to the
machine's owner: ``sudo nvidia-smi mig -i N -cgi PROFILES -C``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def test_level1_tests_each_mig_instance_with_cuda(cli_env, tmp_path):
    scan = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report"],
                          env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    gpus = [g for g in json.loads(scan.stdout)["gpus"] if g.get("mig_devices")]
    if not gpus:
        pytest.skip("no GPU in MIG mode with MIG instances")
    gpu = gpus[0]
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--json", "--no-report",
                           "--level", "1", "--force", "--gpus", str(gpu["index"])],
                          env=cli_env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    doc = json.loads(done.stdout)
    uuids = [m["uuid"] for m in gpu["mig_devices"]]
    assert [r["mig"]["uuid"] for r in doc["gpus"]] == uuids, done.stderr
    for run in doc["gpus"]:
        assert run["worker"]["status"] == "done", run["worker"]
        assert run["worker"]["ready"]["cuda_devices"] == 1  # the instance alone
        assert run["tests"]["context"]["ok"] and run["tests"]["matmul-check"]["ok"]
        assert run["subject"].startswith(f"gpu:{gpu['index']}/mig:")
