#!/usr/bin/env bash
# gpu-audit as a Slurm Prolog: before each job, judge the GPUs the job was given.
#
# slurm.conf (see examples/slurm-gpu-audit.conf):
#   Prolog=/etc/slurm/gpu-audit-prolog.sh
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
# and exits 1: Slurm then requeues the job elsewhere (and keeps the node drained). Any other
# answer (0, or 3: gpu-audit could not judge, e.g. a bad policy file) lets the job start: the
# auditor's own trouble never drains a node. The line goes to stderr, into slurmd's log.
#   GPU_AUDIT         the gpu-audit command (default: gpu-audit on PATH)
#   GPU_AUDIT_SPOOL   spool folder (default /var/spool/gpu-audit)
#   GPU_AUDIT_POLICY  a check policy TOML (e.g. ignore = ["hw-slowdown"])
#   GPU_AUDIT_DRAIN=0 leave the draining to Slurm (its reason is then "Prolog error")
set -u
node="${SLURMD_NODENAME:-$(hostname -s)}"
line="$(${GPU_AUDIT:-gpu-audit} check --slurm prolog ${GPU_AUDIT_SPOOL:+--spool "$GPU_AUDIT_SPOOL"} \
  ${GPU_AUDIT_POLICY:+--policy "$GPU_AUDIT_POLICY"} 2>&1)"
rc=$?
case "$rc" in
  0) exit 0 ;;
  2)
    echo "gpu-audit prolog on $node, job ${SLURM_JOB_ID:-?}: $line" >&2
    if [ "${GPU_AUDIT_DRAIN:-1}" != 0 ] && command -v scontrol > /dev/null; then
      scontrol update NodeName="$node" State=DRAIN Reason="${line:0:200}"
    fi
    exit 1 ;;
  *)
    echo "gpu-audit prolog on $node: no verdict (exit $rc), not draining: $line" >&2
    exit 0 ;;
esac
