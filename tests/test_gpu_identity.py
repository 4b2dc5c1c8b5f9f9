"""One GPU identity joined from NVML, the kernel driver and /dev; Slurm's order of GPUs."""

from __future__ import annotations

import msgspec
import pytest

from gpu_audit.errors import UsageError
from gpu_audit.gpu_identity import (
    join,
    kernel_gpus,
    nvml_bus_id,
    pair_gpus,
    parse_information,
    slurm_order,
)
from gpu_audit.gpu_selection import resolve_gpus
from gpu_audit.model import Gpu, KernelGpu
from tests import builders as b

BUSES = ("0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0")


def information(index: int, *, minor: int | None = None, uuid: bool = True) -> str:
    """An ``information`` file as the NVIDIA driver writes it."""
    lines = ["Model: \t\t NVIDIA H100 80GB HBM3", "IRQ:   \t\t 123",
             f"GPU UUID: \t GPU-{index:08x}-a1b2-4c3d-8e9f-0123456789ab" if uuid
             else "GPU UUID: \t ??", "Video BIOS: \t 96.00.89.00.01", "Bus Type: \t PCIe",
             f"Bus Location: \t {BUSES[index]}",
             f"Device Minor: \t {index if minor is None else minor}", "GPU Excluded:\t No"]
    return "\n".join(lines) + "\n"


def proc(index: int, **kw) -> KernelGpu:
    found = parse_information(information(index, **kw), BUSES[index])
    assert found is not None
    return found


def nvml(index: int, **fields) -> Gpu:
    named = {"uuid": f"GPU-{index:08x}-a1b2-4c3d-8e9f-0123456789ab",
             "pci_bus_id": nvml_bus_id(BUSES[index]), "minor_number": index}
    return b.gpu(index, **{**named, **fields})


def lost(index: int) -> Gpu:
    return Gpu(index=index, lost=True)


def test_the_information_file_names_minor_bus_uuid_and_model():
    gpu = proc(2)
    assert gpu == KernelGpu("proc", minor_number=2, pci_bus_id="0000:3a:00.0",
                            uuid="GPU-00000002-a1b2-4c3d-8e9f-0123456789ab",
                            name="NVIDIA H100 80GB HBM3")
    assert parse_information(information(1, uuid=False), BUSES[1]).uuid is None


@pytest.mark.parametrize("text", ["", "Device Minor: 99999999999999999999999\n",
                                  "Device Minor: \u0663\nBus Location: nonsense\n"])
def test_a_file_naming_nothing_is_no_gpu(text):
    assert parse_information(text, "not-a-bus") is None


def test_a_lost_gpu_takes_its_identity_from_the_driver():
    gpus, unlisted = join([lost(0), nvml(1)], [proc(0), proc(1)])
    assert unlisted == []
    assert gpus[0].lost and gpus[0].minor_number == 0
    assert gpus[0].pci_bus_id == "00000000:18:00.0"  # NVML's form, as DCGM labels it
    assert gpus[0].uuid == "GPU-00000000-a1b2-4c3d-8e9f-0123456789ab"
    assert gpus[0].identity_source == "proc"
    assert gpus[1] == nvml(1)  # NVML's own names are kept as they are


def test_a_lost_gpu_between_others_is_placed_by_its_neighbours_minor_numbers():
    gpus, _ = join([nvml(0), lost(1), nvml(2)], [proc(i) for i in range(4)])
    assert gpus[1].minor_number == 1 and gpus[1].pci_bus_id == "00000000:2A:00.0"


def test_two_lost_gpus_in_one_gap_pair_in_order_and_never_guess_otherwise():
    gpus, _ = join([nvml(0), lost(1), lost(2)], [proc(i) for i in range(3)])
    assert [g.minor_number for g in gpus] == [0, 1, 2]
    # Three free entries for two unnamed GPUs: which is which is unknown, so none is named.
    gpus, unlisted = join([nvml(0), lost(1), lost(2)], [proc(i) for i in range(4)])
    assert [g.minor_number for g in gpus] == [0, None, None]
    assert [k.minor_number for k in unlisted] == [1, 2, 3]


def test_dev_nodes_the_driver_does_not_list_are_unlisted_gpus():
    kernel = kernel_gpus([proc(0), proc(1)], [0, 1, 2, 3])
    gpus, unlisted = join([nvml(0), nvml(1)], kernel)
    assert [(k.source, k.minor_number) for k in unlisted] == [("dev", 2), ("dev", 3)]
    assert [getattr(s, "index", None) for s in slurm_order(gpus, unlisted)] == [0, 1, None, None]


def test_slurm_order_follows_minor_numbers_else_bus_ids_else_nvml_index():
    swapped = [nvml(0, minor_number=1, pci_bus_id="00000000:2A:00.0"),
               nvml(1, minor_number=0, pci_bus_id="00000000:18:00.0")]
    assert [s.index for s in slurm_order(swapped)] == [1, 0]
    no_minor = [msgspec.structs.replace(g, minor_number=None) for g in swapped]
    assert [s.index for s in slurm_order(no_minor)] == [1, 0]  # bus order
    # A lost GPU that names nothing keeps its NVML place instead of going last.
    assert [s.index for s in slurm_order([lost(0), b.gpu(1, pci_bus_id="0000:18:00.0")])] \
        == [0, 1]


