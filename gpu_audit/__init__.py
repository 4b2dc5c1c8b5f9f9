"""gpu-audit: is this GPU machine fit for a long PyTorch run, and why did the last one die?"""

__version__ = "0.1.0"
