from __future__ import annotations

import msgspec

from gpu_audit.config import Policy
from gpu_audit.model import KernelLog, NvmlStatus, Severity, XidEvent
from gpu_audit.rules import evaluate, exit_code
from gpu_audit.rules.gpu import low_free_vram
from gpu_audit.rules.host import low_host_memory, swap_pressure
from gpu_audit.rules.nvml import nvml_unavailable
from tests import builders as b


def test_swap_above_limit_is_reported_with_numbers():
    scan = b.with_host(b.scan(), swap_used_bytes=3 * b.GIB)
    (finding,) = list(swap_pressure(scan, Policy()))
    assert finding.evidence["swap_used_bytes"] == 3 * b.GIB
    assert finding.evidence["limit_bytes"] == 2 * b.GIB


def test_swap_at_or_below_limit_or_unknown_is_quiet():
    assert list(swap_pressure(b.with_host(b.scan(), swap_used_bytes=2 * b.GIB), Policy())) == []
    assert list(swap_pressure(b.with_host(b.scan(), swap_used_bytes=None), Policy())) == []
    assert (
        list(
            swap_pressure(
                b.with_host(b.scan(), swap_used_bytes=3 * b.GIB), Policy(max_swap_used_gib=4)
            )
        )
        == []
    )


def test_low_host_memory_threshold_and_severity():
    scan = b.with_host(
        b.scan(), memory_total_bytes=16 * b.GIB, memory_available_bytes=1 * b.GIB
    )
    (finding,) = list(low_host_memory(scan, Policy()))
    assert finding.severity is None  # the rule's default (warning)
    assert finding.evidence["available_pct"] == 6.2
    tiny = b.with_host(scan, memory_available_bytes=256 * b.MIB)
    assert next(low_host_memory(tiny, Policy())).severity == Severity.ERROR
    fine = b.with_host(scan, memory_available_bytes=8 * b.GIB)
    assert list(low_host_memory(fine, Policy())) == []


def test_low_free_vram_lists_holders_largest_first():
    procs = [b.process(1, 1000), b.process(2, 70000)]
    scan = b.scan(gpus=[b.gpu(0, used=75 * b.GIB)], processes=procs)
    (finding,) = list(low_free_vram(scan, Policy()))
    assert [h["pid"] for h in finding.evidence["holders"]] == [2, 1]
    assert finding.evidence["free_pct"] == 6.2
    roomy = b.scan(gpus=[b.gpu(0, used=10 * b.GIB)])
    assert list(low_free_vram(roomy, Policy())) == []


def test_nvml_unavailable_causes_and_no_hardware_case():
    broken = b.scan(
        gpus=[], nvml=NvmlStatus(False, "version-mismatch", "Driver/library version mismatch")
    )
    (finding,) = list(nvml_unavailable(broken, Policy()))
    assert finding.severity is None and "reboot" in finding.remedy
    assert finding.evidence["cause"] == "version-mismatch"
    no_gpu = b.with_host(
        b.scan(gpus=[], nvml=NvmlStatus(False, "library-not-found")), nvidia_pci_devices=0
    )
    (finding,) = list(nvml_unavailable(no_gpu, Policy()))
    assert finding.severity == Severity.WARNING
    assert finding.title == "No NVIDIA GPU on this host"
    assert list(nvml_unavailable(b.scan(), Policy())) == []


def test_exit_codes_follow_the_monitoring_plugin_convention():
    healthy = b.scan()
    assert evaluate(healthy, Policy()) == []
    assert exit_code([], Severity.ERROR) == 0
    findings = evaluate(b.gtx1650_three_uvicorn(), Policy())
    assert exit_code(findings, Severity.ERROR) == 1
    assert exit_code(findings, Severity.WARNING) == 2
    broken = evaluate(b.scan(gpus=[], nvml=NvmlStatus(False, "driver-not-loaded")), Policy())
    assert exit_code(broken, Severity.ERROR) == 2
    assert exit_code(broken, Severity.CRITICAL) == 1
    info_only = [msgspec.structs.replace(f, severity=Severity.INFO) for f in findings]
    assert exit_code(info_only, Severity.ERROR) == 0
    assert exit_code(info_only, Severity.INFO) == 2


def test_a_hung_nvml_call_is_an_error_naming_the_call_and_gpu():
    from gpu_audit.model import ProbeError
    from gpu_audit.rules.nvml import nvml_hung

    hung = ProbeError("nvml", "gpu:1", "NVML call nvmlDeviceGetFieldValues did not return within "
                      "1 s", "nvmlDeviceGetFieldValues", timed_out=True)
    slow_but_fine = ProbeError("nvml", "gpu:0", "no permission", "nvmlDeviceGetSerial")
    scan = b.scan(gpus=[b.gpu(0), b.gpu(1)], probe_errors=[hung, slow_but_fine])
    (finding,) = list(nvml_hung(scan, Policy()))
    assert finding.subject == "gpu:1"
    assert finding.evidence["calls"] == ["nvmlDeviceGetFieldValues"]
    assert "--gpu-reset -i 1" in finding.remedy
    assert list(nvml_hung(b.scan(probe_errors=[slow_but_fine]), Policy())) == []


def test_gpu_lost_names_the_pci_address_from_the_kernel_log_when_nvml_cannot():
    scan = b.scan(gpus=[b.gpu(0, pci_bus_id="00000000:1B:00.0"), b.Gpu(index=1, lost=True)])
    log = KernelLog(source="dmesg", readable=True, xid_events=[
        XidEvent(xid=79, pci_bus_id="0000:3b:00", message="GPU has fallen off the bus."),
        XidEvent(xid=13, pci_bus_id="0000:1b:00", message="Graphics Exception")])
    (finding,) = [f for f in evaluate(msgspec.structs.replace(scan, kernel_log=log))
                  if f.id == "gpu-lost"]
    assert finding.severity is Severity.CRITICAL and finding.subject == "gpu:1"
    assert finding.evidence["pci_bus_id"] == "0000:3b:00"
    assert finding.evidence["pci_bus_id_source"] == "kernel-log"
    assert "RMA for the GPU at PCI 0000:3b:00" in finding.remedy
    (bare,) = [f for f in evaluate(scan) if f.id == "gpu-lost"]
    assert bare.evidence["pci_bus_id"] is None and "lspci -D -d 10de:" in bare.remedy
