"""A script that attacks ``validate -- COMMAND``'s supervisor through what it controls: the
streams folder the hook writes into (``GPU_AUDIT_SCRIPT_STREAMS``) and its own output.

    python hostile_streams.py MODE [--cycles N] [--sleep S] [--line-mb M] [--lines K]
                              [--trailer T] [--stream-mb M] [--pid-file F]

MODE: ``fifo`` (a FIFO named like a stream), ``zero`` (a stream that is a symbolic link to
``/dev/zero``), ``deep`` (stream lines nested deeper than any parser's recursion), ``long``
(``--lines`` output lines of ``--line-mb`` MB per cycle, with no metric in them),
``bigstream`` (a stream of ``--stream-mb`` MB of short records that are no cycle),
``detach`` (a process left behind in a session of its own, holding the output open; its pid
goes to ``--pid-file``). Then it
prints ``cycle i loss=...`` lines, one per cycle (``--cycle-pattern '^cycle'``), and ``--trailer``
short lines at its end; no torch, so that it starts fast.
"""

import argparse
import os
import subprocess
import time


def plant(mode: str, folder: str, stream_mb: float) -> None:
    if mode == "fifo":
        os.mkfifo(os.path.join(folder, "rank-7.jsonl"))
    elif mode == "zero":
        os.symlink("/dev/zero", os.path.join(folder, "rank-8.jsonl"))
    elif mode == "deep":
        with open(os.path.join(folder, "rank-9.jsonl"), "w") as handle:
            handle.write("[" * 50_000 + "\n")  # under the line cap: parsed, nested too deep
            handle.write('{"n": ' * 10_000 + "\n")
            handle.write("[" * 1_000_000 + "\n")  # past the line cap: skipped unparsed
            handle.write('{"ev": "hello", "pid": 1}\n')
    elif mode == "bigstream":
        block = '{"x": 1}\n' * 100_000
        with open(os.path.join(folder, "rank-5.jsonl"), "w") as handle:
            for _ in range(int(stream_mb * 1_000_000 / len(block)) + 1):
                handle.write(block)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["fifo", "zero", "deep", "long", "bigstream", "detach",
                                         "none"])
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--line-mb", type=float, default=5.0)
    parser.add_argument("--lines", type=int, default=6)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--trailer", type=int, default=0)
    parser.add_argument("--stream-mb", type=float, default=300.0)
    parser.add_argument("--pid-file", default=None)
    args = parser.parse_args()
    folder = os.environ["GPU_AUDIT_SCRIPT_STREAMS"]
    plant(args.mode, folder, args.stream_mb)
    if args.mode == "detach":
        child = subprocess.Popen(["sleep", "600"], start_new_session=True)
        with open(args.pid_file, "w") as handle:
            handle.write(str(child.pid))
    print(f"planted {args.mode} in the streams folder", flush=True)
    for i in range(args.cycles):
        if args.mode == "long":
            line = "x" * int(args.line_mb * 1_000_000)
            for k in range(args.lines):
                print(f"long {i}.{k} {line}", flush=True)
        time.sleep(args.sleep)
        print(f"cycle {i} loss={1.0 / (i + 1):.4f}", flush=True)
    for k in range(args.trailer):
        print(f"trailer {k}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
