#!/usr/bin/env bash
# gpu-audit as a Slurm Epilog: after each job, what did it leave behind?
#
# slurm.conf (see examples/slurm-gpu-audit.conf):
#   Epilog=/etc/slurm/gpu-audit-epilog.sh
#
# `gpu-audit check --slurm epilog` scans the job's GPUs again and compares the scan with the
# one its prolog kept (`gpu-audit diff`): processes of the job (appeared during it, and of
# SLURM_JOB_USER or an unknown owner) still holding GPU memory, memory no process accounts for,
# ECC / retired-page / remapped-row counters that went up, new hardware Xids, a GPU gone. It
# prints one line and exits 2 only for such node problems; then the diff is kept as
# epilog-$SLURM_JOB_ID.json in the spool folder for the admin. Without a prolog record the
# job's user alone tells its leftovers.
#
# On 2 this script drains the node with the reason, e.g.
#   gpu-audit: job-vram-leak on gpu:0: pid=81234 user=alice used_memory_mib=8192
# and exits 1 (Slurm drains a node whose epilog fails). 0 and 3 (no verdict) exit 0.
# Same variables as examples/slurm-prolog.sh.
set -u
node="${SLURMD_NODENAME:-$(hostname -s)}"
line="$(${GPU_AUDIT:-gpu-audit} check --slurm epilog ${GPU_AUDIT_SPOOL:+--spool "$GPU_AUDIT_SPOOL"} \
  ${GPU_AUDIT_POLICY:+--policy "$GPU_AUDIT_POLICY"} 2>&1)"
rc=$?
case "$rc" in
  0) exit 0 ;;
  2)
    echo "gpu-audit epilog on $node, job ${SLURM_JOB_ID:-?}: $line" >&2
    if [ "${GPU_AUDIT_DRAIN:-1}" != 0 ] && command -v scontrol > /dev/null; then
      scontrol update NodeName="$node" State=DRAIN Reason="${line:0:200}"
    fi
    exit 1 ;;
  *)
    echo "gpu-audit epilog on $node: no verdict (exit $rc), not draining: $line" >&2
    exit 0 ;;
esac
