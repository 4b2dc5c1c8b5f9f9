"""Fails the way a CUDA out-of-memory ends a script: torch's own message, exit code 1.

    python oom_script.py [--batch B --fits F] [--cycles N]

On the CPU no GPU can run out, so the script raises the error torch raises (the message is the
caching allocator's, word for word), after two cycles of output; with ``--batch``, only when the
batch is above ``--fits`` (else it runs its cycles and ends well).
"""

import argparse
import sys

MESSAGE = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 7.79 GiB of "
    "which 1.06 GiB is free. Including non-PyTorch memory, this process has 6.72 GiB memory in "
    "use. Of the allocated memory 5.91 GiB is allocated by PyTorch, and 512.00 MiB is reserved "
    "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
    "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html"
    "#environment-variables)"
)


class OutOfMemoryError(RuntimeError):
    pass


OutOfMemoryError.__module__ = "torch"

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=None)
parser.add_argument("--fits", type=int, default=8)
parser.add_argument("--cycles", type=int, default=2)
args = parser.parse_args()
fits = args.batch is not None and args.batch <= args.fits
for i in range(args.cycles if fits else 2):
    print(f"cycle {i} batch={args.batch} loss=0.5", flush=True)
if fits:
    sys.exit(0)
print("allocating the activations of a batch of 512", file=sys.stderr, flush=True)
raise OutOfMemoryError(MESSAGE)
