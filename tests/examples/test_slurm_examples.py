"""The Slurm hook examples run as written (examples/slurm-prolog.sh, slurm-epilog.sh,
slurm-healthcheck.sh, gpu-audit-hook-lib.sh, gpu-audit.default, slurm-gpu-audit.conf) against
fake NVIDIA nodes, with a stand-in scontrol that records what it was asked to do and a syslog
socket: the exit codes Slurm reads, the drain reasons, and what is logged when gpu-audit gives
no verdict or does not run. tests/slurm_real runs them under a real slurmd."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakegpu
from tests.examples.hookenv import fake_gpu_audit, settings_file, syslog
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
               GPU_AUDIT_DEFAULTS=str(settings_file(tmp_path / "etc" / "gpu-audit")),
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
                        f"user={current_user()} used_memory_mib=6144; "
                        f"see {tmp_path}/spool/epilog-99.json")


def test_no_verdict_never_drains(fake_nvml, node_env, tmp_path):
    env = {**node_env, **fake_nvml(h100_node(1), base=node_env)}
    env.pop("SLURM_JOB_ID")
    for script in ("slurm-prolog.sh", "slurm-epilog.sh"):
        done = run(script, env)
        assert done.returncode == 0
        assert "no verdict (exit 3), log-only: " in done.stderr
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


# ------------------------------------------------------------ the settings file, and never silent


def configured(node_env: dict, tmp_path: Path, **keys: str) -> dict:
    """node_env with its settings file holding ``keys`` and a syslog socket."""
    keys.setdefault("GPU_AUDIT_LOG_SOCKET", str(tmp_path / "log.sock"))
    settings_file(Path(node_env["GPU_AUDIT_DEFAULTS"]), **keys)
    return node_env


def test_an_empty_environment_runs_gpu_audit_named_in_the_settings_file(fake_nvml, node_env,
                                                                          tmp_path):
    """slurmd passes no PATH: the settings file names the command (a venv's gpu-audit)."""
    nvml = fake_nvml(h100_node(2), base=node_env)
    command = fake_gpu_audit(tmp_path / "venv" / "bin" / "gpu-audit", nvml)
    settings = settings_file(tmp_path / "etc" / "gpu-audit", GPU_AUDIT=str(command),
                             GPU_AUDIT_SPOOL=f'"{tmp_path / "spool"}"')
    bare = {"GPU_AUDIT_DEFAULTS": str(settings), "SLURM_JOB_ID": "5", "SLURM_JOB_GPUS": "1",
            "SLURMD_NODENAME": "gpu-node-07"}
    done = run("slurm-prolog.sh", bare)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "spool" / "prolog-5.json").exists()


@pytest.mark.parametrize(("choice", "code", "drained"),
                         [(None, 1, True), ("drain", 1, True), ("fail-job", 1, False),
                          ("log-only", 0, False)])
def test_gpu_audit_not_running_is_logged_and_handled_as_configured(node_env, tmp_path, choice,
                                                                  code, drained):
    keys = {"GPU_AUDIT": str(tmp_path / "nowhere" / "gpu-audit")}
    if choice:
        keys["GPU_AUDIT_ON_ERROR"] = choice
    env = configured(node_env, tmp_path, **keys)
    with syslog(tmp_path / "log.sock") as log:
        done = run("slurm-prolog.sh", env)
        logged = log.read()
    assert done.returncode == code, done.stdout + done.stderr
    (line,) = logged
    assert line.startswith("<11>") and "gpu-audit: prolog on gpu-node-07, job 99: gpu-audit " \
                                      "did not run (exit 127)" in line
    assert "gpu-audit: not found" in line and "gpu-audit did not run (exit 127)" in done.stderr
    if drained:
        (drain,) = drains(tmp_path)
        assert drain[3].startswith("Reason=gpu-audit: prolog: gpu-audit did not run (exit 127): ")
        assert len(drain[3].removeprefix("Reason=")) <= 200
    else:
        assert drains(tmp_path) == []


def test_a_command_that_exits_127_itself_is_not_silent(node_env, tmp_path):
    broken = tmp_path / "venv" / "bin" / "gpu-audit"
    broken.parent.mkdir(parents=True)
    broken.write_text("#!/bin/sh\necho 'python3: No such file or directory' >&2\nexit 127\n")
    broken.chmod(0o755)
    env = configured(node_env, tmp_path, GPU_AUDIT=str(broken))
    with syslog(tmp_path / "log.sock") as log:
        done = run("slurm-healthcheck.sh", env)
        (line,) = log.read()
    assert done.returncode == 1
    assert "gpu-audit did not run (exit 127), drain: python3: No such file or directory" in line
    (drain,) = drains(tmp_path)
    assert drain[3] == ("Reason=gpu-audit: healthcheck: gpu-audit did not run (exit 127): "
                        "python3: No such file or directory")


