#!/usr/bin/env bash
# gpu-audit as a Slurm node health check: the node judges every GPU and drains itself when it
# has a node problem.
#
# slurm.conf (see examples/slurm-gpu-audit.conf):
#   HealthCheckProgram=/etc/slurm/gpu-audit-healthcheck.sh
#   HealthCheckInterval=300
# LBNL NHC, which drains by itself (nhc.conf):
#   * || check_cmd_status -t 60 -r 0 env GPU_AUDIT_DRAIN=0 /etc/slurm/gpu-audit-healthcheck.sh
#
# `gpu-audit check --slurm healthcheck` prints one line and exits 2 only for the node's
# problems (a GPU lost or failing, a driver that does not answer); a running job's warnings
# and processes never count. On 2 this script drains the node with that line as the reason,
#   scontrol update NodeName=gpu-node-07 State=DRAIN Reason="gpu-audit: gpu-lost on gpu:3: ..."
# prints it and exits 1 (slurmd ignores a health check's exit code; NHC reads it). 0 and 3 (no
# verdict, e.g. a policy error) exit 0 and are never drained on.
#   GPU_AUDIT         the gpu-audit command (default: gpu-audit on PATH)
#   GPU_AUDIT_POLICY  a check policy TOML
#   GPU_AUDIT_DRAIN=0 print the reason and exit 1, but leave the draining to the caller (NHC)
set -u
node="${SLURMD_NODENAME:-$(hostname -s)}"
line="$(${GPU_AUDIT:-gpu-audit} check --slurm healthcheck \
  ${GPU_AUDIT_POLICY:+--policy "$GPU_AUDIT_POLICY"} 2>&1)"
rc=$?
if [ "$rc" -ne 2 ]; then
  echo "gpu-audit healthcheck on $node: exit $rc (0 OK, 3 UNKNOWN): not draining: $line"
  exit 0
fi
echo "gpu-audit healthcheck on $node: draining: $line"
if [ "${GPU_AUDIT_DRAIN:-1}" != 0 ]; then
  scontrol update NodeName="$node" State=DRAIN Reason="${line:0:200}"
fi
exit 1
