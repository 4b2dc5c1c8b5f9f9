"""A small trainer that resumes itself from its own checkpoint, in the shape of a GPT trainer:
``--max_iters``, ``--out_dir`` and ``--init_from=resume``. It knows nothing of gpu-audit.

    python resume_self.py --out_dir DIR --max_iters N [--init_from scratch|resume]
                          [--save_every K] [--sleep S] [--optimizer adamw|sgd]
                          [--steps_per_iter K] [--counter_key NAME]

The checkpoint (model, optimizer, ``iter_num``) is written every ``--save_every`` iterations,
before that iteration's step; a resumed run continues from it to ``--max_iters``.
``--counter_key`` names the checkpoint's iteration counter. ``--steps_per_iter`` stands for a
loop whose unit is not one step (an epoch of K batches).
"""

import argparse
import os
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--max_iters", type=int, required=True)
    parser.add_argument("--init_from", default="scratch", choices=("scratch", "resume"))
    parser.add_argument("--save_every", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--optimizer", default="adamw", choices=("adamw", "sgd"))
    parser.add_argument("--steps_per_iter", type=int, default=1)
    parser.add_argument("--counter_key", default="iter_num")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 1)
    optimizer = (torch.optim.AdamW(model.parameters(), lr=1e-2) if args.optimizer == "adamw"
                 else torch.optim.SGD(model.parameters(), lr=1e-2))
    path = os.path.join(args.out_dir, "ckpt.pt")
    iter_num = 0
    if args.init_from == "resume":
        checkpoint = torch.load(path)
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        iter_num = checkpoint[args.counter_key]
        print(f"resuming from iteration {iter_num}", flush=True)
    os.makedirs(args.out_dir, exist_ok=True)
    inputs = torch.randn(64, 16)
    target = inputs.sum(dim=1, keepdim=True) * 0.1
    while iter_num < args.max_iters:
        if iter_num and iter_num % args.save_every == 0:
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        args.counter_key: iter_num}, path)
        for _ in range(args.steps_per_iter):
            time.sleep(args.sleep)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs), target)
            loss.backward()
            optimizer.step()
        print(f"iter {iter_num}: loss {loss.item():.4f}", flush=True)
        iter_num += 1
    print("training done", flush=True)


if __name__ == "__main__":
    main()
