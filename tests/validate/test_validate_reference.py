"""The built-in reference workload and the workload protocol, in-process on the CPU."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpu_audit.validate.protocol import (
    LITE_MAX_QUBITS,
    WorkloadContext,
    WorkloadError,
    clean_metrics,
    has_state,
    load_workload,
    qubit_cap,
)
from gpu_audit.validate.workloads.reference import (
    CPU_FULL_MAX_QUBITS,
    ReferenceWorkload,
    apply_cz,
    apply_single,
    rotation,
    run_random_circuit,
    sizes_for,
)

torch = pytest.importorskip("torch")


def dense_single(gate: torch.Tensor, qubit: int, qubits: int) -> torch.Tensor:
    """The full 2**n x 2**n operator, qubit 0 being the least significant bit."""
    operator = torch.ones(1, 1, dtype=torch.complex64)
    for position in reversed(range(qubits)):
        factor = gate if position == qubit else torch.eye(2, dtype=torch.complex64)
        operator = torch.kron(operator, factor)
    return operator


def test_the_simulator_agrees_with_dense_matrices() -> None:
    qubits = 5
    generator = torch.Generator().manual_seed(7)
    state = torch.randn(2**qubits, dtype=torch.complex64, generator=generator)
    state = state / state.norm()
    dense = state.clone()
    for qubit in range(qubits):
        gate = rotation(0.4 + qubit, 1.3, 2.2)
        state = apply_single(state, gate, qubit, qubits)
        dense = dense_single(gate, qubit, qubits) @ dense
    apply_cz(state, 3, 1, qubits)
    index = torch.arange(2**qubits)
    both = ((index >> 1) & 1).bool() & ((index >> 3) & 1).bool()
    dense = torch.where(both, -dense, dense)
    assert torch.allclose(state, dense, atol=1e-5)


def test_random_circuits_stay_normalised_and_spread_out() -> None:
    result = run_random_circuit(10, 12, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert result["qubits"] == 10
    assert result["norm_error"] < 1e-4
    assert 0.2 < result["entropy_per_qubit"] <= 1.0


def test_qubit_caps_lite_sixteen_full_from_memory_and_time_on_the_cpu() -> None:
    assert qubit_cap("off", 10**12) is None
    assert qubit_cap("lite", 80 * 1024**3) == LITE_MAX_QUBITS
    # a quarter of 4 GiB over four complex64 copies: 2**25 amplitudes
    assert qubit_cap("full", 4 * 1024**3) == 25
    assert qubit_cap("full", 80 * 1024**3) == 29
    workload = ReferenceWorkload()
    workload.sizes = sizes_for(ctx())
    workload.device = torch.device("cpu")
    generator = torch.Generator().manual_seed(0)
    big_host = ctx("full", budget=64 * 1024**3)
    assert workload.simulate(big_host, generator)["qubits"] == CPU_FULL_MAX_QUBITS


def ctx(quantum: str = "off", cycle: int = 0, budget: int = 8 * 1024**3,
        **extra) -> WorkloadContext:
    return WorkloadContext(device="cpu", quantum=quantum, stage="full", cycles=10, seed=1,
                           cycle=cycle, memory_budget_bytes=budget,
                           max_qubits=qubit_cap(quantum, budget), **extra)


def test_reference_cycles_vary_sequence_length_and_report_metrics() -> None:
    workload = ReferenceWorkload()
    context = ctx("full", budget=2**20)  # full mode sized from memory: 13 qubits here
    assert context.max_qubits == 13
    workload.setup(context)
    seen = []
    for index in range(3):
        context.cycle = index
        metrics = clean_metrics(workload.cycle(context))
        seen.append(metrics["seq_len"])
        assert math.isfinite(metrics["loss"]) and metrics["norm_error"] < 1e-3
        assert metrics["qubits"] == 13 - index % 3
    assert len(set(seen)) == 3


def test_a_halved_batch_scale_shrinks_the_batch_and_the_circuit() -> None:
    workload = ReferenceWorkload()
    full = ctx("lite")
    workload.setup(full)
    big = workload.cycle(full)
    half = ctx("lite", batch_scale=0.5)
    small = workload.cycle(half)
    assert small["batch"] == big["batch"] // 2
    assert small["qubits"] == big["qubits"] - 1


def test_resuming_from_state_dict_continues_exactly_like_an_unbroken_run() -> None:
    unbroken = ReferenceWorkload()
    unbroken.setup(ctx())
    straight = []
    for index in range(4):
        straight.append(unbroken.cycle(ctx(cycle=index))["loss"])

    first = ReferenceWorkload()
    first.setup(ctx())
    for index in range(2):
        first.cycle(ctx(cycle=index))
    saved = first.state_dict()
    resumed = ReferenceWorkload()
    resumed.setup(ctx())
    resumed.load_state_dict(saved)
    again = [resumed.cycle(ctx(cycle=index))["loss"] for index in (2, 3)]
    assert again == pytest.approx(straight[2:], rel=1e-5)


def test_cuda_sizes_fit_the_memory_budget() -> None:
    budget_4g = sizes_for(WorkloadContext(device="cuda:0", quantum="off", stage="full",
                                          cycles=1, seed=0, memory_budget_bytes=4 * 1024**3))
    budget_80g = sizes_for(WorkloadContext(device="cuda:0", quantum="off", stage="full",
                                           cycles=1, seed=0, memory_budget_bytes=80 * 1024**3))
    assert 1 <= budget_4g.batch < budget_80g.batch <= 64


def test_workloads_load_by_module_or_file_and_follow_the_protocol(tmp_path: Path) -> None:
    assert has_state(load_workload("tests.validate.tiny_workloads:Counter"))
    assert not has_state(load_workload("tests.validate.tiny_workloads:Stateless"))
    (tmp_path / "my_loop.py").write_text(
        "def make():\n    class Loop:\n        def cycle(self, ctx):\n            return {'x': 1}\n"
        "    return Loop()\n")
    assert load_workload(f"{tmp_path / 'my_loop.py'}:make").cycle(None) == {"x": 1}
    with pytest.raises(WorkloadError, match="no cycle"):
        load_workload("tests.validate.tiny_workloads:NoCycle")
    with pytest.raises(WorkloadError, match="no attribute"):
        load_workload("tests.validate.tiny_workloads:Missing")
    with pytest.raises(ModuleNotFoundError, match="gpu_audit_no_such_package"):
        load_workload("tests.validate.broken_workload:Workload")


def test_metrics_must_be_numbers() -> None:
    assert clean_metrics({"loss": torch.tensor(0.5), "ok": True, "nan": float("nan")}) == {
        "loss": 0.5, "ok": True, "nan": None}
    assert clean_metrics(None) == {}
    with pytest.raises(WorkloadError, match="must be a number"):
        clean_metrics({"loss": "low"})
    with pytest.raises(WorkloadError, match="dict of metrics"):
        clean_metrics([1, 2])
