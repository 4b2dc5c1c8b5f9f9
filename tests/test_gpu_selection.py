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
)
from gpu_audit.model import Finding, KernelLog, MigDevice, ProbeError, XidEvent
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
    assert limited.gpu_selection == {"spec": "0", "indices": [0],
                                     "reason": selection.reason}
    assert apply_selection(scan, None) is scan and scan.gpu_selection is None


def test_findings_are_limited_by_subject():
    scan = b.scan(gpus=GPUS, processes=[b.process(100, 500, gpu_index=0),
                                        b.process(200, 700, gpu_index=2)])
    selection = pick("2")
    findings = [Finding(subject=s, title=s, detail="", remedy="")
                for s in ("host", "env", "gpu:0", "gpu:2", "pid:100", "pid:200", "pid:999")]
    kept = [f.subject for f in select_findings(findings, scan, selection)]
    assert kept == ["host", "env", "gpu:2", "pid:200", "pid:999"]
    assert keeps_subject("gpu:0", scan, None)


# ------------------------------------------------------------------------------- MIG instances


def mig_gpus() -> list:
    """GPU 0 whole; GPU 1 in MIG mode with GPU instances 2 (compute instances 0 and 1) and 7."""
    devices = [MigDevice(index=0, uuid="MIG-aaaa", gpu_instance_id=2, compute_instance_id=0),
               MigDevice(index=1, uuid="MIG-bbbb", gpu_instance_id=2, compute_instance_id=1),
               MigDevice(index=2, uuid="MIG-cccc", gpu_instance_id=7, compute_instance_id=0)]
    return [GPUS[0], b.gpu(1, uuid="GPU-1aaaaaaa-1111-2222-3333-444444444441",
                           pci_bus_id=BUSES[1], mig_mode=True, mig_devices=devices)]


@pytest.mark.parametrize(("spec", "indices", "migs"), [
    ("MIG-cccc", (1,), ("MIG-cccc",)),
    ("mig-CCCC", (1,), ("MIG-cccc",)),  # any case; the UUID as NVML lists it
    ("0,MIG-aaaa", (0, 1), ("MIG-aaaa",)),
    ("MIG-GPU-1aaaaaaa-1111-2222-3333-444444444441/7/0", (1,), ("MIG-cccc",)),
    ("MIG-GPU-1aaaaaaa/2", (1,), ("MIG-aaaa", "MIG-bbbb")),  # every compute instance of GI 2
    ("MIG-GPU-1aaaaaaa", (1,), ()),  # no instance ids: the whole GPU
    ("MIG-cccc,1", (1,), ()),  # the GPU named whole too: whole
])
def test_mig_entries_choose_instances(spec, indices, migs):
    selection = resolve_gpus(spec, mig_gpus(), {})
    assert (selection.indices, selection.mig_uuids) == (indices, migs)
    if migs:
        assert selection.to_dict()["mig_uuids"] == list(migs)
        assert "(MIG " in selection.reason
    else:
        assert "mig_uuids" not in selection.to_dict()


def test_an_old_form_naming_no_listed_instance_is_refused():
    with pytest.raises(UsageError, match=r"names no MIG instance of GPU 1 \(it lists 2/0, 2/1, "
                                         r"7/0\)"):
        resolve_gpus("MIG-GPU-1aaaaaaa/3/0", mig_gpus(), {})


def test_job_with_a_mig_device_chooses_the_instance():
    selection = resolve_gpus("job", mig_gpus(), {"CUDA_VISIBLE_DEVICES": "MIG-bbbb"})
    assert (selection.indices, selection.mig_uuids) == ((1,), ("MIG-bbbb",))
    assert selection.reason.startswith("CUDA_VISIBLE_DEVICES=MIG-bbbb: the job's GPUs")
    assert "1 (MIG 2/1)" in selection.reason


def test_apply_selection_keeps_the_chosen_instances_and_their_processes():
    placed = [b.process(10, 100, gpu_index=1, mig_gpu_instance_id=7, mig_compute_instance_id=0,
                        mig_uuid="MIG-cccc"),
              b.process(20, 100, gpu_index=1, mig_gpu_instance_id=2, mig_compute_instance_id=0,
                        mig_uuid="MIG-aaaa"),
              b.process(30, 100, gpu_index=1, mig_gpu_instance_id=7),  # no uuid, no CI
              b.process(40, 100, gpu_index=1),  # NVML gave no instance: it stays
              b.process(50, 100, gpu_index=0)]
    scan = b.scan(gpus=mig_gpus(), processes=placed,
                  probe_errors=[ProbeError("nvml", "gpu:1/mig:2/0", "x"),
                                ProbeError("nvml", "gpu:1/mig:7/0", "y")])
    selection = resolve_gpus("MIG-cccc", scan.gpus, {})
    limited = apply_selection(scan, selection)
    [gpu] = limited.gpus
    assert gpu.index == 1 and [m.uuid for m in gpu.mig_devices] == ["MIG-cccc"]
    assert [p.pid for p in limited.processes] == [10, 30, 40]
    assert [e.subject for e in limited.probe_errors] == ["gpu:1/mig:7/0"]
    assert limited.gpu_selection["mig_uuids"] == ["MIG-cccc"]
    kept = [s for s in ("gpu:1", "gpu:1/mig:7/0", "gpu:1/mig:2/0", "gpu:0", "pid:10", "pid:20",
                        "pid:40", "pid:50", "host") if keeps_subject(s, scan, selection)]
    assert kept == ["gpu:1", "gpu:1/mig:7/0", "pid:10", "pid:40", "host"]
    # A GPU chosen whole keeps all its instances.
    whole = apply_selection(scan, resolve_gpus("1", scan.gpus, {}))
    assert len(whole.gpus[0].mig_devices) == 3 and len(whole.processes) == 4
