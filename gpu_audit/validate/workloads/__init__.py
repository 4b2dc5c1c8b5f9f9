"""Workloads that ship with gpu-audit (``reference``: the default of ``gpu-audit validate``)."""
