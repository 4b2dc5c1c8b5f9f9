"""The diag worker: the child process that imports torch and runs ``gpu-audit diag``'s tests.

``python -m gpu_audit.diag.worker --device cuda|cpu --plan JSON``

The parent (:mod:`gpu_audit.diag.runner`) starts one worker per GPU (``CUDA_VISIBLE_DEVICES``
names that GPU by UUID, so it is ``cuda:0`` here) and one for the tests between GPUs (every
selected GPU visible, in NVML order). Torch is imported only here, never in the gpu-audit
process. Events go to the parent as one JSON object per line on the file descriptor that was
stdout at start (stdout then points at stderr, so library output cannot corrupt them):

- ``{"ev": "ready", ...}`` once torch is imported;
- ``{"ev": "fatal", "kind": K, "reason": ...}`` when it cannot test: ``torch-missing``,
  ``torch`` (torch does not import), ``torch-build`` (a torch without CUDA: no verdict on the
  GPU), ``cuda`` (a CUDA build of torch that cannot use the GPU: the GPU or its driver);
- ``{"ev": "phase", "test": NAME, "limit_s": S}`` before each test: the parent kills the worker
  when the test runs past ``limit_s`` (a hung kernel, a dead GPU);
- ``{"ev": "result", "test": NAME, "record": {...}}`` after it, ``{"ev": "tick", ...}`` every
  second of the sustained load, ``{"ev": "done"}`` at the end.

Its stdin is the parent's lifeline (:mod:`.lifeline`): the worker dies with gpu-audit.

The plan's ``plant`` (byte offset, bit) flips that bit of the memory test's buffer after the
first pattern is written: the test mode's proof that a bad cell is found and named.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any

from gpu_audit.diag import lifeline, probes
from gpu_audit.diag.memtest import MemoryTest
from gpu_audit.validate.device import torch_missing

LEVEL1 = ("context", "kernel-launch", "round-trip", "matmul-check")
LEVEL2 = ("memtest", "memory-bandwidth", "host-bandwidth", "matmul")


class Events:
    def __init__(self, fd: int) -> None:
        self.stream = os.fdopen(fd, "w", buffering=1, encoding="utf-8")

    def send(self, event: dict[str, Any]) -> None:
        self.stream.write(json.dumps(event) + "\n")
        self.stream.flush()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:400]


def _threads(torch: Any) -> None:
    given = (os.environ.get("OMP_NUM_THREADS") or "").strip()
    count = int(given) if given.isdigit() and int(given) > 0 else \
        max(1, min(4, (os.cpu_count() or 2) // 2))
    torch.set_num_threads(count)


def run_gpu_tests(torch: Any, device: Any, plan: dict[str, Any], events: Events) -> None:
    limit = float(plan.get("test_timeout_s", 120))
    seconds = float(plan.get("measure_s", 1.0))
    level = int(plan["level"])

    def run(name: str, func: Any, fatal: bool = False, limit_s: float = limit) -> bool:
        events.send({"ev": "phase", "test": name, "limit_s": limit_s})
        try:
            record = func()
        except Exception as exc:
            record = {"ok": False, "error": _one_line(exc)}
            print(traceback.format_exc(), file=sys.stderr)
        events.send({"ev": "result", "test": name, "record": record})
        return not (fatal and record.get("ok") is False)

    if not run("context", lambda: probes.context(torch, device), fatal=True):
        return
    if not run("kernel-launch", lambda: probes.kernel_launch(torch, device), fatal=True):
        return
    run("round-trip", lambda: probes.round_trip(torch, device, int(plan["roundtrip_bytes"])))
    run("matmul-check", lambda: probes.matmul_check(torch, device))
    if level >= 2:
        plant = plan.get("plant")

        def memtest() -> dict[str, Any]:
            planned = size = int(plan["memtest_bytes"])
            for _ in range(4):  # the CUDA context took more than foreseen: a smaller buffer
                try:
                    test = MemoryTest(torch, device, size // 4,
                                      plant=tuple(plant) if plant else None)
                    break
                except torch.cuda.OutOfMemoryError:
                    size = size * 3 // 4
            else:
                return {"ok": False, "error": f"no buffer of {size} bytes could be allocated"}
            try:
                record = test.run(quick=bool(plan.get("memtest_quick")))
                record["planned_bytes"] = planned
                return record
            finally:
                test.close()
                del test
                if device.type == "cuda":
                    torch.cuda.empty_cache()

        run("memtest", memtest, limit_s=float(plan.get("memtest_timeout_s", limit)))
        run("memory-bandwidth", lambda: probes.memory_bandwidth(
            torch, device, int(plan["bandwidth_bytes"]), seconds))
        if int(plan["host_bytes"]) > 0:  # 0: not measured here (a MIG instance)
            run("host-bandwidth", lambda: probes.host_bandwidth(
                torch, device, int(plan["host_bytes"]), seconds))
        for dtype in plan.get("dtypes", ("fp32", "tf32", "fp16", "bf16", "fp8")):
            run(f"matmul-{dtype}", lambda dtype=dtype: probes.matmul_throughput(
                torch, device, dtype, int(plan["matmul_n"]), seconds))


def run_sustain(torch: Any, device: Any, plan: dict[str, Any], events: Events) -> None:
    """Level 3's load alone (the parent runs it on every GPU at once and samples NVML)."""

    limit = float(plan.get("test_timeout_s", 120))
    duration = float(plan["sustain_s"])
    events.send({"ev": "phase", "test": "sustained", "limit_s": duration + limit})
    try:
        record = probes.sustained(torch, device, plan.get("sustain_dtype", "bf16"),
                                  int(plan["sustain_n"]), duration, events.send)
    except Exception as exc:
        record = {"ok": False, "error": _one_line(exc)}
        print(traceback.format_exc(), file=sys.stderr)
    events.send({"ev": "result", "test": "sustained", "record": record})


