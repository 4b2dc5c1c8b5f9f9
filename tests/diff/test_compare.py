"""``gpu-audit diff``'s judgement on hand-built scans: each change it reports, and each it must
not."""

from __future__ import annotations

import msgspec
import pytest

from gpu_audit.diff import compare
from gpu_audit.errors import InputError
from gpu_audit.gpu_selection import apply_selection, resolve_gpus
from gpu_audit.model import KernelLog, Severity, XidEvent
from tests import builders as b

MIB = b.MIB


def pair(before_gpus=None, after_gpus=None, before_procs=(), after_procs=(), **after_changes):
    before = b.scan(gpus=before_gpus or [b.gpu(0), b.gpu(1)], processes=list(before_procs))
    after = b.scan(gpus=after_gpus or [b.gpu(0), b.gpu(1)], processes=list(after_procs),
                   generated_at="2026-11-22T11:00:00Z", **after_changes)
    return before, after


def ids(report) -> list[str]:
    return [f.id for f in report.findings]


def test_nothing_changed_is_ok():
    report = compare(*pair())
    assert report.findings == [] and report.appeared == [] and report.left == []
    assert report.exit_code == 0


def test_a_process_that_appeared_and_stayed_is_a_leak_with_pid_user_and_mib():
    server = b.process(100, 500)
    stray = b.process(4242, 8192, gpu_index=1, user="alice", status="zombie")
    report = compare(*pair(before_procs=[server], after_procs=[server, stray]))
    assert [p.pid for p in report.appeared] == [4242]
    (leak,) = report.findings
    assert leak.id == "job-vram-leak" and leak.severity is Severity.ERROR
    assert leak.subject == "pid:4242"
    assert leak.evidence == {"pid": 4242, "user": "alice", "gpu_index": 1,
                             "used_memory_mib": 8192, "status": "zombie", "name": None,
                             "visible": True}
    assert report.exit_code == 2


def test_the_job_user_decides_whose_process_is_a_leftover():
    theirs = b.process(4242, 1024, user="bob")
    unknown = b.process(4343, 1024, user=None, visible=False)
    mine = b.process(4444, 1024, user="alice")
    report = compare(*pair(after_procs=[theirs, unknown, mine]), job_user="alice")
    assert sorted(f.evidence["pid"] for f in report.findings) == [4343, 4444]
    assert len(report.appeared) == 3  # all three are still listed as appeared


def test_a_reused_pid_is_another_process():
    old = b.process(300, 100, start_time="2026-11-22T09:00:00Z")
    new = b.process(300, 100, start_time="2026-11-22T10:30:00Z")
    report = compare(*pair(before_procs=[old], after_procs=[new]))
    assert [p.pid for p in report.appeared] == [300] and [p.pid for p in report.left] == [300]
    assert ids(report) == ["job-vram-leak"]


def test_processes_that_left_are_listed_and_no_finding():
    report = compare(*pair(before_procs=[b.process(100, 500)]))
    assert [p.pid for p in report.left] == [100]
    assert report.findings == [] and report.exit_code == 0


def test_uncorrectable_ecc_rise_is_critical_corrected_only_a_warning():
    before, after = pair(after_gpus=[b.gpu(0, ecc_errors_uncorrected_volatile=3),
                                     b.gpu(1, ecc_errors_corrected_volatile=7)])
    before = msgspec.structs.replace(before, gpus=[b.gpu(0),
                                                   b.gpu(1, ecc_errors_corrected_volatile=2)])
    report = compare(before, after)
    by_subject = {f.subject: f for f in report.findings}
    assert by_subject["gpu:0"].severity is Severity.CRITICAL
    assert by_subject["gpu:0"].evidence["uncorrected_increase"] == 3
    assert by_subject["gpu:1"].severity is Severity.WARNING
    assert by_subject["gpu:1"].evidence["corrected_increase"] == 5
    # The scan's own ecc-uncorrectable is new in AFTER.
    assert "ecc-uncorrectable" in [f.id for f in report.new_findings]


def test_a_counter_that_fell_or_is_unknown_is_no_rise():
    before, after = pair(before_gpus=[b.gpu(0, ecc_errors_uncorrected_volatile=5)],
                         after_gpus=[b.gpu(0, ecc_errors_uncorrected_volatile=0)])
    assert compare(before, after).findings == []
    before, after = pair(before_gpus=[b.gpu(0, ecc_errors_uncorrected_volatile=None)],
                         after_gpus=[b.gpu(0, ecc_errors_uncorrected_volatile=4)])
    assert "ecc-errors-increased" not in ids(compare(before, after))


def test_retired_pages_and_remapped_rows_that_went_up():
    before, after = pair(
        before_gpus=[b.gpu(0, retired_pages_sbe=1, retired_pages_dbe=0),
                     b.gpu(1, remapped_rows_correctable=0)],
        after_gpus=[b.gpu(0, retired_pages_sbe=1, retired_pages_dbe=2),
                    b.gpu(1, remapped_rows_correctable=1, remapped_rows_uncorrectable=1)])
    found = {f.id: f for f in compare(before, after).findings}
    assert found["retired-pages-increased"].severity is Severity.CRITICAL
    assert found["retired-pages-increased"].evidence["dbe_increase"] == 2
    assert found["remapped-rows-increased"].severity is Severity.ERROR
    assert found["remapped-rows-increased"].evidence["uncorrectable_increase"] == 1


