"""``gpu-audit merge`` as a user runs it, the Slurm example's exact commands, and ``gpu-audit
fleet`` where Ray is not installed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.fakegpu import h100_node, write_scenario
from tests.fleet.synth import node_document, write_documents

pytest_plugins = ["tests.fakegpu"]
REPO = Path(__file__).resolve().parents[2]


def gpu_audit(*args: str, env: dict | None = None, cwd: Path = REPO,
              timeout: float = 120) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "gpu_audit", *args], capture_output=True,
                            text=True, env=env, cwd=cwd, timeout=timeout)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_merge_three_nodes_json(tmp_path):
    docs = [node_document(0), node_document(1, driver="535.54.03"),
            node_document(2, status="WARNING", schema="gpu-audit.scan/1")]
    write_documents(tmp_path / "run", docs)
    result = gpu_audit("merge", str(tmp_path / "run"), "--json", "--no-report")
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpu-audit.fleet/1" and doc["source"] == "merge"
    assert doc["summary"] == {"nodes": 3, "ok": 2, "warning": 1, "critical": 0, "unknown": 0,
                              "duplicates": 0}
    assert {f["id"] for f in doc["findings"]} >= {"fleet-driver-skew", "fleet-mixed-schemas"}
    assert doc["status"] == "WARNING" and result.returncode == 1
    assert doc["nodes"][2]["worst_findings"][0]["id"] == "ecc-uncorrectable"


def test_unreadable_files_are_named_unknown_nodes(tmp_path):
    write_documents(tmp_path, [node_document(0), node_document(1)])
    (tmp_path / "truncated.json").write_text('{"schema": "gpu-audit.check/1", "host', "utf-8")
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00garbage")
    result = gpu_audit("merge", str(tmp_path), "--no-report")
    assert result.returncode == 3
    assert "UNKNOWN  " in result.stdout and "truncated.json: not JSON" in result.stdout
    assert "binary.json: cannot read" in result.stdout
    assert result.stdout.startswith("fleet UNKNOWN: 4 nodes, 2 fit")


def test_merge_writes_reports_and_skips_its_own_fleet_report(tmp_path):
    write_documents(tmp_path / "run", [node_document(i) for i in range(3)])
    first = gpu_audit("merge", str(tmp_path / "run"), "--out", str(tmp_path / "run" / "fleet"))
    assert first.returncode == 0, first.stdout + first.stderr
    (md,) = (tmp_path / "run" / "fleet").glob("merge-*.md")
    text = md.read_text()
    assert text.startswith("# gpu-audit fleet report (merge)")
    assert "fleet OK: 3 nodes, 3 fit" in text and "| gpu-node-00002 | OK | 8 |" in text
    (csv,) = (tmp_path / "run" / "fleet").glob("merge-*-gpus.csv")
    rows = csv.read_text().splitlines()
    assert rows[0].startswith("node,index,uuid,") and "temperature_c" in rows[0]
    assert len(rows) == 1 + 3 * 8 and rows[1].startswith("gpu-node-00000,0,GPU-")
    again = gpu_audit("merge", str(tmp_path / "run"), "--json", "--no-report")
    assert json.loads(again.stdout)["summary"]["nodes"] == 3
    assert "skipping" in again.stderr and "a fleet report" in again.stderr


def test_bad_input_is_exit_3_with_one_line(tmp_path):
    missing = gpu_audit("merge", str(tmp_path / "nope"), "--no-report")
    assert missing.returncode == 3 and "no such file or folder" in missing.stderr
    (tmp_path / "empty").mkdir()
    empty = gpu_audit("merge", str(tmp_path / "empty"), "--no-report")
    assert empty.returncode == 3 and "no *.json documents" in empty.stderr
    assert len(empty.stderr.strip().splitlines()) == 1
    assert gpu_audit("merge").returncode == 3  # usage error, remapped from click's 2


def test_fleet_without_ray_says_how_to_get_it(tmp_path, cli_env):
    shadow = tmp_path / "no-ray" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('ray is not installed')\n")
    env = {**cli_env, "PYTHONPATH": os.pathsep.join([str(shadow.parent), str(REPO)])}
    result = gpu_audit("fleet", "check", "--address", "127.0.0.1:1", env=env)
    assert result.returncode == 3
    assert "pip install 'gpu-audit[ray]'" in result.stderr
    assert result.stdout == ""


FAKE_SRUN = """#!/usr/bin/env bash
# Test double of srun: runs the task once per fake node (a scenario in FAKE_SRUN_SCENARIOS).
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
worst=0
for scenario in ${FAKE_SRUN_SCENARIOS//:/ }; do
  FAKE_NVML_SCENARIO=$scenario "$@"; rc=$?; (( rc > worst )) && worst=$rc
done
exit $worst
"""


def test_slurm_example_runs_srun_then_merge(fake_nvml, cli_env, tmp_path):
    """examples/slurm-fleet.sh as written, with srun playing three fake nodes."""
    scenarios = []
    for i, driver in enumerate(["550.90.07", "550.90.07", "535.54.03"]):
        scenario = h100_node(2)
        scenario["driver_version"] = driver
        for gpu in scenario["gpus"]:
            gpu["uuid"] = gpu["uuid"].replace("GPU-0000000", f"GPU-{i}000000")
        scenarios.append(str(write_scenario(scenario, tmp_path / "nvml")))
    env = fake_nvml(h100_node(1), base=cli_env)  # LD_LIBRARY_PATH with the fake library
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN)
    (bin_dir / "srun").chmod(stat.S_IRWXU)
    env.update(PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                     env["PATH"]]),
               FAKE_SRUN_SCENARIOS=":".join(scenarios), RUN_DIR=str(tmp_path / "run-42"))
    result = subprocess.run(["bash", str(REPO / "examples" / "slurm-fleet.sh")], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in result.stderr, result.stderr
    assert len(list((tmp_path / "run-42").glob("check-*.json"))) == 3
    assert result.stdout.startswith("fleet "), result.stdout + result.stderr
    assert "3 nodes" in result.stdout and "fleet-driver-skew" in result.stdout
    (report,) = (tmp_path / "run-42" / "fleet").glob("merge-*.json")
    fleet = json.loads(report.read_text())
    assert fleet["summary"]["nodes"] == 3 and fleet["command"] == "check"
    assert result.returncode == fleet["exit_code"]


def test_hostile_host_names_cannot_drive_the_terminal_or_the_markdown(tmp_path):
    evil = "\x1b]0;owned\x07node|<img src=x>\n::error ::fake"
    write_documents(tmp_path / "run", [node_document(0, hostname=evil, status="CRITICAL"),
                                       node_document(1), node_document(2)])
    result = gpu_audit("merge", str(tmp_path / "run"), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\n::error" not in result.stdout
    (md,) = (tmp_path / "out").glob("merge-*.md")
    text = md.read_text()
    assert "\x1b" not in text and "<img" not in text and "node|<" not in text


FAKE_SRUN_NODES = """#!/usr/bin/env bash
# Test double of srun: runs the task once per fake node of FAKE_SRUN_NODES
# (host=scenario:host=scenario...), as that host; a node without a scenario died before writing.
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
for node in ${FAKE_SRUN_NODES//:/ }; do
  [[ -n ${node#*=} ]] || continue
  FAKE_HOSTNAME=${node%%=*} FAKE_NVML_SCENARIO=${node#*=} "$@"
done
exit 0
"""


def test_slurm_example_names_the_allocations_nodes_that_wrote_nothing(fake_nvml, cli_env,
                                                                      tmp_path):
    """examples/slurm-fleet.sh as written: four nodes allocated, gpu04 died before writing."""
    from tests.fleet.test_shared_folder import shim_dir

    nodes = []
    for i in range(1, 4):
        scenario = h100_node(1)
        scenario["gpus"][0]["uuid"] = f"GPU-{i:08x}-aaaa-4000-8000-000000000000"
        nodes.append(f"gpu{i:02d}={write_scenario(scenario, tmp_path / 'nvml')}")
    nodes.append("gpu04=")
    env = fake_nvml(h100_node(1), base=cli_env)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(FAKE_SRUN_NODES)
    (bin_dir / "srun").chmod(stat.S_IRWXU)
    env.update(PATH=os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent),
                                     env["PATH"]]),
               PYTHONPATH=f"{shim_dir(tmp_path)}:{env['PYTHONPATH']}",
               FAKE_SRUN_NODES=":".join(nodes), SLURM_JOB_ID="42")
    outcomes = {}
    for case, slurm in (("named", {"SLURM_JOB_NODELIST": "gpu[01-04]",
                                   "SLURM_JOB_NUM_NODES": "4"}),
                        ("counted", {"SLURM_JOB_NUM_NODES": "4"})):
        run_env = {**env, **slurm, "RUN_DIR": str(tmp_path / case)}
        outcomes[case] = subprocess.run(["bash", str(REPO / "examples" / "slurm-fleet.sh")],
                                        env=run_env, cwd=tmp_path, capture_output=True,
                                        text=True, timeout=180)
        assert "Traceback" not in outcomes[case].stderr, outcomes[case].stderr
        assert outcomes[case].returncode == 3, outcomes[case].stdout + outcomes[case].stderr
        assert len(list((tmp_path / case).glob("check-*.json"))) == 3
    assert "1 missing of 4 expected" in outcomes["named"].stdout
    assert "MISSING  gpu04: expected, sent no document" in outcomes["named"].stdout
    assert "MISSING  1 of 4 expected nodes sent no document (3 found)" in \
        outcomes["counted"].stdout
    (report,) = (tmp_path / "named" / "fleet").glob("merge-*.json")
    assert json.loads(report.read_text())["expected"]["missing"] == ["gpu04"]
