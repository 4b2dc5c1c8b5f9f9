"""gpu-audit: is this GPU machine fit for a long PyTorch run, and why did the last one die?"""

from gpu_audit.lazy import exports

__version__ = "0.1.0"

# Library helpers, imported on first use so that `import gpu_audit` (and `gpu-audit --help`)
# stays light: name -> module that defines it.
_LAZY = {
    "retry_on_oom": "gpu_audit.oom",
    "chunked_map": "gpu_audit.chunked",
}


__getattr__, __dir__ = exports(__name__, _LAZY, globals())  # PEP 562
