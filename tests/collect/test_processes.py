from __future__ import annotations

import dataclasses
import sys

import psutil

from gpu_audit.collect.processes import container_from_cgroup, read_processes
from gpu_audit.redact import MASK
from gpu_audit.rules.duplicates import annotate_duplicates
from tests.procs import current_user, install_program, running, uvicorn_argvs


@dataclasses.dataclass(frozen=True)
class Entry:
    pid: int
    gpu_index: int = 0
    gpu_uuid: str | None = "GPU-0"
    used_memory_bytes: int | None = 154 * 1024**2
    type: str = "compute"


def test_real_uvicorn_copies_are_joined_and_grouped(tmp_path):
    program = install_program(tmp_path / "bin", "uvicorn")
    with running(uvicorn_argvs(program, [8000, 8080, 3001])) as pids:
        procs, errors = read_processes([Entry(pid) for pid in pids], container=None)
    assert errors == []
    assert [p.pid for p in procs] == sorted(pids)
    for p in procs:
        assert p.visible and p.user == current_user()
        assert p.name == "uvicorn"
        assert p.cmdline[1].endswith("/uvicorn") and "--port" in p.cmdline
        assert p.start_time and p.start_time.endswith("Z")
        assert p.status in ("sleeping", "running")
        assert p.rss_bytes and p.rss_bytes > 0
    grouped = annotate_duplicates(procs)
    assert {p.duplicate_group for p in grouped} == {1}


def test_secrets_on_a_real_command_line_never_leave_the_collector(tmp_path):
    program = install_program(tmp_path / "bin", "serve")
    argv = [
        sys.executable,
        str(program),
        "--hf-token",
        "hf_" + "x" * 30,
        "--db",
        "postgres://svc:pa55word@db/prod",
    ]
    with running([argv]) as (pid,):
        (proc,), _ = read_processes([Entry(pid)], container=None)
    text = " ".join(proc.cmdline)
    assert "pa55word" not in text and "hf_xxx" not in text
    assert MASK in text


def test_distributed_rank_is_read_from_the_environment(tmp_path):
    program = install_program(tmp_path / "bin", "train")
    env = {"PATH": "/usr/bin:/bin", "LOCAL_RANK": "3"}
    with running([[sys.executable, str(program)]], env=env) as (pid,):
        (proc,), _ = read_processes([Entry(pid)], container=None)
    assert proc.dist_rank == 3


def test_a_pid_that_exited_stays_in_the_table_with_its_memory():
    dead = psutil.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (proc,), _ = read_processes(
        [Entry(dead.pid, used_memory_bytes=2 * 1024**3)], container=None
    )
    assert not proc.visible and proc.used_memory_bytes == 2 * 1024**3
    assert "exited" in proc.note
    (inside,), _ = read_processes([Entry(dead.pid)], container="docker")
    assert "PID namespace" in inside.note


def test_container_ids_are_read_from_cgroup_paths():
    docker = "0::/system.slice/docker-" + "a" * 64 + ".scope\n"
    assert container_from_cgroup(docker) == "docker:aaaaaaaaaaaa"
    kube = "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-" + "b" * 64 + ".scope"
    assert container_from_cgroup(kube).startswith("kubernetes:")
    assert container_from_cgroup("0::/user.slice/user-1000.slice/session-2.scope") is None
