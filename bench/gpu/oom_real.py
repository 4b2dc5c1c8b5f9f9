"""Run a real CUDA out-of-memory under ``gpu_audit.monitor(snapshot_on_oom=True)``.

    python3 bench/gpu/oom_real.py --out DIR [--broken-nvml]

Fills ``cuda:0`` with 1 GiB tensors until the allocator gives up, with the monitor recording
history. The OOM's traceback goes to stderr as an uncaught one would (a real message for
``gpu-audit explain``); then, with the tensors still held, it writes into DIR
``memory_summary.txt`` (``torch.cuda.memory_summary()``), ``memory_stats.json`` (the totals
that ``gpu-audit snapshot`` reports) and ``snapshots.txt`` (the files the monitor wrote, under
DIR/snapshots). A second OOM, one allocation larger than the card, follows (its traceback to
stderr too).

``--broken-nvml`` re-runs itself with the fake ``libnvidia-ml.so.1`` of the test suite in front
of the real one, answering every call with an error (needs a C compiler): torch's OOM report
then fails inside NVML, which is how the "NVML_SUCCESS == ... INTERNAL ASSERT FAILED" message
that hides an OOM arises. Exit 0 when an OOM was caught, 1 when none happened, 3 without CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GIB = 1024**3


def broken_nvml_env(out: Path) -> dict[str, str]:
    sys.path.insert(0, str(REPO))
    from tests.fakegpu import NVML_ERROR_UNKNOWN, broken_driver, scenario_env

    env = scenario_env(broken_driver(NVML_ERROR_UNKNOWN), out / "fake-nvml")
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--broken-nvml", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.broken_nvml and "FAKE_NVML_SCENARIO" not in os.environ:
        env = broken_nvml_env(args.out)
        os.execve(sys.executable, [sys.executable, __file__, "--out", str(args.out),
                                   "--broken-nvml"], env)

    import torch

    from gpu_audit import monitor

    if not torch.cuda.is_available():
        print("oom_real: no CUDA device", file=sys.stderr)
        return 3
    running = monitor.start(interval_s=1.0, snapshot_on_oom=True,
                            snapshot_dir=args.out / "snapshots")
    held = []
    caught = 0
    try:
        while True:
            held.append(torch.empty(GIB, dtype=torch.uint8, device="cuda:0"))
    except Exception:  # torch.OutOfMemoryError, or the RuntimeError of a failed NVML report
        caught += 1
        traceback.print_exc()
        sys.stderr.flush()
    (args.out / "memory_summary.txt").write_text(torch.cuda.memory_summary(), encoding="utf-8")
    stats = torch.cuda.memory_stats()
    keep = ("allocated_bytes.all.current", "reserved_bytes.all.current",
            "active_bytes.all.current", "inactive_split_bytes.all.current", "segment.all.current",
            "num_ooms", "num_alloc_retries", "allocated_bytes.all.peak", "reserved_bytes.all.peak")
    (args.out / "memory_stats.json").write_text(json.dumps(
        {"held_tensors": len(held), **{k: stats.get(k) for k in keep}}, indent=1) + "\n")
    total = torch.cuda.get_device_properties(0).total_memory
    held.clear()
    torch.cuda.empty_cache()
    try:
        torch.empty(2 * total, dtype=torch.uint8, device="cuda:0")
    except Exception:
        caught += 1
        traceback.print_exc()
    snapshots = running.oom_snapshots
    (args.out / "snapshots.txt").write_text("".join(f"{p}\n" for p in snapshots))
    monitor.stop()
    print(f"oom_real: {caught} OOMs caught; snapshots: {snapshots}")
    return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main())
