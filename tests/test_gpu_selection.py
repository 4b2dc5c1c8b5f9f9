"""``--gpus SPEC``: every form of a spec, the scheduler's view of a job's GPUs, and applying it."""

from __future__ import annotations

import pytest

from gpu_audit.errors import UsageError
from gpu_audit.gpu_selection import (
    GpuSelection,
    apply_selection,
    keeps_subject,
    pci_key,
    resolve_gpus,
    select_findings,
    selection_of,
)
from gpu_audit.model import Finding, KernelLog, ProbeError, XidEvent
from tests import builders as b

# NVML numbers GPUs by PCI bus order on real nodes; these four are listed out of bus order so
# that a mapping by NVML index and one by bus order differ.
BUSES = ("00000000:3B:00.0", "00000000:18:00.0", "00000000:DB:00.0", "00000000:86:00.0")
GPUS = [b.gpu(i, uuid=f"GPU-{i}aaaaaaa-1111-2222-3333-44444444444{i}", pci_bus_id=bus)
        for i, bus in enumerate(BUSES)]
# Bus order: 18 (index 1), 3B (index 0), 86 (index 3), DB (index 2).


def pick(spec: str | None, environ: dict[str, str] | None = None) -> GpuSelection | None:
    return resolve_gpus(spec, GPUS, environ or {})


@pytest.mark.parametrize("spec", [None, "all", "ALL", " all "])
def test_all_is_no_selection(spec):
    assert pick(spec) is None


@pytest.mark.parametrize(("spec", "indices"), [
    ("0,2", (0, 2)),
    ("2,0,2", (0, 2)),
    ("1-3", (1, 2, 3)),
    ("GPU-3aaaaaaa-1111-2222-3333-444444444443", (3,)),
    ("gpu-3AAAAAAA", (3,)),  # a unique prefix, any case
    ("MIG-GPU-1aaaaaaa-1111-2222-3333-444444444441/1/0", (1,)),
    ("00000000:DB:00.0", (2,)),
    ("0000:db:00.0", (2,)),
    ("db:00.0", (2,)),
    ("0000:86:00", (3,)),
    ("0, 0000:18:00.0", (0, 1)),
])
def test_explicit_forms(spec, indices):
    selection = pick(spec)
    assert selection is not None
    assert selection.indices == indices
    assert selection.spec == spec.strip()
    assert "command line" in selection.reason


@pytest.mark.parametrize(("spec", "message"), [
    ("7", r"GPU 7 does not exist \(this node has 4 GPUs\)"),
    ("0,,1", "empty entry"),
    ("3-1", "runs backwards"),
    ("GPU-ffff", "names no GPU"),
    ("GPU-", "matches 4 GPUs"),
    ("MIG-4b7c2a4e-8e3f-5a0a-9e1f-0123456789ab", "cannot be tied to its GPU"),
    ("0000:99:00.0", "no GPU at PCI bus id"),
    ("first", "is not a GPU index"),
    ("-1", "is not a GPU index"),
])
def test_bad_specs_are_usage_errors(spec, message):
    with pytest.raises(UsageError, match=message) as caught:
        pick(spec)
    assert caught.value.exit_code == 3
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("environ", "indices", "variable"), [
    ({"SLURM_JOB_GPUS": "0,1"}, (0, 1), "SLURM_JOB_GPUS"),  # bus order: 18 -> 1, 3B -> 0
    ({"SLURM_JOB_GPUS": "2,3"}, (2, 3), "SLURM_JOB_GPUS"),  # 86 -> 3, DB -> 2
    ({"SLURM_JOB_GPUS": "0", "CUDA_VISIBLE_DEVICES": "3"}, (1,), "SLURM_JOB_GPUS"),
    ({"SLURM_STEP_GPUS": "2", "SLURM_JOB_GPUS": "0,1,2"}, (3,), "SLURM_STEP_GPUS"),
    ({"CUDA_VISIBLE_DEVICES": "3"}, (2,), "CUDA_VISIBLE_DEVICES"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-0aaaaaaa-1111-2222-3333-444444444440,GPU-2aaaaaaa"}, (0, 2),
     "CUDA_VISIBLE_DEVICES"),
    ({"CUDA_VISIBLE_DEVICES": "MIG-GPU-3aaaaaaa-1111-2222-3333-444444444443/2/0"}, (3,),
     "CUDA_VISIBLE_DEVICES"),
])
def test_job_reads_the_scheduler_by_pci_bus_order(environ, indices, variable):
    selection = pick("job", environ)
    assert selection is not None
    assert selection.spec == "job"
    assert selection.indices == indices
    assert selection.reason.startswith(f"{variable}={environ[variable]}: the job's GPUs")