def test_new_xids_keep_their_origin():
    gpus = [b.gpu(0, pci_bus_id="00000000:3B:00.0"), b.gpu(1, pci_bus_id="00000000:86:00.0")]
    old = XidEvent(79, "0000:3b:00", "fallen off", uptime_s=10.0)
    log_before = KernelLog("kmsg", True, [old])
    log_after = KernelLog("kmsg", True, [old, XidEvent(48, "0000:86:00", "DBE", uptime_s=99.0),
                                         XidEvent(13, "0000:3b:00", "Graphics", uptime_s=98.0)])
    before = b.scan(gpus=gpus, kernel_log=log_before)
    after = b.scan(gpus=gpus, kernel_log=log_after, generated_at="2026-11-22T11:00:00Z")
    found = {f.evidence["xid"]: f for f in compare(before, after).findings}
    assert set(found) == {48, 13}
    assert found[48].subject == "gpu:1" and found[48].evidence["machine_fault"] is True
    assert found[13].subject == "gpu:0" and found[13].evidence["machine_fault"] is False
    assert found[13].severity < found[48].severity


def test_unreadable_kernel_log_compares_no_xids():
    event = XidEvent(48, "0000:86:00", "DBE", uptime_s=99.0)
    before = b.scan(kernel_log=KernelLog(None, False))
    after = b.scan(kernel_log=KernelLog("kmsg", True, [event]),
                   generated_at="2026-11-22T11:00:00Z")
    assert "xid-new" not in ids(compare(before, after))


def test_throttle_reasons_that_started():
    before, after = pair(after_gpus=[b.gpu(0, throttle_reasons=["hw_slowdown", "gpu_idle"]),
                                     b.gpu(1, throttle_reasons=["sw_thermal_slowdown"])])
    found = {f.subject: f for f in compare(before, after).findings if f.id == "throttle-started"}
    assert found["gpu:0"].severity is Severity.ERROR
    assert found["gpu:0"].evidence["started"] == ["hw_slowdown"]
    assert found["gpu:1"].severity is Severity.WARNING


def test_a_gpu_gone_or_lost_is_critical():
    report = compare(*pair(after_gpus=[b.gpu(0, lost=True)]))
    found = sorted((f.subject, f.title) for f in report.findings if f.id == "gpu-missing")
    assert [s for s, _ in found] == ["gpu:0", "gpu:1"]
    assert "lost" in found[0][1] and "no longer listed" in found[1][1]


def test_memory_no_process_explains_is_unreleased():
    before, after = pair(after_gpus=[b.gpu(0, used=3 * b.GIB), b.gpu(1)])
    (found,) = compare(before, after).findings
    assert found.id == "vram-unreleased" and found.subject == "gpu:0"
    assert found.evidence["unreleased_mib"] == 3 * 1024 - 300
    # Held by a listed process that was there before: not unreleased.
    server = b.process(100, 3 * 1024)
    before, after = pair(before_procs=[server], after_procs=[server],
                         before_gpus=[b.gpu(0, used=3 * b.GIB)],
                         after_gpus=[b.gpu(0, used=3 * b.GIB + 300 * MIB)])
    assert compare(before, after).findings == []


def test_findings_new_and_resolved():
    before, after = pair()
    before = b.with_host(before, swap_used_bytes=6 * b.GIB)
    after = b.with_host(after, memory_available_bytes=1 * b.GIB)
    report = compare(before, after)
    assert [f.id for f in report.new_findings] == ["low-host-memory"]
    assert [f.id for f in report.resolved_findings] == ["swap-pressure"]
    assert report.exit_code == 1  # the worst new finding is a warning
    assert compare(before, after, fail_on=Severity.WARNING).exit_code == 2


def test_a_selection_in_after_limits_before():
    gpus = [b.gpu(i) for i in range(4)]
    before = b.scan(gpus=gpus, processes=[b.process(100, 500, gpu_index=3)])
    full_after = b.scan(gpus=gpus, processes=[], generated_at="2026-11-22T11:00:00Z")
    after = apply_selection(full_after, resolve_gpus("0,1", gpus, {}))
    report = compare(before, after)
    assert report.findings == [] and report.left == []  # GPU 3 was not looked at after


@pytest.mark.parametrize(("change", "message"), [
    ({"host": b.host(hostname="node2")}, "is from host 'node1' and AFTER from 'node2'"),
    ({"generated_at": "2026-11-22T09:00:00Z"}, "is older than BEFORE"),
    ({"gpus": [b.gpu(0, uuid="GPU-other")]}, "share no GPU"),
])
def test_documents_of_other_machines_or_out_of_order_are_refused(change, message):
    before = b.scan()
    after = msgspec.structs.replace(b.scan(generated_at="2026-11-22T11:00:00Z"), **change)
    with pytest.raises(InputError, match=message):
        compare(before, after)


def test_without_before_only_the_job_user_names_leftovers():
    after = b.scan(processes=[b.process(1, 100, user="alice"), b.process(2, 100, user="bob")])
    assert compare(None, after).findings == []
    report = compare(None, after, job_user="alice")
    assert [f.evidence["pid"] for f in report.findings] == [1]
    assert report.notes and "no BEFORE" in report.notes[0]
