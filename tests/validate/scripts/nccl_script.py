"""Exits 1 after an NCCL failure, as a distributed job does when a peer or the network fails."""

import sys

print("cycle 0 loss=0.5", flush=True)
print("Traceback (most recent call last):\n"
      '  File "train.py", line 88, in <module>\n'
      "    dist.all_reduce(grads)\n"
      "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
      "ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
      "details), NCCL version 2.21.5\n"
      "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
      "device error.\n"
      "Last error:\n"
      "socketStartConnect: Connect to 10.0.0.2<43127> failed : Software caused connection "
      "abort", file=sys.stderr, flush=True)
sys.exit(1)
