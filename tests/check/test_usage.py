"""Swap and the processes already on the runner."""

from __future__ import annotations

from tests import builders as b
from tests.check.support import FAIL, GIB, MIB, PASS, SKIP, UNKNOWN, WARN, no_driver, only, run

# --- swap ----------------------------------------------------------------------------------


def test_swap_over_the_limit_fails_with_the_scan_rule_remedy():
    scan = b.with_host(b.scan(), swap_used_bytes=3 * GIB)
    result = only(run(scan), "swap")
    assert result.status is FAIL and "3.0 GiB of swap in use" in result.summary
    assert result.finding_id == "swap-pressure" and "swapoff" in result.remedy
    assert only(run(scan, max_swap_used_gib=4), "swap").status is PASS
    assert only(run(scan, swap="warn"), "swap").status is WARN
    assert only(run(scan, swap="ignore"), "swap").status is SKIP


def test_swap_edge_cases():
    none = b.with_host(b.scan(), swap_total_bytes=0, swap_used_bytes=0)
    assert only(run(none), "swap").summary == "no swap configured"
    unread = b.with_host(b.scan(), swap_used_bytes=None)
    assert only(run(unread), "swap").status is UNKNOWN


# --- processes -------------------------------------------------------------------------------


def test_duplicate_backends_fail_by_default_and_follow_the_policy():
    scan = b.gtx1650_three_uvicorn()
    result = only(run(scan, user="alice"), "duplicate-backends")
    assert result.status is FAIL and result.finding_id == "duplicate-backend"
    assert "kill 2202 2303" in result.remedy
    assert only(run(scan, user="alice", duplicate_backends="warn"),
                "duplicate-backends").status is WARN
    assert only(run(scan, user="alice", duplicate_backends="ignore"),
                "duplicate-backends").status is SKIP
    assert only(run(b.scan()), "duplicate-backends").status is PASS


def test_unattributed_vram_warns_by_default():
    scan = b.scan(gpus=[b.gpu(0, total=16 * GIB, used=6 * GIB)])
    result = only(run(scan), "unattributed-vram")
    assert result.status is WARN and result.subject == "gpu:0"
    assert "fuser" in result.remedy
    assert only(run(scan, unattributed_vram="fail"), "unattributed-vram").status is FAIL
    assert only(run(b.scan()), "unattributed-vram").status is PASS


def test_foreign_processes_are_other_users_and_unseen_ones_not_the_display():
    procs = [
        b.process(1201, 38, ["/usr/lib/xorg/Xorg"], type="graphics", user="root"),
        b.process(3001, 2048, ["python", "serve.py"], user="bob"),
        b.process(3002, 1024, None, user=None, visible=False,
                  note="not visible from this container's PID namespace"),
        b.process(3003, 512, ["python", "mine.py"], user="ci"),
    ]
    used = sum(p.used_memory_bytes for p in procs)
    scan = b.scan(gpus=[b.gpu(0, used=used)], processes=procs,
                      host=b.host(container="docker"))
    report = run(scan, user="ci")
    foreign = only(report, "foreign-processes")
    assert foreign.status is FAIL
    assert [p["pid"] for p in foreign.evidence["processes"]] == [3001, 3002]
    assert "3001 (python, bob, GPU 0, 2.0 GiB)" in foreign.summary
    assert "3002 (?, not visible" in foreign.summary
    own = only(report, "own-processes")
    assert own.status is WARN and [p["pid"] for p in own.evidence["processes"]] == [3003]
    assert "kill 3003" in own.remedy
    strict = run(scan, user="ci", own_processes="fail", foreign_processes="warn")
    assert only(strict, "own-processes").status is FAIL
    assert only(strict, "foreign-processes").status is WARN


def test_outside_a_container_an_unseen_pid_is_gone_not_foreign():
    gone = b.process(3002, 1024, None, user=None, visible=False, note="no such process")
    scan = b.scan(gpus=[b.gpu(0, used=1324 * MIB)], processes=[gone])
    report = run(scan, user="ci")
    assert only(report, "foreign-processes").status is PASS
    assert only(report, "gpu-process-gone").status is WARN


def test_an_idle_runner_has_neither_foreign_nor_own_processes():
    display = b.process(1201, 38, ["/usr/lib/xorg/Xorg"], type="graphics", user="root")
    report = run(b.scan(processes=[display]), user="ci")
    assert only(report, "foreign-processes").status is PASS
    assert only(report, "own-processes").status is PASS


def test_process_checks_skip_without_gpu_readings():
    report = run(no_driver())
    for check_id in ("foreign-processes", "own-processes", "duplicate-backends",
                     "unattributed-vram"):
        assert only(report, check_id).status is SKIP, check_id


def test_one_remedy_per_process_across_duplicate_backends_and_own_processes():
    """Three copies of one server and an unrelated worker, all of the user running check."""
    report = run(b.gtx1650_three_uvicorn(), user="alice")
    dup = only(report, "duplicate-backends")
    assert dup.evidence["keep_pid"] == 2101 and dup.evidence["stop_pids"] == [2202, 2303]
    own = only(report, "own-processes")
    assert [p["pid"] for p in own.evidence["processes"]] == [2404]
    assert own.evidence["duplicate_copies"] == [2101, 2202, 2303]
    assert own.remedy.endswith("kill 2404")
    for pid in ("2101", "2202", "2303"):
        assert pid not in own.remedy
    # without the duplicate-backends check, own-processes is the one remedy for every copy
    relaxed = only(run(b.gtx1650_three_uvicorn(), user="alice", duplicate_backends="ignore"),
                   "own-processes")
    assert relaxed.remedy.endswith("kill 2101 2202 2303 2404")
    # only copies left: nothing else to say here
    copies_only = b.scan(processes=[b.uvicorn(2101, 8000), b.uvicorn(2202, 8080)])
    alone = only(run(copies_only, user="alice"), "own-processes")
    assert alone.status is PASS and "2101 2202 (see duplicate-backends)" in alone.summary
