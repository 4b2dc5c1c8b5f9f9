"""What the NVIDIA driver's Xid numbers mean, how bad each is, and who is usually at fault.

The one Xid catalogue: ``scan``'s health rule and ``explain`` both judge an Xid from it, so an
Xid gets one meaning, one severity and one action everywhere. Meanings follow NVIDIA's Xid
catalog (https://docs.nvidia.com/deploy/xid-errors/, its mnemonics and resolution buckets; older
GPUs from the archived table). ``origin`` says where the fault usually starts:

- ``hardware``: the GPU, its memory, PCIe or NVLink (a root cause; node-level action needed);
- ``driver``: the driver or the GPU's firmware (GSP, FECS) stopped answering;
- ``application``: a fault raised by the program's own kernels (an out-of-bounds access, a bad
  instruction): the job died, the machine is fine;
- ``consequence``: logged because a program was torn down after another error;
- ``informational``: a recorded event or a summary of another Xid, not a failure by itself;
- ``unknown``: not in this catalogue.

The severity is the machine's: an application fault is a warning (the next job is not at risk),
a failed memory repair is critical.
"""

from __future__ import annotations

import msgspec

from gpu_audit.lazy import regex
from gpu_audit.model import Severity


class XidInfo(msgspec.Struct, frozen=True):
    xid: int
    mnemonic: str
    meaning: str
    origin: str  # hardware | driver | application | consequence | informational
    severity: Severity
    action: str


_APP_DEBUG = (
    "Rerun with CUDA_LAUNCH_BLOCKING=1 (or under `compute-sanitizer --tool memcheck`) to find the "
    "faulting kernel; if known-good code triggers it repeatedly, suspect the driver or the GPU."
)
_RESET = (
    "Drain the node, then reset the GPU (`nvidia-smi -r -i <index>` with no processes on it) or "
    "reboot; if the Xid comes back, collect `nvidia-bug-report.sh` and contact the hardware vendor."
)
_REBOOT = (
    "Drain the node and reboot it (a cold power cycle if the GPU stays missing); check the PCIe "
    "slot, riser and power cabling; if it recurs, the GPU or board needs replacing (RMA)."
)
_NVLINK = (
    "Check the links with `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e`, reset the GPU or "
    "reboot; an Xid 74 can also be the echo of a failed GPU at the other end of the link."
)

_S = Severity

