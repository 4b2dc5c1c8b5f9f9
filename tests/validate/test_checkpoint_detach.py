"""A checkpoint's state is copied on the cycle's thread and serialised on the writer's: what is
written is the state as it was when the checkpoint was taken, whatever the workload did next."""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from gpu_audit.validate.checkpoints import (
    Checkpoint,
    CheckpointWriter,
    SerialisedState,
    detached_state,
    host_copy,
    load_checkpoint,
)
from gpu_audit.validate.state import CycleLog


def test_the_copy_shares_no_tensor_with_the_workload(torch: Any) -> None:
    weights = torch.arange(6.0)
    state = {"model": {"w": weights}, "moments": [weights * 2], "step": 3, "name": "adamw"}
    copy = host_copy(state)
    weights.add_(100)
    state["moments"][0].zero_()
    state["step"] = 4
    assert copy["model"]["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert copy["moments"][0].tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert (copy["step"], copy["name"]) == (3, "adamw")


def test_a_tensor_named_twice_stays_one_and_a_state_dict_keeps_its_metadata(torch: Any) -> None:
    model = torch.nn.Linear(3, 2)
    state = {"model": model.state_dict(), "tied": None}
    state["tied"] = state["model"]["weight"]
    copy = host_copy(state)
    assert copy["tied"] is copy["model"]["weight"]
    assert type(copy["model"]) is OrderedDict
    assert copy["model"]._metadata == state["model"]._metadata
    other = torch.nn.Linear(3, 2)
    other.load_state_dict(copy["model"])
    assert torch.equal(other.weight, model.weight)


def test_torch_s_immutable_descriptions_are_kept(torch: Any) -> None:
    state = {"dtype": torch.float16, "device": torch.device("cpu"), "shape": torch.Size([2, 3])}
    assert host_copy(state) == state


def test_tuples_and_numpy_arrays_are_copied() -> None:
    numpy = pytest.importorskip("numpy")
    array = numpy.arange(4)
    copy = host_copy({"pair": (array, 1.5)})
    array[:] = 9
    assert copy["pair"][0].tolist() == [0, 1, 2, 3] and copy["pair"][1] == 1.5


class Counter:
    def __init__(self) -> None:
        self.count = 1


def test_a_state_holding_other_objects_is_serialised_at_once(torch: Any) -> None:
    counter = Counter()
    with pytest.raises(Exception, match="Counter"):
        host_copy({"counter": counter})
    detached = detached_state({"counter": counter, "w": torch.ones(2)})
    assert isinstance(detached, SerialisedState) and detached.codec == "torch"
    counter.count = 2  # serialised already: the checkpoint keeps 1
    kept = torch.load(io.BytesIO(detached.data), weights_only=False)
    assert kept["counter"].count == 1


def test_the_writer_writes_the_state_as_it_was_when_submitted(tmp_path: Path,
                                                              torch: Any) -> None:
    weights = torch.zeros(1000)
    log = CycleLog(tmp_path / "cycles.jsonl")
    writer = CheckpointWriter(log)
    path = tmp_path / "checkpoints" / "v.full.ckpt"
    path.parent.mkdir()
    gate = threading.Event()
    original_sync = log.sync

    def slow_sync() -> None:  # the writer is still busy when the workload changes its state
        gate.wait(timeout=10)
        original_sync()

    log.sync = slow_sync  # type: ignore[method-assign]
    submitted = Checkpoint(leg="v/full", next_cycle=5, batch_scale=1.0,
                           workload_state=detached_state({"w": weights}),
                           has_workload_state=True)
    writer.submit(path, submitted)
    weights.fill_(7.0)
    gate.set()
    writer.wait()
    assert submitted.workload_state is None  # the host copy is let go once written
    loaded = load_checkpoint(path)
    assert loaded is not None and loaded.next_cycle == 5
    assert float(loaded.workload_state["w"].sum()) == 0.0


def test_a_state_that_cannot_be_written_fails_at_the_next_wait(tmp_path: Path,
                                                               torch: Any) -> None:
    writer = CheckpointWriter(CycleLog(tmp_path / "cycles.jsonl"))
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "v.full.ckpt"  # its folder cannot be made
    writer.submit(path, Checkpoint(leg="v/full", next_cycle=1, batch_scale=1.0,
                                   workload_state=detached_state({"w": torch.ones(2)}),
                                   has_workload_state=True))
    with pytest.raises(OSError):
        writer.wait()
    writer.wait()  # reported once


@pytest.mark.gpu
def test_a_cuda_state_is_copied_into_host_memory(torch: Any) -> None:
    weights = torch.ones(1024, device="cuda")
    copy = host_copy({"w": weights, "steps": [torch.zeros(2, device="cuda")]})
    weights.mul_(3)
    torch.cuda.synchronize()
    assert copy["w"].device.type == "cpu" and copy["steps"][0].device.type == "cpu"
    assert float(copy["w"].sum()) == 1024.0
