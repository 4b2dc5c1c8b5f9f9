"""Hardware health findings, from hand-built snapshots (no I/O)."""

from __future__ import annotations

import datetime as dt

import msgspec

from gpu_audit.config import Policy
from gpu_audit.model import KernelLog, NvmlStatus, Scan, Severity, XidEvent
from gpu_audit.rules.health import (
    compute_mode_restricted,
    ecc_uncorrectable,
    hw_slowdown,
    memory_repair_pending,
    mig_enabled,
    pcie_link_degraded,
    persistence_mode_off,
    power_capped,
    row_remap_failure,
    temperature_near_slowdown,
    thermal_slowdown,
    xid_events,
)
from gpu_audit.rules.unsupported import health_unsupported
from tests import builders as b

# What NVML reports for a healthy, idle data-center GPU: every health reading supported.
HEALTHY = dict(
    ecc_mode=True, ecc_errors_corrected_volatile=0, ecc_errors_uncorrected_volatile=0,
    ecc_errors_corrected_aggregate=0, ecc_errors_uncorrected_aggregate=0,
    remapped_rows_pending=False, remapped_rows_failure=False, remapped_rows_correctable=0,
    remapped_rows_uncorrectable=0, throttle_reasons=["gpu_idle"], throttle_reasons_mask=0x1,
    temperature_c=35, temperature_slowdown_c=90, pcie_gen_current=5, pcie_gen_max=5,
    pcie_width_current=16, pcie_width_max=16, persistence_mode=True, compute_mode="default",
    mig_mode=False, power_draw_w=71.5, power_limit_w=700.0, power_default_limit_w=700.0,
    sm_clock_mhz=345, sm_clock_max_mhz=1980,
)


def h100(index: int = 0, **changes) -> object:
    return b.gpu(index, pci_bus_id=f"00000000:{0x18 + index:02X}:00.0", **{**HEALTHY, **changes})


def node(*gpus, **overrides) -> Scan:
    return b.scan(gpus=list(gpus) or [h100()], **overrides)


def gtx1650() -> object:
    """A consumer card: no ECC, no memory repair, the rest supported."""
    return b.gpu(0, name="NVIDIA GeForce GTX 1650", total=4 * b.GIB, temperature_c=46,
                 temperature_slowdown_c=98, throttle_reasons=["gpu_idle"], pcie_gen_current=1,
                 pcie_gen_max=3, pcie_width_current=16, pcie_width_max=16,
                 persistence_mode=False, compute_mode="default", ecc_mode=None,
                 ecc_errors_uncorrected_volatile=None, ecc_errors_uncorrected_aggregate=None,
                 remapped_rows_pending=None, remapped_rows_failure=None,
                 remapped_rows_uncorrectable=None, retired_pages_pending=None)


def run(rule, scan: Scan, policy: Policy | None = None):
    return list(rule(scan, policy or Policy()))


HEALTH_RULES = (ecc_uncorrectable, memory_repair_pending, row_remap_failure, hw_slowdown,
                thermal_slowdown, power_capped, temperature_near_slowdown, pcie_link_degraded,
                persistence_mode_off, compute_mode_restricted, mig_enabled, xid_events,
                health_unsupported)


def test_a_healthy_node_has_no_health_findings():
    scan = node(*(h100(i) for i in range(8)))
    for rule in HEALTH_RULES:
        assert run(rule, scan) == [], rule.__name__


def test_a_consumer_gpu_without_ecc_never_fails_and_says_not_supported():
    scan = node(gtx1650())
    for rule in (ecc_uncorrectable, memory_repair_pending, row_remap_failure, hw_slowdown,
                 pcie_link_degraded, temperature_near_slowdown):
        assert run(rule, scan) == [], rule.__name__
    (finding,) = run(health_unsupported, scan)
    assert finding.evidence["not_supported"] == [
        "ECC error counts", "memory repair (page retirement, row remapping)"]
    assert "not supported" in finding.title


