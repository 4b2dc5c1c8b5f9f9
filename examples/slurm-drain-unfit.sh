#!/usr/bin/env bash
# Drain the nodes a fleet judgement found unfit, with gpu-audit's reason.
#
#   examples/slurm-drain-unfit.sh RUN_DIR            # prints the scontrol lines (a dry run)
#   examples/slurm-drain-unfit.sh RUN_DIR --apply    # runs them (as a Slurm operator)
#
# RUN_DIR holds the node documents of examples/slurm-fleet.sh (or any folder of `gpu-audit check
# --json` documents). `gpu-audit merge` judges them; every node whose own verdict is CRITICAL
# (not a duplicate) gets one line
#   scontrol update NodeName=<short host name> State=DRAIN Reason='gpu-audit: <its worst findings>'
# Nodes that gave no verdict (UNKNOWN) are listed as comments, not drained: a missing document
# is not a broken node. The exit code is the fleet's (0 OK ... 3 UNKNOWN).
set -u
run_dir="${1:?usage: slurm-drain-unfit.sh RUN_DIR [--apply]}"
apply="${2:-}"

fleet="$(mktemp)"
trap 'rm -f "$fleet"' EXIT
gpu-audit merge "$run_dir" --json --no-report > "$fleet"
rc=$?
[ -s "$fleet" ] || exit "$rc"

python3 - "$fleet" "$apply" <<'PY' || exit 3
import json, shlex, subprocess, sys
fleet = json.load(open(sys.argv[1], encoding="utf-8"))
for node in fleet["nodes"]:
    if node.get("duplicate_of"):
        continue
    host = (node.get("hostname") or node["name"]).split(".")[0]
    why = " ".join(f"gpu-audit: {node.get('reason') or 'unfit'}".split())[:200]
    if node["status"] == "UNKNOWN":
        print(f"# no verdict from {shlex.quote(node['name'])}: {why}")
    if node["status"] != "CRITICAL":
        continue
    command = ["scontrol", "update", f"NodeName={host}", "State=DRAIN", f"Reason={why}"]
    print(shlex.join(command), flush=True)
    if sys.argv[2] == "--apply":
        subprocess.run(command, check=True)
PY
exit "$rc"
