"""A validation script shaped like the ones users already have: flags, cycles, printed metrics.

    python seed_like.py --cycles N [--disable-quantum | --quantum-lite] [--sleep S] [--loss X]

Prints ``cycle i loss=... phi=...`` per cycle and the flags it was given; no torch, so it starts
fast. ``--resume-from FILE`` records that it was asked to resume.
"""

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, required=True)
    parser.add_argument("--disable-quantum", action="store_true")
    parser.add_argument("--quantum-lite", action="store_true")
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--loss", type=float, default=1.0)
    parser.add_argument("--resume-from", default=None)
    args = parser.parse_args()
    mode = "off" if args.disable_quantum else "lite" if args.quantum_lite else "full"
    print(f"quantum mode: {mode}; resume from: {args.resume_from}", flush=True)
    for i in range(args.cycles):
        time.sleep(args.sleep)
        loss = args.loss / (1 + i)
        print(f"cycle {i} loss={loss:.4f} phi={0.6 + 0.01 * i:.3f}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
