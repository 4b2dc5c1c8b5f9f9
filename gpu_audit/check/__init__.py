"""``gpu-audit check``: the pre-run checklist for CI on GPU runners.

A check policy (:mod:`gpu_audit.check.policy`) says what makes a runner fit; the checks
(:mod:`gpu_audit.check.checks`) are pure functions over a scan snapshot and its findings that
give pass/warn/fail/skip/unknown with evidence; :func:`gpu_audit.check.engine.judge` puts them
together into a :class:`~gpu_audit.check.results.CheckReport` whose verdict is the exit code.
Optional validation stages (:mod:`gpu_audit.check.stages`) prove that CUDA work actually runs.
"""

from __future__ import annotations
