"""A time-series fit with LBFGS, as such scripts are written: each step evaluates its closure
several times, then the script evaluates the model on held-out points, prints the loss and
writes a file of predictions for that step. Unaware of gpu-audit.

    python lbfgs_files.py --out DIR [--steps N]
"""

import argparse
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=100_000)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    t = torch.linspace(0, 6.28, 200).unsqueeze(1)
    series = torch.sin(t)
    train, test = slice(0, 150), slice(150, 200)
    model = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for step in range(args.steps):
        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(t[train]), series[train])
            loss.backward()
            return loss

        optimizer.step(closure)
        with torch.no_grad():  # the step's closing evaluation
            prediction = model(t[test])
            test_loss = torch.nn.functional.mse_loss(prediction, series[test])
        print(f"step {step} test loss={test_loss.item():.5f}", flush=True)
        (out / f"prediction-{step}.txt").write_text(
            "\n".join(f"{v:.5f}" for v in prediction.squeeze(1).tolist()))


if __name__ == "__main__":
    main()
