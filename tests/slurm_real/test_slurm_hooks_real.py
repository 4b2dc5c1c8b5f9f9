"""The shipped Slurm hooks under a real slurmctld + slurmd + munged on localhost (one node, GPUs
as gres on ``mknod`` character devices), gpu-audit playing a fake NVIDIA node: what a job and
the node's state show, and what the hooks log through syslog.

Needs root and Debian's slurm-wlm and munge (``.ci/run`` installs them); skipped, with the
reason, where they are missing. One cluster for the module, stopped at its end."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import fakegpu
from tests.examples.hookenv import Syslog, fake_gpu_audit, settings_file
from tests.fakegpu import GIB, h100_node
from tests.procs import install_program, running
from tests.slurm_real import cluster as slurm

GRES_GPUS = 8
fake_nvml_lib = fakegpu.fake_nvml_lib

if os.geteuid() != 0:
    pytest.skip("slurmd runs its hooks as root: these tests need root", allow_module_level=True)
if missing := slurm.missing_programs():
    pytest.skip(f"no {', '.join(missing)}: apt-get install slurm-wlm munge (.ci/run does, "
                "as root)", allow_module_level=True)


class Node:
    """The cluster and what the test changes between jobs: the fake NVML scenario, the
    settings file, the syslog socket."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.scenario_path = root / "nvml" / "scenario.json"
        self.spool = root / "gpu-audit-spool"
        self.log = Syslog(root / "log.sock")
        env = fakegpu.scenario_env(h100_node(GRES_GPUS), root / "nvml")
        env["FAKE_NVML_SCENARIO"] = str(self.scenario_path)
        self.transcript = root / "gpu-audit.transcript"
        self.command = fake_gpu_audit(root / "venv" / "bin" / "gpu-audit", env, self.transcript)
        self.settings = root / "default" / "gpu-audit"
        self.configure()
        self.play(h100_node(GRES_GPUS))
        self.cluster: slurm.Cluster | None = None

    def configure(self, **keys: str) -> None:
        settings_file(self.settings, **{
            "GPU_AUDIT": str(self.command), "GPU_AUDIT_SPOOL": str(self.spool),
            "GPU_AUDIT_LOG_SOCKET": str(self.log.path), "GPU_AUDIT_SLURM_SETTLE_S": "0.2",
            **keys})

    def play(self, scenario: dict) -> None:
        self.scenario_path.write_text(json.dumps(scenario))

    def runs(self) -> str:
        """What gpu-audit was asked and answered (the transcript's end)."""
        return self.transcript.read_text()[-3000:] if self.transcript.exists() else ""

    def logged(self) -> list[str]:
        return list(self.log.read())

    def fresh(self) -> None:
        """Back to a healthy node in service, nothing logged yet."""
        self.configure()
        self.play(h100_node(GRES_GPUS))
        assert self.cluster is not None
        self.cluster.resume()
        self.log.read()
        self.log.lines.clear()


@pytest.fixture(scope="module")
def node(tmp_path_factory, fake_nvml_lib) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("slurm")
    root.chmod(0o755)
    state = Node(root)
    try:
        state.cluster = slurm.start(root / "cluster", GRES_GPUS, state.settings)
    except PermissionError as exc:
        state.log.close()
        pytest.skip(f"cannot start a local cluster here: {exc}")
    try:
        yield state
    finally:
        state.cluster.stop()
        state.log.close()


@pytest.fixture
def fresh(node: Node) -> Node:
    node.fresh()
    return node


def drained(c: slurm.Cluster, job: str | None = None) -> dict[str, str]:
    """The node once drained (or, with ``job``, once that job has ended: it ran)."""
    def done(node: dict[str, str]) -> bool:
        return "DRAIN" in node.get("State", "") or (
            job is not None and c.job(job).get("JobState") in ("COMPLETED", "FAILED"))
    return c.wait_node(done)


def test_a_healthy_node_runs_the_job(fresh):
    c = fresh.cluster
    job = c.submit("--gres=gpu:2", script="test -n \"$CUDA_VISIBLE_DEVICES\"")
    assert c.wait_job(job, {"COMPLETED", "FAILED"})["JobState"] == "COMPLETED"
    assert "DRAIN" not in c.node()["State"]
    assert fresh.logged() == []  # an OK says nothing
    assert not list(fresh.spool.glob("*-" + job + ".json"))  # the epilog removed the record


