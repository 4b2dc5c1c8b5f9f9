"""A real CUDA training loop under ``gpu_audit.monitor``, for a scan to read while it runs.

    python3 bench/gpu/train_monitored.py --seconds 60 --ready READY --figures FIGURES.jsonl

Trains a small MLP on ``cuda:0`` with ``monitor.start(interval_s=...)`` and ``monitor.step()``
after every optimizer step. Every 20 steps it appends torch's own figures (allocated, reserved,
their peaks, the step) as one JSON line to ``--figures``; once the monitor has published twice it
writes ``--ready`` (its PID and publication path) so the caller can scan. Ends after
``--seconds`` or when ``--stop`` (a file) appears. Exit 0 when it trained, 3 without CUDA.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=1.0, help="monitor interval (s)")
    parser.add_argument("--ready", type=Path, required=True)
    parser.add_argument("--figures", type=Path, required=True)
    parser.add_argument("--stop", type=Path, help="stop early when this file exists")
    args = parser.parse_args(argv)

    import torch

    from gpu_audit import monitor

    if not torch.cuda.is_available():
        print("train_monitored: no CUDA device", file=sys.stderr)
        return 3
    running = monitor.start(interval_s=args.interval)
    device = torch.device("cuda:0")
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 4096)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randn(512, 4096, device=device)
    started = time.monotonic()
    step = 0
    ready = False
    with args.figures.open("a", encoding="utf-8") as figures:
        while time.monotonic() - started < args.seconds:
            loss = model(batch).square().mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            monitor.step()
            step += 1
            if step % 20:
                continue
            torch.cuda.synchronize(device)
            figures.write(json.dumps({
                "time": time.time(), "pid": os.getpid(), "step": step,
                "allocated_bytes": torch.cuda.memory_allocated(device),
                "reserved_bytes": torch.cuda.memory_reserved(device),
                "allocated_peak_bytes": torch.cuda.max_memory_allocated(device),
                "reserved_peak_bytes": torch.cuda.max_memory_reserved(device),
                "publication": str(running.publication_path),
            }) + "\n")
            figures.flush()
            if not ready and time.monotonic() - started > 3 * args.interval:
                args.ready.write_text(json.dumps(
                    {"pid": os.getpid(), "publication": str(running.publication_path)}) + "\n")
                ready = True
            if args.stop is not None and args.stop.exists():
                break
    monitor.stop()
    print(f"train_monitored: {step} steps in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
