"""The Slurm hook examples run as written (examples/slurm-prolog.sh, slurm-epilog.sh,
slurm-healthcheck.sh, slurm-gpu-audit.conf) against fake NVIDIA nodes, with a stand-in scontrol
that records what it was asked to do: the exit codes Slurm reads, and the drain reasons."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakegpu
from tests.fakegpu import GIB, h100_node
from tests.procs import current_user, install_program, running

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml
# `scontrol show node` (the health check's question for the node's gres) answers no gres.
FAKE_SCONTROL = """#!/usr/bin/env bash
[ "$1" = show ] && exit 0
printf '%s\\n' "$@" >> "$SCONTROL_LOG"
printf '%s\\n' --- >> "$SCONTROL_LOG"
"""


@pytest.fixture
def node_env(cli_env, tmp_path):
    """slurmd's environment for the hooks: gpu-audit and scontrol on PATH, a job's variables."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(stat.S_IRWXU)
    env = {k: v for k, v in cli_env.items() if not k.startswith(("SLURM", "CUDA_VISIBLE"))}
    env.update(PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                     env["PATH"]]),
               SCONTROL_LOG=str(tmp_path / "scontrol.log"),
               GPU_AUDIT_SPOOL=str(tmp_path / "spool"), SLURMD_NODENAME="gpu-node-07",
               SLURM_JOB_ID="99", SLURM_JOB_GPUS="0", SLURM_JOB_USER=current_user())
    return env


def run(script: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(EXAMPLES / script)], env=env, capture_output=True,
                          text=True, timeout=120)


def drains(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "scontrol.log"
    if not log.exists():
        return []
    return [c.strip().splitlines() for c in log.read_text().split("---") if c.strip()]


def test_prolog_then_epilog_of_a_clean_job(fake_nvml, node_env, tmp_path):
    env = {**node_env, **fake_nvml(h100_node(2), base=node_env)}
    prolog = run("slurm-prolog.sh", env)
    assert prolog.returncode == 0, prolog.stdout + prolog.stderr
    assert (tmp_path / "spool" / "prolog-99.json").exists()
    epilog = run("slurm-epilog.sh", env)
    assert epilog.returncode == 0, epilog.stdout + epilog.stderr
    assert drains(tmp_path) == [] and not (tmp_path / "spool" / "prolog-99.json").exists()


def test_prolog_drains_and_fails_for_a_failing_gpu_of_the_job(fake_nvml, node_env, tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][0]["ecc_errors_uncorrected_volatile"] = 2
    env = {**node_env, **fake_nvml(scenario, base=node_env)}
    prolog = run("slurm-prolog.sh", env)
    assert prolog.returncode == 1  # Slurm requeues the job and drains the node
    (drain,) = drains(tmp_path)
    assert drain[:3] == ["update", "NodeName=gpu-node-07", "State=DRAIN"]
    assert drain[3].startswith("Reason=gpu-audit: ecc-uncorrectable on gpu:0: ")
    assert drain[3].removeprefix("Reason=") in prolog.stderr

    # The same node, a job on the healthy GPU: it runs.
    (tmp_path / "scontrol.log").unlink()
    ok = run("slurm-prolog.sh", {**env, "SLURM_JOB_GPUS": "1"})
    assert ok.returncode == 0 and drains(tmp_path) == []


def test_epilog_drains_for_a_leftover_process(fake_nvml, node_env, tmp_path):
    env = {**node_env, **fake_nvml(h100_node(2), base=node_env)}
    assert run("slurm-prolog.sh", env).returncode == 0
    program = install_program(tmp_path / "progs", "python")
    with running([[str(program), "-m", "torch.distributed.run", "train.py"]]) as (pid,):
        env.update(fake_nvml(h100_node(2, pids=[pid], process_memory_bytes=6 * GIB),
                             base=env))
        epilog = run("slurm-epilog.sh", env)
    assert epilog.returncode == 1, epilog.stdout + epilog.stderr
    (drain,) = drains(tmp_path)
    assert drain[3] == (f"Reason=gpu-audit: job-vram-leak on gpu:0: pid={pid} "
                        f"user={current_user()} used_memory_mib=6144")


def test_no_verdict_never_drains(fake_nvml, node_env, tmp_path):
    env = {**node_env, **fake_nvml(h100_node(1), base=node_env)}
    env.pop("SLURM_JOB_ID")
    for script in ("slurm-prolog.sh", "slurm-epilog.sh"):
        done = run(script, env)
        assert done.returncode == 0
        assert "no verdict (exit 3), not draining" in done.stderr
    policy = tmp_path / "bad.toml"
    policy.write_text("min_gpus = 'many'\n")
    done = run("slurm-healthcheck.sh", {**env, "GPU_AUDIT_POLICY": str(policy)})
    assert done.returncode == 0 and "exit 3" in done.stdout
    assert drains(tmp_path) == []


def test_healthcheck_for_nhc_leaves_the_draining_to_it(fake_nvml, node_env, tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][1]["lost"] = True
    env = {**node_env, **fake_nvml(scenario, base=node_env), "GPU_AUDIT_DRAIN": "0"}
    done = run("slurm-healthcheck.sh", env)
    assert done.returncode == 1 and "draining: gpu-audit: gpu-lost on gpu:1" in done.stdout
    assert drains(tmp_path) == []


def test_slurm_conf_lines_name_the_installed_scripts():
    text = (EXAMPLES / "slurm-gpu-audit.conf").read_text()
    settings = dict(line.split("=", 1) for line in text.splitlines()
                    if line and not line.startswith("#"))
    assert settings["Prolog"] == "/etc/slurm/gpu-audit-prolog.sh"
    assert settings["Epilog"] == "/etc/slurm/gpu-audit-epilog.sh"
    assert settings["HealthCheckProgram"] == "/etc/slurm/gpu-audit-healthcheck.sh"
    assert int(settings["PrologEpilogTimeout"]) > 30  # the hook's own deadline
    for script in ("slurm-prolog.sh", "slurm-epilog.sh", "slurm-healthcheck.sh"):
        assert f"examples/{script}" in text
        check = subprocess.run(["bash", "-n", str(EXAMPLES / script)], capture_output=True)
        assert check.returncode == 0, check.stderr
