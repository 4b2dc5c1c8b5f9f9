"""``gpu-audit fleet`` on a real local Ray cluster started by the tests on this machine: a head and
worker nodes, each node's processes seeing its own fake NVIDIA machine (per-node raylet
environment). Stopped after the module; about 20 s in all."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_audit import __version__
from tests.fakegpu import h100_node, scenario_env

ray = pytest.importorskip("ray", reason="Ray is the optional extra gpu-audit[ray]")
from ray.cluster_utils import Cluster  # noqa: E402

pytest_plugins = ["tests.fakegpu"]
REPO = Path(__file__).resolve().parents[2]
# One cluster for the module: --dist loadfile (pyproject) runs its tests on one xdist worker.
pytestmark = pytest.mark.slow


def node_scenario(i: int, **changes) -> dict:
    """One H100 node whose GPU UUID is its own (several nodes share this machine)."""
    scenario = h100_node(1)
    scenario["gpus"][0]["uuid"] = f"GPU-{i:08x}-feed-4000-8000-0000000000{i:02d}"
    scenario["gpus"][0].update(changes.pop("gpu", {}))
    scenario.update(changes)
    return scenario


def node_env(scenario: dict, folder: Path, **extra: str) -> dict[str, str]:
    env = scenario_env(scenario, folder)
    return {"LD_LIBRARY_PATH": env["LD_LIBRARY_PATH"], "FAKE_NVML_SCENARIO":
            env["FAKE_NVML_SCENARIO"], "PYTHONPATH": str(REPO), **extra}


@pytest.fixture(scope="module")
def cluster(fake_nvml_lib, tmp_path_factory):
    """Head + 4 workers: node 2 has another driver, node 3 a hot GPU (an outlier), and the
    last one is a second pod of node 1's host (it sees the same GPU)."""
    folder = tmp_path_factory.mktemp("ray-nvml")
    scenarios = [node_scenario(0), node_scenario(1),
                 node_scenario(2, driver_version="535.54.03"),
                 node_scenario(3, gpu={"temperature_c": 86}), node_scenario(1)]
    envs = [node_env(s, folder) for s in scenarios]
    envs[3]["GPU_AUDIT_TEST_SLOW"] = "1"  # read by tests.fleet.ray_tasks only
    head = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "env_vars": envs[0], "include_dashboard": False,
        "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
    })
    try:
        for env in envs[1:]:
            head.add_node(num_cpus=0, env_vars=env)
        head.wait_for_nodes()
        head.scenario_folder = folder
        yield head
    finally:
        head.shutdown()


