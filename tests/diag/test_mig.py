"""A GPU in MIG mode is tested instance by instance: each MIG instance in a worker of its own
(``CUDA_VISIBLE_DEVICES=<MIG uuid>``), its findings naming ``gpu:N/mig:GI/CI``, its figures judged
against the node's instances of the same profile only (a slice judged against the whole GPU's
datasheet would be a false alarm). A MIG GPU with no instance to test is left untested, with a
finding that says how to create instances."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpu_audit.diag.judge import judge
from gpu_audit.diag.mig import instance_runs
from gpu_audit.diag.results import WorkerOutcome
from gpu_audit.model import MigDevice
from tests import builders as b
from tests import fakegpu
from tests.diag import recorded
from tests.fakegpu import GIB, MIB, h100_mig_gpu, h100_node

fake_nvml_lib = fakegpu.fake_nvml_lib
fake_nvml = fakegpu.fake_nvml


def test_an_untested_mig_gpu_is_an_info_finding_and_no_verdict() -> None:
    mig = recorded.h100_run(1, tests={}, mig_mode=True,
                            worker=WorkerOutcome(status="not-run", kind="mig",
                                                 reason="MIG mode is on"))
    out = judge(2, [recorded.healthy_h100(), mig])
    [finding] = out.findings
    assert (finding.id, finding.subject) == ("diag-mig-not-tested", "gpu:1")
    assert finding.severity.value == "info" and "nvidia-smi -L" in finding.remedy
    assert "sudo nvidia-smi mig -i 1 -cgi" in finding.remedy and " -C " in finding.remedy
    assert "-i 1 -mig 0" in finding.remedy and finding.evidence["gpu_uuid"] == mig.uuid
    assert out.unknown == ["GPU 1: not tested, MIG mode is on (diag-mig-not-tested)"]
    assert out.exit_code == 3
    assert {f.subject for f in out.figures} == {"gpu:0"}  # nothing judged for the MIG GPU


def mig_gpu():
    devices = [MigDevice(index=i, uuid=f"MIG-{i}", gpu_instance_id=gi, compute_instance_id=0,
                         profile=profile, memory_total_bytes=memory * MIB,
                         memory_used_bytes=13 * MIB, sm_count=sms)
               for i, (gi, profile, memory, sms) in enumerate(
                   [(2, "3g.40gb", 40192, 60), (7, "1g.10gb", 9984, 16),
                    (8, "1g.10gb", 9984, 16)])]
    return b.gpu(1, name="NVIDIA H100 80GB HBM3", mig_mode=True, mig_devices=devices,
                 total=81559 * MIB)


def instance_tests(gbs: float, tflops: float) -> dict:
    tests = recorded.h100_tests()
    del tests["host-bandwidth"]
    tests["memory-bandwidth"] = {"gbs": gbs, "bytes": GIB}
    for dtype in ("fp32", "tf32", "fp16", "bf16", "fp8"):
        tests[f"matmul-{dtype}"] = {"tflops": tflops, "n": 4096}
    return tests


def test_instances_are_runs_of_their_own_with_their_shares():
    runs = instance_runs(mig_gpu())
    assert [r.subject for r in runs] == ["gpu:1/mig:2/0", "gpu:1/mig:7/0", "gpu:1/mig:8/0"]
    big = runs[0]
    assert big.mig["uuid"] == "MIG-0" and big.memory_free_bytes == (40192 - 13) * MIB
    assert big.mig["sm_share_of_instances"] == round(60 / 92, 4)
    assert big.mig["memory_share"] == round(40192 / 81559, 4)
    assert big.label == "GPU 1 MIG 2/0 (3g.40gb)" and big.pcie_width_current is None


def test_instance_figures_are_judged_against_their_profile_only():
    big, small, slow = instance_runs(mig_gpu())
    big.tests, small.tests = instance_tests(1500.0, 200.0), instance_tests(420.0, 60.0)
    slow.tests = instance_tests(150.0, 58.0)  # a 1g.10gb instance at a third of its twin
    for run in (big, small, slow):
        run.worker = WorkerOutcome(status="done")
    out = judge(2, [recorded.healthy_h100(), big, small, slow])
    findings = [(f.id, f.subject) for f in out.findings]
    # The slow 1g.10gb is low beside the other 1g.10gb; the 3g.40gb, far above both, and the
    # healthy 1g.10gb are not judged against the whole GPU's datasheet.
    assert findings == [("diag-bandwidth-low", "gpu:1/mig:8/0")]
    [low] = out.findings
    assert "GPU 1 MIG 8/0 (1g.10gb)" in low.title
    assert "other NVIDIA H100 80GB HBM3 MIG 1g.10gb" in low.detail
    alone = [f for f in out.figures if f.subject == "gpu:1/mig:2/0"]
    assert alone and all(f.expected is None and not f.low for f in alone)
    assert "compared with the node's instances of the same profile" in alone[0].source
    assert not [f for f in out.figures if f.subject.startswith("gpu:1") and "h2d" in f.metric]
    assert out.exit_code == 2  # diag-bandwidth-low is an error


def run_diag(env, cwd, *args):
    return subprocess.run([sys.executable, "-m", "gpu_audit", "diag", "--device", "cpu",
                           "--json", "--no-report", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_diag_leaves_a_mig_gpu_without_instances_untested(fake_nvml, cli_env, tmp_path) -> None:
    pytest.importorskip("torch")
    scenario = h100_node(2)
    scenario["gpus"][1]["mig_mode"] = True  # no instance created
    env = fake_nvml(scenario, base=cli_env)
    done = run_diag(env, tmp_path, "--level", "1")
    assert done.returncode == 3, done.stderr
    doc = json.loads(done.stdout)
    # (the test mode has no table of models: the tested GPU has diag-model-unknown, info)
    [finding] = [f for f in doc["findings"] if f["id"] != "diag-model-unknown"]
    assert (finding["id"], finding["subject"]) == ("diag-mig-not-tested", "gpu:1")
    assert "no MIG instance is listed" in finding["detail"]
    tested, mig = doc["gpus"]
    assert tested["worker"]["status"] == "done" and tested["tests"]["context"]["ok"]
    assert (mig["worker"]["status"], mig["worker"]["kind"]) == ("not-run", "mig")
    assert mig["tests"] == {} and mig["plan"] is None
    assert "not tested, MIG mode on: GPU 1" in done.stderr
    # Choosing the other GPUs gives a verdict.
    chosen = run_diag(env, tmp_path, "--level", "1", "--gpus", "0")
    assert chosen.returncode == 0, chosen.stderr
    assert [f["id"] for f in json.loads(chosen.stdout)["findings"]] == ["diag-model-unknown"]


def test_diag_tests_each_mig_instance_in_its_own_worker(fake_nvml, cli_env, tmp_path) -> None:
    pytest.importorskip("torch")
    scenario = h100_node(2)
    scenario["gpus"][1] = h100_mig_gpu(1, ("3g.40gb", "1g.10gb"))
    env = fake_nvml(scenario, base=cli_env)
    done = run_diag(env, tmp_path, "--level", "2", "--gpus", "1")
    assert done.returncode in (0, 1), done.stderr
    doc = json.loads(done.stdout)
    big, small = doc["gpus"]
    uuids = [m["uuid"] for m in scenario["gpus"][1]["mig_devices"]]
    assert [g["subject"] for g in doc["gpus"]] == ["gpu:1/mig:2/0", "gpu:1/mig:7/0"]
    assert [g["mig"]["uuid"] for g in doc["gpus"]] == uuids
    assert "GPU 1 MIG 7/0 (1g.10gb): memtest" in done.stderr
    # One worker per instance, each given its instance alone.
    assert [g["worker"]["ready"]["cuda_visible_devices"] for g in doc["gpus"]] == uuids
    assert len({g["worker"]["ready"]["pid"] for g in doc["gpus"]}) == 2
    for run in (big, small):
        assert run["worker"]["status"] == "done" and run["tests"]["context"]["ok"]
        assert run["tests"]["memtest"]["mismatches"] == []
        assert run["tests"]["host-bandwidth"]["skipped"] is True
        assert "PCIe" in run["tests"]["host-bandwidth"]["reason"]
        assert "peer access" in run["tests"]["peers"]["reason"]
        assert run["plan"]["host_bytes"] == 0
        assert {f["subject"] for f in run["figures"]} == {run["subject"]}
    assert not [f for f in doc["findings"] if f["id"] in ("diag-mig-not-tested",
                                                         "diag-model-unknown")]
    assert doc["peers"] is None
    assert "1/mig:2/0, 1/mig:7/0" in done.stderr


def test_check_diag_reports_a_mig_gpu_as_unknown_with_its_remedy() -> None:
    pytest.importorskip("torch")
    from gpu_audit.check.engine import judge as judge_check
    from gpu_audit.check.results import CheckStatus
    from gpu_audit.config import CheckPolicy
    from gpu_audit.diag.checklist import run_diag_stage

    scan = b.scan(gpus=[b.gpu(0, mig_mode=True)])
    stage = run_diag_stage(scan, 1, None, device="cpu")
    assert stage.status == "error" and "MIG mode is on" in stage.summary
    [line] = [r for r in judge_check(scan, CheckPolicy(), stages=[stage]).results
              if r.id == "diag"]
    assert line.status is CheckStatus.UNKNOWN and "-i 0 -mig 0" in line.remedy
    assert "nvidia-smi mig -i 0 -cgi" in line.remedy


def test_check_diag_tests_the_instances_of_a_mig_gpu() -> None:
    pytest.importorskip("torch")
    from gpu_audit.diag.checklist import run_diag_stage

    scan = b.scan(gpus=[mig_gpu()])
    stage = run_diag_stage(scan, 1, None, device="cpu")
    assert stage.status == "passed", stage.summary
    assert "level 1 on GPU 1/mig:2/0, 1/mig:7/0, 1/mig:8/0:" in stage.summary
    assert stage.evidence["gpus"] == [1]
    assert stage.evidence["tested"] == ["gpu:1/mig:2/0", "gpu:1/mig:7/0", "gpu:1/mig:8/0"]


def test_only_the_instances_with_processes_are_busy() -> None:
    from gpu_audit.diag.runner import busy_processes, refuse_busy
    from gpu_audit.errors import UsageError

    big, small, other = instance_runs(mig_gpu())  # GPU instances 2, 7 and 8
    scan = b.scan(gpus=[mig_gpu()], processes=[
        b.process(4242, 2048, ["python", "train.py"], gpu_index=1, mig_gpu_instance_id=7,
                  mig_compute_instance_id=0)])
    assert list(busy_processes(scan, [big, small, other])) == ["gpu:1/mig:7/0"]
    refuse_busy(scan, [big, other])  # a neighbour in another GPU instance does not count
    with pytest.raises(UsageError, match=r"GPU 1 MIG 7/0: pid 4242 .*--gpus MIG-0,MIG-2, "):
        refuse_busy(scan, [big, small, other])
    # A sibling compute instance shares its GPU instance's memory; an unplaced process may be
    # in any instance: both count.
    sibling = b.process(5, 1, gpu_index=1, mig_gpu_instance_id=2, mig_compute_instance_id=1)
    unplaced = b.process(6, 1, gpu_index=1)
    assert list(busy_processes(b.scan(gpus=[mig_gpu()], processes=[sibling]), [big, small])) \
        == ["gpu:1/mig:2/0"]
    assert len(busy_processes(b.scan(gpus=[mig_gpu()], processes=[unplaced]),
                              [big, small])) == 2


def test_diag_tests_only_the_chosen_instance_and_refuses_only_a_busy_one(
        fake_nvml, cli_env, tmp_path) -> None:
    pytest.importorskip("torch")
    scenario = h100_node(2)
    gpu = scenario["gpus"][1] = h100_mig_gpu(1, ("3g.40gb", "1g.10gb"))
    gpu["processes"] = [dict(fakegpu.process(4_194_500, 700 * MIB), gpu_instance_id=2,
                             compute_instance_id=0)]
    big_uuid, small_uuid = (m["uuid"] for m in gpu["mig_devices"])
    env = fake_nvml(scenario, base=cli_env)
    done = run_diag(env, tmp_path, "--level", "1", "--gpus", small_uuid)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert [g["subject"] for g in doc["gpus"]] == ["gpu:1/mig:7/0"]
    assert doc["gpus"][0]["worker"]["ready"]["cuda_visible_devices"] == small_uuid
    assert doc["selection"]["mig_uuids"] == [small_uuid]
    assert "(1/mig:7/0" in done.stderr
    # The instance with the process is refused, alone or with its GPU; --force tests it.
    for spec in (big_uuid, "1"):
        refused = run_diag(env, tmp_path, "--level", "1", "--gpus", spec)
        assert refused.returncode == 3 and "Traceback" not in refused.stderr
        assert "GPU 1 MIG 2/0: pid 4194500" in refused.stderr
        assert "GPU 1 MIG 7/0:" not in refused.stderr
    assert f"--gpus {small_uuid}, --gpus" in refused.stderr
    forced = run_diag(env, tmp_path, "--level", "1", "--gpus", big_uuid, "--force")
    assert forced.returncode == 0, forced.stderr
    assert [g["subject"] for g in json.loads(forced.stdout)["gpus"]] == ["gpu:1/mig:2/0"]
