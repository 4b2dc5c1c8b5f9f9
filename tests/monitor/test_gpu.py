"""On a real CUDA device: publish from a CUDA process, hit a real OOM, summarise its snapshot.

Each test runs a real training-like script in a child process (so this process never holds a
CUDA context) and drives ``gpu-audit`` as a user would. Skipped without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.snapshot import load_snapshot, summarize
from tests.monitor.children import REPO

pytestmark = pytest.mark.gpu

MIB = 1024**2

TRAINER = r'''
import json, sys
import torch
from gpu_audit import monitor

snapshot_dir = sys.argv[1]
m = monitor.start(interval_s=60, snapshot_on_oom=True, snapshot_dir=snapshot_dir)
blocks = [torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda") for _ in range(3)]
del blocks[1]  # leave a hole in the middle of the cache
torch.cuda.synchronize()
path = m.publish()
# The document as published now: the file is rewritten by the next publication.
print(json.dumps({"publication": str(path), "document": json.loads(path.read_text()),
                  "reserved": torch.cuda.memory_reserved(0),
                  "allocated": torch.cuda.memory_allocated(0)}), flush=True)
total = torch.cuda.get_device_properties(0).total_memory
try:
    too_big = torch.empty(2 * total, dtype=torch.uint8, device="cuda")
except BaseException as exc:
    print(json.dumps({"raised": type(exc).__module__ + "." + type(exc).__qualname__,
                      "message": str(exc)[:300]}), flush=True)
path = m.publish()
doc = json.loads(path.read_text())
# torch may release its free cached blocks while handling the OOM (2.11 does): what the
# scan reads from now on is this publication, with these figures.
print(json.dumps({"num_ooms": doc["devices"][0]["num_ooms"], "snapshots": m.oom_snapshots,
                  "recording": doc["history_recording"],
                  "reserved": torch.cuda.memory_reserved(0)}), flush=True)
sys.stdin.readline()
'''


def run_env(runtime_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["GPU_AUDIT_RUNTIME_DIR"] = str(runtime_dir)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.pop("PYTORCH_ALLOC_CONF", None)
    env["NO_COLOR"] = "1"
    return env


@pytest.fixture
def trainer(tmp_path: Path):
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER)
    runtime_dir = tmp_path / "runtime"
    env = run_env(runtime_dir)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "snaps")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    lines = [json.loads(proc.stdout.readline()) for _ in range(3)]
    yield proc, lines, env, tmp_path
    proc.stdin.close()
    proc.wait(timeout=60)


def test_a_cuda_process_publishes_figures_that_match_torch(trainer):
    proc, (first, _, _), _, _ = trainer
    doc = first["document"]
    assert doc["pid"] == proc.pid
    assert doc["cuda_initialized"] is True
    device = doc["devices"][0]
    assert device["reserved_bytes"] == first["reserved"]
    assert device["allocated_bytes"] == first["allocated"] == 512 * MIB
    assert device["uuid"] and device["pci_bus_id"]
    assert device["total_memory_bytes"] > 0


def test_scan_joins_the_cuda_process(trainer):
    proc, (_, _, last), env, cwd = trainer
    result = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report"],
                            env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1, 2), result.stderr
    doc = json.loads(result.stdout)
    mine = [p for p in doc["processes"] if p["pid"] == proc.pid]
    assert mine, "NVML does not list the trainer (another PID namespace?)"
    assert mine[0]["allocator"] is not None
    assert mine[0]["allocator"]["reserved_bytes"] == last["reserved"]
    assert mine[0]["used_memory_bytes"] >= last["reserved"]  # NVML adds the CUDA context


def test_a_real_oom_propagates_unchanged_and_leaves_a_snapshot(trainer):
    _, (_, raised, after), env, cwd = trainer
    assert raised["raised"] == "torch.OutOfMemoryError" or raised["raised"].endswith(
        "OutOfMemoryError")
    assert "out of memory" in raised["message"].lower()
    assert after["num_ooms"] == 1
    assert after["recording"] is True
    pickles = [p for p in after["snapshots"] if p.endswith(".pickle")]
    assert len(pickles) == 1 and any(p.endswith(".md") for p in after["snapshots"])

    summary = summarize(load_snapshot(Path(pickles[0])))
    device = summary.devices[0]
    assert device.allocated_bytes >= 512 * MIB
    assert device.trace is not None and len(device.trace.ooms) == 1
    assert any("trainer.py" in (a.site or "") for a in device.largest_allocations)

    result = subprocess.run([sys.executable, "-m", "gpu_audit", "snapshot", pickles[0], "--json",
                             "--out", str(cwd / "reports")], env=env, cwd=cwd,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["devices"][0]["trace"]["ooms"]
    assert doc["plot"] and (cwd / "reports" / doc["plot"]).exists()


def test_the_monitor_does_not_initialise_cuda(tmp_path: Path):
    script = (
        "import json, torch\n"
        "from gpu_audit import monitor\n"
        "m = monitor.start(interval_s=60)\n"
        "doc = json.loads(m.publish().read_text())\n"
        "print(json.dumps([torch.cuda.is_initialized(), doc['devices'], doc['cuda_available']]))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], env=run_env(tmp_path / "rt"),
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [False, [], None]