def test_a_leftover_process_at_the_epilog_drains_the_node(fresh, tmp_path):
    c = fresh.cluster
    started, go = tmp_path / "started", tmp_path / "go"
    # The job's script runs after its prolog (a RUNNING job may still be in its prolog).
    job = c.submit("--gres=gpu:1",
                   script=f"touch {started}; while [ ! -e {go} ]; do sleep 0.1; done")
    slurm.wait_for(started.exists, 40, f"job {job}'s script")
    program = install_program(tmp_path / "bin", "python")
    with running([[str(program), "-m", "torch.distributed.run", "train.py"]]) as (pid,):
        fresh.play(h100_node(GRES_GPUS, pids=[pid], process_memory_bytes=6 * GIB))
        go.touch()
        node = drained(c)
    reason = node.get("Reason", "")
    assert reason.startswith(f"gpu-audit: job-vram-leak on gpu:0: pid={pid} user=root "
                             "used_memory_mib=6144; see "), (node, fresh.runs())
    assert (fresh.spool / f"epilog-{job}.json").exists()
    assert any("epilog on gpuaudit-node" in line and "draining" in line
               for line in fresh.logged())


def test_gpu_audit_not_runnable_is_logged_and_handled_as_configured(fresh):
    c = fresh.cluster
    fresh.configure(GPU_AUDIT="/opt/nowhere/bin/gpu-audit", GPU_AUDIT_ON_ERROR="log-only")
    job = c.submit("--gres=gpu:1")
    assert c.wait_job(job, {"COMPLETED", "FAILED"})["JobState"] == "COMPLETED"
    logged = fresh.logged()
    assert len(logged) == 2 and all("did not run (exit 127), log-only" in x for x in logged)
    assert "DRAIN" not in c.node()["State"]

    fresh.configure(GPU_AUDIT="/opt/nowhere/bin/gpu-audit")  # the default: drain
    job = c.submit("--gres=gpu:1")
    node = drained(c)
    c.cancel(job)
    # The prolog drains, then the epilog of the requeued job says it again.
    assert re.match(r"gpu-audit: (prolog|epilog): gpu-audit did not run \(exit 127\): "
                    r"/opt/nowhere/bin/gpu-audit: not found", node.get("Reason", "")), node
    assert any(line.startswith("<11>") and "prolog on gpuaudit-node, job " + job in line
               and "did not run (exit 127), drain" in line for line in fresh.logged())


def test_a_hostile_settings_file_is_refused(fresh):
    c = fresh.cluster
    fresh.configure(GPU_AUDIT_ON_ERROR="log-only")
    fresh.settings.chmod(0o666)
    try:
        job = c.submit("--gres=gpu:1")
        node = drained(c)
        c.cancel(job)
    finally:
        fresh.settings.chmod(0o644)
    assert "settings file refused" in node.get("Reason", ""), node


def test_the_jobs_lost_gpu_drains_naming_it(fresh):
    c = fresh.cluster
    scenario = h100_node(GRES_GPUS)
    scenario["gpus"][0]["lost"] = True  # NVML index 0, gres index 0: the job's GPU
    fresh.play(scenario)
    job = c.submit("--gres=gpu:1")
    node = drained(c, job)
    c.cancel(job)
    assert node.get("Reason", "").startswith("gpu-audit: gpu-lost on gpu:0"), (node, fresh.runs())


