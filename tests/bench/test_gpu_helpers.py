"""The small comparators of bench/gpu/ that read gpu-audit's documents: snapshot_vs_stats.py on
a real ``gpu-audit snapshot --json`` and allocator_vs_torch.py on the scan's field names."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import msgspec

from gpu_audit.model import GpuProcess, ProcessAllocatorState
from tests.snapshot import synthetic

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "bench" / "gpu"
MIB = 1024**2


def run(script: str, *args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GPU / script), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_snapshot_totals_are_compared_with_torch_counters(tmp_path, cli_env):
    snapshot = tmp_path / "oom.pickle"
    snapshot.write_bytes(pickle.dumps(synthetic.finetune_oom_after_eval()))
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "snapshot", str(snapshot), "--json",
                           "--no-report"], env=cli_env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    summary = tmp_path / "snapshot.json"
    summary.write_text(done.stdout)
    device = json.loads(done.stdout)["devices"][0]
    stats = {"reserved_bytes.all.current": device["reserved_bytes"],
             "allocated_bytes.all.current": device["allocated_bytes"],
             "inactive_split_bytes.all.current": device["inactive_split_bytes"],
             "segment.all.current": device["segments"]}
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    assert run("snapshot_vs_stats.py", summary, tmp_path / "stats.json").returncode == 0
    stats["allocated_bytes.all.current"] += 512
    (tmp_path / "stats.json").write_text(json.dumps(stats))
    done = run("snapshot_vs_stats.py", summary, tmp_path / "stats.json")
    assert done.returncode == 1 and "DISAGREE" in done.stdout
    assert run("snapshot_vs_stats.py", tmp_path / "none.json", summary).returncode == 3


def test_allocator_state_is_compared_with_torch_figures(tmp_path):
    used = {f.name for f in msgspec.structs.fields(ProcessAllocatorState)}
    assert {"reserved_bytes", "allocated_bytes", "allocated_peak_bytes",
            "reserved_peak_bytes", "age_s", "step", "fragmentation_pct"} <= used
    assert {"pid", "used_memory_bytes", "allocator"} <= {f.name for f in
                                                         msgspec.structs.fields(GpuProcess)}
    state = {"reserved_bytes": 600 * MIB, "allocated_bytes": 300 * MIB,
             "allocated_peak_bytes": 500 * MIB, "reserved_peak_bytes": 600 * MIB}
    scan = {"processes": [{"pid": 42, "used_memory_bytes": 1100 * MIB, "allocator": state}]}
    figures = {"reserved_bytes": 600 * MIB, "allocated_bytes": 280 * MIB,
               "allocated_peak_bytes": 500 * MIB, "reserved_peak_bytes": 600 * MIB}
    (tmp_path / "scan.json").write_text(json.dumps(scan))
    (tmp_path / "figures.jsonl").write_text(json.dumps(figures) + "\n")
    assert run("allocator_vs_torch.py", tmp_path / "scan.json", tmp_path / "figures.jsonl",
               42).returncode == 0
    state["reserved_bytes"] = 640 * MIB
    (tmp_path / "scan.json").write_text(json.dumps(scan))
    done = run("allocator_vs_torch.py", tmp_path / "scan.json", tmp_path / "figures.jsonl", 42)
    assert done.returncode == 1 and "reserved differs" in done.stdout
    done = run("allocator_vs_torch.py", tmp_path / "scan.json", tmp_path / "figures.jsonl", 7)
    assert done.returncode == 3 and "lists no process 7" in done.stdout
