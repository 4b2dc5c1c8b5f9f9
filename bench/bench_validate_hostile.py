"""What a hostile script costs ``gpu-audit validate -- COMMAND``'s supervisor: time and memory.

Runs ``gpu-audit validate --device cpu --stage smoke --cycle-pattern ^cycle -- python
tests/validate/scripts/hostile_streams.py MODE`` for each MODE, one at a time:

- ``none``: the same script with nothing hostile (the baseline);
- ``fifo``: a FIFO named like a stream in its streams folder (read, it waits for ever);
- ``zero``: a stream that is a symbolic link to ``/dev/zero`` (read, it never ends);
- ``deep``: stream lines nested deeper than the JSON parser's recursion, and a 1 MB one;
- ``bigstream``: a regular stream of ``--stream-mb`` MB of records that are no cycle (read up to
  the 256 MiB cap per stream, a chunk at a time);
- ``flood``: ``--flood-mb`` MB of output in ``--line-mb`` MB lines, past the stage log's cap
  (64 MiB): the log keeps its head and tail.

For each it prints the exit code, the wall time of the whole command, the stage's own time
(the worker's, from ``state.json``), the highest resident memory of any of its processes
(``RUSAGE_CHILDREN``: the runner, the stage worker or the script) and the stage log's size.

    python3 bench/bench_validate_hostile.py [--flood-mb 1800] [--line-mb 10] [--stream-mb 300]

Targets: every mode exits 0, no process above 512 MiB, the stage log within its cap (plus its
header lines). Exit status 0 when met, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "tests" / "validate" / "scripts" / "hostile_streams.py"
MAX_RSS_MIB = 512
LOG_CAP = 64 * 1024**2


def child_peak_mib() -> float:
    """The highest RSS of any process waited for so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_mode(mode: str, script_args: list[str], out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_AUDIT_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["NO_COLOR"] = "1"
    command = [sys.executable, "-m", "gpu_audit", "validate", "--device", "cpu", "--no-plots",
               "--out", str(out), "--run-id", mode, "--stage", "smoke", "--cycle-pattern",
               "^cycle", "--", sys.executable, str(SCRIPT), *script_args]
    began = time.monotonic()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=1800)
    took = time.monotonic() - began
    run = out / "runs" / mode
    state = json.loads((run / "state.json").read_text())
    log = run / "logs" / "default.smoke.log"
    return {"mode": mode, "exit": done.returncode, "wall_s": took,
            "stage_s": state["legs"]["default/smoke"].get("duration_s"),
            "status": state["legs"]["default/smoke"].get("status"),
            "log_bytes": log.stat().st_size if log.exists() else 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood-mb", type=float, default=1800.0)
    parser.add_argument("--line-mb", type=float, default=10.0)
    parser.add_argument("--stream-mb", type=float, default=300.0)
    args = parser.parse_args()
    lines = max(1, round(args.flood_mb / args.line_mb / 3))  # three cycles
    modes = {
        "none": ["none"], "fifo": ["fifo"], "zero": ["zero"], "deep": ["deep"],
        "bigstream": ["bigstream", "--stream-mb", str(args.stream_mb)],
        # Short lines at the end: the runner redacts the log's last lines for the report, and
        # its redaction is not this benchmark's subject.
        "flood": ["long", "--cycles", "{cycles}", "--lines", str(lines), "--line-mb",
                  str(args.line_mb), "--trailer", "200"],
    }
    print(f"load average: {os.getloadavg()}")
    print("| mode | exit | status | wall s | stage s | peak RSS MiB (any process, so far) | "
          "log MiB |\n|---|---|---|---|---|---|---|")
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        for mode, script_args in modes.items():
            row = run_mode(mode, script_args, Path(tmp))
            peak = child_peak_mib()
            print(f"| {mode} | {row['exit']} | {row['status']} | {row['wall_s']:.1f} | "
                  f"{row['stage_s']} | {peak:.0f} | {row['log_bytes'] / 1024**2:.1f} |",
                  flush=True)
            ok &= row["exit"] == 0 and peak <= MAX_RSS_MIB
            ok &= row["log_bytes"] <= LOG_CAP + 64 * 1024
    print("targets met" if ok else "targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
