"""Data-parallel training over the gloo backend, for torchrun on the CPU; unaware of gpu-audit.

    torchrun --nproc-per-node 2 ddp_gloo.py --max-steps N
"""

import argparse

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=100_000)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(64, 16)
    target = inputs.sum(dim=1, keepdim=True) * 0.1
    try:
        for step in range(args.max_steps):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), target)
            loss.backward()
            optimizer.step()
            if rank == 0:
                print(f"step {step} loss={loss.item():.5f}", flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
