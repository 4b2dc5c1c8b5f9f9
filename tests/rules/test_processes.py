from __future__ import annotations

from gpu_audit.config import Policy
from gpu_audit.rules import evaluate
from gpu_audit.rules.duplicates import annotate_duplicates
from gpu_audit.rules.processes import duplicate_backend, gpu_process_gone, unattributed_vram
from tests import builders as b


def ids(findings):
    return [f.id for f in findings]


def test_three_uvicorn_copies_are_one_duplicate_group_with_308_mib_reclaimable():
    scan = b.gtx1650_three_uvicorn()
    (finding,) = list(duplicate_backend(scan, Policy()))
    assert finding.evidence["reclaimable_bytes"] == 308 * b.MIB
    assert [m["pid"] for m in finding.evidence["members"]] == [2101, 2202, 2303]
    assert [m["port"] for m in finding.evidence["members"]] == [8000, 8080, 3001]
    assert finding.evidence["keep_pid"] == 2101
    assert finding.evidence["stop_pids"] == [2202, 2303]
    assert "kill 2202 2303" in finding.remedy
    assert "uvicorn" not in finding.remedy.split("kill", 1)[1]  # pids, never a name pattern


def test_distinct_programs_and_arguments_are_not_duplicates():
    procs = [
        b.process(1, 500, ["python", "train.py", "--lr", "0.1"]),
        b.process(2, 500, ["python", "train.py", "--lr", "0.01"]),
        b.process(3, 500, ["python", "serve.py", "--port", "8000"]),
    ]
    assert list(duplicate_backend(b.scan(processes=procs), Policy())) == []


def test_ranks_of_a_distributed_job_are_not_duplicates():
    argv = ["/usr/bin/python3", "train.py", "--config", "big.yaml"]
    launcher = ["/usr/bin/python3", "/usr/bin/torchrun", "--nproc-per-node=2", "train.py"]
    procs = [b.process(10 + i, 30000, argv, gpu_index=i, parent_cmdline=launcher) for i in range(2)]
    assert (
        list(duplicate_backend(b.scan(gpus=[b.gpu(0), b.gpu(1)], processes=procs), Policy()))
        == []
    )
    by_rank = [b.process(20 + i, 30000, argv, gpu_index=i, dist_rank=i) for i in range(2)]
    assert list(duplicate_backend(b.scan(processes=by_rank), Policy())) == []
    by_flag = [
        b.process(30 + i, 30000, [*argv, f"--local-rank={i}"], gpu_index=i) for i in range(2)
    ]
    assert list(duplicate_backend(b.scan(processes=by_flag), Policy())) == []


def test_workers_of_one_gunicorn_master_are_one_server():
    master = ["/venv/bin/python", "/venv/bin/gunicorn", "-w", "2", "app:app"]
    procs = [b.process(40 + i, 900, master, ppid=39, parent_cmdline=master) for i in range(2)]
    assert list(duplicate_backend(b.scan(processes=procs), Policy())) == []


def test_duplicate_group_numbers_are_set_on_members_only():
    scan = b.gtx1650_three_uvicorn()
    marked = {p.pid: p.duplicate_group for p in annotate_duplicates(scan.processes)}
    assert marked == {1201: None, 2101: 1, 2202: 1, 2303: 1, 2404: None}


def test_unattributed_vram_beyond_allowance_is_reported():
    procs = [b.process(5, 1024)]
    scan = b.scan(gpus=[b.gpu(0, used=10 * b.GIB)], processes=procs)
    (finding,) = list(unattributed_vram(scan, Policy()))
    assert finding.evidence["unattributed_bytes"] == 9 * b.GIB
    assert finding.subject == "gpu:0"


def test_unattributed_vram_within_allowance_or_unknown_per_process_is_quiet():
    within = b.scan(
        gpus=[b.gpu(0, used=1024 * b.MIB + 400 * b.MIB)], processes=[b.process(5, 1024)]
    )
    assert list(unattributed_vram(within, Policy())) == []
    unknown = b.scan(
        gpus=[b.gpu(0, used=10 * b.GIB)], processes=[b.process(5, 0, used_memory_bytes=None)]
    )
    assert list(unattributed_vram(unknown, Policy())) == []


def test_process_gone_is_flagged_on_a_host_but_not_inside_a_container():
    gone = b.process(77, 2048, None, visible=False, user=None, status=None)
    scan = b.scan(gpus=[b.gpu(0, used=3 * b.GIB)], processes=[gone])
    (finding,) = list(gpu_process_gone(scan, Policy()))
    assert finding.evidence["used_memory_bytes"] == 2048 * b.MIB
    in_container = b.with_host(scan, container="docker")
    assert list(gpu_process_gone(in_container, Policy())) == []


def test_zombie_holding_memory_names_its_parent():
    zombie = b.process(88, 512, ["python", "job.py"], status="zombie", ppid=87)
    (finding,) = list(gpu_process_gone(b.scan(processes=[zombie]), Policy()))
    assert "87" in finding.remedy


def test_evaluate_stamps_ids_and_severities_and_honours_ignore():
    scan = b.gtx1650_three_uvicorn()
    findings = evaluate(scan, Policy())
    assert "duplicate-backend" in ids(findings)
    assert all(f.severity is not None for f in findings)
    assert "duplicate-backend" not in ids(evaluate(scan, Policy(ignore=["duplicate-backend"])))
