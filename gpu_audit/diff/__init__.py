"""``gpu-audit diff``: what changed on a machine between two scans (before and after a job)."""

from gpu_audit.diff.compare import DiffReport, check_pair, compare
from gpu_audit.diff.rules import all_diff_rules, evaluate_diff
from gpu_audit.diff.view import DiffView

__all__ = ["DiffReport", "DiffView", "all_diff_rules", "check_pair", "compare", "evaluate_diff"]