@pytest.mark.parametrize("value", ["", "NoDevFiles", "-1"])
def test_job_without_gpus_selects_none(value):
    selection = pick("job", {"CUDA_VISIBLE_DEVICES": value})
    assert selection is not None and selection.indices == ()
    assert "no GPU" in selection.reason


def test_job_with_devices_confined_selects_what_nvml_lists():
    # ConstrainDevices=yes: NVML sees the job's two GPUs, SLURM_JOB_GPUS keeps the node's numbers.
    selection = resolve_gpus("job", GPUS[:2], {"SLURM_JOB_GPUS": "5,7"})
    assert selection is not None and selection.indices == (0, 1)
    assert "confined" in selection.reason


def test_job_outside_a_job_is_a_usage_error():
    with pytest.raises(UsageError, match="none of SLURM_STEP_GPUS, SLURM_JOB_GPUS"):
        pick("job", {})
    with pytest.raises(UsageError, match=r"SLURM_JOB_GPUS=9.*GPU 9 does not exist"):
        pick("job", {"SLURM_JOB_GPUS": "9"})


def test_pci_key_forms():
    assert pci_key("00000000:3B:00.0") == pci_key("0000:3b:00.0") == pci_key("3b:00") \
        == (0, 0x3B, 0, 0)
    assert pci_key("nonsense") is None and pci_key(None) is None


def test_apply_selection_limits_gpus_processes_errors_and_xids():
    scan = b.scan(
        gpus=GPUS,
        processes=[b.process(100, 500, gpu_index=0), b.process(200, 700, gpu_index=2)],
        probe_errors=[ProbeError("nvml", "gpu:2", "no power reading"),
                      ProbeError("nvml", "gpu:0", "no fan"), ProbeError("host", "host", "x")],
        kernel_log=KernelLog("kmsg", True, [XidEvent(79, "0000:db:00", "fallen off"),
                                            XidEvent(48, "0000:3b:00", "DBE"),
                                            XidEvent(79, "0000:ee:00", "gone")]),
    )
    selection = pick("0")
    limited = apply_selection(scan, selection)
    assert [g.index for g in limited.gpus] == [0]
    assert [p.pid for p in limited.processes] == [100]
    assert [e.subject for e in limited.probe_errors] == ["gpu:0", "host"]
    # The event of an unselected GPU goes; one of a GPU NVML does not list is the node's.
    assert [e.xid for e in limited.kernel_log.xid_events] == [48, 79]
    assert selection_of(limited) == {"spec": "0", "indices": [0],
                                     "reason": selection.reason}
    assert apply_selection(scan, None) is scan and selection_of(scan) is None


def test_findings_are_limited_by_subject():
    scan = b.scan(gpus=GPUS, processes=[b.process(100, 500, gpu_index=0),
                                        b.process(200, 700, gpu_index=2)])
    selection = pick("2")
    findings = [Finding(subject=s, title=s, detail="", remedy="")
                for s in ("host", "env", "gpu:0", "gpu:2", "pid:100", "pid:200", "pid:999")]
    kept = [f.subject for f in select_findings(findings, scan, selection)]
    assert kept == ["host", "env", "gpu:2", "pid:200", "pid:999"]
    assert keeps_subject("gpu:0", scan, None)