def fleet(address: str, *args: str, timeout: float = 60,
          cwd: Path = REPO) -> tuple[int, dict | None, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    result = subprocess.run(
        [sys.executable, "-m", "gpu_audit", "fleet", *args, "--address", address, "--no-report"],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stdout or "--json" not in args, result.stderr
    doc = json.loads(result.stdout) if "--json" in args else None
    return result.returncode, doc, result.stderr


def test_fleet_check_judges_every_node(cluster):
    code, doc, _ = fleet(cluster.address, "check", "--json", "--timeout", "45")
    assert doc["schema"] == "gpu-audit.fleet/1"
    assert doc["summary"]["nodes"] == 4, doc["nodes"]
    assert doc["summary"]["duplicates"] == 1
    (dup,) = [n for n in doc["nodes"] if n["duplicate_of"]]
    assert dup["gpu_uuids"] == ["GPU-00000001-feed-4000-8000-000000000001"]
    assert all(n["status"] in ("OK", "WARNING") for n in doc["nodes"]), doc["nodes"]
    assert all(n["source"].startswith("ray:") for n in doc["nodes"])
    findings = {f["id"]: f for f in doc["findings"]}
    skew = findings["fleet-driver-skew"]["evidence"]
    assert skew["values"] == {"550.90.07": 3, "535.54.03": 1}
    (hot,) = [f for f in doc["findings"] if f["id"] == "fleet-gpu-outlier"]
    assert hot["evidence"]["value"] == 86 and hot["evidence"]["metric"] == "temperature_c"
    assert hot["evidence"]["uuid"].startswith("GPU-00000003-")
    assert code == doc["exit_code"] == max(n["exit_code"] for n in doc["nodes"])


def test_fleet_scan_runs_the_scan_on_every_node(cluster):
    code, doc, _ = fleet(cluster.address, "scan", "--json", "--timeout", "45")
    assert doc["command"] == "scan" and doc["summary"]["nodes"] == 4
    assert {n["schema"] for n in doc["nodes"]} == {"gpu-audit.scan/1"}
    assert sorted(n["driver_version"] for n in doc["nodes"] if not n["duplicate_of"]) == [
        "535.54.03", "550.90.07", "550.90.07", "550.90.07"]
    worst_node = max(n["exit_code"] for n in doc["nodes"] if not n["duplicate_of"])
    assert code == doc["exit_code"] == worst_node


class QuickOnesFirst:
    """Ray, whose first ``wait`` lets every task that answers at all answer before the real wait
    under the deadline: which node is late then depends on the tasks, not on how busy this
    machine is (a loaded machine may take seconds to start a node's worker)."""

    def __init__(self, ray_module) -> None:
        self._ray = ray_module
        self.deadline_waited_from: float | None = None

    def __getattr__(self, name: str):
        return getattr(self._ray, name)

    def wait(self, refs, *, num_returns: int, timeout: float):
        if self.deadline_waited_from is None:
            self._ray.wait(refs, num_returns=len(refs) - 1)  # all but the one that never answers
            self.deadline_waited_from = time.monotonic()
        return self._ray.wait(refs, num_returns=num_returns, timeout=timeout)


def test_fan_out_deadline_names_the_late_node(cluster):
    """The wall-clock limit holds even when one node's task never returns (it sleeps 300 s)."""
    from gpu_audit.collect import ray_fanout
    from tests.fleet.ray_tasks import slow_on_marked_node

    ray_module = QuickOnesFirst(ray_fanout.connect(cluster.address, timeout_s=30))
    try:
        answers = ray_fanout.fan_out(ray_module, slow_on_marked_node, (), timeout_s=2)
        returned = time.monotonic()
    finally:
        ray_fanout.disconnect(ray_module)
    late = [a for a in answers if a.document is None]
    assert len(answers) == 5 and len(late) == 1, answers
    assert late[0].reason == "no answer within the 2 s limit (--timeout)"
    assert all(a.document and "pid" in a.document for a in answers if a is not late[0])
    # Back well before the late task could answer: the limit, not the task, ended the wait.
    assert returned - ray_module.deadline_waited_from < 60


def test_dead_address_fails_fast_with_exit_3():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    code, _, err = fleet(f"127.0.0.1:{port}", "check", "--timeout", "30")
    assert code == 3
    assert "cannot reach the Ray cluster at 127.0.0.1:" in err
    assert time.monotonic() - started < 15


def test_node_removed_mid_run_is_unknown_not_a_hang(cluster):
    """A node whose driver hangs (so its scan takes seconds) is removed during the fan-out."""
    env = node_env(node_scenario(4, hang=["nvmlInitWithFlags"]), cluster.scenario_folder)
    doomed = cluster.add_node(num_cpus=0, env_vars=env)
    cluster.wait_for_nodes()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_audit", "fleet", "check", "--json", "--no-report",
         "--address", cluster.address, "--timeout", "40"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    time.sleep(3.0)
    cluster.remove_node(doomed)
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    doc = json.loads(out)
    unknown = [n for n in doc["nodes"] if n["status"] == "UNKNOWN"]
    assert len(unknown) == 1, doc["nodes"]
    assert "died" in unknown[0]["reason"] or "left the cluster" in unknown[0]["reason"]
    assert doc["status"] == "UNKNOWN" and proc.returncode == 3
    assert doc["summary"]["nodes"] == 5


def check_with_stranger(cluster, tmp_path: Path, shadow: Path, i: int) -> tuple[int, dict]:
    """`fleet check` with one more node, whose Python finds the gpu_audit under ``shadow``
    first; the node leaves the cluster afterwards."""
    env = node_env(node_scenario(i), cluster.scenario_folder, PYTHONPATH=str(shadow))
    stranger = cluster.add_node(num_cpus=0, env_vars=env)
    cluster.wait_for_nodes()
    try:
        # Ray puts the driver's working directory first on its workers' path: not this checkout.
        code, doc, _ = fleet(cluster.address, "check", "--json", "--timeout", "45", cwd=tmp_path)
    finally:
        cluster.remove_node(stranger)
    return code, doc


def test_node_without_gpu_audit_is_an_import_error(cluster, tmp_path):
    """A node whose Python finds another gpu_audit (an old or partial install) than ours."""
    shadow = tmp_path / "shadow"
    (shadow / "gpu_audit").mkdir(parents=True)
    (shadow / "gpu_audit" / "__init__.py").write_text("")
    code, doc = check_with_stranger(cluster, tmp_path, shadow, 5)
    (unknown,) = [n for n in doc["nodes"] if n["status"] == "UNKNOWN"]
    assert "import error on that node" in unknown["reason"], unknown
    assert "gpu-audit[ray]" in unknown["reason"]
    assert code == 3


def shadow_copy(folder: Path, version: str, old_task: bool = False) -> Path:
    """This checkout's gpu_audit, copied under ``folder`` and declaring another ``version``;
    with ``old_task``, its fleet task also takes the arguments the task took before the policy
    travelled as plain data (three, and no version)."""
    import shutil

    shutil.copytree(REPO / "gpu_audit", folder / "gpu_audit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    init = folder / "gpu_audit" / "__init__.py"
    text = init.read_text()
    assert '__version__ = "' in text
    init.write_text(re.sub(r'__version__ = "[^"]*"', f'__version__ = "{version}"', text))
    if old_task:
        task = folder / "gpu_audit" / "cli" / "fleet.py"
        text = task.read_text()
        now = re.compile(r"nvml_timeout_s: float,\s+fleet_version: str\)")
        assert now.search(text)
        task.write_text(now.sub("nvml_timeout_s: float)", text))
    return folder


@pytest.mark.parametrize("old_task", [False, True], ids=["says-its-version", "older-arguments"])
def test_node_with_another_version_is_named_so(cluster, tmp_path, old_task):
    """A node whose gpu-audit is another version: UNKNOWN, naming the version to install,
    whether that version checks the sender's (new) or takes other arguments (older)."""
    shadow = shadow_copy(tmp_path / "shadow", "0.0.9", old_task=old_task)
    code, doc = check_with_stranger(cluster, tmp_path, shadow, 6)
    (unknown,) = [n for n in doc["nodes"] if n["status"] == "UNKNOWN"]
    reason = unknown["reason"]
    assert reason.startswith("another gpu-audit version on that node"), unknown
    assert f"gpu-audit[ray]=={__version__}" in reason
    if old_task:
        assert "takes other arguments" in reason
    else:
        assert f"gpu-audit 0.0.9 is installed there, {__version__} here" in reason
    assert [n["status"] for n in doc["nodes"]].count("UNKNOWN") == 1
    assert code == 3


def test_merge_expects_the_clusters_alive_nodes(cluster, tmp_path):
    """`merge --expect-ray` lists the cluster's alive nodes (here all on this machine's host
    name) and names the one that sent no document."""
    from tests.fleet.synth import node_document, write_documents

    here = socket.gethostname()
    write_documents(tmp_path / "here", [node_document(0, gpus=1, hostname=here)])
    write_documents(tmp_path / "other", [node_document(1, gpus=1, hostname="elsewhere")])
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")},
           "RAY_ADDRESS": cluster.address, "PYTHONPATH": str(REPO)}
    runs = {}
    for name in ("here", "other"):
        result = subprocess.run(
            [sys.executable, "-m", "gpu_audit", "merge", str(tmp_path / name), "--expect-ray",
             "--json", "--no-report"], capture_output=True, text=True, timeout=90, env=env)
        assert "Traceback" not in result.stderr, result.stderr
        runs[name] = (result.returncode, json.loads(result.stdout))
    assert runs["here"][0] == 0 and runs["here"][1]["expected"]["missing"] == []
    code, doc = runs["other"]
    assert code == 3 and doc["expected"]["missing"] == [here]
    assert doc["expected"]["sources"] == ["the Ray cluster's alive nodes"]
