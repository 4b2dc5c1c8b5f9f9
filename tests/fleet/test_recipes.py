"""The fleet recipes of docs/fleet.md run as written: the Kubernetes Jobs' container commands
(taken from the manifests) against fake NVIDIA nodes and canned documents, and the Slurm health
check and drain scripts with a stand-in scontrol that records what it was asked to do."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import yaml

from tests.fakegpu import h100_node, write_scenario
from tests.fleet.synth import node_document, write_documents
from tests.fleet.test_shared_folder import shim_dir

pytest_plugins = ["tests.fakegpu"]
REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "examples" / "kubernetes"
# `scontrol show node` (the health check's question for the node's gres) answers no gres.
FAKE_SCONTROL = """#!/usr/bin/env bash
[ "$1" = show ] && exit 0
printf '%s\\n' "$@" >> "$SCONTROL_LOG"
printf '%s\\n' --- >> "$SCONTROL_LOG"
"""


def node_scenario(i: int, **gpu_changes) -> dict:
    scenario = h100_node(2)
    for gpu in scenario["gpus"]:
        gpu["uuid"] = gpu["uuid"][:-2] + f"{i:02d}"  # every node its own GPUs
        gpu.update(gpu_changes)
    return scenario


def container(manifest: str) -> tuple[list[str], dict[str, str], str]:
    """The Job's container: its command, its plain env values, and the shared volume's mount."""
    job = yaml.safe_load((K8S / manifest).read_text())
    assert job["kind"] == "Job" and job["apiVersion"] == "batch/v1"
    (spec,) = job["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in spec["env"] if "value" in e}
    (mount,) = spec["volumeMounts"]
    return spec["command"], env, mount["mountPath"]


def with_tools(base: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """``base`` with gpu-audit's console script and python3 first on PATH, plus scontrol."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(stat.S_IRWXU)
    return {**base, "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                             base["PATH"]]),
            "SCONTROL_LOG": str(tmp_path / "scontrol.log")}


