"""A plain CUDA training script that knows nothing of gpu-audit, for ``validate -- COMMAND``.

    python3 bench/gpu/plain_train.py --steps N [--batch B] [--width W]

An MLP trained with SGD on random data on ``cuda`` (exit 3 without CUDA), one optimizer step and
one ``step I loss X`` line per step. Its memory grows with ``--batch`` (each activation is
batch x width floats), so a large batch under ``validate --emulate-memory`` runs out of memory.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, required=True)
parser.add_argument("--batch", type=int, default=256)
parser.add_argument("--width", type=int, default=4096)
args = parser.parse_args()

if not torch.cuda.is_available():
    print("plain_train: no CUDA device", file=sys.stderr)
    sys.exit(3)
device = "cuda"
model = torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                            torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                            torch.nn.Linear(args.width, 1)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
start = time.perf_counter()
for step in range(args.steps):
    x = torch.randn(args.batch, args.width, device=device)
    loss = model(x).square().mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.5f}", flush=True)
print(f"done: {args.steps} steps of batch {args.batch} on {device} in "
      f"{time.perf_counter() - start:.2f} s", flush=True)
