"""Scheduler hooks: ``gpu-audit check --slurm prolog|epilog|healthcheck``."""

from gpu_audit.hooks.slurm import HOOKS, run_hook
from gpu_audit.hooks.spool import DEFAULT_SPOOL, open_spool

__all__ = ["DEFAULT_SPOOL", "HOOKS", "open_spool", "run_hook"]
