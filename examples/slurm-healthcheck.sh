#!/usr/bin/env bash
# gpu-audit as a Slurm node health check: the node judges every GPU and drains itself when it
# has a node problem.
#
# slurm.conf (see examples/slurm-gpu-audit.conf; docs/slurm.md):
#   HealthCheckProgram=/etc/slurm/gpu-audit-healthcheck.sh
#   HealthCheckInterval=300
# with gpu-audit-hook-lib.sh beside it and the settings in /etc/default/gpu-audit
# (examples/gpu-audit.default). LBNL NHC, which drains by itself (nhc.conf):
#   * || check_cmd_status -t 60 -r 0 env GPU_AUDIT_DRAIN=0 /etc/slurm/gpu-audit-healthcheck.sh
#
# `gpu-audit check --slurm healthcheck` prints one line and exits 2 only for the node's
# problems (a GPU lost or failing, a driver that does not answer); a running job's warnings
# and processes never count. On 2 this script drains the node with that line as the reason,
#   scontrol update NodeName=gpu-node-07 State=DRAIN Reason="gpu-audit: gpu-lost on gpu:3: ..."
# logs and prints it and exits 1 (slurmd ignores a health check's exit code; NHC reads it).
# No verdict (3) and gpu-audit not running: logged, then as the settings say
# (GPU_AUDIT_ON_UNKNOWN, default log-only; GPU_AUDIT_ON_ERROR, default drain).
# GPU_AUDIT_DRAIN=0: print the reason and exit 1, but leave the draining to the caller (NHC).
. "$(dirname -- "${BASH_SOURCE[0]}")/gpu-audit-hook-lib.sh" || {
  logger -t gpu-audit -p user.err "healthcheck: gpu-audit-hook-lib.sh missing beside $0" \
    2> /dev/null
  echo "gpu-audit healthcheck: gpu-audit-hook-lib.sh missing beside $0"
  exit 1
}
ga_hook healthcheck
