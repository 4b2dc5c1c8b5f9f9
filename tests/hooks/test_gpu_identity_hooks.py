"""The Slurm hooks judge the GPU the job was given, found by one identity across NVML, the kernel
driver and /dev: a lost GPU keeps its place, a GPU NVML no longer lists drains as
``gpu-missing``, the health check counts GPUs against what Slurm configures, and hostile job
variables get no verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import fakegpu
from tests.collect.test_identity import dev_folder, driver_folder
from tests.fakegpu import h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

JOB_VARIABLES = ("SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES",
                 "SLURM_JOB_USER", "SLURMD_NODENAME", "GPU_AUDIT_MIN_GPUS")


def hook(kind: str, env: dict, tmp_path: Path, *args: str, **variables: str):
    return subprocess.run(
        [sys.executable, "-m", "gpu_audit", "check", "--slurm", kind,
         "--spool", str(tmp_path / "spool"), *args],
        env={**env, **variables}, cwd=tmp_path, capture_output=True, text=True, timeout=120)


def line(done) -> str:
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    return lines[0]


def no_verdict(done, *words: str) -> None:
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout == ""  # no verdict, on this GPU or any other
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    for word in words:
        assert word in done.stderr, done.stderr


@pytest.fixture
def base(cli_env, tmp_path):
    env = {k: v for k, v in cli_env.items() if k not in JOB_VARIABLES}
    env["PATH"] = f"{tmp_path / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def fake_scontrol(tmp_path: Path, gres: str) -> None:
    """An ``scontrol`` on PATH answering ``show node`` with ``Gres=<gres>``."""
    program = tmp_path / "bin" / "scontrol"
    program.parent.mkdir(exist_ok=True)
    program.write_text("#!/bin/sh\n"
                       "echo \"NodeName=$3 Arch=x86_64 CoresPerSocket=32\"\n"
                       f"echo \"   Gres={gres}\"\n"
                       "echo \"   CfgTRES=cpu=64,mem=1000000M,gres/gpu=8\"\n")
    program.chmod(0o755)


def lost_first(fake_nvml, env: dict) -> dict:
    scenario = h100_node(2)
    scenario["gpus"][0]["lost"] = True
    return fake_nvml(scenario, base=env)


@pytest.mark.parametrize("with_driver", [False, True])
def test_the_prolog_judges_the_lost_gpu_the_job_was_given(fake_nvml, base, tmp_path,
                                                          with_driver):
    """NVML index 0 lost (it names no bus id), index 1 healthy: the job given GPU 0 drains for
    GPU 0, the job given GPU 1 runs, whether or not the driver's /proc folder names GPU 0."""
    if with_driver:
        base = {**base, "GPU_AUDIT_PROC_NVIDIA": str(driver_folder(tmp_path / "proc", 2))}
    env = lost_first(fake_nvml, base)
    bad = hook("prolog", env, tmp_path, SLURM_JOB_ID="11", SLURM_JOB_GPUS="0",
               CUDA_VISIBLE_DEVICES="0")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert line(bad).startswith("gpu-audit: gpu-lost on gpu:0")
    good = hook("prolog", env, tmp_path, SLURM_JOB_ID="12", SLURM_JOB_GPUS="1",
                CUDA_VISIBLE_DEVICES="0")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "1 GPU judged" in line(good)
    kept = json.loads((tmp_path / "spool" / "prolog-12.json").read_text())
    assert [g["index"] for g in kept["gpus"]] == [1]


def test_the_epilog_drains_for_the_jobs_gpu_lost_during_the_job(fake_nvml, base, tmp_path):
    base = {**base, "GPU_AUDIT_PROC_NVIDIA": str(driver_folder(tmp_path / "proc", 2))}
    job = {"SLURM_JOB_ID": "13", "SLURM_JOB_GPUS": "0"}
    assert hook("prolog", fake_nvml(h100_node(2), base=base), tmp_path, **job).returncode == 0
    done = hook("epilog", lost_first(fake_nvml, base), tmp_path, **job)
    assert done.returncode == 2, done.stdout + done.stderr
    assert line(done).startswith("gpu-audit: gpu-")  # gpu-lost, and gpu-missing of the diff
    assert "on gpu:0" in line(done)
    kept = json.loads((tmp_path / "spool" / "epilog-13.json").read_text())
    missing = [f for f in kept["findings"] if f["id"] == "gpu-missing"]
    assert missing and "lost" in missing[0]["title"]  # paired by UUID from /proc, not "gone"


def test_gpus_gone_from_nvml_drain_naming_them(fake_nvml, base, tmp_path):
    """gres configures 8 GPUs (/dev/nvidia0-7), NVML lists 4, the job has GPUs 4-7."""
    base = {**base, "GPU_AUDIT_DEV": str(dev_folder(tmp_path / "dev", range(8)))}
    env = fake_nvml(h100_node(4), base=base)
    done = hook("prolog", env, tmp_path, SLURM_JOB_ID="21", SLURM_JOB_GPUS="4-7")
    assert done.returncode == 2, done.stdout + done.stderr
    assert line(done) == ("gpu-audit: gpu-missing on gpu:/dev/nvidia4: slurm_index=4 "
                          "minor_number=4 nvml_gpus=4 (+3 more)")
    epilog = hook("epilog", env, tmp_path, SLURM_JOB_ID="21", SLURM_JOB_GPUS="4-7")
    assert epilog.returncode == 2 and "gpu-missing on gpu:/dev/nvidia4" in line(epilog)
    # A job of the GPUs NVML lists is not held up by the missing ones.
    fine = hook("prolog", env, tmp_path, SLURM_JOB_ID="22", SLURM_JOB_GPUS="0-3")
    assert fine.returncode == 0, fine.stdout + fine.stderr


