#!/usr/bin/env bash
# gpu-audit as a Slurm node health check: the node judges itself and drains itself when unfit.
#
# slurm.conf, with gpu-audit and this script installed on every GPU node:
#   HealthCheckProgram=/etc/slurm/gpu-audit-healthcheck.sh
#   HealthCheckInterval=300
#   HealthCheckNodeState=IDLE     # between jobs only: a running job's processes are not leftovers
# or before / after every job:
#   Prolog=/etc/slurm/gpu-audit-healthcheck.sh
#   Epilog=/etc/slurm/gpu-audit-healthcheck.sh
#
# When `gpu-audit check` fails (exit 2) the script drains the node with the reason, e.g.
#   scontrol update NodeName=gpu-node-07 State=DRAIN Reason="gpu-audit: ecc-uncorrectable: ..."
# prints that reason (the slurmd log keeps it) and exits 1. slurmd ignores a health check's exit
# code (the program drains the node itself, as here); a prolog that exits non-zero also drains
# the node and requeues the job (Slurm may then show its own "Prolog error" as the reason).
# WARNING (1) and UNKNOWN (3: e.g. a policy error) are printed, never drained on.
# GPU_AUDIT_POLICY names a check policy TOML (e.g. own_processes = "fail" on dedicated nodes).
set -u

node="${SLURMD_NODENAME:-$(hostname -s)}"
doc="$(mktemp)"
trap 'rm -f "$doc"' EXIT

gpu-audit check --json --no-report ${GPU_AUDIT_POLICY:+--policy "$GPU_AUDIT_POLICY"} > "$doc"
rc=$?
if [ "$rc" -ne 2 ]; then
  echo "gpu-audit check on $node: exit $rc (0 OK, 1 WARNING, 3 UNKNOWN): not draining"
  exit 0
fi

# The drain reason: "gpu-audit: " and the first failed checks, on one line.
reason="$(python3 - "$doc" <<'PY'
import json, sys
checks = json.load(open(sys.argv[1], encoding="utf-8")).get("checks", [])
failed = [f"{c['id']}: {c.get('summary') or c.get('title')}" for c in checks
          if isinstance(c, dict) and c.get("status") == "fail"]
text = " ".join(("gpu-audit: " + "; ".join(failed[:2] or ["check failed"])).split())
print(text if len(text) <= 200 else text[:199] + "…")
PY
)" || reason="gpu-audit: check failed"
echo "gpu-audit check on $node: unfit, draining: $reason"
scontrol update NodeName="$node" State=DRAIN Reason="$reason"
exit 1
