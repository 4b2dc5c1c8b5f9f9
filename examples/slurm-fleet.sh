#!/usr/bin/env bash
# Audit every node of a Slurm allocation with gpu-audit, then judge them as one fleet.
#
#   sbatch --nodes=4 examples/slurm-fleet.sh      # or run it inside an salloc
#
# Each node writes its own check document (check-<UTC time>-p<pid>-<host>.json, with a .md twin)
# into a folder every node can reach; `gpu-audit merge` then judges the fleet: every unfit or
# silent node on one line, every node of the allocation that wrote no document (named from
# SLURM_JOB_NODELIST), driver/CUDA/torch/gpu-audit skew, GPU outliers, duplicate nodes. Its exit
# code is the fleet's (0 OK, 1 WARNING, 2 a node is unfit, 3 a node gave no verdict or is
# missing). The same two commands work for a CI matrix or a Kubernetes Job: gather the
# documents, merge with --expect N or --expect-nodes NODELIST.
#
# In a node health check, prolog or epilog, one node judges itself with
# `gpu-audit check --slurm healthcheck|prolog|epilog`: see examples/slurm-healthcheck.sh,
# slurm-prolog.sh, slurm-epilog.sh and slurm-gpu-audit.conf.
#SBATCH --job-name=gpu-audit-fleet
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:05:00
set -u

RUN_DIR="${RUN_DIR:-${SHARED:-$HOME}/gpu-audit/run-${SLURM_JOB_ID:-manual}}"
mkdir -p "$RUN_DIR" || exit 3

# One check per node. srun returns the highest exit code of its tasks, which ranks UNKNOWN (3)
# over CRITICAL (2): the fleet's verdict is recomputed by merge instead. Each node keeps its own
# newest keep_reports documents in the folder; it never deletes another node's.
srun --ntasks-per-node=1 gpu-audit check --json --out "$RUN_DIR" > /dev/null || true

# Whom to expect: every node of the allocation, so a node that wrote nothing (it crashed, its
# gpu-audit is missing, the shared folder failed it) is named, and the fleet is not OK.
expect=()
if [[ -n ${SLURM_JOB_NODELIST:-} ]]; then
  expect=(--expect-nodes "$SLURM_JOB_NODELIST")
elif [[ -n ${SLURM_JOB_NUM_NODES:-} ]]; then
  expect=(--expect "$SLURM_JOB_NUM_NODES")
fi
gpu-audit merge "$RUN_DIR" ${expect[@]+"${expect[@]}"} --out "$RUN_DIR/fleet"