def test_the_job_gets_the_lost_gpu_it_was_given():
    gpus = [lost(0), b.gpu(1, pci_bus_id="00000000:2A:00.0")]
    assert resolve_gpus("job", gpus, {"SLURM_JOB_GPUS": "0"}).indices == (0,)
    assert resolve_gpus("job", gpus, {"SLURM_JOB_GPUS": "1"}).indices == (1,)


def test_a_job_gpu_nvml_does_not_list_is_missing_for_a_hook_and_refused_otherwise():
    kernel = kernel_gpus([proc(i) for i in range(4)], range(8))
    gpus, unlisted = join([nvml(0), nvml(1)], kernel)
    selection = resolve_gpus("job", gpus, {"SLURM_JOB_GPUS": "1-3,5"}, unlisted=unlisted,
                             missing_ok=True)
    assert selection.indices == (1,)
    assert [(m.entry, m.minor_number, m.pci_bus_id, m.subject) for m in selection.missing] == [
        ("2", 2, "0000:3a:00.0", "gpu:/dev/nvidia2"), ("3", 3, "0000:5d:00.0", "gpu:/dev/nvidia3"),
        ("5", 5, None, "gpu:/dev/nvidia5")]
    assert selection.to_dict()["missing"][0]["why"].startswith("/dev/nvidia2 (PCI 0000:3a:00.0")
    beyond = resolve_gpus("job", gpus, {"SLURM_JOB_GPUS": "9"}, unlisted=unlisted,
                          missing_ok=True)
    assert beyond.indices == () and beyond.missing[0].subject == "gpu:job-9"
    by_uuid = resolve_gpus("job", gpus, {"CUDA_VISIBLE_DEVICES": "GPU-00000003"},
                           unlisted=unlisted, missing_ok=True)
    assert by_uuid.missing[0].minor_number == 3
    with pytest.raises(UsageError, match="GPU 2 does not exist"):
        resolve_gpus("job", gpus, {"SLURM_JOB_GPUS": "2"}, unlisted=unlisted)


@pytest.mark.parametrize(("value", "message"), [
    ("1024", "beyond the 1024 GPUs"),
    (",".join(str(i) for i in range(10_000)), "beyond the 1024 GPUs"),
    (",".join(f"GPU-{i:x}" for i in range(2_000)), "more than 1024 GPUs this node does not list"),
    ("zero", "is not a GPU index"),
    ("\u0663", "not a whole number"),
    ("9" * 30, "at most 20"),
])
def test_hostile_job_values_are_refused_without_a_verdict(value, message):
    with pytest.raises(UsageError, match=message):
        resolve_gpus("job", [nvml(0)], {"SLURM_JOB_GPUS": value}, missing_ok=True)


def test_diff_pairs_a_gpu_that_lost_its_uuid_by_bus_id():
    before = [nvml(0), nvml(1), nvml(2)]
    after = [nvml(0), Gpu(index=1, lost=True, pci_bus_id="00000000:2A:00.0")]
    pairs, missing = pair_gpus(before, after)
    assert [(old.index, new.index, new.lost) for old, new in pairs] == [(0, 0, False),
                                                                        (1, 1, True)]
    assert [g.index for g in missing] == [2]


def test_pairing_and_joining_a_full_node_cost_lookups_not_passes():
    """1024 GPUs (the most a document may list): each GPU's twin is looked up by its names."""
    import time

    many = [Gpu(index=i, pci_bus_id=f"0000:{i // 32:02x}:{i % 32:02x}.0") for i in range(1024)]
    kernel = [KernelGpu("proc", i, g.pci_bus_id) for i, g in enumerate(many)]
    started = time.perf_counter()
    gpus, unlisted = join(many, kernel)
    pairs, missing = pair_gpus(many, list(reversed(gpus)))
    assert len(pairs) == 1024 and not missing and not unlisted
    assert all(old.pci_bus_id == new.pci_bus_id and new.minor_number == old.index
               for old, new in pairs)
    assert time.perf_counter() - started < 2


def test_a_selection_keeps_only_the_unlisted_gpus_it_names_missing():
    from gpu_audit.gpu_selection import apply_selection

    gpus, unlisted = join([nvml(0)], kernel_gpus([proc(0)], range(4)))
    scan = b.scan(gpus=gpus, unlisted_gpus=unlisted)
    selection = resolve_gpus("job", gpus, {"SLURM_JOB_GPUS": "0,2"}, unlisted=unlisted,
                             missing_ok=True)
    limited = apply_selection(scan, selection)
    assert [k.minor_number for k in limited.unlisted_gpus] == [2]
    assert limited.gpu_selection["missing"][0]["entry"] == "2"