def test_identical_unsupported_readings_on_many_gpus_are_one_finding_worded_by_the_gpu_kind():
    scan = node(*(h100(i, throttle_reasons=None) for i in range(8)))
    (finding,) = run(health_unsupported, scan)
    assert finding.subject == "host" and finding.evidence["gpus"] == list(range(8))
    assert finding.title.startswith("GPU 0-7 (NVIDIA H100 80GB HBM3): not supported")
    assert finding.evidence["not_supported"] == ["clock-event (throttle) reasons"]
    assert finding.evidence["gpu_kind"] == "data-center"
    assert "consumer" not in finding.remedy and "data-center GPU reports these" in finding.remedy
    assert "-i 0,1,2,3,4,5,6,7" in finding.remedy
    # a different gap on one GPU is its own finding, about that GPU
    mixed = node(*(h100(i, throttle_reasons=None, pcie_gen_current=None if i == 5 else 5)
                   for i in range(8)))
    merged, single = sorted(run(health_unsupported, mixed), key=lambda f: len(f.evidence["gpus"]),
                            reverse=True)
    assert merged.evidence["gpus"] == [0, 1, 2, 3, 4, 6, 7] and "GPU 0-4,6-7" in merged.title
    assert single.subject == "gpu:5" and single.evidence["gpus"] == [5]
    (consumer,) = run(health_unsupported, node(gtx1650()))
    assert consumer.subject == "gpu:0" and consumer.evidence["gpu_kind"] == "consumer"
    assert "consumer (GeForce, TITAN) GPUs do not have these readings" in consumer.remedy


def test_lost_gpus_are_left_to_the_nvml_rules():
    lost = b.gpu(0, lost=True, throttle_reasons=["hw_slowdown"], ecc_errors_uncorrected_volatile=3)
    for rule in HEALTH_RULES:
        assert run(rule, node(lost)) == [], rule.__name__


# ------------------------------------------------------------------------------------- memory


def test_volatile_uncorrectable_ecc_is_critical():
    (finding,) = run(ecc_uncorrectable, node(h100(ecc_errors_uncorrected_volatile=2,
                                                  ecc_errors_uncorrected_aggregate=2)))
    assert finding.severity is None  # the rule's default: critical
    assert finding.evidence["uncorrected_volatile"] == 2
    assert "nvidia-smi -r -i 0" in finding.remedy


def test_lifetime_only_uncorrectable_ecc_is_a_warning():
    (finding,) = run(ecc_uncorrectable, node(h100(ecc_errors_uncorrected_aggregate=1)))
    assert finding.severity == Severity.WARNING


def test_pending_repairs_need_a_reset():
    (finding,) = run(memory_repair_pending, node(h100(remapped_rows_pending=True)))
    assert "row remapping pending" in finding.title
    old = b.gpu(0, retired_pages_pending=True, retired_pages_dbe=2)
    (finding,) = run(memory_repair_pending, node(old))
    assert "page retirement" in finding.title and finding.evidence["retired_pages_dbe"] == 2


def test_row_remap_failure_is_critical():
    (finding,) = run(row_remap_failure, node(h100(remapped_rows_failure=True)))
    assert finding.severity is None
    assert "out of service" in finding.remedy


# ------------------------------------------------------------------------------------- clocks


def test_hardware_slowdown_is_an_error_with_the_readings():
    gpu = h100(throttle_reasons=["hw_slowdown", "hw_thermal_slowdown"], temperature_c=91,
               sm_clock_mhz=700)
    (finding,) = run(hw_slowdown, node(gpu))
    assert finding.evidence["throttle_reasons"] == ["hw_slowdown", "hw_thermal_slowdown"]
    assert "700 of 1980 MHz" in finding.detail


