"""``gpu-audit fleet scan`` on a 4-node local Ray cluster against the same four scans run one
after the other.

    python3 bench/bench_fleet_ray.py [--repeat 3] [--delay-ms 0]

Starts a ``ray.cluster_utils.Cluster`` on this machine (a head and 3 workers, each node's
processes seeing its own fake NVIDIA machine of 8 H100s through its raylet's environment, as in
tests/fleet/test_ray_cluster.py), then times, as the user runs them, in child processes:

* ``gpu-audit fleet scan --address ... --json --no-report`` (connect, one task per node, judge);
* the four ``gpu-audit scan --json --no-report`` runs, one per node's machine, one after the
  other (what a loop over ``ssh node gpu-audit scan`` costs, minus ssh).

``--delay-ms`` makes every fake NVML call sleep that long (a slow driver, as in bench_scan.py).
Prints the median, min and max wall time of each over ``--repeat`` rounds and the ratio
fleet / sequential. Needs Ray (the gpu-audit extra ``ray``) and a C compiler for the fake NVML.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fakegpu import build_fake_nvml, h100_node, scenario_env  # noqa: E402

NODES = 4


def node_scenario(i: int, delay_ms: int) -> dict:
    scenario = h100_node(8)
    if delay_ms:
        scenario["call_delay_ms"] = delay_ms
    for gpu in scenario["gpus"]:
        gpu["uuid"] = gpu["uuid"][:-2] + f"{i:02d}"  # every node its own GPUs
    return scenario


def timed(command: list[str], env: dict[str, str]) -> tuple[float, dict]:
    """Wall time and the JSON document ``command`` printed (exits, naming the error, if none)."""
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO,
                            timeout=300)
    wall = time.perf_counter() - started
    try:
        return wall, json.loads(result.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"{' '.join(command[2:5])} printed no document (exit "
                         f"{result.returncode}): {result.stderr.strip()[-2000:]}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay-ms", type=int, default=0, help="fake NVML delay per call")
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    build_fake_nvml()
    with tempfile.TemporaryDirectory(prefix="fleet-ray-bench-") as tmp:
        envs = [scenario_env(node_scenario(i, args.delay_ms), Path(tmp) / f"node{i}")
                for i in range(NODES)]
        node_envs = [{"LD_LIBRARY_PATH": e["LD_LIBRARY_PATH"],
                      "FAKE_NVML_SCENARIO": e["FAKE_NVML_SCENARIO"], "PYTHONPATH": str(REPO)}
                     for e in envs]
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "env_vars": node_envs[0], "include_dashboard": False})
        try:
            for env in node_envs[1:]:
                cluster.add_node(num_cpus=0, env_vars=env)
            cluster.wait_for_nodes()
            driver_env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
            driver_env["PYTHONPATH"] = str(REPO)
            fleet_cmd = [sys.executable, "-m", "gpu_audit", "fleet", "scan", "--address",
                         cluster.address, "--json", "--no-report"]
            scan_cmd = [sys.executable, "-m", "gpu_audit", "scan", "--json", "--no-report"]
            fleet_times, serial_times = [], []
            for _ in range(args.repeat):
                wall, doc = timed(fleet_cmd, driver_env)
                if doc["summary"]["nodes"] != NODES or doc["summary"]["unknown"]:
                    raise SystemExit(f"fleet scan did not judge {NODES} nodes: {doc['summary']}"
                                     f" {[n['reason'] for n in doc['nodes'] if n['reason']]}")
                fleet_times.append(wall)
                started = time.perf_counter()
                for env in envs:
                    if timed(scan_cmd, env)[1]["schema"] != "gpu-audit.scan/1":
                        raise SystemExit("scan printed another document")
                serial_times.append(time.perf_counter() - started)
        finally:
            cluster.shutdown()
    driver = f"NVML calls delayed {args.delay_ms} ms" if args.delay_ms else "fast fake NVML"
    print(f"| {NODES} nodes x 8 GPUs, {driver} ({args.repeat} rounds) | median s | min s "
          "| max s |")
    print("|---|---:|---:|---:|")
    for label, times in (("gpu-audit fleet scan (Ray)", fleet_times),
                         (f"{NODES} x gpu-audit scan, one after the other", serial_times)):
        print(f"| {label} | {statistics.median(times):.2f} | {min(times):.2f} | "
              f"{max(times):.2f} |")
    ratio = statistics.median(fleet_times) / statistics.median(serial_times)
    print(f"\nratio fleet / sequential (medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
