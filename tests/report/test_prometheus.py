"""The node_exporter textfile: parsed back with prometheus_client's own parser, joinable with the
DCGM exporter's series, bounded in cardinality."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from gpu_audit.gpu_identity import join
from gpu_audit.model import Gpu, KernelGpu, ProcessAllocatorState, Severity
from gpu_audit.report.prometheus import GPU_LABELS, METRICS, render_failure, render_textfile
from gpu_audit.rules import evaluate, exit_code
from tests import builders as b

parser = pytest.importorskip("prometheus_client.parser")

MIB = b.MIB


def parse(text: bytes) -> dict[str, list]:
    """Metric name -> its samples."""
    families = parser.text_string_to_metric_families(text.decode())
    return {family.name: list(family.samples) for family in families}


def one(samples: list, **labels: str):
    found = [s for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (labels, samples)
    return found[0]


def laptop_scan():
    """The GTX 1650 story with a bus id, a second user and a monitored PyTorch process."""
    scan = b.gtx1650_three_uvicorn()
    card = b.gpu(0, total=scan.gpus[0].memory_total_bytes, used=scan.gpus[0].memory_used_bytes,
                 name="NVIDIA GeForce GTX 1650", pci_bus_id="00000000:01:00.0")
    allocator = ProcessAllocatorState(cuda_device=0, published_at="2026-11-22T09:59:58Z",
                                      reserved_bytes=100 * MIB, allocated_bytes=60 * MIB,
                                      fragmentation_pct=40.0)
    trainer = b.process(3505, 120, ["python", "train.py", "--lr", "3e-4"], user="bob",
                        allocator=allocator)
    return b.scan(gpus=[card], processes=[*scan.processes, trainer])


def render(scan):
    findings = evaluate(scan)
    return render_textfile(scan, findings, exit_code(findings, Severity.ERROR), duration_s=1.25)


def test_every_series_carries_the_dcgm_join_labels_with_dcgm_value_formats():
    metrics = parse(render(laptop_scan()))
    sample = one(metrics["gpu_audit_duplicate_backend_memory_bytes"], gpu="0")
    assert sample.labels["UUID"] == "GPU-00000000-0000-0000-0000-000000000000"
    assert sample.labels["pci_bus_id"] == "00000000:01:00.0"
    assert sample.labels["modelName"] == "NVIDIA GeForce GTX 1650"
    assert sample.labels["Hostname"] == sample.labels["hostname"] == "node1"
    for name, (_doc, extra, per_gpu) in METRICS.items():
        for s in metrics.get(name, []):
            wanted = set(extra) | (set(GPU_LABELS) if per_gpu else {"Hostname", "hostname"})
            assert set(s.labels) == wanted, (name, s.labels)
            assert name.startswith("gpu_audit_")


def test_duplicate_unattributed_and_per_user_memory():
    scan = laptop_scan()
    metrics = parse(render(scan))
    gpu0 = {"gpu": "0"}
    # Three uvicorn copies at 154 MiB each; stopping two frees 308 MiB.
    assert one(metrics["gpu_audit_duplicate_backend_memory_bytes"], **gpu0).value == 3 * 154 * MIB
    assert one(metrics["gpu_audit_duplicate_backend_reclaimable_bytes"],
               **gpu0).value == 2 * 154 * MIB
    # Used memory minus every listed process: the 60 MiB the builder leaves unaccounted, minus
    # the 120 MiB trainer added without raising "used": none left, never negative.
    assert one(metrics["gpu_audit_unattributed_memory_bytes"], **gpu0).value == 0
    by_user = {s.labels["user"]: s.value for s in metrics["gpu_audit_process_memory_bytes"]}
    assert by_user == {"root": 38 * MIB, "alice": (3 * 154 + 114) * MIB, "bob": 120 * MIB}
    counts = {s.labels["user"]: s.value for s in metrics["gpu_audit_processes"]}
    assert counts == {"root": 1, "alice": 4, "bob": 1}


def test_unattributed_memory_is_the_used_memory_no_process_accounts_for():
    card = b.gpu(0, used=2048 * MIB)
    metrics = parse(render(b.scan(gpus=[card], processes=[b.process(10, 512, ["python"])])))
    assert one(metrics["gpu_audit_unattributed_memory_bytes"], gpu="0").value == 1536 * MIB
    # A process whose memory is not reported: the GPU cannot be judged, so no series.
    unknown = b.process(10, 0, ["python"], used_memory_bytes=None)
    metrics = parse(render(b.scan(gpus=[card], processes=[unknown])))
    assert "gpu_audit_unattributed_memory_bytes" not in metrics or \
        metrics["gpu_audit_unattributed_memory_bytes"] == []


def test_allocator_state_of_monitored_processes():
    metrics = parse(render(laptop_scan()))
    bob = {"gpu": "0", "user": "bob"}
    assert one(metrics["gpu_audit_allocator_reserved_bytes"], **bob).value == 100 * MIB
    assert one(metrics["gpu_audit_allocator_allocated_bytes"], **bob).value == 60 * MIB
    assert one(metrics["gpu_audit_allocator_fragmentation_ratio"], **bob).value == \
        pytest.approx(0.4)
    assert one(metrics["gpu_audit_allocator_monitored_processes"], **bob).value == 1
    assert all(s.labels["user"] == "bob" for s in metrics["gpu_audit_allocator_reserved_bytes"])


def test_findings_are_counted_without_pids_or_command_lines_in_labels():
    scan = laptop_scan()
    text = render(scan)
    metrics = parse(text)
    duplicate = one(metrics["gpu_audit_finding"], id="duplicate-backend")
    assert duplicate.value == 1 and duplicate.labels["subject"] == "pid"
    assert duplicate.labels["severity"] == "warning"
    severities = {s.labels["severity"]: s.value for s in metrics["gpu_audit_findings"]}
    assert set(severities) == {"info", "warning", "error", "critical"}
    assert severities["warning"] >= 1
    for pid in (p.pid for p in scan.processes):
        assert f'"{pid}"'.encode() not in text and f"pid:{pid}".encode() not in text
    assert b"uvicorn" not in text and b"train.py" not in text and b"8080" not in text


def test_a_gpu_finding_carries_that_gpus_join_labels():
    hot = b.gpu(1, temperature_c=85, temperature_slowdown_c=87, pci_bus_id="00000000:3B:00.0")
    metrics = parse(render(b.scan(gpus=[b.gpu(0), hot])))
    finding = one(metrics["gpu_audit_finding"], subject="gpu:1")
    assert finding.labels["gpu"] == "1" and finding.labels["pci_bus_id"] == "00000000:3B:00.0"
    assert finding.labels["UUID"] == hot.uuid


def test_series_stay_bounded_as_processes_grow():
    def series(n: int) -> int:
        procs = [b.process(5000 + i, 10, ["python", f"job{i}.py"], user=f"u{i % 3}")
                 for i in range(n)]
        metrics = parse(render(b.scan(gpus=[b.gpu(0, used=n * 10 * MIB + 300 * MIB)],
                                      processes=procs)))
        return sum(len(samples) for samples in metrics.values())

    assert series(6) == series(60)  # three users either way


def test_run_metrics_and_no_client_side_timestamps():
    text = render(laptop_scan())
    metrics = parse(text)
    assert one(metrics["gpu_audit_scan_success"]).value == 1
    assert one(metrics["gpu_audit_scan_status"]).value == 1  # warnings only
    assert one(metrics["gpu_audit_scan_duration_seconds"]).value == 1.25
    noon = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC).timestamp()  # the scan's generated_at
    assert one(metrics["gpu_audit_scan_timestamp_seconds"]).value == noon
    info = one(metrics["gpu_audit_info"])
    assert info.labels["driver_version"] == "560.35.03" and info.labels["version"] == "0.1.0"
    assert all(s.timestamp is None for samples in metrics.values() for s in samples)
    assert text.endswith(b"\n")


def test_a_failed_scan_still_says_so():
    metrics = parse(render_failure("node7", duration_s=0.5, timestamp_s=1795255200.0))
    assert one(metrics["gpu_audit_scan_success"], Hostname="node7").value == 0
    assert one(metrics["gpu_audit_scan_status"]).value == 3
    assert metrics.get("gpu_audit_finding", []) == []


def check_report(scan, **policy):
    from tests.check.support import run

    return run(scan, **policy)


def test_a_check_adds_its_verdict_to_the_scan_series():
    from gpu_audit.report.prometheus import CHECK_METRICS, render_check_textfile

    report = check_report(laptop_scan(), min_gpus=2)
    text = render_check_textfile(report, duration_s=0.75)
    metrics = parse(text)
    assert one(metrics["gpu_audit_check_status"]).value == report.exit_code == 2
    assert one(metrics["gpu_audit_scan_success"]).value == 1
    assert one(metrics["gpu_audit_scan_duration_seconds"]).value == 0.75
    # The scan's own series are all there, and its status is the scan's, not the check's.
    assert one(metrics["gpu_audit_duplicate_backend_memory_bytes"], gpu="0").value > 0
    assert one(metrics["gpu_audit_scan_status"]).value == 1  # warnings only
    counts = {s.labels["status"]: s.value for s in metrics["gpu_audit_checks"]}
    assert counts == report.counts()
    passed = {(s.labels["id"], s.labels["subject"]): s.value
              for s in metrics["gpu_audit_check_passed"]}
    assert passed[("gpu-count", "host")] == 0
    assert 1 in passed.values()
    skipped = {r.id for r in report.results if r.status.value == "skip"} - \
        {r.id for r in report.results if r.status.value != "skip"}
    assert skipped and not skipped & {i for i, _ in passed}
    for name, (_doc, extra, per_gpu) in CHECK_METRICS.items():
        for s in metrics.get(name, []):
            wanted = set(extra) | (set(GPU_LABELS) if per_gpu else {"Hostname", "hostname"})
            assert set(s.labels) == wanted, (name, s.labels)
    for pid in (p.pid for p in report.scan.processes):
        assert f"pid:{pid}".encode() not in text and f'"{pid}"'.encode() not in text


def test_check_results_on_processes_collapse_into_one_bounded_series():
    from gpu_audit.check.results import CheckResult, CheckStatus
    from gpu_audit.report.prometheus import render_check_textfile

    report = check_report(laptop_scan())
    extra = [CheckResult("example-process-check", f"pid:{pid}", status, "t", "s")
             for pid, status in ((11, CheckStatus.PASS), (12, CheckStatus.WARN),
                                 (13, CheckStatus.SKIP))]
    report = dataclasses.replace(report, results=[*report.results, *extra])
    metrics = parse(render_check_textfile(report, duration_s=None))
    collapsed = one(metrics["gpu_audit_check_passed"], id="example-process-check")
    assert collapsed.labels["subject"] == "pid" and collapsed.value == 0  # one of them warned


def test_a_failed_check_still_says_so():
    metrics = parse(render_failure("node7", duration_s=0.5, timestamp_s=1795255200.0,
                                   check=True))
    assert one(metrics["gpu_audit_scan_success"]).value == 0
    assert one(metrics["gpu_audit_check_status"]).value == 3
    assert "gpu_audit_check_status" not in parse(render_failure("n", duration_s=None,
                                                                timestamp_s=None))


def test_a_lost_gpus_series_carry_the_identity_the_driver_kept():
    """NVML names nothing of a lost GPU; the kernel driver's UUID and bus id reach its labels,
    so `on(UUID)` joins with DCGM find exactly that GPU."""
    uuid = "GPU-00000000-a1b2-4c3d-8e9f-0123456789ab"
    gpus, _ = join([Gpu(index=0, lost=True), b.gpu(1, pci_bus_id="00000000:2A:00.0",
                                                   minor_number=1)],
                   [KernelGpu("proc", 0, "0000:18:00.0", uuid, "NVIDIA H100 80GB HBM3")])
    metrics = parse(render(b.scan(gpus=gpus)))
    sample = one(metrics["gpu_audit_finding"], id="gpu-lost")
    assert sample.labels["gpu"] == "0" and sample.labels["UUID"] == uuid
    assert sample.labels["pci_bus_id"] == "00000000:18:00.0"
    assert sample.labels["modelName"] == "NVIDIA H100 80GB HBM3"


def test_a_lost_gpu_without_a_known_uuid_is_labelled_by_its_bus_id_never_empty():
    gpu = Gpu(index=0, lost=True, pci_bus_id="00000000:18:00.0", identity_source="proc")
    sample = one(parse(render(b.scan(gpus=[gpu])))["gpu_audit_finding"], id="gpu-lost")
    assert sample.labels["UUID"] == sample.labels["pci_bus_id"] == "00000000:18:00.0"
