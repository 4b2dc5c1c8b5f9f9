#!/usr/bin/env bash
# gpu-audit as a Slurm Prolog: before each job, judge the GPUs the job was given.
#
# slurm.conf (see examples/slurm-gpu-audit.conf; docs/slurm.md):
#   Prolog=/etc/slurm/gpu-audit-prolog.sh
# with gpu-audit-hook-lib.sh beside it and the settings in /etc/default/gpu-audit
# (examples/gpu-audit.default): the gpu-audit command, the spool, the policy, and what to do
# when gpu-audit gives no verdict or cannot run. slurmd gives a prolog no PATH: name the
# command there (GPU_AUDIT=/opt/gpu-audit/bin/gpu-audit) unless it is in /usr/local/bin.
#
# `gpu-audit check --slurm prolog` scans the node, judges only the job's GPUs (SLURM_JOB_GPUS)
# and the host, and keeps the scan in the spool folder (default /var/spool/gpu-audit, root's,
# 0700) as prolog-$SLURM_JOB_ID.json for the epilog's before/after diff. It prints one line and
# exits 2 only for the node's problems: a GPU lost or failing (uncorrectable ECC errors, a row
# remap failure, pending memory repair, hardware slowdown, hardware Xids), a driver that does
# not answer. The job's own warnings (its environment, another user's process) never fail it.
#
# On 2 this script drains the node with gpu-audit's reason, e.g.
#   gpu-audit: ecc-uncorrectable on gpu:1: uncorrected_volatile=2 uncorrected_aggregate=2
# logs it (syslog, tag gpu-audit) and exits 1: Slurm then requeues the job elsewhere. No verdict
# (3) and gpu-audit not running are logged and handled as the settings say
# (GPU_AUDIT_ON_UNKNOWN, default log-only: the job starts; GPU_AUDIT_ON_ERROR, default drain).
. "$(dirname -- "${BASH_SOURCE[0]}")/gpu-audit-hook-lib.sh" || {
  logger -t gpu-audit -p user.err "prolog: gpu-audit-hook-lib.sh missing beside $0" 2> /dev/null
  echo "gpu-audit prolog: gpu-audit-hook-lib.sh missing beside $0" >&2
  exit 1
}
ga_hook prolog