def run_peer_tests(torch: Any, plan: dict[str, Any], events: Events) -> None:
    count = torch.cuda.device_count()
    limit = float(plan.get("test_timeout_s", 120))
    seconds = float(plan.get("measure_s", 1.0))
    events.send({"ev": "phase", "test": "peer-matrix", "limit_s": limit})
    matrix = probes.peer_matrix(torch, count)
    events.send({"ev": "result", "test": "peer-matrix", "record": {"matrix": matrix}})
    if int(plan["level"]) < 2:
        return
    for i in range(count):
        for j in range(count):
            if i == j:
                continue
            name = f"peer-copy-{i}-{j}"
            events.send({"ev": "phase", "test": name, "limit_s": limit})
            try:
                record = probes.peer_copy(torch, i, j, int(plan["peer_bytes"]), seconds)
            except Exception as exc:
                record = {"ok": False, "error": _one_line(exc)}
            record.update(source=i, target=j, peer_access=matrix[i][j])
            events.send({"ev": "result", "test": name, "record": record})
    events.send({"ev": "phase", "test": "all-reduce", "limit_s": limit})
    try:
        record = probes.all_reduce(torch, count, int(plan["peer_bytes"]), seconds)
    except Exception as exc:
        record = {"ok": False, "error": _one_line(exc)}
    events.send({"ev": "result", "test": "all-reduce", "record": record})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpu_audit.diag.worker")
    parser.add_argument("--device", choices=("cuda", "cpu"), required=True)
    parser.add_argument("--mode", choices=("gpu", "peers", "sustain"), default="gpu")
    parser.add_argument("--plan", required=True, help="the tests' sizes and limits, as JSON")
    args = parser.parse_args(argv)
    lifeline.hold()  # dies with gpu-audit, also when gpu-audit is killed outright
    events = Events(os.dup(1))
    os.dup2(2, 1)
    plan = json.loads(args.plan)
    events.send({"ev": "phase", "test": "import-torch", "limit_s": plan.get("startup_s", 120)})
    started = time.perf_counter()
    try:
        import torch
    except BaseException as exc:
        missing = torch_missing(exc)
        events.send({"ev": "fatal", "kind": "torch-missing" if missing else "torch",
                     "reason": f"torch does not import: {_one_line(exc)}",
                     "python": sys.executable})
        return 3
    info: dict[str, Any] = {"ev": "ready", "torch_version": torch.__version__,
                            "torch_cuda": getattr(torch.version, "cuda", None),
                            "import_s": round(time.perf_counter() - started, 2), "pid": os.getpid(),
                            # the devices this worker was given (a MIG instance: its MIG UUID)
                            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if args.device == "cuda" and info["torch_cuda"] is None:
        # A torch built without CUDA (CPU-only, or ROCm): software, not the GPU, is at fault.
        events.send(info)
        variant = "ROCm" if getattr(torch.version, "hip", None) else "CPU-only"
        events.send({"ev": "fatal", "kind": "torch-build", "variant": variant.lower(),
                     "reason": f"torch {torch.__version__} is a {variant} build "
                               "(torch.version.cuda is None): it cannot use an NVIDIA GPU",
                     "torch_version": torch.__version__, "python": sys.executable})
        return 0
    if args.device == "cuda":
        try:
            available = torch.cuda.is_available()
        except Exception as exc:
            available, info["reason"] = False, _one_line(exc)
        if not available:
            reason = info.get("reason") or (
                "torch finds no usable CUDA device (driver, CUDA_VISIBLE_DEVICES)")
            events.send({"ev": "fatal", "kind": "cuda",
                         "reason": f"CUDA does not initialise: {reason}",
                         "torch_version": torch.__version__})
            return 0
        info["cuda_devices"] = torch.cuda.device_count()
    else:
        _threads(torch)
        info["threads"] = torch.get_num_threads()
    events.send(info)
    device = torch.device("cuda:0" if args.device == "cuda" else "cpu")
    if args.mode == "peers":
        run_peer_tests(torch, plan, events)
    elif args.mode == "sustain":
        run_sustain(torch, device, plan, events)
    else:
        run_gpu_tests(torch, device, plan, events)
    events.send({"ev": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