@pytest.mark.parametrize("mode", [0o666, 0o620])
def test_a_settings_file_others_can_write_is_refused(fake_nvml, node_env, tmp_path, mode):
    env = configured({**node_env, **fake_nvml(h100_node(1), base=node_env)}, tmp_path,
                     GPU_AUDIT_ON_ERROR="log-only")  # what an attacker would write
    Path(env["GPU_AUDIT_DEFAULTS"]).chmod(mode)
    with syslog(tmp_path / "log.sock") as log:
        done = run("slurm-prolog.sh", env)
        log.read()
    assert done.returncode == 1  # the default for a hook that could not run: drain
    assert f"is writable by others (mode {mode:o})" in done.stderr
    (drain,) = drains(tmp_path)
    assert drain[3].startswith("Reason=gpu-audit: prolog not run: settings file refused: ")


@pytest.mark.parametrize("gpus", ["0;scontrol update State=RESUME", "../../etc/shadow",
                                  "0," * 500, "\x1b[2J7"])
def test_a_hostile_job_gpus_value_gets_no_verdict_never_another_gpu(fake_nvml, node_env,
                                                                    tmp_path, gpus):
    scenario = h100_node(2)
    scenario["gpus"][1]["ecc_errors_uncorrected_volatile"] = 2  # never judged for this job
    env = configured({**node_env, **fake_nvml(scenario, base=node_env), "SLURM_JOB_GPUS": gpus},
                     tmp_path)
    with syslog(tmp_path / "log.sock") as log:
        done = run("slurm-prolog.sh", env)
        (line,) = log.read()
    assert done.returncode == 0, done.stdout + done.stderr  # log-only, the default
    assert "no verdict (exit 3), log-only: " in line and "SLURM_JOB_GPUS" in line
    assert "ecc-uncorrectable" not in done.stderr and drains(tmp_path) == []

    settings_file(Path(env["GPU_AUDIT_DEFAULTS"]), GPU_AUDIT_ON_UNKNOWN="drain")
    done = run("slurm-prolog.sh", env)
    assert done.returncode == 1
    (drain,) = drains(tmp_path)
    assert drain[3].startswith("Reason=gpu-audit: prolog gave no verdict (exit 3): ")
    assert "\x1b" not in drain[3] and len(drain[3].removeprefix("Reason=")) <= 200


def test_a_missing_spool_gets_no_verdict_and_the_configured_choice(fake_nvml, node_env,
                                                                   tmp_path):
    env = configured({**node_env, **fake_nvml(h100_node(1), base=node_env)}, tmp_path,
                     GPU_AUDIT_SPOOL=str(tmp_path / "gone" / "spool"),
                     GPU_AUDIT_ON_UNKNOWN="fail-job")
    env.pop("GPU_AUDIT_SPOOL")  # the settings file's, not the environment's
    with syslog(tmp_path / "log.sock") as log:
        done = run("slurm-epilog.sh", env)
        (line,) = log.read()
    assert done.returncode == 1 and drains(tmp_path) == []
    assert "no verdict (exit 3), fail-job: " in line
    assert f"{tmp_path}/gone does not exist" in line


def test_the_reason_for_a_long_message_is_cut_between_words(node_env, tmp_path):
    noisy = tmp_path / "venv" / "bin" / "gpu-audit"
    noisy.parent.mkdir(parents=True)
    noisy.write_text("#!/bin/sh\necho \"$(seq 100000 100100 | tr '\\n' ' ')\"\nexit 1\n")
    noisy.chmod(0o755)
    run("slurm-prolog.sh", configured(node_env, tmp_path, GPU_AUDIT=str(noisy)))
    (drain,) = drains(tmp_path)
    reason = drain[3].removeprefix("Reason=")
    assert len(reason) <= 200 and reason.endswith(" ...")
    assert all(len(n) == 6 for n in reason.removesuffix(" ...").split(": ")[-1].split())


def test_no_path_never_means_the_working_folder(tmp_path):
    """bash's PATH when none is given ends in ".": a root hook must not run ./gpu-audit."""
    planted = tmp_path / "gpu-audit"
    planted.write_text(f"#!/bin/sh\ntouch {tmp_path}/ran\n")
    planted.chmod(0o755)
    settings = settings_file(tmp_path / "etc" / "gpu-audit", GPU_AUDIT_ON_ERROR="log-only")
    done = subprocess.run(["bash", str(EXAMPLES / "slurm-healthcheck.sh")], cwd=tmp_path,
                          env={"GPU_AUDIT_DEFAULTS": str(settings)}, capture_output=True,
                          text=True, timeout=60)
    assert not (tmp_path / "ran").exists()
    assert done.returncode == 0 and "gpu-audit did not run (exit 127), log-only" in done.stdout


def test_a_job_folders_configuration_never_sets_the_hooks_policy(fake_nvml, node_env, tmp_path):
    """slurmd starts a prolog in the job's working folder, which the job's user writes."""
    scenario = h100_node(1)
    scenario["gpus"][0]["ecc_errors_uncorrected_volatile"] = 2
    job_folder = tmp_path / "job"
    job_folder.mkdir()
    (job_folder / "gpu-audit.toml").write_text('ignore = ["ecc-uncorrectable"]\n')
    done = subprocess.run(["bash", str(EXAMPLES / "slurm-prolog.sh")], cwd=job_folder,
                          env={**node_env, **fake_nvml(scenario, base=node_env)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    (drain,) = drains(tmp_path)
    assert drain[3].startswith("Reason=gpu-audit: ecc-uncorrectable on gpu:0: ")
