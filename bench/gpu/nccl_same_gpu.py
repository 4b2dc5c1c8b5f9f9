"""Two NCCL ranks on one GPU: the real error NCCL and torch print for it.

    python3 bench/gpu/nccl_same_gpu.py --out DIR [--timeout 120]

Starts two ranks (``--rank`` children of this script) that both take ``cuda:0``, form an NCCL
process group over TCP on localhost and all-reduce one tensor. NCCL refuses two ranks on one
device ("Duplicate GPU detected"), or, with another NCCL, the collective fails or hangs until
the group's timeout. Each rank's stdout and stderr go to ``DIR/rank<N>.log`` (NCCL_DEBUG=WARN)
for ``gpu-audit explain``. Exit 0 when both ranks ended (with whatever error), 1 when one had
to be killed at ``--timeout``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path


def rank_main(rank: int, port: int, timeout_s: float) -> int:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2, timeout=datetime.timedelta(seconds=timeout_s))
    tensor = torch.ones(1024, device="cuda:0")
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    print(f"rank {rank}: all_reduce gave {tensor[0].item()}", flush=True)
    dist.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank is not None:
        return rank_main(args.rank, args.port, args.timeout / 2)
    if args.out is None:
        parser.error("--out is required")
    args.out.mkdir(parents=True, exist_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, NCCL_DEBUG="WARN", TORCH_NCCL_ASYNC_ERROR_HANDLING="1")
    ranks = []
    for rank in (0, 1):
        log = (args.out / f"rank{rank}.log").open("w")
        ranks.append((subprocess.Popen(
            [sys.executable, __file__, "--rank", str(rank), "--port", str(port),
             "--timeout", str(args.timeout)], stdout=log, stderr=subprocess.STDOUT, env=env),
            log))
    deadline = time.monotonic() + args.timeout
    killed = False
    for proc, log in ranks:
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()  # our own child, by its handle
            proc.wait()
            killed = True
        log.close()
        print(f"rank pid {proc.pid}: exit {proc.returncode}")
    return 1 if killed else 0


if __name__ == "__main__":
    sys.exit(main())
