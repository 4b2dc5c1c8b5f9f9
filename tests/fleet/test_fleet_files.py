"""The fleet report's process table (duplicate servers, leftover and foreign processes by host
and pid), the per-GPU Parquet table beside the CSV, and the per-node heat map."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pandas as pd

from gpu_audit.fleet.inputs import read_nodes
from gpu_audit.fleet.judge import judge_fleet
from gpu_audit.fleet.render import write_gpu_tables
from tests.fakegpu import h100_node
from tests.fleet.synth import node_document, write_documents
from tests.fleet.test_merge_cli import gpu_audit

pytest_plugins = ["tests.fakegpu"]
GIB = 1024**3
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def with_duplicates(node: int, pids: list[int], check_status: str | None = None) -> dict:
    """A scan (or check) document whose own judgement found copies of one server."""
    document = node_document(node, schema="gpu-audit.scan/1" if check_status is None
                             else "gpu-audit.check/1")
    scan = document if check_status is None else document["snapshot"]
    scan["processes"] = [{"pid": pid, "gpu_index": 0, "name": "uvicorn", "user": "svc",
                          "used_memory_bytes": 3 * GIB, "type": "compute"} for pid in pids]
    finding = {"id": "duplicate-backend", "severity": "warning", "subject": f"pid:{pids[0]}",
               "title": f"{len(pids)} copies of the same server hold GPU memory",
               "detail": "", "remedy": "",
               "evidence": {"keep_pid": pids[0], "stop_pids": pids[1:], "members": [
                   {"pid": pid, "port": 8000 + i, "used_memory_bytes": 3 * GIB,
                    "start_time": None, "gpu_index": 0, "user": "svc"}
                   for i, pid in enumerate(pids)]}}
    if check_status is not None:
        finding["check_status"] = check_status
    document["findings"] = [finding]
    return document


def test_leftover_and_duplicate_processes_are_listed_fleet_wide(fake_nvml, cli_env, tmp_path):
    """A real check document with a leftover process of this user, plus canned documents with
    copies of one server: the fleet lists every one by host and pid."""
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        env = fake_nvml(h100_node(2, pids=[leftover.pid], process_memory_bytes=5 * GIB),
                        base=cli_env)
        checked = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--json",
                                  "--no-report"], env=env, capture_output=True, text=True,
                                 timeout=120)
    finally:
        leftover.kill()
        leftover.wait()
    assert checked.returncode in (1, 2), checked.stdout + checked.stderr
    run = tmp_path / "run"
    run.mkdir()
    (run / "real-node.json").write_text(checked.stdout)
    hostname = json.loads(checked.stdout)["hostname"]
    write_documents(run / "canned", [with_duplicates(1, [4101, 4102, 4103]),
                                     with_duplicates(2, [5101, 5102], check_status="fail"),
                                     with_duplicates(3, [6101, 6102], check_status="skip")])
    result = gpu_audit("merge", str(run), "--json", "--out", str(tmp_path / "out"))
    fleet = json.loads(result.stdout)
    found = {f["id"]: f for f in fleet["findings"]}
    dups = found["fleet-duplicate-backends"]["evidence"]
    assert {(r["host"], r["pid"], r["keep"]) for r in dups["processes"]} == {
        ("gpu-node-00001", 4101, True), ("gpu-node-00001", 4102, False),
        ("gpu-node-00001", 4103, False), ("gpu-node-00002", 5101, True),
        ("gpu-node-00002", 5102, False)}  # node 3's copies were ignored by its policy
    assert dups["redundant"] == 3 and dups["reclaimable_bytes"] == 9 * GIB
    assert "ssh gpu-node-00001 ps -o pid,lstart,args -p 4102 4103" in \
        found["fleet-duplicate-backends"]["remedy"]
    rows = found["fleet-leftover-processes"]["evidence"]["processes"]
    assert [(r["host"], r["pid"], r["kind"]) for r in rows] == [
        (hostname, leftover.pid, "leftover")]
    assert rows[0]["used_memory_bytes"] == 5 * GIB
    (md,) = (tmp_path / "out").glob("merge-*[0-9a-z].md")
    text = md.read_text()
    assert "## Duplicate backends and leftover processes" in text
    assert f"| {hostname} | {leftover.pid} | leftover |" in text
    assert "| gpu-node-00001 | 4101 | duplicate (keep: oldest) | svc | uvicorn | 0 | 3.0 GiB |" \
        in text


def test_parquet_and_heat_map_beside_the_markdown(tmp_path):
    docs = [node_document(i, gpus=4) for i in range(6)]
    docs[2]["snapshot"]["gpus"][1]["temperature_c"] = 75
    write_documents(tmp_path / "run", docs)
    result = gpu_audit("merge", str(tmp_path / "run"), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    (md,) = (tmp_path / "out").glob("merge-*[0-9a-z].md")
    csv = md.with_name(f"{md.stem}-gpus.csv")
    parquet = md.with_name(f"{md.stem}-gpus.parquet")
    png = md.with_name(f"{md.stem}-heatmap.png")
    from_parquet = pd.read_parquet(parquet)
    from_csv = pd.read_csv(csv)
    assert list(from_parquet.columns) == list(from_csv.columns) and len(from_parquet) == 24
    assert from_parquet["temperature_c"].tolist() == from_csv["temperature_c"].tolist()
    assert from_parquet.loc[9, ["node", "index", "temperature_c"]].tolist() == \
        ["gpu-node-00002", 1, 75]
    data = png.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 300 and height > 150
    assert f"![per-node heat map]({png.name})" in md.read_text()
    assert "Parquet needs pyarrow" not in result.stderr


def test_without_pyarrow_the_csv_is_written_and_the_output_says_so(tmp_path, monkeypatch):
    write_documents(tmp_path / "run", [node_document(i, gpus=2) for i in range(3)])
    report = judge_fleet(read_nodes([tmp_path / "run"]), source="merge")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    md = tmp_path / "out" / "merge.md"
    md.parent.mkdir()
    md.write_text("placeholder")
    notes: list[str] = []
    written = write_gpu_tables(report, md, note=notes.append)
    assert [p.name for p in written] == ["merge-gpus.csv", "merge-heatmap.png"]
    assert not (tmp_path / "out" / "merge-gpus.parquet").exists()
    assert notes == ["per-GPU table written as CSV only: Parquet needs pyarrow "
                     "(pip install 'gpu-audit[parquet]')"]
    assert "](merge-heatmap.png)" in md.read_text()


def test_heat_map_of_a_large_fleet_shows_the_nodes_furthest_from_their_peers(tmp_path):
    from gpu_audit.fleet.render import NODES_DRAWN, node_scores

    docs = [node_document(i, gpus=2) for i in range(150)]
    docs[120]["snapshot"]["gpus"][0]["pcie_width_current"] = 4
    write_documents(tmp_path / "run", docs)
    scores, values = node_scores(judge_fleet(read_nodes([tmp_path / "run"]), source="merge"))
    assert len(scores) == NODES_DRAWN and "gpu-node-00120" in scores.index
    assert scores.loc["gpu-node-00120", "PCIe link width (lanes)"] > 1
    assert values.loc["gpu-node-00120", "PCIe link width (lanes)"] == 4
    assert scores.drop(index="gpu-node-00120")["PCIe link width (lanes)"].max() == 0


def test_no_gpu_fleet_writes_no_tables(tmp_path):
    write_documents(tmp_path / "run", [node_document(i, gpus=0) for i in range(2)])
    report = judge_fleet(read_nodes([tmp_path / "run"]), source="merge")
    md = tmp_path / "merge.md"
    md.write_text("x")
    assert write_gpu_tables(report, md) == []
    assert md.read_text() == "x"
