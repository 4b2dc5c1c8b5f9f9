"""Whose processes the Slurm epilog calls the job's: ``check --user`` when given, else the job's
user from Slurm's environment (SLURM_JOB_USER, else SLURM_JOB_UID), as ``gpu-audit diff --user``
decides it. A process of another known user is never the job's, so it never drains the node."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_audit.hooks.slurm import job_user
from tests import fakegpu
from tests.examples.test_slurm_examples import EXAMPLES, FAKE_SCONTROL, drains
from tests.fakegpu import GIB, absent_pids, h100_node
from tests.hooks.test_slurm_cli import hook, one_line
from tests.procs import current_user, install_program, running

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

USER = current_user()
OTHER_UID = str(os.getuid() + 4242)  # nobody's, or someone else's: never this user's


@pytest.fixture
def base(cli_env):
    return {k: v for k, v in cli_env.items()
            if not k.startswith("SLURM_") and k != "CUDA_VISIBLE_DEVICES"}


def job(**more: str) -> dict[str, str]:
    return {"SLURM_JOB_ID": "4711", "SLURM_JOB_GPUS": "1", **more}


def epilog_with_a_leftover(fake_nvml, base, tmp_path: Path, *args: str, **variables: str):
    """A prolog on a clean node, then an epilog while a process of this user (appeared during
    the job, on its GPU) still holds 8 GiB."""
    prolog = hook("prolog", fake_nvml(h100_node(2), base=base), tmp_path, **job(**variables))
    assert prolog.returncode == 0, prolog.stdout + prolog.stderr
    program = install_program(tmp_path / "bin", "python")
    with running([[str(program), "train.py"]]) as (pid,):
        env = fake_nvml(h100_node(2, pids=[absent_pids(1)[0], pid],
                                  process_memory_bytes=8 * GIB), base=base)
        done = hook("epilog", env, tmp_path, *args, **job(**variables))
    return done, pid


def test_user_flag_wins_over_the_jobs_user(fake_nvml, base, tmp_path):
    done, pid = epilog_with_a_leftover(fake_nvml, base, tmp_path, "--user", USER,
                                       SLURM_JOB_USER="someone-else")
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_line(done).startswith(f"gpu-audit: job-vram-leak on gpu:1: pid={pid} "
                                     f"user={USER} used_memory_mib=8192; see ")


def test_user_flag_of_another_user_leaves_this_users_process_alone(fake_nvml, base, tmp_path):
    done, _ = epilog_with_a_leftover(fake_nvml, base, tmp_path, "--user", "someone-else",
                                     SLURM_JOB_USER=USER)
    assert done.returncode == 0, done.stdout + done.stderr
    assert one_line(done).startswith("gpu-audit: OK: epilog")


@pytest.mark.parametrize(("uid", "drained"), [(str(os.getuid()), True), (OTHER_UID, False)])
def test_the_job_uid_names_the_user_when_slurm_gives_no_name(fake_nvml, base, tmp_path, uid,
                                                               drained):
    done, pid = epilog_with_a_leftover(fake_nvml, base, tmp_path, SLURM_JOB_UID=uid)
    assert done.returncode == (2 if drained else 0), done.stdout + done.stderr
    if drained:
        assert f"pid={pid} user={USER} " in one_line(done)


def test_the_example_epilog_leaves_another_uids_job_alone(fake_nvml, base, tmp_path):
    """examples/slurm-epilog.sh with the stand-in scontrol: the job ran as another uid, the
    leftover process is this user's: not the job's, no drain; as this uid: drained."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(stat.S_IRWXU)
    env = {**base, "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                            base["PATH"]]),
           "SCONTROL_LOG": str(tmp_path / "scontrol.log"),
           "GPU_AUDIT_SPOOL": str(tmp_path / "spool"), "SLURMD_NODENAME": "gpu-node-07",
           "SLURM_JOB_ID": "99", "SLURM_JOB_GPUS": "0"}

    def run(script: str, variables: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(EXAMPLES / script)], env=variables,
                              capture_output=True, text=True, timeout=120)

    program = install_program(tmp_path / "progs", "python")
    for uid, drained in ((OTHER_UID, False), (str(os.getuid()), True)):
        clean = {**env, **fake_nvml(h100_node(2), base=env), "SLURM_JOB_UID": uid}
        assert run("slurm-prolog.sh", clean).returncode == 0
        with running([[str(program), "train.py"]]) as (pid,):
            leftover = {**clean, **fake_nvml(h100_node(2, pids=[pid],
                                                       process_memory_bytes=6 * GIB), base=env)}
            epilog = run("slurm-epilog.sh", leftover)
        if drained:
            assert epilog.returncode == 1, epilog.stdout + epilog.stderr
            (drain,) = drains(tmp_path)
            assert drain[3].startswith(f"Reason=gpu-audit: job-vram-leak on gpu:0: pid={pid} "
                                       f"user={USER} used_memory_mib=6144; see ")
        else:
            assert epilog.returncode == 0, epilog.stdout + epilog.stderr
            assert drains(tmp_path) == []


def test_job_user_resolution():
    uid = str(os.getuid())
    assert job_user({"SLURM_JOB_USER": "alice", "SLURM_JOB_UID": uid}, "bob") == "bob"
    assert job_user({"SLURM_JOB_USER": "alice", "SLURM_JOB_UID": uid}) == "alice"
    assert job_user({"SLURM_JOB_USER": " ", "SLURM_JOB_UID": uid}) == USER
    assert job_user({"SLURM_JOB_UID": "4294967294000"}) == "4294967294000"  # as psutil says
    assert job_user({"SLURM_JOB_UID": "-1"}) is None
    assert job_user({"SLURM_JOB_UID": "x"}) is None
    assert job_user({}) is None
