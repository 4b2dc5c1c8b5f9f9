"""A plain torch training loop that knows nothing of gpu-audit: cycles come from its optimizer.

    python train_plain.py [--max-steps N] [--print-every K] [--sleep S]

``--sleep`` stands for the data loading a real step waits for.
"""

import argparse
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=100_000)
    parser.add_argument("--print-every", type=int, default=1)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--sleep", type=float, default=0.0)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                                torch.nn.Linear(args.width, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    inputs = torch.randn(256, args.width)
    target = inputs.sum(dim=1, keepdim=True) * 0.1
    for step in range(args.max_steps):
        if args.sleep:
            time.sleep(args.sleep)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs), target)
        loss.backward()
        optimizer.step()
        if step % args.print_every == 0:
            print(f"step {step} loss={loss.item():.5f}")
    print("training finished")


if __name__ == "__main__":
    main()