def test_a_job_gpu_nothing_on_the_node_knows_drains_too(fake_nvml, base, tmp_path):
    env = fake_nvml(h100_node(4), base=base)
    done = hook("prolog", env, tmp_path, SLURM_JOB_ID="23", SLURM_JOB_GPUS="2,6")
    assert done.returncode == 2, done.stdout + done.stderr
    assert line(done) == "gpu-audit: gpu-missing on gpu:job-6: slurm_index=6 nvml_gpus=4"


def test_a_job_gpu_past_what_slurm_configures_is_no_verdict(fake_nvml, base, tmp_path):
    fake_scontrol(tmp_path, "gpu:h100:8(S:0-1)")
    env = fake_nvml(h100_node(4), base=base)
    no_verdict(hook("prolog", env, tmp_path, SLURM_JOB_ID="24", SLURM_JOB_GPUS="0,1000"),
               "SLURM_JOB_GPUS=0,1000", "GPU 1000 is beyond the 8 GPUs Slurm configures")
    inside = hook("prolog", env, tmp_path, SLURM_JOB_ID="25", SLURM_JOB_GPUS="7")
    assert inside.returncode == 2 and "gpu-missing on gpu:job-7" in line(inside)


@pytest.mark.parametrize(("value", "words"), [
    ("0-99999", ["beyond the 1024 GPUs"]),
    (",".join(str(i) for i in range(10_000)), ["beyond the 1024 GPUs"]),
    ("," * 70_000, ["a spec names at most"]),
    ("0,x", ["'x' is not a GPU index"]),
    ("\u0661", ["not a whole number"]),  # Arabic-Indic one
    ("1" * 40, ["at most 20"]),
])
def test_hostile_job_gpus_are_no_verdict(fake_nvml, base, tmp_path, value, words):
    env = lost_first(fake_nvml, base)
    no_verdict(hook("prolog", env, tmp_path, SLURM_JOB_ID="31", SLURM_JOB_GPUS=value), *words)


@pytest.mark.parametrize(("how", "code", "start"), [
    ({"args": ["--slurm-gpus", "8"]}, 2,
     "gpu-audit: gpu-missing on host: expected_gpus=8 nvml_gpus=4 missing_gpus=4"),
    ({"gres": "gpu:h100:4(S:0),gpu:a100:4(S:1)"}, 2,
     "gpu-audit: gpu-missing on host: expected_gpus=8 nvml_gpus=4"),
    ({"gres": "gpu:4"}, 0, "gpu-audit: OK: healthcheck"),
    ({"gres": "(null)"}, 0, "gpu-audit: OK: healthcheck"),
    ({}, 0, "gpu-audit: OK: healthcheck"),  # no scontrol: nothing to compare with
    ({"gres": "gpu:8", "env": {"GPU_AUDIT_MIN_GPUS": "4"}}, 0, "gpu-audit: OK"),  # min_gpus rules
    ({"env": {"GPU_AUDIT_MIN_GPUS": "6"}}, 2, "gpu-audit: gpu-missing on host: expected_gpus=6"),
])
def test_the_health_check_counts_gpus_against_the_node(fake_nvml, base, tmp_path, how, code,
                                                       start):
    if "gres" in how:
        fake_scontrol(tmp_path, how["gres"])
    env = fake_nvml(h100_node(4), base={**base, **how.get("env", {})})
    done = hook("healthcheck", env, tmp_path, *how.get("args", []))
    assert done.returncode == code, done.stdout + done.stderr
    assert line(done).startswith(start)


def test_the_health_check_names_the_first_gpu_nvml_lost_track_of(fake_nvml, base, tmp_path):
    base = {**base, "GPU_AUDIT_PROC_NVIDIA": str(driver_folder(tmp_path / "proc", 4))}
    env = fake_nvml(h100_node(2), base=base)
    done = hook("healthcheck", env, tmp_path, "--slurm-gpus", "4")
    assert done.returncode == 2, done.stdout + done.stderr
    assert line(done).startswith("gpu-audit: gpu-missing on gpu:/dev/nvidia2: expected_gpus=4")


def test_slurm_gpus_belongs_to_the_hooks(base, tmp_path):
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--no-report",
                           "--slurm-gpus", "8"], env=base, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 3 and "use it with --slurm" in done.stderr


@pytest.mark.parametrize(("text", "count"), [
    ("NodeName=n1 Arch=x86_64\n   Gres=gpu:8\n", 8),
    ("   Gres=gpu:h100:4(S:0-1),gpu:a100:2(S:1),shard:h100:16\n", 6),
    ("   Gres=(null)\n   CfgTRES=cpu=64,gres/gpu=8\n", None),  # only Gres= counts
    ("NodeName=n1 State=IDLE\n", None),
    ("   Gres=gpu:99999999\n", None),  # not a count Slurm writes
])
def test_the_gres_count_is_read_from_scontrol_show_node(text, count):
    from gpu_audit.hooks.slurm import parse_gres_gpus

    assert parse_gres_gpus(text) == count
