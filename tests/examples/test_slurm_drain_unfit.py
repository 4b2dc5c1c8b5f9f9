"""examples/slurm-drain-unfit.sh drains a node only for the machine's problems (the finding
catalogue's node_problem), never for its workload, with a reason that fits scontrol's field."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from tests.fleet.synth import node_document

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "slurm-drain-unfit.sh"
FAKE_SCONTROL = """#!/bin/sh
printf '%s\\n' "$@" >> "$SCONTROL_LOG"
"""


def scan_with(node: int, *findings: dict) -> dict:
    document = node_document(node, status="CRITICAL", schema="gpu-audit.scan/1")
    document["findings"] = [{"detail": "", "remedy": "", "evidence": {}, **f} for f in findings]
    return document


def run(tmp_path: Path, documents: list[dict], *args: str) -> subprocess.CompletedProcess:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    for i, document in enumerate(documents):
        (run_dir / f"node-{i}.json").write_text(json.dumps(document))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(REPO), SCONTROL_LOG=str(tmp_path / "scontrol.log"),
               PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                     os.environ["PATH"]]))
    return subprocess.run(["bash", str(SCRIPT), str(run_dir), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_users_workload_never_drains_a_node(tmp_path):
    uvicorns = scan_with(1, {"id": "duplicate-backend", "severity": "critical", "subject": "host",
                             "title": "3 copies of uvicorn app:api share GPU 0: they hold 4096 "
                                      "MiB"},
                         {"id": "alloc-conf-invalid", "severity": "error", "subject": "env",
                          "title": "PYTORCH_CUDA_ALLOC_CONF is not valid"})
    done = run(tmp_path, [uvicorns], "--apply")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "scontrol" not in done.stdout and not (tmp_path / "scontrol.log").exists()
    assert ("# not drained: gpu-node-00001 is unfit for its workload only "
            "(alloc-conf-invalid, duplicate-backend)") in done.stdout


def test_a_node_problem_drains_with_a_reason_cut_between_words(tmp_path):
    title = "GPU 0 has uncorrectable ECC errors: " + " ".join(
        f"counter_{i}=123456789012" for i in range(20))
    broken = scan_with(2, {"id": "duplicate-backend", "severity": "critical", "subject": "host",
                           "title": "3 copies of uvicorn"},
                       {"id": "ecc-uncorrectable", "severity": "critical", "subject": "gpu:0",
                        "title": title},
                       {"id": "hw-slowdown", "severity": "error", "subject": "gpu:1",
                        "title": "GPU 1 slows down"})
    done = run(tmp_path, [broken], "--apply")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("scontrol")]
    reason = shlex.split(line)[-1].removeprefix("Reason=")
    assert reason.startswith("gpu-audit: ecc-uncorrectable on gpu:0: GPU 0 has uncorrectable")
    assert len(reason) <= 200 and reason.endswith(" ... (+1 more)")
    numbers = [w.split("=")[1] for w in reason.split() if w.startswith("counter_")]
    assert numbers and set(numbers) == {"123456789012"}, reason
    assert (tmp_path / "scontrol.log").read_text().splitlines()[-1] == f"Reason={reason}"


def test_a_failed_check_of_a_node_problem_drains(tmp_path):
    document = node_document(3, status="CRITICAL")
    document["checks"][-1].update(id="gpu-count", finding_id="gpu-lost",
                                  summary="GPU 1 is lost: it has fallen off the bus")
    done = run(tmp_path, [document])
    assert done.returncode == 2, done.stdout + done.stderr
    assert shlex.split(done.stdout.splitlines()[0])[-1] == \
        "Reason=gpu-audit: gpu-lost on gpu:0: GPU 1 is lost: it has fallen off the bus"
