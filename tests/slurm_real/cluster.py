"""A one-node Slurm cluster on localhost for the tests: munged with a key of its own, slurmctld
and slurmd with a slurm.conf in a temporary folder (state, spool, logs and pid files there too),
free ports, and GPUs as gres on character devices made with ``mknod``. The hooks are the shipped
scripts, installed as an admin would (:mod:`tests.examples.hookenv`); only their settings file
is the test's, named by a wrapper that sets ``GPU_AUDIT_DEFAULTS`` (slurmd gives a hook no
variables of ours).

slurmd runs the health check every second (``HealthCheckInterval=1``, the smallest), but its
wrapper starts the shipped script only while the test has switched it on
(:meth:`Cluster.health_checks`): the other tests' scenarios never meet a health check, and a
health check never drains the node under a test about the prolog.

Everything is started by :func:`start` and stopped by :meth:`Cluster.stop`, which kills every
daemon it started by its pid and waits for it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.examples.hookenv import install_hooks

DAEMONS = ("munged", "slurmctld", "slurmd")
NODE = "gpuaudit-node"


def missing_programs() -> list[str]:
    """The programs a real cluster needs that this machine lacks."""
    wanted = (*DAEMONS, "srun", "sbatch", "scontrol", "mknod")
    return [p for p in wanted if not shutil.which(p, path=os.environ.get("PATH", "") +
                                                  ":/usr/sbin:/sbin")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _which(program: str) -> str:
    found = shutil.which(program, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    assert found, program
    return found


@dataclass
class Cluster:
    root: Path
    gpus: int
    hooks: dict[str, Path] = field(default_factory=dict)
    settings: Path = Path()
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    def env(self) -> dict[str, str]:
        """The environment of a user's srun/sbatch/scontrol against this cluster."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": str(self.conf),
                "HOME": str(self.root)}

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), env=self.env(), capture_output=True, text=True,
                              timeout=timeout)

    def node(self) -> dict[str, str]:
        """``scontrol show node`` as key=value pairs (State, Gres, ...); ``Reason`` is the
        drain reason alone (scontrol appends ``[user@time]``)."""
        out = self.run("scontrol", "show", "node", NODE, "-o").stdout
        reason = re.search(r"\bReason=(.*?) \[[^\]]*@[^\]]*\]", out)
        if reason:
            out = out[:reason.start()] + out[reason.end():]
        pairs = dict(w.partition("=")[::2] for w in out.split() if "=" in w)
        if reason:
            pairs["Reason"] = reason.group(1)
        return pairs

    def wait_node(self, predicate, timeout: float = 40) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            node = self.node()
            if predicate(node) or time.monotonic() > deadline:
                return node
            time.sleep(0.3)

    def job(self, job_id: str) -> dict[str, str]:
        out = self.run("scontrol", "show", "job", job_id, "-o").stdout
        return dict(w.partition("=")[::2] for w in out.split() if "=" in w)

    def wait_job(self, job_id: str, states: set[str], timeout: float = 40) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job.get("JobState") in states or time.monotonic() > deadline:
                return job
            time.sleep(0.3)

    def submit(self, *args: str, script: str = "true") -> str:
        done = self.run("sbatch", "--parsable", "-o", "/dev/null", "-N1", *args,
                        "--wrap", script)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def cancel(self, job: str) -> None:
        """Cancel ``job`` (a requeued one too) and wait until the node has finished with it."""
        self.run("scancel", job)
        self.wait_job(job, {"CANCELLED", "COMPLETED", "FAILED", ""}, timeout=20)
        self.wait_node(lambda n: "COMPLETING" not in n.get("State", ""), timeout=20)

    def resume(self) -> None:
        """Back to service after a drain."""
        for _ in range(3):
            if "DRAIN" not in self.node().get("State", "DRAIN"):
                return
            done = self.run("scontrol", "update", f"NodeName={NODE}", "State=RESUME")
            node = self.wait_node(lambda n: "DRAIN" not in n.get("State", ""), timeout=5)
            if "DRAIN" not in node.get("State", ""):
                return
        raise RuntimeError(f"the node stays drained: {node} {done.stderr}")

    @property
    def _health_switch(self) -> Path:
        return self.root / "run" / "healthcheck-on"

    @contextlib.contextmanager
    def health_checks(self) -> Iterator[None]:
        """slurmd's health checks reach the shipped script while in this block; on leaving it,
        waits for a health check still running (the wrapper holds a lock while it runs)."""
        self._health_switch.touch()
        try:
            yield
        finally:
            self._health_switch.unlink()
            with open(self.root / "run" / "healthcheck.lock", "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # released on closing

    def log(self, daemon: str) -> str:
        path = self.root / "log" / f"{daemon}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop every daemon this cluster started (by pid: slurmd, slurmctld, munged)."""
        for name in reversed(DAEMONS):
            for pid in self._pids(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for name in reversed(DAEMONS):
            for pid in self._pids(name):
                while _alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if _alive(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)

    def _pids(self, name: str) -> list[int]:
        pids = []
        pid_file = self.root / "run" / f"{name}.pid"
        with contextlib.suppress(OSError, ValueError):
            pids.append(int(pid_file.read_text().split()[0]))
        if name in self.processes:
            pids.append(self.processes[name].pid)
        return sorted(set(pids))

    def daemons_alive(self) -> list[str]:
        return [name for name in DAEMONS for pid in self._pids(name) if _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


def _slurm_conf(c: Cluster, prolog: Path, epilog: Path, healthcheck: Path) -> str:
    r = c.root
    cpus = os.cpu_count() or 1
    return "\n".join([
        "ClusterName=gpuaudit",
        f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
        f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
        "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={r / 'run' / 'munge.socket'}",
        f"StateSaveLocation={r / 'state'}", f"SlurmdSpoolDir={r / 'spool'}",
        f"SlurmctldPidFile={r / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={r / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={r / 'log' / 'slurmd.log'}",
        "SlurmctldDebug=info", "SlurmdDebug=debug",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "SwitchType=switch/none", "MpiDefault=none", "ReturnToService=2",
        "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/builtin", "PrologFlags=Alloc", "PrologEpilogTimeout=60",
        "SlurmctldTimeout=30", "SlurmdTimeout=60", "MinJobAge=600", "KillWait=2",
        "GresTypes=gpu", f"Prolog={prolog}", f"Epilog={epilog}",
        f"HealthCheckProgram={healthcheck}", "HealthCheckInterval=1", "HealthCheckNodeState=ANY",
        f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname=localhost CPUs={cpus} "
        f"RealMemory=1000 Gres=gpu:{c.gpus} State=UNKNOWN",
        f"PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _wrapper(path: Path, script: Path, settings: Path) -> Path:
    """What slurm.conf names: the shipped script, its settings file named."""
    path.write_text(f"#!/bin/sh\nGPU_AUDIT_DEFAULTS={settings} exec /bin/bash {script}\n")
    path.chmod(0o755)
    return path


def _health_wrapper(path: Path, script: Path, c: Cluster) -> Path:
    """What slurm.conf names as HealthCheckProgram: the shipped script, its settings file
    named, while the switch file exists (:meth:`Cluster.health_checks`), one at a time.
    ``SLURM_CONF`` stands in for ``/etc/slurm/slurm.conf``, where a real node's scontrol finds
    the cluster (slurmd gives a health check only ``SLURMD_NODENAME``)."""
    lock, switch = c.root / "run" / "healthcheck.lock", c._health_switch
    path.write_text("#!/bin/sh\n"
                    f"exec 9>>{lock}\nflock 9\n[ -e {switch} ] || exit 0\n"
                    f"SLURM_CONF={c.conf} GPU_AUDIT_DEFAULTS={c.settings} "
                    f"exec /bin/bash {script}\n")
    path.chmod(0o755)
    return path


def start(root: Path, gpus: int, settings: Path) -> Cluster:
    """Start munged, slurmctld and slurmd in ``root``; the node has ``gpus`` gres GPUs."""
    c = Cluster(root=root, gpus=gpus, settings=settings)
    for sub in ("etc", "state", "spool", "log", "run", "dev", "hooks", "munge"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for sub in ("run", "log", "munge"):
        (root / sub).chmod(0o755)
    for i in range(gpus):
        subprocess.run(["mknod", str(root / "dev" / f"nvidia{i}"), "c", "195", str(i)],
                       check=True)
    c.hooks = install_hooks(root / "hooks")
    prolog = _wrapper(root / "etc" / "prolog", c.hooks["prolog"], settings)
    epilog = _wrapper(root / "etc" / "epilog", c.hooks["epilog"], settings)
    healthcheck = _health_wrapper(root / "etc" / "healthcheck", c.hooks["healthcheck"], c)
    c.conf.write_text(_slurm_conf(c, prolog, epilog, healthcheck))
    (root / "etc" / "gres.conf").write_text(
        f"AutoDetect=off\nName=gpu File={root / 'dev'}/nvidia[0-{gpus - 1}]\n")
    key = root / "munge" / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o600)
    log = open(root / "log" / "daemons.out", "ab")  # noqa: SIM115 - kept by the Popen objects
    c.processes["munged"] = subprocess.Popen(
        [_which("munged"), "-F", "-f", f"--key-file={key}",
         f"--socket={root / 'run' / 'munge.socket'}", f"--pid-file={root / 'run' / 'munged.pid'}",
         f"--log-file={root / 'log' / 'munged.log'}", f"--seed-file={root / 'munge' / 'seed'}"],
        stdout=log, stderr=log, start_new_session=True)
    wait_for(lambda: (root / "run" / "munge.socket").exists(), 10, "munged's socket")
    env = c.env()
    c.processes["slurmctld"] = subprocess.Popen(
        [_which("slurmctld"), "-D", "-i", "-f", str(c.conf)], env=env, stdout=log, stderr=log,
        start_new_session=True)
    c.processes["slurmd"] = subprocess.Popen(
        [_which("slurmd"), "-D", "-N", NODE, "-f", str(c.conf)], env=env, stdout=log,
        stderr=log, start_new_session=True)
    node = c.wait_node(lambda n: n.get("State", "").startswith("IDLE"), timeout=40)
    if not node.get("State", "").startswith("IDLE"):
        c.stop()
        raise RuntimeError(f"the node did not come up: {node}\n--- slurmctld\n"
                           f"{c.log('slurmctld')[-3000:]}\n--- slurmd\n{c.log('slurmd')[-3000:]}"
                           f"\n--- out\n{(root / 'log' / 'daemons.out').read_text()[-2000:]}")
    return c


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not appear within {timeout} s")
        time.sleep(0.1)


def wait_for_or_not(predicate, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``predicate``; whether it came true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
