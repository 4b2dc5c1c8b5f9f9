"""The run's pure parts: plans and the estimate, busy GPUs, new Xids, combined exit codes."""

from __future__ import annotations

import pytest

from gpu_audit.diag.results import DiagOptions, combine_exit_codes
from gpu_audit.diag.runner import _new_xids, busy_processes, estimate, plan_for, refuse_busy
from gpu_audit.errors import UsageError
from gpu_audit.knowledge.gpu_models import find_model
from tests import builders as b

GIB = 1024**3


def test_plan_covers_most_free_memory_and_the_estimate_says_so() -> None:
    gpu = b.gpu(0, total=80 * GIB, used=1 * GIB)
    plan = plan_for(gpu, DiagOptions(level=2), find_model(gpu.name))
    assert 0.85 * 79 * GIB < plan["memtest_bytes"] < 0.9 * 79 * GIB
    assert plan["dtypes"] == ["fp32", "tf32", "fp16", "bf16", "fp8"]
    cost = estimate({0: plan, 1: plan}, DiagOptions(level=2), peers=True)
    assert cost["memory_per_gpu_bytes"] == plan["memtest_bytes"] + 512 * 1024**2
    assert 30 < cost["seconds"] < 200  # "about a minute per GPU"
    level3 = estimate({0: plan}, DiagOptions(level=3, duration_s=300), peers=False)
    assert level3["seconds"] > 300
    laptop = plan_for(b.gpu(0, total=4 * GIB, used=600 * 1024**2, compute_capability="7.5"),
                      DiagOptions(level=3), None)
    assert laptop["matmul_n"] == 4096 and laptop["sustain_dtype"] == "fp16"


def test_busy_gpus_are_named_and_refused() -> None:
    scan = b.scan(gpus=[b.gpu(0), b.gpu(1)],
                  processes=[b.process(4242, 2048, ["python", "train.py"], gpu_index=1),
                             b.process(77, 4, ["Xorg"], gpu_index=0, type="graphics")])
    assert list(busy_processes(scan, [0, 1])) == [1]  # a display server does not count
    with pytest.raises(UsageError, match=r"GPU 1: pid 4242 \(python, alice.*--gpus 0, --gpus"):
        refuse_busy(scan, [0, 1])
    refuse_busy(scan, [0])


def test_only_new_xids_of_this_gpu() -> None:
    old = {"xid": 79, "pci_bus_id": "0000:18:00", "uptime_s": 10.0, "message": "fell off"}
    new_here = {"xid": 48, "pci_bus_id": "0000:18:00", "uptime_s": 99.0, "message": "DBE"}
    new_elsewhere = {"xid": 13, "pci_bus_id": "0000:2a:00", "uptime_s": 98.0, "message": "x"}
    assert _new_xids([old], [old, new_here, new_elsewhere], "00000000:18:00.0") == [new_here]


def test_exit_codes_combine_in_monitoring_order() -> None:
    assert combine_exit_codes(0, 1) == 1
    assert combine_exit_codes(1, 3) == 3
    assert combine_exit_codes(3, 2) == 2
    assert combine_exit_codes(0, 0) == 0