def test_software_thermal_slowdown_is_a_warning():
    (finding,) = run(thermal_slowdown, node(h100(throttle_reasons=["sw_thermal_slowdown"],
                                                 temperature_c=86)))
    assert finding.severity is None and "86 C" in finding.title


def test_idle_or_app_clock_reasons_are_not_slowdowns():
    gpu = h100(throttle_reasons=["gpu_idle", "applications_clocks_setting", "sync_boost",
                                 "display_clock_setting"])
    for rule in (hw_slowdown, thermal_slowdown, power_capped):
        assert run(rule, node(gpu)) == []


def test_power_cap_is_info_and_points_out_a_lowered_limit():
    (normal,) = run(power_capped, node(h100(throttle_reasons=["sw_power_cap"],
                                            power_draw_w=699.0)))
    assert normal.severity is None and "Nothing to do" in normal.remedy
    (lowered,) = run(power_capped, node(h100(throttle_reasons=["sw_power_cap"],
                                             power_limit_w=400.0, power_draw_w=399.0)))
    assert "lowered from the default 700 W" in lowered.detail
    assert lowered.remedy.startswith("sudo nvidia-smi -i 0 -pl 700")


def test_temperature_margin_follows_the_policy():
    scan = node(h100(temperature_c=86, temperature_slowdown_c=90))
    (finding,) = run(temperature_near_slowdown, scan)
    assert finding.severity is None and finding.evidence["margin_c"] == 4
    assert run(temperature_near_slowdown, scan, Policy(temperature_margin_c=3)) == []
    (hot,) = run(temperature_near_slowdown, node(h100(temperature_c=92, temperature_slowdown_c=90)))
    assert hot.severity == Severity.ERROR
    assert run(temperature_near_slowdown, node(h100(temperature_slowdown_c=None))) == []


# --------------------------------------------------------------------------------------- PCIe


def test_busy_gpu_on_a_downgraded_link_is_flagged():
    (finding,) = run(pcie_link_degraded, node(h100(utilization_pct=97, pcie_gen_current=3,
                                                   pcie_width_current=8)))
    assert "Gen3 x8, capable of Gen5 x16" in finding.title
    assert "generation and width" in finding.detail


def test_idle_gpu_dropping_its_link_speed_is_not_flagged():
    idle = h100(utilization_pct=0, pcie_gen_current=1)
    assert run(pcie_link_degraded, node(idle)) == []
    unknown = h100(utilization_pct=None, pcie_gen_current=1)
    assert run(pcie_link_degraded, node(unknown)) == []
    busy = h100(utilization_pct=30, pcie_gen_current=1)
    assert run(pcie_link_degraded, node(busy), Policy(busy_utilization_pct=50)) == []
    assert len(run(pcie_link_degraded, node(busy))) == 1


# -------------------------------------------------------------------------------------- modes


def test_persistence_off_on_linux_only():
    (finding,) = run(persistence_mode_off, node(h100(persistence_mode=False)))
    assert finding.subject == "gpu:0" and finding.severity is None  # info
    many = node(h100(0, persistence_mode=False), h100(1, persistence_mode=False))
    (finding,) = run(persistence_mode_off, many)
    assert finding.subject == "host" and finding.evidence["gpus"] == [0, 1]
    windows = b.with_host(node(h100(persistence_mode=False)), os="Windows")
    assert run(persistence_mode_off, windows) == []
    assert run(persistence_mode_off, node(h100(persistence_mode=None))) == []


def test_exclusive_compute_mode_is_a_warning_and_an_error_when_taken():
    (free,) = run(compute_mode_restricted, node(h100(compute_mode="exclusive_process")))
    assert free.severity is None
    taken = node(h100(compute_mode="exclusive_process"), processes=[b.process(4242, 1000)])
    (finding,) = run(compute_mode_restricted, taken)
    assert finding.severity == Severity.ERROR and finding.evidence["compute_processes"] == [4242]
    (banned,) = run(compute_mode_restricted, node(h100(compute_mode="prohibited")))
    assert banned.severity == Severity.ERROR


