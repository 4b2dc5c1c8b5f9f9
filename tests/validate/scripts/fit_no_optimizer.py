"""A closed-form fit, no optimizer and no loop: it holds 512 MiB of samples for a moment, then
writes its result and idles briefly before it exits. Unaware of gpu-audit."""

import time

import torch

samples = torch.ones(128 * 1024 * 1024 // 64, 64)  # 128 Mi floats: 512 MiB
weight = samples[:, 0].mean().item() * 3.0
del samples
print(f"fit weight={weight:.3f}", flush=True)
time.sleep(2.5)
