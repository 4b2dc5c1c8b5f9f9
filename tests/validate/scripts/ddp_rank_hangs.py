"""Data-parallel training over gloo for torchrun in which rank 1 stops following rank 0: after
its first step it waits in a barrier rank 0 never enters, while rank 0 waits in its next
backward pass for rank 1's gradients. Unaware of gpu-audit.

    torchrun --nproc-per-node 2 ddp_rank_hangs.py
"""

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    inputs = torch.randn(64, 16)
    target = inputs.sum(dim=1, keepdim=True) * 0.1
    for step in range(100_000):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()  # rank 0 waits here for rank 1
        optimizer.step()
        print(f"rank {rank} step {step} loss={loss.item():.5f}", flush=True)
        if rank == 1 and step == 1:
            dist.barrier()  # rank 1 waits here for rank 0


if __name__ == "__main__":
    main()