def test_mig_enabled_is_info():
    (finding,) = run(mig_enabled, node(h100(mig_mode=True)))
    assert finding.severity is None and "-mig 0" in finding.remedy
    assert run(mig_enabled, node(h100(mig_mode=None))) == []


# ---------------------------------------------------------------------------------------- Xid


def with_xids(scan: Scan, *events: XidEvent, source: str = "kmsg") -> Scan:
    return msgspec.structs.replace(scan, kernel_log=KernelLog(source, True, list(events)))


SCANNED_AT = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)  # the builders' generated_at


def xid(code: int, bus: str = "0000:18:00", hours_ago: float = 1.0, **kw) -> XidEvent:
    when = (SCANNED_AT - dt.timedelta(hours=hours_ago)).isoformat().replace("+00:00", "Z")
    return XidEvent(xid=code, pci_bus_id=bus, message=kw.pop("message", "..."), time=when, **kw)


def test_fallen_off_the_bus_is_critical_and_mapped_to_its_gpu():
    scan = with_xids(node(h100(0), h100(1)), xid(79, "0000:19:00",
                                                  message="GPU has fallen off the bus."))
    (finding,) = run(xid_events, scan)
    assert finding.subject == "gpu:1"
    assert finding.severity == Severity.CRITICAL
    assert "fallen off the bus" in finding.detail
    assert finding.evidence["counts"] == {"79": 1}


def test_application_xids_are_warnings_when_recent_and_notes_when_old():
    recent = with_xids(node(), xid(31, pid=4242, process_name="python"), xid(31), xid(13))
    (finding,) = run(xid_events, recent)
    assert finding.severity == Severity.WARNING
    assert finding.evidence["counts"] == {"13": 1, "31": 2}
    assert "accessed an illegal address" in finding.detail
    old = with_xids(node(), xid(31, hours_ago=30))
    (finding,) = run(xid_events, old)
    assert finding.severity == Severity.INFO


def test_worst_code_sets_the_severity_and_unknown_codes_are_named():
    scan = with_xids(node(), xid(13), xid(48), xid(999))
    (finding,) = run(xid_events, scan)
    assert finding.severity == Severity.CRITICAL
    assert "Xid 999 x1: not in gpu-audit's catalog" in finding.detail


def test_xid_for_a_device_nvml_does_not_list_goes_to_the_host():
    scan = with_xids(node(), xid(79, "0000:af:00"))
    (finding,) = run(xid_events, scan)
    assert finding.subject == "host" and "PCI 0000:af:00" in finding.title


def test_no_xids_or_unreadable_log_gives_no_finding():
    assert run(xid_events, with_xids(node())) == []
    unread = msgspec.structs.replace(node(), kernel_log=KernelLog(None, False))
    assert run(xid_events, unread) == []
    assert run(xid_events, node()) == []


def test_the_remedy_is_the_worst_xids_action_machine_faults_first():
    scan = with_xids(node(), xid(13), xid(94))  # application warning, hardware error
    (finding,) = run(xid_events, scan)
    assert finding.severity == Severity.ERROR
    assert "Restart the job" in finding.remedy
    app_only = with_xids(node(), xid(31))
    (finding,) = run(xid_events, app_only)
    assert "CUDA_LAUNCH_BLOCKING=1" in finding.remedy


def test_xid_154_takes_the_severity_of_the_action_it_requires():
    message = ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
    (finding,) = run(xid_events, with_xids(node(), xid(154, message=message)))
    assert finding.severity == Severity.CRITICAL


# ---------------------------------------------------------------------------- not supported


def test_health_unsupported_is_quiet_when_nvml_did_not_answer():
    scan = node(b.gpu(0), nvml=NvmlStatus(False, "driver-not-loaded"))
    assert run(health_unsupported, scan) == []
