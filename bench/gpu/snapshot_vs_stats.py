"""``gpu-audit snapshot --json`` of an OOM snapshot beside torch's own counters at that moment.

    python3 bench/gpu/snapshot_vs_stats.py SNAPSHOT_JSON MEMORY_STATS_JSON

``MEMORY_STATS_JSON`` is what ``oom_real.py`` wrote from ``torch.cuda.memory_stats()`` just
after the OOM, with the tensors still held; the snapshot was written by the monitor's OOM
observer just before the error was raised, so the allocator's state is the same. Device 0's
reserved, allocated and inactive-split bytes and its segment count must equal torch's
``*.all.current`` counters. Exit 0 when they do, 1 when one differs, 3 when an input is
unreadable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PAIRS = (
    ("reserved_bytes", "reserved_bytes.all.current"),
    ("allocated_bytes", "allocated_bytes.all.current"),
    ("inactive_split_bytes", "inactive_split_bytes.all.current"),
    ("segments", "segment.all.current"),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot_json", type=Path)
    parser.add_argument("memory_stats_json", type=Path)
    args = parser.parse_args(argv)
    try:
        snapshot = json.loads(args.snapshot_json.read_text())
        stats = json.loads(args.memory_stats_json.read_text())
        device = next(d for d in snapshot["devices"] if d.get("device") == 0)
    except (OSError, ValueError, KeyError, StopIteration) as exc:
        print(f"snapshot_vs_stats: cannot read the inputs: {exc!r}", file=sys.stderr)
        return 3
    differ = 0
    print(f"{'figure':22} {'gpu-audit snapshot':>20} {'torch memory_stats':>20}")
    for ours, theirs in PAIRS:
        a, b = device.get(ours), stats.get(theirs)
        status = "agree" if a == b else "DISAGREE"
        differ += a != b
        print(f"{ours:22} {a!s:>20} {b!s:>20}  {status}")
    print(f"fragmentation {device.get('fragmentation_pct')}%, "
          f"largest free block {device.get('largest_free_block_bytes')} B; "
          f"torch num_ooms {stats.get('num_ooms')}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
