"""A folder many nodes share: every node runs ``gpu-audit check --json --out SHARED`` and
retention (``keep_reports``) prunes only that node's own reports, so a 60-node fleet leaves 60
nodes' newest documents for ``gpu-audit merge``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpu_audit.report.files import report_stem
from tests.fakegpu import h100_node, write_scenario
from tests.fleet.synth import node_document

pytest_plugins = ["tests.fakegpu"]
REPO = Path(__file__).resolve().parents[2]
NODES = 60
RUN = 3  # nodes that run the real CLI; the others' documents are written as they would be
SHIM = """import os, socket
_name = os.environ.get("FAKE_HOSTNAME")
if _name:  # this process plays node FAKE_HOSTNAME: uname's node name, and socket's
    _uname = os.uname
    os.uname = lambda: os.uname_result((_uname()[0], _name, *_uname()[2:]))
    socket.gethostname = lambda: _name
"""


def host(i: int) -> str:
    return f"gpu-node-{i:05d}"


def written_by(folder: Path, i: int, second: int, pid: int = 1) -> str:
    """Node ``i``'s report as ``check --json --out`` names it, written earlier."""
    stem = report_stem("check", f"2026-11-22T10:00:{second:02d}Z", host(i), f"p{pid}")
    (folder / f"{stem}.json").write_text(json.dumps(node_document(i, gpus=2)))
    (folder / f"{stem}.md").write_text("# check\n")
    return stem


def node_env(i: int, base: dict[str, str], shim: Path, tmp_path: Path) -> dict[str, str]:
    scenario = h100_node(2)
    for gpu in scenario["gpus"]:
        gpu["uuid"] = gpu["uuid"][:-2] + f"{i:02d}"  # every node its own GPUs
    return {**base, "PYTHONPATH": f"{shim}:{base['PYTHONPATH']}", "FAKE_HOSTNAME": host(i),
            "FAKE_NVML_SCENARIO": str(write_scenario(scenario, tmp_path / f"n{i}"))}


def shim_dir(tmp_path: Path) -> Path:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    return shim


def test_sixty_nodes_in_one_folder_keep_every_nodes_documents(fake_nvml, cli_env, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    others = {i: written_by(shared, i, i % 60) for i in range(RUN, NODES)}
    own_old = [written_by(shared, 0, s, pid=7) for s in (1, 2)]  # node 0's earlier runs
    # Names whose host cannot be read are nobody's: never deleted.
    strays = ["check-20261122T100000Z-gpu-node-00001.json", "check-notes.json"]
    for name in strays:
        (shared / name).write_text("{}")
    base = fake_nvml(h100_node(1), base=cli_env)
    shim = shim_dir(tmp_path)
    for i in range(RUN):
        env = node_env(i, base, shim, tmp_path)
        if i == 0:
            env["GPU_AUDIT_KEEP_REPORTS"] = "1"  # node 0 keeps only its newest report
        done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--json", "--out",
                               str(shared)], env=env, capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 1), done.stdout + done.stderr
        assert f"-{host(i)}.md" in done.stderr  # "report: .../check-...-p123-gpu-node-0000i.md"
    for i, stem in others.items():  # every other node's report is whole
        assert (shared / f"{stem}.json").exists() and (shared / f"{stem}.md").exists(), i
    assert not any((shared / f"{stem}.json").exists() for stem in own_old)
    for name in strays:
        assert (shared / name).read_text() == "{}"
    hosts = {json.loads(p.read_text()).get("snapshot", {}).get("host", {}).get("hostname")
             for p in shared.glob("check-2*.json") if p.name not in strays}
    assert hosts == {host(i) for i in range(NODES)}
    assert len(list(shared.glob(f"check-2*-{host(0)}.json"))) == 1
    merged = subprocess.run([sys.executable, "-m", "gpu_audit", "merge", str(shared),
                             "--expect-nodes", f"gpu-node-[00000-{NODES - 1:05d}]", "--json",
                             "--no-report"], env=base, capture_output=True, text=True,
                            timeout=120)
    fleet = json.loads(merged.stdout)
    assert fleet["expected"]["missing"] == [] and fleet["expected"]["found"] >= NODES
    assert {n["hostname"] for n in fleet["nodes"]} >= {host(i) for i in range(NODES)}
