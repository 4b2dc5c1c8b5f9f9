#!/usr/bin/env bash
# gpu-audit as a Slurm Epilog: after each job, what did it leave behind?
#
# slurm.conf (see examples/slurm-gpu-audit.conf; docs/slurm.md):
#   Epilog=/etc/slurm/gpu-audit-epilog.sh
# with gpu-audit-hook-lib.sh beside it and the settings in /etc/default/gpu-audit
# (examples/gpu-audit.default), as for examples/slurm-prolog.sh.
#
# `gpu-audit check --slurm epilog` scans the job's GPUs again and compares the scan with the
# one its prolog kept (`gpu-audit diff`): processes of the job (appeared during it, and of
# SLURM_JOB_USER or an unknown owner) still holding GPU memory, memory no process accounts for,
# ECC / retired-page / remapped-row counters that went up, new hardware Xids, a GPU gone. It
# prints one line and exits 2 only for such node problems; when the diff shows one it is kept
# as epilog-$SLURM_JOB_ID.json in the spool folder and the reason names it ("; see PATH").
# Without a prolog record the job's user alone tells its leftovers.
#
# On 2 this script drains the node with the reason, e.g.
#   gpu-audit: job-vram-leak on gpu:0: pid=81234 user=alice used_memory_mib=8192; see ...
# logs it and exits 1. No verdict (3) and gpu-audit not running: as the settings say.
. "$(dirname -- "${BASH_SOURCE[0]}")/gpu-audit-hook-lib.sh" || {
  logger -t gpu-audit -p user.err "epilog: gpu-audit-hook-lib.sh missing beside $0" 2> /dev/null
  echo "gpu-audit epilog: gpu-audit-hook-lib.sh missing beside $0" >&2
  exit 1
}
ga_hook epilog
