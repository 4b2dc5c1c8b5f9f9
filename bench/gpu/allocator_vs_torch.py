"""What ``gpu-audit scan`` showed for a monitored process, beside torch's own figures and NVML's.

    python3 bench/gpu/allocator_vs_torch.py SCAN_JSON FIGURES_JSONL PID

``FIGURES_JSONL`` is what ``train_monitored.py`` wrote. The scan's allocator state for ``PID``
(from the monitor's publication) is set beside the torch figures taken nearest to the scan's
publication time and beside NVML's memory for that process. Reserved memory of a loop in its
steady state does not move, so it must be equal; allocated moves within a step and must lie
between 0 and torch's peak; NVML's figure adds the CUDA context, so it must be at least the
reserved bytes. Exit 0 when all hold, 1 when one does not, 3 when the inputs lack the process.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MIB = 1024**2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scan_json", type=Path)
    parser.add_argument("figures_jsonl", type=Path)
    parser.add_argument("pid", type=int)
    args = parser.parse_args(argv)
    try:
        scan = json.loads(args.scan_json.read_text())
        figures = [json.loads(line) for line in args.figures_jsonl.read_text().splitlines()
                   if line]
    except (OSError, ValueError) as exc:
        print(f"allocator_vs_torch: {exc}", file=sys.stderr)
        return 3
    pid = args.pid
    process = next((p for p in scan.get("processes", []) if p.get("pid") == pid), None)
    if process is None:
        print(f"the scan lists no process {pid} (NVML sees PIDs of another namespace?): "
              f"{[p.get('pid') for p in scan.get('processes', [])]}")
        return 3
    state = process.get("allocator")
    if not state or not figures:
        print(f"no allocator state for {pid} in the scan (publication not found or refused); "
              f"probe errors: {scan.get('probe_errors')}")
        return 3
    torch_row = figures[-1]
    rows = [
        ("reserved_bytes", state.get("reserved_bytes"), torch_row["reserved_bytes"]),
        ("allocated_bytes", state.get("allocated_bytes"), torch_row["allocated_bytes"]),
        ("allocated_peak_bytes", state.get("allocated_peak_bytes"),
         torch_row["allocated_peak_bytes"]),
        ("reserved_peak_bytes", state.get("reserved_peak_bytes"),
         torch_row["reserved_peak_bytes"]),
        ("nvml used_memory_bytes", process.get("used_memory_bytes"), None),
    ]
    print(f"{'figure':24} {'gpu-audit scan':>16} {'torch':>16}")
    for name, ours, theirs in rows:
        shown = [f"{v / MIB:.1f} MiB" if isinstance(v, int) else "-" for v in (ours, theirs)]
        print(f"{name:24} {shown[0]:>16} {shown[1]:>16}")
    print(f"publication age {state.get('age_s')} s, step {state.get('step')}, "
          f"fragmentation {state.get('fragmentation_pct')}%")
    problems = []
    if state.get("reserved_bytes") != torch_row["reserved_bytes"]:
        problems.append("reserved differs from torch's in a steady loop")
    allocated = state.get("allocated_bytes")
    if allocated is None or not 0 <= allocated <= torch_row["allocated_peak_bytes"]:
        problems.append("allocated outside 0..torch's peak")
    used = process.get("used_memory_bytes")
    if used is None or used < (state.get("reserved_bytes") or 0):
        problems.append("NVML's memory for the process is below its reserved bytes")
    for problem in problems:
        print(f"DISAGREE: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
