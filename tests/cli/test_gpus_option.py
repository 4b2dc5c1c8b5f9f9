"""``scan --gpus`` and ``check --gpus`` against a fake four-GPU node, with every form of a spec.

The node's GPUs are listed out of PCI bus order (NVML index 0 sits at bus 2A, index 1 at 18), so
a job variable mapped by bus order and one mapped by NVML index select different GPUs. GPU 2
has uncorrectable ECC errors; GPU 3 holds another user's process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakegpu
from tests.fakegpu import GIB, absent_pids, h100_node, process

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

JOB_VARIABLES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")


def node() -> dict:
    scenario = h100_node(4)
    gpus = scenario["gpus"]
    gpus[0]["pci_bus_id"], gpus[1]["pci_bus_id"] = gpus[1]["pci_bus_id"], gpus[0]["pci_bus_id"]
    # The driver numbers device minors in bus order, as Slurm's gres then does.
    gpus[0]["minor_number"], gpus[1]["minor_number"] = 1, 0
    gpus[2]["ecc_errors_uncorrected_volatile"] = 2
    gpus[2]["ecc_errors_uncorrected_aggregate"] = 2
    gpus[3]["processes"].append(process(absent_pids(1)[0], 10 * GIB))
    return scenario


UUID = h100_node(4)["gpus"]


@pytest.fixture
def env(fake_nvml, cli_env):
    made = fake_nvml(node(), base=cli_env)
    for name in JOB_VARIABLES:
        made.pop(name, None)
    return made


def run(command: str, args: list[str], env: dict, cwd: Path, **extra: str):
    return subprocess.run([sys.executable, "-m", "gpu_audit", command, "--no-report", *args],
                          env={**env, **extra}, cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def scan_json(args: list[str], env: dict, cwd: Path, **extra: str) -> dict:
    done = run("scan", ["--json", *args], env, cwd, **extra)
    assert done.returncode in (0, 1, 2), done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("spec", "indices"), [
    ("0,1", [0, 1]),
    ("2", [2]),
    (UUID[3]["uuid"], [3]),
    (f"MIG-{UUID[2]['uuid']}/1/0", [2]),
    ("0000:18:00.0", [1]),
    ("2a:00.0", [0]),
])
def test_scan_limits_gpus_processes_and_gpu_findings(env, tmp_path, spec, indices):
    doc = scan_json(["--gpus", spec], env, tmp_path)
    assert [g["index"] for g in doc["gpus"]] == indices
    assert {p["gpu_index"] for p in doc["processes"]} <= set(indices)
    assert doc["gpu_selection"]["indices"] == indices
    assert doc["gpu_selection"]["spec"] == spec
    ids = {f["id"] for f in doc["findings"]}
    assert ("ecc-uncorrectable" in ids) == (2 in indices)
    assert all(f["subject"] in ("host", "env") or f["subject"] in {f"gpu:{i}" for i in indices}
               or f["subject"].startswith("pid:") for f in doc["findings"])


def test_scan_without_gpus_judges_everything(env, tmp_path):
    doc = scan_json([], env, tmp_path)
    assert doc["gpu_selection"] is None
    assert len(doc["gpus"]) == 4
    assert "ecc-uncorrectable" in {f["id"] for f in doc["findings"]}


@pytest.mark.parametrize(("variables", "indices", "named"), [
    ({"SLURM_JOB_GPUS": "0"}, [1], "SLURM_JOB_GPUS=0"),  # bus 18 comes first
    ({"SLURM_JOB_GPUS": "0,1", "SLURM_STEP_GPUS": "1"}, [0], "SLURM_STEP_GPUS=1"),
    ({"CUDA_VISIBLE_DEVICES": "2,3"}, [2, 3], "CUDA_VISIBLE_DEVICES=2,3"),
    ({"CUDA_VISIBLE_DEVICES": UUID[3]["uuid"]}, [3], "CUDA_VISIBLE_DEVICES=GPU-"),
    ({"CUDA_VISIBLE_DEVICES": f"MIG-{UUID[0]['uuid']}/7/0"}, [0], "CUDA_VISIBLE_DEVICES=MIG-"),
])
def test_gpus_job_reads_the_scheduler(env, tmp_path, variables, indices, named):
    doc = scan_json(["--gpus", "job"], env, tmp_path, **variables)
    assert doc["gpu_selection"]["indices"] == indices
    assert doc["gpu_selection"]["reason"].startswith(named)


def test_terminal_and_markdown_say_which_gpus(env, tmp_path):
    done = run("scan", ["--gpus", "job"], env, tmp_path, SLURM_JOB_GPUS="2")
    assert "GPUs judged:" in done.stdout
    assert "SLURM_JOB_GPUS=2: the job's GPUs (NVML index 2" in done.stdout
    out = tmp_path / "reports"
    subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--gpus", "1", "--out", str(out)],
                   env=env, cwd=tmp_path, capture_output=True, timeout=120)
    (markdown,) = out.glob("scan-*.md")
    assert "GPUs judged" in markdown.read_text() and "--gpus 1" in markdown.read_text()


def test_check_judges_only_the_selected_gpus(env, tmp_path):
    clean = run("check", ["--json", "--gpus", "0"], env, tmp_path)
    doc = json.loads(clean.stdout)
    assert doc["gpu_selection"]["indices"] == [0]
    assert {c["status"] for c in doc["checks"] if c["id"] == "foreign-processes"} == {"pass"}
    assert "ecc-uncorrectable" not in {f["id"] for f in doc["findings"]}
    # The check counts the selection's GPUs and does not compare them with the PCI bus.
    (count,) = [c for c in doc["checks"] if c["id"] == "gpu-count"]
    assert count["status"] == "pass" and count["evidence"]["gpus"] == 1

    busy = json.loads(run("check", ["--json", "--gpus", "job"], env, tmp_path,
                          CUDA_VISIBLE_DEVICES="3").stdout)
    assert {c["status"] for c in busy["checks"] if c["id"] == "foreign-processes"} == {"fail"}
    text = run("check", ["--gpus", "2"], env, tmp_path)
    assert text.returncode == 2
    assert "GPUs judged: --gpus 2" in text.stdout


@pytest.mark.parametrize(("args", "extra", "message"), [
    (["--gpus", "9"], {}, "--gpus: GPU 9 does not exist (this node has 4 GPUs)"),
    (["--gpus", "GPU-nothing"], {}, "names no GPU"),
    (["--gpus", "0,,1"], {}, "empty entry"),
    (["--gpus", "job"], {}, "none of SLURM_STEP_GPUS"),
    (["--gpus", "job"], {"SLURM_JOB_GPUS": "7"}, "GPU 7 does not exist"),
])
@pytest.mark.parametrize("command", ["scan", "check"])
def test_bad_specs_exit_3_with_one_line(env, tmp_path, command, args, extra, message):
    done = run(command, args, env, tmp_path, **extra)
    assert done.returncode == 3
    assert message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
