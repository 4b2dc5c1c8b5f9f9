"""A training loop that leaves processes behind, as scripts with helpers do: at its first step
it starts a helper that daemonises (forks twice, leaves the session, keeps the script's stdout
open) and a program in a session of its own; it writes their pids to ``--pids``, then trains
to the end and exits without stopping them. Unaware of gpu-audit.

    python leaves_processes.py --steps N --pids FILE
"""

import argparse
import os
import subprocess
import time
from pathlib import Path

import torch


def daemonise() -> int:
    """The pid of a grandchild that outlives this script with its stdout open."""
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.close(write)
            while True:
                print("helper: still here", flush=True)
                time.sleep(0.5)
        os.write(write, str(pid).encode())
        os._exit(0)
    os.close(write)
    os.wait()
    pid = int(os.read(read, 32))
    os.close(read)
    return pid


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--pids", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        optimizer.zero_grad()
        loss = model(torch.randn(16, 8)).pow(2).mean()
        loss.backward()
        optimizer.step()
        if step == 0:
            daemon = daemonise()
            own_session = subprocess.Popen(["sleep", "300"], start_new_session=True)
            Path(args.pids).write_text(f"{daemon} {own_session.pid}")
        print(f"step {step} loss={loss.item():.4f}", flush=True)


if __name__ == "__main__":
    main()
