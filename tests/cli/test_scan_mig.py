"""``gpu-audit scan`` on a GPU in MIG mode: its instances in the GPU table (terminal, markdown),
in the JSON document, the instance of each process, and ``--gpus MIG-<uuid>``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpu_audit.errors import UsageError
from gpu_audit.gpu_selection import resolve_gpus
from gpu_audit.model import MigDevice
from gpu_audit.report import tables
from gpu_audit.report.markdown import render_scan_markdown
from tests import builders as b
from tests.cli.test_scan_fake_gpu import scan_json
from tests.fakegpu import MIB, h100_mig_gpu, h100_node, process

pytest_plugins = ["tests.fakegpu"]

SMALL = "MIG-00000001-0007-4c3d-8e9f-000000000000"


def mig_node() -> dict:
    scenario = h100_node(2)
    gpu = scenario["gpus"][1] = h100_mig_gpu(1, ("3g.40gb", "1g.10gb"))
    gpu["processes"] = [
        dict(process(4_194_500, 700 * MIB), gpu_instance_id=7, compute_instance_id=0)]
    return scenario


def test_json_carries_the_instances_and_each_process_its_instance(fake_nvml, cli_env, tmp_path):
    _, doc, _ = scan_json(fake_nvml(mig_node(), base=cli_env), tmp_path)
    plain, mig = doc["gpus"]
    assert plain["mig_devices"] == []
    assert [(m["gpu_instance_id"], m["compute_instance_id"], m["profile"], m["sm_count"])
            for m in mig["mig_devices"]] == [(2, 0, "3g.40gb", 60), (7, 0, "1g.10gb", 16)]
    assert mig["mig_devices"][1]["memory_used_bytes"] == 700 * MIB
    [proc] = doc["processes"]
    assert (proc["mig_gpu_instance_id"], proc["mig_compute_instance_id"], proc["mig_uuid"]) == (
        7, 0, SMALL)


def test_terminal_shows_one_indented_line_per_instance(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(mig_node(), base=cli_env)
    env["COLUMNS"] = "160"
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--no-report"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip().startswith("1 ")
              and "H100" in line)
    assert "MIG" in lines[at]
    first, second = lines[at + 1], lines[at + 2]
    assert first.startswith("   2/0") and "MIG 3g.40gb, 60 SMs" in first
    assert "0 MiB / 40192 MiB" in first
    assert second.startswith("   7/0") and "700 MiB / 9984 MiB" in second
    assert any(line.lstrip().startswith("1/7/0") for line in lines)  # the process's instance


def test_gpus_selects_the_gpu_of_a_mig_uuid(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(mig_node(), base=cli_env)
    _, doc, _ = scan_json(env, tmp_path, "--gpus", SMALL)
    assert [g["index"] for g in doc["gpus"]] == [1]
    assert doc["gpu_selection"]["indices"] == [1]
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report",
                           "--gpus", "MIG-00000001-0005-4c3d-8e9f-000000000000"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "cannot be tied to its GPU" in done.stderr
    assert "Traceback" not in done.stderr


def mig_scan():
    devices = [MigDevice(index=0, uuid="MIG-a", gpu_instance_id=1, compute_instance_id=0,
                         profile="4g.40gb", memory_total_bytes=40 * 1024 * MIB,
                         memory_used_bytes=1024 * MIB, sm_count=64),
               MigDevice(index=1, uuid="MIG-b", gpu_instance_id=5)]
    return b.scan(gpus=[b.gpu(0), b.gpu(1, mig_mode=True, mig_devices=devices)])


def test_markdown_lists_the_instances_under_their_gpu():
    text = render_scan_markdown(mig_scan(), [], 0)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    at = next(i for i, row in enumerate(rows) if row.startswith("| 1 |"))
    assert "MIG 4g.40gb, 64 SMs" in rows[at + 1] and "1024 MiB / 40960 MiB" in rows[at + 1]
    assert rows[at + 1].startswith("|   1/0 |  |")
    assert "MIG n/a" in rows[at + 2] and "n/a / n/a" in rows[at + 2]


def test_gpu_rows_put_each_gpu_before_its_instances():
    rows = tables.gpu_rows(mig_scan().gpus)
    assert [row[0] for row in rows] == ["0", "1", "  1/0", "  5/?"]
    assert all(len(row) == len(tables.GPU_HEADERS) for row in rows)


def test_selection_by_mig_uuid_is_by_its_gpu():
    gpus = mig_scan().gpus
    assert resolve_gpus("mig-b", gpus, {}).indices == (1,)
    assert resolve_gpus("0,MIG-a", gpus, {}).indices == (0, 1)
    with pytest.raises(UsageError, match="cannot be tied to its GPU"):
        resolve_gpus("MIG-c", gpus, {})


def test_a_saved_scan_keeps_its_instances():
    from gpu_audit.model import Scan
    from gpu_audit.serial import from_jsonable, to_jsonable

    scan = mig_scan()
    again = from_jsonable(Scan, to_jsonable(scan))
    assert again.gpus[1].mig_devices == scan.gpus[1].mig_devices
    assert from_jsonable(Scan, {**to_jsonable(scan), "gpus": [{"index": 0}]}).gpus[0].mig_devices \
        == []  # a scan saved before instances were read


BIG = "MIG-00000001-0002-4c3d-8e9f-000000000000"


def test_gpus_with_a_mig_uuid_shows_only_that_instance(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(mig_node(), base=cli_env)
    _, doc, _ = scan_json(env, tmp_path, "--gpus", SMALL)
    [gpu] = doc["gpus"]
    assert [m["uuid"] for m in gpu["mig_devices"]] == [SMALL]
    assert [p["pid"] for p in doc["processes"]] == [4_194_500]  # it runs in 7/0
    assert doc["gpu_selection"]["mig_uuids"] == [SMALL]
    _, other, _ = scan_json(env, tmp_path, "--gpus", BIG)
    assert [m["uuid"] for m in other["gpus"][0]["mig_devices"]] == [BIG]
    assert other["processes"] == []
    env["COLUMNS"] = "160"
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "scan", "--no-report", "--gpus",
                           BIG], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert "GPU 1 (MIG 2/0) chosen on the command line" in done.stdout
    assert any(line.startswith("   2/0") for line in lines)
    assert not any(line.startswith("   7/0") for line in lines)
    assert not any(line.lstrip().startswith("1/7/0") for line in lines)  # its process neither


def check_json(env, cwd, *args):
    done = subprocess.run([sys.executable, "-m", "gpu_audit", "check", "--json", *args], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    import json

    return done.returncode, json.loads(done.stdout)


def test_check_with_a_mig_uuid_judges_only_that_instance(fake_nvml, cli_env, tmp_path):
    env = fake_nvml(mig_node(), base=cli_env)
    status = {}
    for uuid in (SMALL, BIG):
        code, doc = check_json(env, tmp_path, "--gpus", uuid)
        [foreign] = [c for c in doc["checks"] if c["id"] == "foreign-processes"]
        status[uuid] = foreign["status"]
        assert code in (0, 1, 2)
        [gpu] = doc["snapshot"]["gpus"]
        assert [m["uuid"] for m in gpu["mig_devices"]] == [uuid]
        assert doc["gpu_selection"]["mig_uuids"] == [uuid]
    # The other user's process runs in 7/0: it fails the check there, not in 2/0.
    assert status == {SMALL: "fail", BIG: "pass"}