def test_gpus_vanished_from_nvml_drain(fresh):
    c = fresh.cluster
    fresh.play(h100_node(GRES_GPUS // 2))  # gres says 8, NVML answers for 4
    job = c.submit(f"--gres=gpu:{GRES_GPUS}")
    node = drained(c, job)
    c.cancel(job)
    assert node.get("Reason", "").startswith("gpu-audit: gpu-missing on "), node
    assert "exit 3" not in node.get("Reason", ""), (node, fresh.runs())


def health_checks_done(node: Node) -> int:
    """How many health checks gpu-audit has answered (the transcript's lines)."""
    text = node.transcript.read_text() if node.transcript.exists() else ""
    return sum(1 for line in text.splitlines() if line.startswith("check --slurm healthcheck "))


def logged_soon(node: Node, *parts: str, timeout: float = 30) -> list[str]:
    """The syslog lines, once one holds every part (or at the timeout)."""
    slurm.wait_for_or_not(lambda: any(all(p in x for p in parts) for x in node.logged()),
                          timeout)
    return node.logged()


def test_the_health_check_leaves_a_healthy_node_idle(fresh):
    c = fresh.cluster
    before = health_checks_done(fresh)
    with c.health_checks():
        # Two answers: the second started after the node was healthy and in service.
        slurm.wait_for(lambda: health_checks_done(fresh) >= before + 2, 40,
                       "two health checks by slurmd")
    last = fresh.runs().rstrip().splitlines()[-1]
    assert re.fullmatch(r"check --slurm healthcheck -> 0: gpu-audit: OK: healthcheck on \S+: "
                        rf"no node problem \({GRES_GPUS} GPUs judged; .*", last), fresh.runs()
    assert c.node()["State"] == "IDLE"
    assert fresh.logged() == []


def test_the_health_check_drains_for_gpus_vanished_from_nvml(fresh):
    c = fresh.cluster
    fresh.play(h100_node(GRES_GPUS // 2))  # gres says 8, NVML answers for 4
    with c.health_checks():
        node = drained(c)
    assert node.get("Reason") == ("gpu-audit: gpu-missing on host: expected_gpus=8 nvml_gpus=4 "
                                  "missing_gpus=4"), (node, fresh.runs())
    assert any("healthcheck on gpuaudit-node" in x and "draining: gpu-audit: gpu-missing" in x
               for x in fresh.logged())


def test_the_health_check_handles_gpu_audit_not_runnable_as_configured(fresh):
    c = fresh.cluster
    fresh.configure(GPU_AUDIT="/opt/nowhere/bin/gpu-audit", GPU_AUDIT_ON_ERROR="log-only")
    with c.health_checks():
        logged = logged_soon(fresh, "healthcheck on gpuaudit-node", "log-only")
    assert logged and all(x.startswith("<11>") and "healthcheck on gpuaudit-node, job none: "
                          "gpu-audit did not run (exit 127), log-only: /opt/nowhere/bin/"
                          "gpu-audit: not found" in x for x in logged), logged
    assert "DRAIN" not in c.node()["State"]

    fresh.configure(GPU_AUDIT="/opt/nowhere/bin/gpu-audit")  # the default: drain
    with c.health_checks():
        node = drained(c)
    assert node.get("Reason", "").startswith(
        "gpu-audit: healthcheck: gpu-audit did not run (exit 127): /opt/nowhere/bin/gpu-audit: "
        "not found"), node


def test_a_missing_spool_folder_is_no_verdict_handled_as_configured(fresh):
    c = fresh.cluster
    gone = fresh.root / "gone"
    fresh.configure(GPU_AUDIT_SPOOL=str(gone / "spool"))  # GPU_AUDIT_ON_UNKNOWN=log-only
    job = c.submit("--gres=gpu:1")
    assert c.wait_job(job, {"COMPLETED", "FAILED"})["JobState"] == "COMPLETED"
    said = (f"no verdict (exit 3), log-only: gpu-audit: spool folder {gone / 'spool'}: cannot "
            f"create it: {gone} does not exist")
    logged = logged_soon(fresh, f"epilog on gpuaudit-node, job {job}")
    assert [x.split(": ", 1)[1] for x in logged] == [
        f"prolog on gpuaudit-node, job {job}: {said}",
        f"epilog on gpuaudit-node, job {job}: {said}"], logged
    assert "DRAIN" not in c.node()["State"]

    fresh.configure(GPU_AUDIT_SPOOL=str(gone / "spool"), GPU_AUDIT_ON_UNKNOWN="drain")
    job = c.submit("--gres=gpu:1")
    node = drained(c)
    c.cancel(job)
    # The prolog drains; slurmd then runs the epilog of the failed job, whose own drain may
    # rewrite the reason with the same words: either hook's name may be the last one set.
    assert re.match(r"gpu-audit: (prolog|epilog) gave no verdict \(exit 3\): gpu-audit: "
                    r"spool folder ", node.get("Reason", "")), node
    logged = logged_soon(fresh, f"prolog on gpuaudit-node, job {job}", "drain")
    assert any(f"prolog on gpuaudit-node, job {job}: no verdict (exit 3), drain" in x
               for x in logged), logged


def test_a_read_only_spool_is_no_verdict(fresh):
    c = fresh.cluster
    spool = fresh.root / "read-only-spool"
    spool.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k,mode=0700", "tmpfs",
                              str(spool)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs (needs CAP_SYS_ADMIN): "
                    f"{mounted.stderr.strip()}")
    try:
        fresh.configure(GPU_AUDIT_SPOOL=str(spool))
        job = c.submit("--gres=gpu:1")
        assert c.wait_job(job, {"COMPLETED", "FAILED"})["JobState"] == "COMPLETED"
        logged = logged_soon(fresh, f"epilog on gpuaudit-node, job {job}")
    finally:
        subprocess.run(["umount", str(spool)], check=True)
    assert any(f"prolog on gpuaudit-node, job {job}: no verdict (exit 3), log-only: gpu-audit: "
               f"spool folder {spool}: cannot write prolog-{job}.json: Read-only file system"
               in x for x in logged), logged
    assert "DRAIN" not in c.node()["State"]


def test_zz_the_cluster_stops_leaving_no_daemon(node):
    c = node.cluster
    c.stop()
    assert c.daemons_alive() == []
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    assert str(c.conf) not in ps and str(c.root / "run" / "munge.socket") not in ps
