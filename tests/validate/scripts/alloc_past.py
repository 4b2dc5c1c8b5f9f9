"""Keeps 256 MiB more of GPU memory every cycle (for --emulate-memory on a real GPU).

    python alloc_past.py --cycles N
"""

import argparse

import torch

from gpu_audit import monitor

parser = argparse.ArgumentParser()
parser.add_argument("--cycles", type=int, required=True)
args = parser.parse_args()
kept = []
for i in range(args.cycles):
    kept.append(torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda"))
    print(f"cycle {i}: holding {len(kept) * 256} MiB", flush=True)
    monitor.step()
