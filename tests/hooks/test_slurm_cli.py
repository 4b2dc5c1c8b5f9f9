"""``gpu-audit check --slurm prolog|epilog|healthcheck`` against fake NVIDIA nodes and canned
documents: one line, and the exit codes the hooks need (2 only for the node's problems)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpu_audit.model import Severity
from gpu_audit.report.jsonout import scan_document
from gpu_audit.rules import evaluate, exit_code
from tests import builders as b
from tests import fakegpu
from tests.fakegpu import (
    GIB,
    NVML_ERROR_DRIVER_NOT_LOADED,
    absent_pids,
    broken_driver,
    h100_node,
    process,
)
from tests.procs import current_user, install_program, running

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml

USER = current_user()


def hook(kind: str, env: dict, tmp_path: Path, *args: str, **variables: str):
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "gpu_audit", "check", "--slurm", kind,
         "--spool", str(tmp_path / "spool"), *args],
        env={**env, **variables}, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    done.elapsed = time.monotonic() - started  # type: ignore[attr-defined]
    return done


def job(**more: str) -> dict[str, str]:
    return {"SLURM_JOB_ID": "4711", "SLURM_JOB_GPUS": "1", "SLURM_JOB_USER": USER, **more}


def one_line(done) -> str:
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    assert "\x1b" not in done.stdout
    return lines[0]


@pytest.fixture
def base(cli_env):
    env = dict(cli_env)
    for name in ("SLURM_JOB_ID", "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES",
                 "SLURM_JOB_USER"):
        env.pop(name, None)
    return env


def test_prolog_keeps_the_job_scan_and_passes_a_healthy_node(fake_nvml, base, tmp_path):
    env = fake_nvml(h100_node(2), base=base)
    done = hook("prolog", env, tmp_path, **job())
    assert done.returncode == 0, done.stdout + done.stderr
    assert one_line(done).startswith("gpu-audit: OK: prolog on ")
    record = tmp_path / "spool" / "prolog-4711.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "spool").stat().st_mode) == 0o700
    doc = json.loads(record.read_text())
    assert doc["schema"] == "gpu-audit.scan/1"
    assert doc["gpu_selection"]["indices"] == [1] and [g["index"] for g in doc["gpus"]] == [1]
    assert not (tmp_path / "reports").exists()  # a hook writes no report files

    after = hook("epilog", env, tmp_path, **job())
    assert after.returncode == 0, after.stdout + after.stderr
    assert one_line(after).startswith("gpu-audit: OK: epilog")
    assert not record.exists()  # the job is over


def test_prolog_fails_only_for_a_fault_on_the_jobs_gpus(fake_nvml, base, tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][1]["ecc_errors_uncorrected_volatile"] = 2
    env = fake_nvml(scenario, base=base)
    bad = hook("prolog", env, tmp_path, **job(SLURM_JOB_GPUS="1"))
    assert bad.returncode == 2
    assert one_line(bad).startswith("gpu-audit: ecc-uncorrectable on gpu:1: "
                                    "uncorrected_volatile=2")
    other = hook("prolog", env, tmp_path, **job(SLURM_JOB_GPUS="0"))
    assert other.returncode == 0, other.stdout  # GPU 1 is another job's business


def test_the_jobs_own_warnings_never_fail_a_hook(fake_nvml, base, tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][1]["processes"].append(process(absent_pids(1)[0], 20 * GIB))
    scenario["gpus"][1]["memory_total_bytes"] = 21 * GIB  # and little memory left
    env = fake_nvml(scenario, base=base)
    noisy = {"CUDA_LAUNCH_BLOCKING": "1", "PYTORCH_NO_NVML": "1",
             "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:5", "CUDA_VISIBLE_DEVICES": "7"}
    for kind in ("prolog", "healthcheck"):
        done = hook(kind, env, tmp_path, **job(**noisy))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "other finding" in one_line(done)


def test_epilog_drains_for_memory_the_jobs_process_still_holds(fake_nvml, base, tmp_path):
    assert hook("prolog", fake_nvml(h100_node(2), base=base), tmp_path, **job()).returncode == 0
    program = install_program(tmp_path / "bin", "python")
    with running([[str(program), "train.py"]]) as (pid,):
        env = fake_nvml(h100_node(2, pids=[absent_pids(1)[0], pid],
                                  process_memory_bytes=8 * GIB), base=base)
        done = hook("epilog", env, tmp_path, **job())
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_line(done) == (f"gpu-audit: job-vram-leak on gpu:1: pid={pid} user={USER} "
                              f"used_memory_mib=8192; see {tmp_path}/spool/epilog-4711.json")
    assert not (tmp_path / "spool" / "prolog-4711.json").exists()
    kept = json.loads((tmp_path / "spool" / "epilog-4711.json").read_text())
    assert kept["schema"] == "gpu-audit.diff/1"
    assert [f["id"] for f in kept["findings"]] == ["job-vram-leak"]


def test_epilog_keeps_no_empty_diff_for_a_fault_the_node_had_before(fake_nvml, base,
                                                                     tmp_path):
    scenario = h100_node(2)
    scenario["gpus"][1]["ecc_errors_uncorrected_volatile"] = 2
    env = fake_nvml(scenario, base=base)
    # The prolog saw the fault (and kept its record); the epilog sees the same fault again.
    assert hook("prolog", env, tmp_path, **job()).returncode == 2
    done = hook("epilog", env, tmp_path, **job())
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_line(done).startswith("gpu-audit: ecc-uncorrectable on gpu:1: ")
    assert "see " not in one_line(done)
    assert not (tmp_path / "spool" / "epilog-4711.json").exists()


def test_epilog_leaves_another_users_process_alone(fake_nvml, base, tmp_path):
    assert hook("prolog", fake_nvml(h100_node(2), base=base), tmp_path, **job()).returncode == 0
    program = install_program(tmp_path / "bin", "python")
    with running([[str(program), "serve.py"]]) as (pid,):
        env = fake_nvml(h100_node(2, pids=[absent_pids(1)[0], pid]), base=base)
        done = hook("epilog", env, tmp_path, **job(SLURM_JOB_USER="someone-else"))
    assert done.returncode == 0, done.stdout + done.stderr


def canned(tmp_path: Path, name: str, **gpu1) -> Path:
    scan = b.scan(gpus=[b.gpu(0, pci_bus_id="00000000:18:00.0"),
                        b.gpu(1, pci_bus_id="00000000:2A:00.0", **gpu1)],
                  generated_at=f"2026-11-22T1{len(gpu1)}:00:00Z")
    findings = evaluate(scan)
    path = tmp_path / name
    path.write_text(json.dumps(scan_document(scan, findings, exit_code(findings,
                                                                         Severity.ERROR))))
    return path


@pytest.mark.parametrize(("after", "code", "reason"), [
    ({}, 0, "gpu-audit: OK: epilog"),
    ({"ecc_errors_corrected_volatile": 9}, 0, "gpu-audit: OK: epilog"),  # a warning only
    ({"ecc_errors_uncorrected_volatile": 1},
     2, "gpu-audit: ecc-errors-increased on gpu:1: uncorrected_increase=1"),
    ({"remapped_rows_uncorrectable": 1, "remapped_rows_pending": True},
     2, "gpu-audit: remapped-rows-increased on gpu:1: uncorrectable_increase=1"),
])
def test_epilog_on_canned_documents(base, tmp_path, after, code, reason):
    before = canned(tmp_path, "before.json")
    assert hook("prolog", base, tmp_path, "--from", str(before), **job()).returncode == 0
    done = hook("epilog", base, tmp_path, "--from", str(canned(tmp_path, "after.json", **after)),
                **job())
    assert done.returncode == code, done.stdout + done.stderr
    assert one_line(done).startswith(reason)


def test_epilog_without_a_prolog_record_still_judges(base, tmp_path):
    done = hook("epilog", base, tmp_path, "--from", str(canned(tmp_path, "a.json")), **job())
    assert done.returncode == 0
    assert "no prolog record prolog-4711.json" in one_line(done)


def test_healthcheck_drains_a_broken_driver_but_not_a_gpu_less_node(fake_nvml, base, tmp_path):
    env = fake_nvml(broken_driver(NVML_ERROR_DRIVER_NOT_LOADED), base=base)
    done = hook("healthcheck", env, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_line(done).startswith("gpu-audit: nvml-unavailable on host")
    assert not (tmp_path / "spool").exists()  # a health check keeps no state


def test_a_hung_driver_is_answered_within_the_timeout(fake_nvml, base, tmp_path):
    scenario = h100_node(1)
    scenario["hang"] = ["nvmlInitWithFlags"]
    env = fake_nvml(scenario, base=base)
    done = hook("healthcheck", env, tmp_path, "--timeout", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert one_line(done).startswith("gpu-audit: nvml-unavailable on host: cause=")
    assert done.elapsed < 20


@pytest.mark.parametrize(("args", "variables", "message"), [
    ([], {}, "SLURM_JOB_ID=None: not a Slurm job id"),
    ([], {"SLURM_JOB_ID": "1;rm"}, "not a Slurm job id"),
    (["--json"], job(), "drop --json"),
    (["--stages", "imports"], job(), "drop --stages"),
])
def test_no_verdict_is_exit_3_with_one_line(base, tmp_path, args, variables, message):
    saved = canned(tmp_path, "a.json")
    done = hook("prolog", base, tmp_path, "--from", str(saved), *args, **variables)
    assert done.returncode == 3
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert done.stdout == ""


def test_a_planted_spool_link_is_refused(base, tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    (tmp_path / "spool").symlink_to(tmp_path / "elsewhere")
    done = hook("prolog", base, tmp_path, "--from", str(canned(tmp_path, "a.json")), **job())
    assert done.returncode == 3 and "is a symbolic link" in done.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []


@pytest.fixture
def immutable(tmp_path) -> Iterator[Callable[[Path], Path]]:
    """``immutable(folder)``: the folder refuses every change, root's too (``chattr +i``: a
    read-only disk that root cannot bypass); skipped where the user or filesystem cannot."""
    made: list[Path] = []

    def make(folder: Path) -> Path:
        if os.geteuid() != 0:
            pytest.skip("chattr +i needs root (CAP_LINUX_IMMUTABLE)")
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i {folder} failed: {done.stderr.strip()}")
        made.append(folder)
        return folder

    yield make
    for folder in made:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_spool_that_refuses_writes_is_no_verdict_with_one_line(base, tmp_path, immutable):
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    immutable(spool)
    done = hook("prolog", base, tmp_path, "--from", str(canned(tmp_path, "a.json")), **job())
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr == (f"gpu-audit: spool folder {spool}: cannot write prolog-4711.json: "
                           "Operation not permitted\n")  # not "internal error: ... a bug"
    assert done.stdout == ""
    assert list(spool.iterdir()) == []


def test_a_spool_that_cannot_be_created_is_no_verdict(base, tmp_path, immutable):
    parent = tmp_path / "var"
    parent.mkdir(mode=0o755)
    immutable(parent)
    done = hook("prolog", base, tmp_path, "--spool", str(parent / "spool"),
                "--from", str(canned(tmp_path, "a.json")), **job())
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr == (f"gpu-audit: spool folder {parent / 'spool'}: cannot create it: "
                           "Operation not permitted\n")


def test_a_fifo_in_place_of_the_record_is_no_verdict_at_once(base, tmp_path):
    """A FIFO where the prolog's record should be cannot hold the epilog to its deadline."""
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    os.mkfifo(spool / "prolog-4711.json")
    done = hook("epilog", base, tmp_path, "--from", str(canned(tmp_path, "a.json")), **job())
    assert done.returncode == 3, done.stdout + done.stderr
    assert "is a FIFO, not a regular file" in done.stderr
    assert done.elapsed < 20  # the hook's deadline is 30 s; refusing takes well under a second


def test_a_root_owned_record_link_is_replaced_not_followed(base, tmp_path):
    """A link named as the record, even one root could have made, is never written through."""
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (spool / "prolog-4711.json").symlink_to(victim)
    done = hook("prolog", base, tmp_path, "--from", str(canned(tmp_path, "a.json")), **job())
    assert done.returncode == 0, done.stdout + done.stderr
    assert victim.read_text() == "root:x:0:0:root:/root:/bin/bash\n"
    record = spool / "prolog-4711.json"
    assert not record.is_symlink() and json.loads(record.read_text())["schema"]
