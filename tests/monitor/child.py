"""A training process stand-in that publishes through gpu_audit.monitor (run as a child).

``python -m tests.monitor.child [--retries N] [--steps N] [--fork] [--uuid U] [--pci P]`` starts
a monitor fed by a recorded H100 allocator (one more allocation retry per publication, up to
N), prints ``ready <publication path>``, and exits normally when its stdin closes or reads a
line (so atexit clean-up runs), unless killed first. With ``--fork`` it forks a child that exits
through ``sys.exit`` first (as a DataLoader worker would) and prints ``forked`` once it is gone.
"""

from __future__ import annotations

import argparse
import os
import sys

from gpu_audit import monitor
from tests.monitor.recorded import (
    H100_PCI,
    H100_UUID,
    fragmented_training_stats,
    h100_reading,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--retries", type=int, default=0)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--fork", action="store_true")
    parser.add_argument("--uuid", default=H100_UUID)
    parser.add_argument("--pci", default=H100_PCI)
    args = parser.parse_args()
    readings = [h100_reading(fragmented_training_stats(retries=r), uuid=args.uuid,
                             pci_bus_id=args.pci) for r in range(args.retries + 1)]
    running = monitor.start(interval_s=args.interval,
                            source=monitor.RecordedAllocatorSource(readings))
    monitor.step(args.steps)
    running.publish()
    print(f"ready {running.publication_path}", flush=True)
    if args.fork:
        pid = os.fork()
        if pid == 0:
            monitor.stop()  # a worker calling stop() must not touch its parent's file
            sys.exit(0)  # runs the inherited atexit handlers in the child
        os.waitpid(pid, 0)
        print("forked", flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