XID_TABLE: dict[int, XidInfo] = {
    info.xid: info
    for info in (
        XidInfo(8, "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing (a kernel "
                "hung or ran past the idle timeout)", "application", _S.WARNING, _APP_DEBUG),
        XidInfo(13, "ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception: usually a program "
                "fault (an out-of-bounds access, an illegal instruction or register)",
                "application", _S.WARNING, _APP_DEBUG),
        XidInfo(31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault: a kernel "
                "accessed an illegal address", "application", _S.WARNING, _APP_DEBUG),
        XidInfo(32, "ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream: the "
                "DMA stream between driver and GPU over PCIe was corrupted (PCIe link quality), "
                "rarely the program's fault", "hardware", _S.ERROR, _RESET),
        XidInfo(38, "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error",
                "driver", _S.ERROR, _RESET),
        XidInfo(43, "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing: a "
                "program hit a fault and was stopped; the GPU itself stays healthy",
                "consequence", _S.WARNING, "Look for the program's own error just before it."),
        XidInfo(45, "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup: the driver tore "
                "down a program after it aborted (Ctrl-C, a kill, a GPU reset, or an earlier "
                "error such as an ECC error)", "consequence", _S.INFO,
                "Look for the Xid or error that came just before it; alone it needs no action."),
        XidInfo(46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "hardware",
                _S.ERROR, _RESET),
        XidInfo(48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double-bit (uncorrectable) ECC error in GPU "
                "memory", "hardware", _S.CRITICAL, _RESET + " Check `nvidia-smi -q -d ECC`."),
        XidInfo(54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to "
                "the GPU board", "hardware", _S.ERROR, "Check the GPU's power cables."),
        XidInfo(61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning",
                "hardware", _S.ERROR, _RESET),
        XidInfo(62, "PMU_HALT_ERROR", "Internal micro-controller halt", "hardware",
                _S.CRITICAL, _RESET),
        XidInfo(63, "INFOROM_DRAM_RETIREMENT_EVENT", "ECC page retirement or row-remapping "
                "event: the GPU recorded a bad memory row/page and will stop using it after a "
                "reset", "informational", _S.WARNING,
                "Reset the GPU or reboot when convenient to apply the remapping; a rising count "
                "(`nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT`) means failing memory."),
        XidInfo(64, "INFOROM_DRAM_RETIREMENT_FAILURE", "ECC page retirement or row-remapping "
                "failure: the GPU could not retire a bad memory row/page", "hardware",
                _S.CRITICAL, _RESET),
        XidInfo(68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 (video decoder) exception",
                "application", _S.WARNING, _APP_DEBUG),
        XidInfo(69, "ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error",
                "application", _S.WARNING, _APP_DEBUG),
        XidInfo(74, "NVLINK_ERROR", "NVLink error: a problem on a link to another GPU or an "
                "NVSwitch", "hardware", _S.CRITICAL, _NVLINK),
        XidInfo(79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus: "
                "the driver can no longer reach the GPU over PCIe", "hardware", _S.CRITICAL,
                _REBOOT),
        XidInfo(92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit (correctable) ECC error rate",
                "informational", _S.WARNING,
                "Plan maintenance: correctable errors at a high rate mean degrading memory."),
        XidInfo(94, "ROBUST_CHANNEL_CONTAINED_ERROR", "Contained ECC error: an uncorrectable "
                "memory error was contained to one program, which must be restarted",
                "hardware", _S.ERROR,
                "Restart the job; reset the GPU when convenient (other programs are unaffected)."),
        XidInfo(95, "ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained ECC error: an "
                "uncorrectable memory error affected every program on the GPU", "hardware",
                _S.CRITICAL, "Reset the GPU before restarting any job on it. " + _RESET),
        XidInfo(109, "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context switch timeout",
                "hardware", _S.ERROR, _RESET),
        XidInfo(119, "GSP_RPC_TIMEOUT", "GSP RPC timeout: the GPU System Processor did not "
                "answer the driver in time", "driver", _S.CRITICAL,
                "Reset the GPU or power-cycle the node; keep driver and GPU firmware current. "
                + _RESET),
        XidInfo(120, "GSP_ERROR", "GSP error: code on the GPU System Processor failed",
                "driver", _S.CRITICAL, _RESET),
        XidInfo(121, "C2C_ERROR", "Corrected error on the C2C link to the Grace CPU",
                "informational", _S.WARNING,
                "No impact now; reset the GPU in a maintenance window to retrain the link."),
        XidInfo(136, "ALI_TRAINING_FAIL", "NVLink link training failed", "hardware",
                _S.ERROR, _NVLINK),
        XidInfo(137, "NVLINK_PRIV_ERR", "NVLink privilege error: an illegal peer-to-peer "
                "access over NVLink", "application", _S.WARNING, _APP_DEBUG),
        XidInfo(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "Unrecovered ECC error: uncorrectable "
                "memory errors interrupted the driver's page offlining/row remapping",
                "hardware", _S.CRITICAL, _RESET),
        XidInfo(143, "GPU_INIT_ERROR", "GPU initialization error", "hardware", _S.CRITICAL,
                _RESET),
        XidInfo(144, "NVLINK_SAW_ERROR", "NVLink SAW error", "hardware", _S.CRITICAL, _NVLINK),
        XidInfo(145, "NVLINK_RLW_ERROR", "NVLink RLW error", "hardware", _S.CRITICAL, _NVLINK),
        XidInfo(146, "NVLINK_TLW_ERROR", "NVLink TLW error", "hardware", _S.CRITICAL, _NVLINK),
        XidInfo(147, "NVLINK_TREX_ERROR", "NVLink TREX error", "hardware", _S.CRITICAL,
                _NVLINK),
        XidInfo(148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW_CTRL error", "hardware",
                _S.CRITICAL, _NVLINK),
        XidInfo(149, "NVLINK_NETIR_ERROR", "NVLink NETIR error", "hardware", _S.CRITICAL,
                _NVLINK),
        XidInfo(150, "NVLINK_MSE_ERROR", "NVLink MSE error", "hardware", _S.CRITICAL, _NVLINK),
        XidInfo(154, "GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed: the driver's "
                "summary of what another Xid requires", "informational", _S.WARNING,
                "Do what the recovery action says (drain, reset the GPU, or reboot the node)."),
        XidInfo(155, "NVLINK_SW_DEFINED_ERROR", "NVLink link-down event (including intentional "
                "transitions)", "informational", _S.WARNING, _NVLINK),
        XidInfo(156, "RESOURCE_RETIREMENT_EVENT", "Resource retirement event", "informational",
                _S.WARNING, "Reset the GPU to apply the retirement."),
        XidInfo(157, "RESOURCE_RETIREMENT_FAILURE", "Resource retirement failure: no spare "
                "resources left to repair the fault", "hardware", _S.ERROR, _RESET),
        XidInfo(158, "GPU_FATAL_TIMEOUT", "GPU fatal timeout", "hardware", _S.CRITICAL, _RESET),
    )
}

# Xid 154's text names the action the driver now requires.
RECOVERY_ACTION_SEVERITY = {
    "none": Severity.INFO,
    "drain p2p": Severity.ERROR,
    "drain and reset": Severity.ERROR,
    "gpu reset required": Severity.CRITICAL,
    "node reboot required": Severity.CRITICAL,
}


APP_ORIGINS = ("application", "consequence")  # the program's fault, not the machine's
MACHINE_ORIGINS = ("hardware", "driver")

# Xid 154's message names the action now required: "GPU recovery action changed from 0x0
# (None) to 0x2 (Node Reboot Required)".
_RECOVERY_ACTION = regex(r"recovery action changed from \S+ \([^)]*\) to \S+ "
                              r"\((?P<action>[^)]*)\)")


def xid_info(xid: int) -> XidInfo:
    """The catalogue entry, or a neutral one for an Xid the catalogue does not know."""
    known = XID_TABLE.get(xid)
    if known is not None:
        return known
    return XidInfo(
        xid, "UNKNOWN", f"not in gpu-audit's catalog (Xid {xid}): look it up in NVIDIA's Xid "
        "catalog, https://docs.nvidia.com/deploy/xid-errors/", "unknown", Severity.WARNING,
        _RESET,
    )


def recovery_action(message: str | None) -> str | None:
    """The action an Xid 154 message says the GPU now needs (``GPU Reset Required``), if any."""
    match = _RECOVERY_ACTION().search(message or "")
    return match["action"] if match else None


def xid_severity(xid: int, action: str | None = None) -> Severity:
    """How bad one Xid event is; for Xid 154 the required recovery ``action`` decides."""
    if xid == 154 and action:
        return RECOVERY_ACTION_SEVERITY.get(action.strip().lower(), Severity.WARNING)
    return xid_info(xid).severity