def test_kubernetes_jobs_check_every_node_then_merge(fake_nvml, cli_env, tmp_path):
    command, env, mount = container("gpu-audit-check-job.yaml")
    assert command[:2] == ["/bin/sh", "-c"] and "gpu-audit check --json" in command[2]
    shared = tmp_path / "shared"
    # The shared volume is a folder here; everything else is the manifest's.
    run_dir = env["GPU_AUDIT_RUN_DIR"].replace(mount, str(shared), 1)
    base = with_tools(fake_nvml(h100_node(1), base=cli_env), tmp_path)
    shim = shim_dir(tmp_path)  # each pod's gpu-audit answers to its node's host name
    scenarios = [node_scenario(0), node_scenario(1),
                 node_scenario(2, ecc_errors_uncorrected_volatile=4)]
    for i, scenario in enumerate(scenarios):
        node_env = {**base, **env, "GPU_AUDIT_RUN_DIR": run_dir, "NODE_NAME": f"k8s-gpu-{i}",
                    "FAKE_HOSTNAME": f"k8s-gpu-{i}",
                    "PYTHONPATH": f"{shim}:{base['PYTHONPATH']}",
                    "FAKE_NVML_SCENARIO": str(write_scenario(scenario, tmp_path / f"n{i}"))}
        pod = subprocess.run(command, env=node_env, capture_output=True, text=True, timeout=120)
        assert pod.returncode == 0, pod.stdout + pod.stderr  # an unfit node still completes
        assert pod.stdout.startswith(f"gpu-audit check on k8s-gpu-{i}: exit "), pod.stdout
    assert "exit 2" in pod.stdout  # the node with uncorrectable ECC errors
    # A fourth node's document gathered before (another cluster, another gpu-audit run).
    write_documents(Path(run_dir) / "canned", [node_document(7, gpus=2)])
    assert len(list(Path(run_dir).rglob("*.json"))) == 4

    command, env, mount = container("gpu-audit-merge-job.yaml")
    merge_env = {**base, **env, "GPU_AUDIT_RUN_DIR": run_dir}
    merged = subprocess.run(command, env=merge_env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in merged.stderr, merged.stderr
    assert merged.returncode == 2, merged.stdout + merged.stderr  # the Job fails: a node unfit
    assert merged.stdout.startswith("fleet CRITICAL: 4 nodes, 3 fit"), merged.stdout
    fleet_dir = Path(run_dir) / "fleet"
    (report,) = fleet_dir.glob("merge-*[0-9a-z].json")
    fleet = json.loads(report.read_text())
    assert fleet["summary"]["critical"] == 1 and fleet["exit_code"] == 2
    assert {p.suffix for p in fleet_dir.iterdir()} == {".json", ".md", ".csv", ".parquet",
                                                        ".png"}
    assert env["EXPECTED_NODES"] == "4" and fleet["expected"]["missing_count"] == 0

    # A node's document lost (its pod never ran, or the volume dropped it): named as missing.
    for path in Path(run_dir).glob("check-*-k8s-gpu-1.*"):
        path.unlink()
    named = {**merge_env, "EXPECTED_NODE_NAMES": "k8s-gpu-[0-2] gpu-node-00007"}
    merged = subprocess.run(command, env=named, capture_output=True, text=True, timeout=120)
    assert merged.returncode == 2, merged.stdout + merged.stderr  # the unfit node still wins
    assert "1 missing of 4 expected" in merged.stdout
    assert "MISSING  k8s-gpu-1: expected, sent no document" in merged.stdout
    counted = subprocess.run(command, env=merge_env, capture_output=True, text=True,
                             timeout=120)
    assert "MISSING  1 of 4 expected nodes sent no document (3 found)" in counted.stdout


def test_kubernetes_check_pod_retries_when_gpu_audit_is_missing(tmp_path):
    command, env, _ = container("gpu-audit-check-job.yaml")
    env = {**env, "GPU_AUDIT_RUN_DIR": str(tmp_path / "run"), "NODE_NAME": "n0",
           "PATH": "/usr/bin:/bin"}
    pod = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert pod.returncode == 1 and "exit 127" in pod.stdout


def test_slurm_health_check_drains_an_unfit_node_with_the_reason(fake_nvml, cli_env, tmp_path):
    script = str(REPO / "examples" / "slurm-healthcheck.sh")
    env = with_tools(fake_nvml(node_scenario(0), base=cli_env), tmp_path)
    env["SLURMD_NODENAME"] = "gpu-node-07"
    healthy = subprocess.run(["bash", script], env=env, capture_output=True, text=True,
                             timeout=120)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert not (tmp_path / "scontrol.log").exists()

    env.update(fake_nvml(node_scenario(1, ecc_errors_uncorrected_volatile=2), base=env))
    unfit = subprocess.run(["bash", script], env=env, capture_output=True, text=True,
                           timeout=120)
    assert unfit.returncode == 1, unfit.stdout + unfit.stderr
    args = (tmp_path / "scontrol.log").read_text().split("\n---\n")[0].splitlines()
    assert args[:3] == ["update", "NodeName=gpu-node-07", "State=DRAIN"]
    (reason,) = args[3:]
    assert reason.startswith("Reason=gpu-audit: ecc-uncorrectable on gpu:0: uncorrected_volatile=2")
    assert len(reason) < 220
    assert reason.removeprefix("Reason=") in unfit.stdout


def test_slurm_drain_lines_from_a_fleet_judgement(tmp_path):
    write_documents(tmp_path / "run", [
        node_document(0), node_document(1, status="CRITICAL", hostname="gpu-node-01.hpc.example",
                                        schema="gpu-audit.scan/1"),
        node_document(2, status="WARNING")])
    (tmp_path / "run" / "silent.json").write_text("{")
    env = with_tools(dict(os.environ, PYTHONPATH=str(REPO)), tmp_path)
    script = str(REPO / "examples" / "slurm-drain-unfit.sh")
    dry = subprocess.run(["bash", script, str(tmp_path / "run")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert dry.returncode == 2, dry.stdout + dry.stderr  # the fleet's: a node is unfit
    lines = dry.stdout.splitlines()
    drains = [shlex.split(line) for line in lines if line.startswith("scontrol")]
    assert drains == [["scontrol", "update", "NodeName=gpu-node-01", "State=DRAIN",
                       "Reason=gpu-audit: ecc-uncorrectable on gpu:0: "
                       "GPU 0 has uncorrectable ECC errors"]]
    assert any(line.startswith("# no verdict from") and "silent.json" in line for line in lines)
    assert not (tmp_path / "scontrol.log").exists()  # a dry run

    applied = subprocess.run(["bash", script, str(tmp_path / "run"), "--apply"], env=env,
                             capture_output=True, text=True, timeout=120)
    assert applied.returncode == 2
    logged = (tmp_path / "scontrol.log").read_text().split("\n---\n")[0].splitlines()
    assert logged == drains[0][1:]


def test_ray_job_submit_recipes_say_the_job_client_needs_ray_default():
    """`ray job submit` is in Ray's job client, which the gpu-audit extra (core ray) lacks."""
    for page in (REPO / "docs" / "fleet.md", REPO / "docs" / "guide" / "fleets.md"):
        text = page.read_text()
        at = text.index("ray job submit")
        assert "pip install 'ray[default]'" in text[max(0, at - 600):at + 600], page
