"""``gpu-audit merge`` given hostile node documents beside good ones: time and peak RSS.

    python3 bench/bench_merge_hostile.py [--gpu-audit PATH] [--good 3]

Builds, in a temporary folder outside the repository, documents that once cost gigabytes to
parse or passed as fit nodes: twenty million empty ``gpus`` entries in 60 MB, two million in
6 MB, 2,000 GPUs (past ``bounds.MAX_GPUS``, refused after parsing), a million-deep nesting, and a
document that is a schema and nothing else. Each is merged with ``--good`` healthy 8-GPU check
documents (tests/fleet/synth.py), by the installed ``gpu-audit`` in a child process of a fresh
wrapper process, so ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` there is this merge's own peak.
A merge of the good documents alone is the baseline. Each run is checked: the hostile node is
UNKNOWN with its reason, every good node is judged OK, and the exit code is 3.

Goal: each hostile document refused in under 5 s and 200 MiB peak RSS. One more document stays
within ``bounds.load_json``'s ceilings (1.99 million short strings): it is parsed before it is
refused, so its cost follows those ceilings; it is shown without being held to the goal.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.fleet.synth import node_document  # noqa: E402

GOAL_S = 5.0
GOAL_MIB = 200
CHUNK_ENTRIES = 1 << 20

# Runs the merge as its only child and reports its wall time and peak RSS (KiB on Linux).
WRAPPER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"wall_s": time.perf_counter() - started, "rc": done.returncode,
                  "peak_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "stdout": done.stdout, "stderr": done.stderr}))
"""


def write_empty_gpus(path: Path, entries: int) -> None:
    """A scan document whose ``gpus`` array holds ``entries`` empty objects, written in chunks."""
    with path.open("wb") as out:
        out.write(b'{"schema": "gpu-audit.scan/1", "host": {"hostname": "hostile"}, "gpus": [')
        left = entries
        while left > 0:
            step = min(left, CHUNK_ENTRIES)
            out.write(b"{}," * step)
            left -= step
        out.seek(-1, 1)  # the last comma
        out.write(b"]}")


def write_many_gpus(path: Path, count: int) -> None:
    doc = node_document(99, gpus=count, schema="gpu-audit.scan/1", hostname="hostile")
    path.write_text(json.dumps(doc), encoding="utf-8")


def write_deep(path: Path, depth: int) -> None:
    path.write_bytes(b'{"schema": "gpu-audit.scan/1", "extra": ' + b"[" * depth + b"]" * depth
                     + b"}")


CASES = {
    "20 M empty gpus entries (60 MB)": lambda p: write_empty_gpus(p, 20_000_000),
    "2 M empty gpus entries (6 MB)": lambda p: write_empty_gpus(p, 2_000_000),
    "2,000 GPUs (> MAX_GPUS)": lambda p: write_many_gpus(p, 2_000),
    "1 M-deep nesting": lambda p: write_deep(p, 1_000_000),
    "100 k-deep nesting": lambda p: write_deep(p, 100_000),
    "schema only": lambda p: p.write_text('{"schema": "gpu-audit.scan/1"}', encoding="utf-8"),
}
# Within load_json's ceilings (items, containers, bytes), so parsed before it is refused: what
# the parse costs is bounded by those ceilings, not by merge. Shown, not held to the goal.
WITHIN_CEILINGS = {
    "1.99 M short strings as gpus (60 MB)": lambda p: p.write_bytes(
        b'{"schema": "gpu-audit.scan/1", "host": {"hostname": "hostile"}, "gpus": ['
        + b",".join([b'"' + b"x" * 27 + b'"'] * 1_990_000) + b"]}"),
}


def merge(binary: str, paths: list[Path]) -> dict:
    command = [sys.executable, "-c", WRAPPER, binary, "merge", *map(str, paths), "--json",
               "--no-report"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def check(result: dict, good: int, hostile: Path | None) -> str:
    """What is wrong with the merge's answer ("" when it is what it should be)."""
    try:
        doc = json.loads(result["stdout"])
    except ValueError:
        return f"no fleet document (rc {result['rc']}): {result['stderr'].strip()[-300:]}"
    by_source = {n["source"]: n for n in doc["nodes"]}
    if sum(1 for n in doc["nodes"] if n["status"] == "OK") != good:
        return f"good nodes not all judged OK: {doc['summary']}"
    if hostile is None:
        return "" if result["rc"] == 0 else f"exit {result['rc']}, expected 0"
    node = by_source.get(str(hostile))
    if node is None or node["status"] != "UNKNOWN":
        return f"the hostile document is not an UNKNOWN node: {node}"
    return "" if result["rc"] == 3 else f"exit {result['rc']}, expected 3"


def measure(binary: str, good: list[Path], path: Path | None,
            goal: bool = True) -> tuple[str, str]:
    """One merge: its figures as a table cell, and what is wrong with it ("" if nothing)."""
    result = merge(binary, [*good, *([path] if path else [])])
    problem = check(result, len(good), path)
    mib = result["peak_kib"] / 1024
    if not problem and path and goal and (result["wall_s"] >= GOAL_S or mib >= GOAL_MIB):
        problem = "over the goal"
    return f"{result['wall_s']:.2f} s, {mib:.0f} MiB, exit {result['rc']}", problem


def reason(binary: str, path: Path) -> str:
    result = merge(binary, [path])
    node = json.loads(result["stdout"])["nodes"][0]
    return (node["reason"] or "")[:100]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--gpu-audit", default=str(REPO / ".venv" / "bin" / "gpu-audit"))
    parser.add_argument("--good", type=int, default=3, help="healthy node documents beside")
    args = parser.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="merge-hostile-") as tmp:
        folder = Path(tmp)
        good = []
        for i in range(max(args.good, 1)):
            good.append(folder / f"good-{i}.json")
            good[-1].write_text(json.dumps(node_document(i)), encoding="utf-8")
        figures, problem = measure(args.gpu_audit, good, None)
        print(f"baseline, {len(good)} good documents alone: {figures} {problem}\n")
        print("| input | size | alone | with the good documents | the node's reason |")
        print("|---|---|---|---|---|")
        cases = [(*case, True) for case in CASES.items()]
        cases += [(f"{label} (no goal)", build, False) for label, build in WITHIN_CEILINGS.items()]
        for i, (label, build, goal) in enumerate(cases):
            path = folder / f"hostile-{i}.json"
            build(path)
            alone, problem_alone = measure(args.gpu_audit, [], path, goal)
            beside, problem_beside = measure(args.gpu_audit, good, path, goal)
            problems += [f"{label}: {p}" for p in (problem_alone, problem_beside) if p]
            print(f"| {label} | {path.stat().st_size / 1e6:.1f} MB | {alone} | {beside} | "
                  f"{reason(args.gpu_audit, path)} |", flush=True)
            path.unlink()
    print(f"\ngoal: each hostile document refused in < {GOAL_S:g} s and < {GOAL_MIB} MiB "
          "peak RSS, the good nodes judged: " + ("met" if not problems else "; ".join(problems)))
    return 1 if problems else 0

if __name__ == "__main__":
    sys.exit(main())
