"""On a real GPU: CUDA telemetry per cycle, allocator settings that take effect, the memory cap,
device choice and a real out-of-memory recovered by halving. Skipped without CUDA."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.validate.runs import REPO, TINY, cycles_of, run_dir, run_validate, state_of

pytestmark = pytest.mark.gpu
MIB, GIB = 1024**2, 1024**3


def test_cuda_telemetry_is_recorded_every_cycle(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(["--device", "cuda", "--stage", "smoke", "--out", str(tmp_path),
                         "--run-id", "r", "--no-plots"], cli_env, timeout=600)
    assert done.returncode == 0, done.stderr
    records = cycles_of(run_dir(tmp_path, "r"), "default/smoke")
    assert len(records) == 3
    for record in records:
        for key in ("allocated_bytes", "reserved_bytes", "reserved_peak_bytes", "active_bytes",
                    "inactive_split_bytes", "device_free_bytes", "device_used_bytes",
                    "alloc_retries", "ooms"):
            assert isinstance(record[key], int), key
        assert 0.0 <= record["fragmentation_pct"] <= 100.0
        assert record["reserved_peak_bytes"] >= record["reserved_bytes"] > 0


def test_allocator_settings_take_effect_in_the_worker(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(["--device", "cuda", "--stage", "imports", "--max-split-size-mb", "128",
                         "--alloc-conf", "expandable_segments:False", "--out", str(tmp_path),
                         "--run-id", "r", "--no-plots", "--json"], cli_env, timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    allocator = doc["variants"][0]["allocator"]
    assert allocator["in_effect"]["max_split_size"] == 128 * MIB
    assert allocator["in_effect"]["expandable_segments"] is False
    assert allocator["env"] == {"PYTORCH_CUDA_ALLOC_CONF":
                                "expandable_segments:False,max_split_size_mb:128",
                                "PYTORCH_ALLOC_CONF":
                                "expandable_segments:False,max_split_size_mb:128"}
    assert "alloc-conf-not-applied" not in {f["id"] for f in doc["findings"]}


def test_emulated_memory_caps_the_worker(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(["--device", "cuda", "--stage", "smoke", "--emulate-memory", "2GiB",
                         "--out", str(tmp_path), "--run-id", "r", "--no-plots"], cli_env,
                        timeout=600)
    assert done.returncode == 0, done.stderr
    run = run_dir(tmp_path, "r")
    ready = state_of(run)["legs"]["default/smoke"]["ready"]
    assert ready["memory_fraction"] == pytest.approx(2 * GIB / ready["total_memory_bytes"])
    assert max(r["reserved_peak_bytes"] for r in cycles_of(run, "default/smoke")) <= 2 * GIB


def test_a_real_cuda_oom_recovers_at_half_the_batch(tmp_path: Path, cli_env: dict) -> None:
    done = run_validate(["--device", "cuda", "--workload", f"{TINY}:GpuHog", "--stage", "smoke",
                         "--emulate-memory", "1GiB", "--retry-backoff", "0", "--out",
                         str(tmp_path), "--run-id", "r", "--no-plots"], cli_env, timeout=600)
    assert done.returncode == 0, done.stderr
    records = cycles_of(run_dir(tmp_path, "r"), "default/smoke")
    assert records[0]["oom_retries"][0]["kind"] == "torch"
    assert records[0]["ooms"] >= 1
    assert [r["batch_scale"] for r in records] == [0.5, 0.5, 0.5]


def test_auto_picks_the_device_with_the_most_free_memory(tmp_path: Path, cli_env: dict) -> None:
    probe = subprocess.run([sys.executable, "-m", "gpu_audit.validate.worker", "probe-devices"],
                           cwd=REPO, env=cli_env, capture_output=True, text=True, timeout=300)
    devices = json.loads(probe.stdout)["devices"]
    best = max(devices, key=lambda d: (d["free_bytes"], -d["index"]))
    done = run_validate(["--device", "auto", "--stage", "imports", "--out", str(tmp_path),
                         "--run-id", "r", "--no-plots"], cli_env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert state_of(run_dir(tmp_path, "r"))["device"]["resolved"] == f"cuda:{best['index']}"


def test_a_gpu_sweep_recommends_only_beyond_the_spread(tmp_path: Path, cli_env: dict) -> None:
    from gpu_audit.validate.report import faster_beyond_noise

    done = run_validate(["--device", "cuda", "--stage", "smoke,classical", "--workload",
                         f"{TINY}:Counter", "--max-split-size-mb", "none,128,512", "--out",
                         str(tmp_path), "--run-id", "r", "--json"], cli_env, timeout=600)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    rows, found = doc["comparison"], doc["recommendation"]
    assert all(row["iqr_cycle_s"] is not None for row in rows)
    assert found["rule"]
    if found["label"] is not None and "faster than the others" in found["text"]:
        best = next(row for row in rows if row["label"] == found["label"])
        assert all(faster_beyond_noise(best, row) for row in rows if row is not best)
    run = run_dir(tmp_path, "r")
    assert sorted(p.name for p in run.glob("*.png")) == ["fragmentation.png", "memory.png"]
