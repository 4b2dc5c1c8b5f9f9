"""``gpu-audit merge`` over synthetic fleets: wall time and peak RSS per fleet size.

    python3 bench/bench_fleet_merge.py --nodes 1000 10000 --gpus 8

Each node is a ``gpu-audit.check/1`` document of ``--gpus`` H100s (tests/fleet/synth.py) with a
few planted issues (driver skew, one hot GPU, one duplicate node), written to a temporary folder;
the merge runs as the user runs it, in a child process (``--json --no-report``), and is checked to
find the planted issues. Goal: 10,000 nodes x 8 GPUs in under 10 s and under 1 GiB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fleet.synth import node_document, write_documents  # noqa: E402


def fleet(nodes: int, gpus: int) -> list[dict]:
    docs = [node_document(i, gpus=gpus) for i in range(nodes)]
    docs[nodes // 3] = node_document(nodes // 3, gpus=gpus, driver="535.54.03")
    docs[nodes // 2] = node_document(nodes // 2, gpus=gpus,
                                     gpu_changes={0: {"temperature_c": 80}})
    docs.append(node_document(7, gpus=gpus))
    return docs


def run(nodes: int, gpus: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as tmp:
        write_documents(Path(tmp), fleet(nodes, gpus))
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "gpu_audit", "merge", tmp, "--json",
                                 "--no-report"], capture_output=True, text=True, cwd=REPO)
        wall = time.perf_counter() - started
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if result.returncode not in (0, 1, 2):
        raise SystemExit(f"merge failed ({result.returncode}): {result.stderr}")
    doc = json.loads(result.stdout)
    found = {f["id"] for f in doc["findings"]}
    missing = {"fleet-driver-skew", "fleet-gpu-outlier", "fleet-duplicate-node"} - found
    if missing or doc["summary"]["nodes"] != nodes:
        raise SystemExit(f"planted issues not found: {sorted(missing)}, {doc['summary']}")
    # ru_maxrss of the children is the largest child so far: valid when it grew.
    peak = peak_kib if peak_kib > before else None
    return {"nodes": nodes, "gpus": nodes * gpus, "wall_s": round(wall, 2),
            "peak_rss_mib": round(peak / 1024) if peak else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--gpus", type=int, default=8)
    args = parser.parse_args()
    print("| nodes | GPUs | wall | peak RSS |")
    print("|---|---|---|---|")
    for nodes in sorted(args.nodes):
        r = run(nodes, args.gpus)
        rss = f"{r['peak_rss_mib']} MiB" if r["peak_rss_mib"] else "n/a"
        print(f"| {r['nodes']} | {r['gpus']} | {r['wall_s']} s | {rss} |", flush=True)


if __name__ == "__main__":
    main()
