"""``gpu-audit scan`` shows what a running training process publishes, next to NVML's figures.

A real child process publishes through gpu_audit.monitor (fed by a recorded H100 allocator);
the fake NVML lists that child's PID on an H100 with 72 GiB; ``gpu-audit scan`` runs in a
subprocess, as a user would run it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from gpu_audit.report.jsonout import scan_document
from tests import builders as b
from tests import fakegpu
from tests.monitor.children import REPO

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

GIB = 1024**3
H100_0 = fakegpu.h100_gpu(0)


def publishing_trainer(spawn, runtime_dir: Path, retries: int):
    """A child publishing one more allocation retry every 50 ms, on the fake node's GPU 0.

    Returns once ``retries`` retries are published; the child keeps climbing after that when
    ``retries`` is not 0, so the rise stays inside the published history during the test.
    """
    # torch spells the UUID without NVML's "GPU-" prefix: the join must see through that.
    child = spawn("--retries", str(retries * 1000), "--steps", "300",
                  "--uuid", H100_0["uuid"].removeprefix("GPU-"), "--pci", H100_0["pci_bus_id"])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        device = json.loads(child.path.read_text())["devices"][0]
        if device["history"][-1]["num_alloc_retries"] >= retries:
            return child
        time.sleep(0.02)
    raise AssertionError("the child never published its last retry")


def scan(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpu_audit", "scan", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_scan_joins_the_publication_and_flags_climbing_retries(
    spawn, runtime_dir: Path, fake_nvml, cli_env, tmp_path: Path
):
    child = publishing_trainer(spawn, runtime_dir, retries=3)
    node = fakegpu.h100_node(1, pids=[child.pid], process_memory_bytes=72 * GIB)
    env = fake_nvml(node, base=cli_env) | {"GPU_AUDIT_RUNTIME_DIR": str(runtime_dir)}

    result = scan(["--json", "--no-report"], env, tmp_path)
    assert result.returncode in (1, 2), result.stderr
    doc = json.loads(result.stdout)
    (proc,) = doc["processes"]
    assert proc["pid"] == child.pid
    allocator = proc["allocator"]
    assert allocator["reserved_bytes"] == 70 * GIB
    assert allocator["allocated_bytes"] == 45 * GIB
    assert allocator["reserved_unallocated_bytes"] == 25 * GIB
    assert allocator["fragmentation_pct"] == 35.7
    assert allocator["step"] == 300
    climb = [s["num_alloc_retries"] for s in allocator["history"]]
    assert climb[-1] >= 3 and climb == sorted(climb)
    (retries,) = [f for f in doc["findings"] if f["id"] == "allocator-oom-retries"]
    assert retries["subject"] == f"pid:{child.pid}"
    assert retries["evidence"]["new_alloc_retries"] == climb[-1] - climb[0]
    assert not [f for f in doc["findings"] if f["id"] == "allocator-fragmentation"]  # 35.7% < 50%

    out = tmp_path / "reports"
    text = scan(["--out", str(out)], env, tmp_path)
    assert "PyTorch allocator (published by gpu_audit.monitor)" in text.stdout
    row = next(line for line in text.stdout.splitlines() if f" {child.pid} " in line
               and "70.0 GiB" in line)
    assert "72.0 GiB" in row  # NVML's figure
    assert "2.0 GiB" in row  # context/other: 72 GiB held minus 70 GiB reserved
    assert "35.7% (split 28.6%)" in row
    markdown = next(out.glob("scan-*.md")).read_text()
    assert "### PyTorch allocator (published by gpu_audit.monitor)" in markdown
    assert "allocator-oom-retries" in markdown


def test_a_stale_publication_is_not_joined(spawn, runtime_dir: Path, fake_nvml, cli_env,
                                           tmp_path: Path):
    child = publishing_trainer(spawn, runtime_dir, retries=0)
    child.kill()  # its file stays behind; NVML still lists the PID (a defunct context)
    node = fakegpu.h100_node(1, pids=[child.pid], process_memory_bytes=72 * GIB)
    env = fake_nvml(node, base=cli_env) | {"GPU_AUDIT_RUNTIME_DIR": str(runtime_dir)}
    result = scan(["--json", "--no-report"], env, tmp_path)
    doc = json.loads(result.stdout)
    (proc,) = doc["processes"]
    assert proc["allocator"] is None
    assert not [e for e in doc["probe_errors"] if e["source"] == "monitor"]  # stale is not news


def test_a_planted_symlink_is_reported_not_followed(runtime_dir: Path, fake_nvml, cli_env,
                                                    tmp_path: Path):
    runtime_dir.mkdir(mode=0o700)
    (runtime_dir / "4242.json").symlink_to("/etc/passwd")
    env = fake_nvml(fakegpu.h100_node(1), base=cli_env) | {
        "GPU_AUDIT_RUNTIME_DIR": str(runtime_dir)}
    result = scan(["--json", "--no-report"], env, tmp_path)
    doc = json.loads(result.stdout)
    (error,) = [e for e in doc["probe_errors"] if e["source"] == "monitor"]
    assert "4242.json: is a symbolic link" in error["message"]
    assert "root:" not in result.stdout


def test_an_older_scan_without_allocator_fields_still_loads(tmp_path: Path, cli_env):
    doc = scan_document(b.gtx1650_three_uvicorn(), [], 0)
    for proc in doc["processes"]:
        del proc["allocator"]  # as written before the field existed
    saved = tmp_path / "old-scan.json"
    saved.write_text(json.dumps(doc))
    result = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--from", str(saved),
                             "--json", "--no-report"], env=cli_env, cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    assert all(p["allocator"] is None for p in json.loads(result.stdout)["processes"])
